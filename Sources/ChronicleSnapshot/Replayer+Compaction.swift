import ChronicleContainer
import ChronicleCore
import Foundation

/// Compaction: logs that a baseline covers, and that every device still
/// reporting has applied, leave the container; the baseline stands for
/// them. See `docs/compaction.md`.
extension Replayer {
    /// The store's compaction marker, or nil if it was never compacted.
    ///
    /// A marker that does not hold a compaction marker's JSON (damaged, or
    /// written by hand) is read as no marker, with a warning: every device
    /// then syncs as before compaction, and the next compaction, or a
    /// device that holds what the last one covered, writes it again.
    package func compactionHorizon() async throws -> CompactionHorizon? {
        horizon(of: try await container.readMarker(ContainerLayout.compaction(store: snapshot.storeID)))
    }

    /// The compaction marker `marker` read, decoded (see ``compactionHorizon()``).
    func horizon(of marker: Marker?) -> CompactionHorizon? {
        let name = ContainerLayout.compaction(store: snapshot.storeID)
        guard let marker else { return nil }
        do {
            return try CompactionHorizon(markerBytes: marker.bytes)
        } catch {
            logger.warning("the store's compaction marker is unreadable; it is taken as absent", metadata: ["chronicle.marker": "\(name)", "chronicle.error": "\(error)"])
            return nil
        }
    }

    /// Writes (or refreshes) this device's applied report when its vector
    /// moved since the last one, or the last one is older than `refresh`.
    /// A failure to write is left to the next sync: the report only makes
    /// compaction wait for this device.
    package func reportApplied(refresh: UInt64) async throws {
        let vector = try snapshot.vector()
        let digest = String(ContainerLayout.vectorDigest(vector), radix: 16)
        let now = clock.nowMilliseconds()
        let last = try snapshot.metadata("applied_report").map { $0.split(separator: " ") }
        if let last, last.count == 2, last[0] == digest, let at = UInt64(last[1]), now >= at, now - at < refresh { return }
        let name = ContainerLayout.appliedReport(store: snapshot.storeID, device: snapshot.deviceID)
        let report = AppliedReport(device: snapshot.deviceID, milliseconds: now, vector: vector)
        if let existing = try await container.readMarker(name) {
            _ = try await container.replaceMarker(name, report, expected: existing.version)
        } else {
            _ = try await container.createMarker(name, report)
        }
        try snapshot.setMetadata("applied_report", "\(digest) \(now)")
    }

    /// Drops the outbox bodies the store's compaction covers (see
    /// ``Snapshot/pruneOutbox(through:)``), when the compaction marker
    /// `known` (as the import read it) names, by its clock, this device's
    /// own save at the sequence it covers through, and its baseline is in
    /// the container: a marker about another copy of this device's files,
    /// or one whose baseline is gone, drops nothing.
    ///
    /// - Returns: how many bodies went.
    @discardableResult
    package func pruneCompactedOutbox(known: Marker??) async throws -> Int {
        guard case .some(let read) = known, let horizon = horizon(of: read),
              let covered = horizon.vector[snapshot.deviceID], try snapshot.hasPrunableOutboxBodies(through: covered),
              let clock = horizon.clocks[snapshot.deviceID],
              try snapshot.transactionClocks(at: [snapshot.deviceID: covered])[snapshot.deviceID] == clock,
              try await !container.list(prefix: horizon.baseline, after: nil, limit: 1).isEmpty
        else { return 0 }
        let pruned = try snapshot.pruneOutbox(through: covered)
        if pruned.saves > 0 {
            logger.info("dropped the outbox bodies the store's compaction covers",
                        metadata: ["chronicle.saves": "\(pruned.saves)", "chronicle.bytes": "\(pruned.bytes)", "chronicle.through": "\(covered)"])
        }
        return pruned.saves
    }

    /// After an import: if this device has applied less of some device than
    /// the compaction marker covers (it was away longer than the retention
    /// period, or its import was under way when the logs went), it applies
    /// the baseline that stands for the removed logs (a join, as a log is)
    /// and imports again from there. A baseline that cannot be applied is a
    /// failure of the pass, like a damaged log.
    package func catchUpWithCompaction(into report: inout ImportReport) async throws {
        let horizonName = ContainerLayout.compaction(store: snapshot.storeID)
        let horizon: CompactionHorizon
        do {
            let marker = try await container.readMarker(horizonName)
            // Kept for the rest of the sync (see restoreLostCompaction(known:)).
            report.compactionMarker = .some(marker)
            guard let read = self.horizon(of: marker) else { return }
            horizon = read
        } catch let error as ChronicleError where error.code != .simulatedCrash {
            recordFailure(horizonName.rawValue, device: snapshot.deviceID, error, into: &report)
            return
        }
        // The same sequence, another save: this device's history of that
        // device went apart from the container's (its own files, or the
        // container, went back in time, and the sequence was used again).
        // The logs that would show it are gone; the marker's clocks do.
        if !horizon.clocks.isEmpty {
            let known = try snapshot.transactionClocks(at: horizon.vector)
            if let (device, clock) = known.sorted(by: { $0.key < $1.key }).first(where: { entry in
                horizon.clocks[entry.key].map { $0 != entry.value } ?? false
            }) {
                report.historyApart = device == snapshot.deviceID
                    ? "the store's compacted history holds another save \(horizon.vector[device] ?? 0) of this device than its files made (clock \(horizon.clocks[device] ?? 0), not \(clock)): another copy of its files, or of the container, used that sequence again"
                    : "the store's compacted history holds another save \(horizon.vector[device] ?? 0) of device \(device) than this device applied: that device's files, or the container, went back in time and the sequence was used again"
                return
            }
        }
        let vector = try snapshot.vector()
        let behind = horizon.vector.filter { $0.key != snapshot.deviceID && (vector[$0.key] ?? 0) < $0.value }.map(\.key)
        guard !behind.isEmpty else { return }
        let names: [ContainerName]
        let lastBytes: [UInt8]
        do {
            let parts = try await container.listAll(prefix: horizon.baseline)
                .compactMap { blob in ContainerLayout.parseBaselinePart(blob.name).map { ($0.part, blob.name) } }
                .sorted { $0.0 < $1.0 }
            names = parts.map(\.1)
            // Parts not all visible yet (a sync service copies files in any
            // order, the marker first perhaps): waited for, as a baseline to
            // start from is. A damaged one is a failure.
            guard !parts.isEmpty, parts.enumerated().allSatisfy({ $0.element.0 == UInt64($0.offset + 1) }) else {
                report.waitingForBaseline = horizon.baseline
                return
            }
            lastBytes = try await container.get(names[names.count - 1], maxBytes: decoder.limits.maxLogBytes)
            let header = try decoder.header(of: lastBytes)
            guard header.kind == .baseline, header.isFinalBaselinePart, header.baselinePart == UInt64(names.count) else {
                report.waitingForBaseline = horizon.baseline
                return
            }
        } catch let error as ChronicleError where error.code == .shortRead || error.code == .notFound {
            report.waitingForBaseline = horizon.baseline
            return
        } catch let error as ChronicleError where error.code != .simulatedCrash {
            recordFailure(horizon.baseline, device: snapshot.deviceID, error, into: &report)
            return
        }
        guard try await applyBaseline(names, lastBytes: lastBytes, into: &report) != nil else { return }
        logger.info("applied the baseline that stands for compacted logs",
                    metadata: ["chronicle.baseline": "\(horizon.baseline)", "chronicle.devices": "\(behind.count)"])
        report.gaps.removeAll { gap in behind.contains(gap.device) }
        report.failures.removeAll { failure in
            guard behind.contains(failure.device), let name = try? ContainerName(failure.name), let parsed = ContainerLayout.parseLog(name) else { return false }
            return horizon.mayHaveRemoved(device: parsed.device, last: parsed.last)
        }
        try await importLogs(of: devices(), after: try snapshot.vector(), into: &report)
    }

    /// Remembers the compaction marker this device last saw; if the marker
    /// is gone (the container was wiped, or restored from an older copy,
    /// and the baseline that stood for the removed logs with it), a device
    /// that has applied all it covered publishes a baseline and writes the
    /// marker again, naming it: the logs the marker covered are nowhere
    /// else in the container, and devices that had not applied them catch
    /// up from the new baseline. Returns the new baseline's folder when it did.
    ///
    /// - Parameter known: the marker as this sync's import read it (nil
    ///   when it did not), so that it is not read twice.
    package func restoreLostCompaction(known: Marker?? = nil) async throws -> String? {
        let name = ContainerLayout.compaction(store: snapshot.storeID)
        let marker: Marker?
        if let known { marker = known } else { marker = try await container.readMarker(name) }
        var seen: [DeviceID: UInt64] = [:]
        for entry in try snapshot.metadata("compaction_seen")?.split(separator: " ") ?? [] {
            let pair = entry.split(separator: "=")
            if pair.count == 2, let device = DeviceID(string: String(pair[0])), let sequence = UInt64(pair[1]) { seen[device] = sequence }
        }
        let vector = try snapshot.vector()
        let holdsSeen = seen.allSatisfy { (vector[$0.key] ?? 0) >= $0.value }
        if let marker, let current = try? CompactionHorizon(markerBytes: marker.bytes) {
            // A marker that covers less than one this device saw went back
            // in time (written again by a device that knew only an older
            // one, or a container put back from an older copy): the logs
            // between the two are gone, and only the marker's baseline may
            // stand for them. A device holding all the newer one covered
            // writes it again; others keep what they saw.
            guard !seen.isEmpty, seen.contains(where: { (current.vector[$0.key] ?? 0) < $0.value }) else {
                try remember(current)
                return nil
            }
            guard holdsSeen else { return nil }
            logger.warning("the store's compaction marker covers less than one this device saw; publishing a baseline that covers what that one covered",
                           metadata: ["chronicle.baseline": "\(current.baseline)"])
        } else {
            guard !seen.isEmpty, holdsSeen else { return nil }
            logger.warning("the store's compaction marker is gone from the container, or unreadable; publishing a baseline that covers what it covered")
        }
        let published = try await publishStandIn()
        let replacement = CompactionHorizon(baseline: published.prefix, device: snapshot.deviceID, milliseconds: clock.nowMilliseconds(), vector: published.vector,
                                            clocks: try snapshot.transactionClocks(at: published.vector))
        do {
            // Gone, there but unreadable, or gone back.
            if let marker {
                _ = try await container.replaceMarker(name, replacement, expected: marker.version)
            } else {
                _ = try await container.createMarker(name, replacement)
            }
            try remember(replacement)
        } catch let error as ChronicleError where error.code == .markerConflict {
            // Another device wrote it again first.
        }
        return published.prefix
    }

    /// ``baselineWait`` in whole milliseconds.
    var baselineWaitMilliseconds: UInt64 { Self.wholeMilliseconds(baselineWait) }

    /// `duration` in whole milliseconds, 0 for a negative one.
    static func wholeMilliseconds(_ duration: Duration) -> UInt64 {
        UInt64(max(0, duration.components.seconds)) * 1000 + UInt64(max(0, duration.components.attoseconds) / 1_000_000_000_000_000)
    }

    /// Notes the compaction marker this device saw or wrote (see
    /// ``restoreLostCompaction(known:)``).
    private func remember(_ horizon: CompactionHorizon) throws {
        let text = horizon.vector.map { "\($0.key)=\($0.value)" }.sorted().joined(separator: " ")
        if try snapshot.metadata("compaction_seen") != text { try snapshot.setMetadata("compaction_seen", text) }
    }

    /// Publishes this device's state as a baseline that stands in for a
    /// damaged or lost one; returns its folder and vector.
    private func publishStandIn(replacing damaged: String? = nil) async throws -> (prefix: String, vector: [DeviceID: UInt64]) {
        let published = try await publishBaseline(replacing: damaged)
        let first = try await container.get(try ContainerName(published.prefix + "00000001" + ContainerLayout.baselinePartExtension),
                                            maxBytes: decoder.limits.maxLogBytes)
        let part = try await openBaselineLearning(first)
        guard part.header.kind == .baseline else {
            throw ChronicleError(.malformedBody, "baseline \(published.prefix) holds no baseline part 1")
        }
        return (published.prefix, try part.baselineVector())
    }

    /// A gap no compaction marker explains (the container lost logs that
    /// only a baseline still covers: a wipe took the marker with it, say)
    /// that has lasted ``baselineWait`` (a log still arriving fills it
    /// sooner): the newest complete baseline of another device whose vector
    /// reaches past the missing sequences is applied, a join as a log is,
    /// and the import goes on after it.
    package func healGapsFromBaselines(into report: inout ImportReport) async throws {
        let now = clock.nowMilliseconds()
        var since: [String: UInt64] = [:]
        if let text = try snapshot.metadata("gaps_since") {
            for entry in text.split(separator: " ") {
                let pair = entry.split(separator: "=")
                if pair.count == 2, let at = UInt64(pair[1]) { since[String(pair[0])] = at }
            }
        }
        since = since.filter { key, _ in report.gaps.contains { "\($0.device)" == key } }
        for gap in report.gaps where since["\(gap.device)"] == nil { since["\(gap.device)"] = now }
        try snapshot.setMetadata("gaps_since", since.isEmpty ? nil : since.map { "\($0.key)=\($0.value)" }.sorted().joined(separator: " "))
        let wait = baselineWaitMilliseconds
        let lasting = report.gaps.filter { gap in since["\(gap.device)"].map { now >= $0 && now - $0 >= wait } ?? false }
        guard !lasting.isEmpty else { return }
        let candidates: [[ContainerName]]
        do {
            candidates = try await baselines().filter { ContainerLayout.parseBaselinePart($0[0])?.device != snapshot.deviceID }
        } catch let error as ChronicleError where error.code.isTransient {
            return
        }
        for names in candidates {
            let lastBytes: [UInt8]
            let vector: [DeviceID: UInt64]
            do {
                lastBytes = try await container.get(names[names.count - 1], maxBytes: decoder.limits.maxLogBytes)
                guard try decoder.header(of: lastBytes).isFinalBaselinePart else { continue }
                let firstBytes = names.count == 1 ? lastBytes : try await container.get(names[0], maxBytes: decoder.limits.maxLogBytes)
                let part = try await openBaselineLearning(firstBytes)
                guard part.header.kind == .baseline else { continue }
                vector = try part.baselineVector()
            } catch let error as ChronicleError where error.code != .simulatedCrash {
                continue
            }
            let healed = lasting.filter { (vector[$0.device] ?? 0) + 1 >= $0.found }
            guard !healed.isEmpty else { continue }
            guard try await applyBaseline(names, lastBytes: lastBytes, into: &report) != nil else { continue }
            logger.notice("applied a baseline that covers logs the container no longer has",
                          metadata: ["chronicle.baseline": "\(names[0])", "chronicle.devices": "\(healed.count)"])
            report.gaps.removeAll { gap in healed.contains { $0.device == gap.device } }
            try await importLogs(of: devices(), after: try snapshot.vector(), into: &report)
            return
        }
    }

    /// A device of the store whose saves this device has none of, and that
    /// has no logs in the container, may still have saves: a
    /// seeding device publishes a baseline of what it seeded, and the
    /// device that keeps its logs puts them back if the container loses
    /// them; if that device lost its copy too (its files went back in
    /// time), the seeder's baseline is where its saves are left. No gap
    /// shows (no log of the device is listed), so its complete baseline is
    /// applied, a join as a log is: only one that covers that device's
    /// saves alone, as a seeding device's does.
    ///
    /// It lists the logs of each device it has nothing of: at most once per
    /// ``baselineWait`` (a device that never saves is listed in every
    /// store).
    func applyBaselinesOfDevicesWithoutLogs(_ devices: [DeviceID], into report: inout ImportReport) async throws {
        let now = clock.nowMilliseconds()
        let wait = baselineWaitMilliseconds
        if let last = try snapshot.metadata("silent_check_at").flatMap(UInt64.init), now >= last, now - last < wait { return }
        try snapshot.setMetadata("silent_check_at", String(now))
        let vector = try snapshot.vector()
        var silent: Set<DeviceID> = []
        for device in devices where device != snapshot.deviceID && (vector[device] ?? 0) == 0 {
            // A folder of logs can outlive its logs (a directory container's).
            if try await container.listAll(prefix: ContainerLayout.logPrefix(store: snapshot.storeID, device: device)).isEmpty {
                silent.insert(device)
            }
        }
        guard !silent.isEmpty else { return }
        let candidates: [[ContainerName]]
        do {
            candidates = try await baselines().filter { names in ContainerLayout.parseBaselinePart(names[0]).map { silent.contains($0.device) } ?? false }
        } catch let error as ChronicleError where error.code.isTransient {
            return
        }
        // Baselines that failed to apply are not read again at every sync.
        var failed = Set(try snapshot.metadata("silent_baselines_failed")?.split(separator: " ").map(String.init) ?? [])
        let failedBefore = failed
        var applied: Set<DeviceID> = []
        for names in candidates {
            guard let publisher = ContainerLayout.parseBaselinePart(names[0])?.device, !applied.contains(publisher),
                  !failed.contains(names[0].rawValue) else { continue }
            let lastBytes: [UInt8]
            do {
                lastBytes = try await container.get(names[names.count - 1], maxBytes: decoder.limits.maxLogBytes)
                // Still being written: the next sync looks again.
                guard try decoder.header(of: lastBytes).isFinalBaselinePart else { continue }
                // Only a baseline of that device's own saves (a seeding
                // device's), and some: one that holds other devices' writes too may
                // hold versions of them that the container no longer has
                // (another copy's, gone since), which a join would bring
                // to this device alone.
                let firstBytes = names.count == 1 ? lastBytes : try await container.get(names[0], maxBytes: decoder.limits.maxLogBytes)
                let part = try await openBaselineLearning(firstBytes)
                let vector = part.header.kind == .baseline ? try part.baselineVector() : [:]
                guard (vector[publisher] ?? 0) > 0, vector.keys.allSatisfy({ $0 == publisher }) else {
                    failed.insert(names[0].rawValue)
                    continue
                }
            } catch let error as ChronicleError where error.code.isTransient {
                continue
            } catch let error as ChronicleError where error.code != .simulatedCrash {
                logger.warning("the baseline of a device whose logs the container does not have cannot be applied",
                               metadata: ["chronicle.baseline": "\(names[0])", "chronicle.error": "\(error)"])
                failed.insert(names[0].rawValue)
                continue
            }
            let failures = report.failures.count
            guard try await applyBaseline(names, lastBytes: lastBytes, into: &report) != nil else {
                // Not an import failure: no log of this store needs it.
                for failure in report.failures[failures...] {
                    logger.warning("the baseline of a device whose logs the container does not have cannot be applied",
                                   metadata: ["chronicle.baseline": "\(failure.name)", "chronicle.error": "\(failure.error)"])
                }
                report.failures.removeSubrange(failures...)
                failed.insert(names[0].rawValue)
                continue
            }
            applied.insert(publisher)
            logger.notice("applied the baseline of a device whose logs the container does not have",
                          metadata: ["chronicle.baseline": "\(names[0])", "chronicle.device": "\(publisher)"])
        }
        if failed != failedBefore {
            try snapshot.setMetadata("silent_baselines_failed", failed.sorted().suffix(16).joined(separator: " "))
        }
        if !applied.isEmpty {
            try await importLogs(of: self.devices(), after: try snapshot.vector(), into: &report)
        }
    }

    /// The end of a device's history that other devices applied and the
    /// container no longer lists: no later log shows the gap (a device
    /// waits at a gap only when it sees a log after it), so the other
    /// devices' applied reports (``AppliedReport``) tell. Such a device's
    /// last logs were lost (put back by no one, or removed with a copy
    /// that could not be put again); this device reports the gap at the
    /// end of what it applied, at every import until its logs or a
    /// baseline that covers them fill it (``healGapsFromBaselines(into:)``),
    /// as the health monitor then judges any gap.
    ///
    /// The reports are read at most once per ``missingEndCheckInterval``;
    /// what they showed is kept in the snapshot until then. Sequences the
    /// compaction marker covers are the compaction's to bring.
    func noteMissingEnds(into report: inout ImportReport) async throws {
        let now = clock.nowMilliseconds()
        let vector = try snapshot.vector()
        let stored = try snapshot.metadata(Self.missingEndsKey)
        var ends = Self.parseEnds(stored)
        let checkedAt = try snapshot.metadata(Self.missingEndsCheckedKey).flatMap(UInt64.init)
        let interval = Self.wholeMilliseconds(missingEndCheckInterval)
        if checkedAt.map({ now < $0 || now - $0 >= interval }) ?? true {
            var reported: [DeviceID: UInt64] = [:]
            do {
                for name in try await container.listMarkers(prefix: ContainerLayout.appliedReportsPrefix(store: snapshot.storeID)) {
                    guard let applied = try? await container.readMarker(name, as: AppliedReport.self)?.payload,
                          applied.device != snapshot.deviceID else { continue }
                    for (device, sequence) in applied.vector where device != snapshot.deviceID {
                        reported[device] = max(reported[device] ?? 0, sequence)
                    }
                }
                let compacted = try await compactionHorizon()?.vector ?? [:]
                ends = [:]
                for (device, through) in reported.sorted(by: { $0.key.description < $1.key.description })
                where through > (vector[device] ?? 0) && through > (compacted[device] ?? 0) {
                    // A gap or a failure the import met says it already.
                    if report.gaps.contains(where: { $0.device == device }) || report.failures.contains(where: { $0.device == device }) { continue }
                    let after = vector[device] ?? 0
                    let logs = try await container.listAll(prefix: ContainerLayout.logPrefix(store: snapshot.storeID, device: device))
                    guard !logs.contains(where: { ContainerLayout.parseLog($0.name).map { $0.device == device && $0.last > after } ?? false }) else { continue }
                    ends[device] = through
                }
            } catch let error as ChronicleError where error.code.isTransient {
                // The next import looks again.
                return
            }
            try snapshot.setMetadata(Self.missingEndsCheckedKey, String(now))
        }
        ends = ends.filter { (vector[$0.key] ?? 0) < $0.value }
        // Written only when it changes: most imports find nothing missing.
        let text = ends.isEmpty ? nil : ends.map { "\($0.key)=\($0.value)" }.sorted().joined(separator: " ")
        if text != stored { try snapshot.setMetadata(Self.missingEndsKey, text) }
        for (device, through) in ends.sorted(by: { $0.key.description < $1.key.description }) where !report.gaps.contains(where: { $0.device == device }) {
            report.gaps.append(.init(device: device, expected: (vector[device] ?? 0) + 1, found: through + 1, atEnd: true))
        }
    }

    /// The snapshot metadata of ``noteMissingEnds(into:)``: each device
    /// whose end other devices applied and the container lacks, with the
    /// last sequence they applied, as `device=sequence` pairs.
    static let missingEndsKey = "missing_ends"
    /// When the applied reports were last read for ``missingEndsKey``.
    static let missingEndsCheckedKey = "missing_ends_checked_at"

    static func parseEnds(_ text: String?) -> [DeviceID: UInt64] {
        var ends: [DeviceID: UInt64] = [:]
        for entry in text?.split(separator: " ") ?? [] {
            let pair = entry.split(separator: "=")
            if pair.count == 2, let device = DeviceID(string: String(pair[0])), let through = UInt64(pair[1]) { ends[device] = through }
        }
        return ends
    }

    /// The snapshot metadata naming a baseline part found damaged, for the
    /// next ``checkBaselines(interval:)``.
    static let suspectBaselinePartKey = "baseline_check_suspect"

    /// One bounded check of the baselines that hold saves no log may hold:
    /// the one the compaction marker names (the removed logs' only copy),
    /// and the store's newest complete one (a store that starts from a
    /// baseline, seeded or rebuilt, has its first saves there only). At
    /// most once per `interval` milliseconds, it reads each one's first
    /// part and the next of its other parts in turn. A device that has
    /// applied everything such a baseline holds stands in for a damaged or
    /// incomplete one: it publishes its own, which covers all the damaged
    /// one covered, points the compaction marker at it if the marker named
    /// the damaged one, and removes the damaged one. Returns the new
    /// baseline's folder when it did.
    ///
    /// A part another step of this device found damaged (see
    /// ``compact(retention:)``) is read at the next check, whatever the
    /// interval.
    package func checkBaselines(interval: UInt64) async throws -> String? {
        let now = clock.nowMilliseconds()
        let suspect = try snapshot.metadata(Self.suspectBaselinePartKey).flatMap { try? ContainerName($0) }
        if suspect == nil, let last = try snapshot.metadata("baseline_check_at").flatMap(UInt64.init), now >= last, now - last < interval { return nil }
        try snapshot.setMetadata("baseline_check_at", String(now))
        try snapshot.setMetadata(Self.suspectBaselinePartKey, nil)
        let markerName = ContainerLayout.compaction(store: snapshot.storeID)
        let marker = try await container.readMarker(markerName)
        let horizon = marker.flatMap { try? CompactionHorizon(markerBytes: $0.bytes) }
        var targets: [String] = horizon.map { [$0.baseline] } ?? []
        if let newest = try await baselines().first, let parsed = ContainerLayout.parseBaselinePart(newest[0]) {
            let prefix = ContainerLayout.baselinePrefix(store: parsed.store, clock: parsed.clock, device: parsed.device, vector: parsed.vector)
            if !targets.contains(prefix) { targets.append(prefix) }
        }
        let vector = try snapshot.vector()
        for target in targets {
            let parts = try await container.listAll(prefix: target)
                .compactMap { blob in ContainerLayout.parseBaselinePart(blob.name).map { ($0.part, blob.name) } }
                .sorted { $0.0 < $1.0 }
            var problem: String?
            var covered: [DeviceID: UInt64]? = target == horizon?.baseline ? horizon?.vector : nil
            if parts.isEmpty || !parts.enumerated().allSatisfy({ $0.element.0 == UInt64($0.offset + 1) }) {
                // The newest one may still be arriving: only the marker's is
                // known to have been whole.
                guard target == horizon?.baseline else { continue }
                problem = "parts are missing"
            } else {
                // One cursor per role, so that the two targets take turns
                // without resetting each other.
                let cursorKey = target == horizon?.baseline ? "baseline_check_horizon" : "baseline_check_newest"
                let cursor = try snapshot.metadata(cursorKey).map { $0.split(separator: " ", maxSplits: 1) }
                let previous = cursor.flatMap { $0.count == 2 && $0[1] == target ? Int($0[0]) : nil } ?? 0
                let index = previous % parts.count
                // The first part says what the baseline covers, the last one
                // that it is whole: both every time, the others in turn.
                let suspected = parts.firstIndex { $0.1 == suspect }
                var check = BaselinePartCheck(count: parts.count)
                for i in Set([0, index, parts.count - 1] + (suspected.map { [$0] } ?? [])).sorted() {
                    do {
                        let decoded = try await openBaselineLearning(try await container.get(parts[i].1, maxBytes: decoder.limits.maxLogBytes))
                        if i == 0, decoded.header.kind == .baseline { covered = try decoded.baselineVector() }
                        if i == parts.count - 1, decoded.header.kind == .baseline, !decoded.header.isFinalBaselinePart {
                            // Still being written, unless the marker names it.
                            guard target == horizon?.baseline else { break }
                            problem = "its last part is not marked final"
                            break
                        }
                        // A part of another baseline, or one swapped with
                        // another, verifies alone: it shows only here.
                        try check.check(decoded, name: parts[i].1, index: i)
                    } catch let error as ChronicleError where error.code != .simulatedCrash
                                && (!error.code.isTransient || (error.code == .shortRead && target == horizon?.baseline)) {
                        // A part shorter than it says is one still arriving,
                        // unless it is the marker's: that one was whole when
                        // the marker was written.
                        problem = "\(parts[i].1.lastComponent): \(error.message)"
                        break
                    }
                }
                try snapshot.setMetadata(cursorKey, "\(index + 1) \(target)")
            }
            // Only a device holding everything the baseline holds can stand
            // in for it: one whose vector covers the baseline's (read from
            // its first part, or the compaction marker), or, when neither
            // says what it covers, one that started from this very baseline
            // (a rebuilt store's, whose first part may be the damaged one).
            guard let problem else { continue }
            let holds = try covered.map { c in c.allSatisfy { (vector[$0.key] ?? 0) >= $0.value } }
                ?? (snapshot.heldBaseline() == target)
            guard holds else { continue }
            logger.warning("a baseline that holds saves no log may hold is damaged; publishing one in its place",
                           metadata: ["chronicle.baseline": "\(target)", "chronicle.problem": "\(problem)"])
            let published = try await publishStandIn(replacing: target)
            // This device's own baseline, put back where it was.
            guard published.prefix != target else { return published.prefix }
            if let marker, let horizon, target == horizon.baseline {
                let replacement = CompactionHorizon(baseline: published.prefix, device: snapshot.deviceID, milliseconds: now, vector: published.vector,
                                                    clocks: try snapshot.transactionClocks(at: published.vector))
                do {
                    _ = try await container.replaceMarker(markerName, replacement, expected: marker.version)
                } catch let error as ChronicleError where error.code == .markerConflict {
                    // Another device moved the marker meanwhile: its baseline
                    // stands, and the damaged one is left for it.
                    return published.prefix
                }
            }
            for (_, part) in parts {
                do { try await container.delete(part) } catch let error as ChronicleError where error.code == .notFound {}
            }
            return published.prefix
        }
        return nil
    }

    /// Removes from the container the logs that the store's newest complete
    /// baseline covers, and the baselines older than it, once every device
    /// that reported within `retention` milliseconds has applied that much.
    ///
    /// The baseline is read whole first (every part verified; one that does
    /// not verify is passed over for the one before it), and the
    /// compaction marker naming it is written before anything is removed:
    /// a device that needs a removed log finds the baseline that stands
    /// for it. A store deleted or rebuilt is not compacted.
    ///
    /// - Throws: ``ChronicleError/Code/unavailable`` for a store that was
    ///   deleted or rebuilt; the container's errors.
    package func compact(retention: UInt64) async throws -> CompactionReport {
        let store = snapshot.storeID
        var report = CompactionReport()
        for (marker, what) in [(ContainerLayout.tombstone(store: store), "deleted"), (ContainerLayout.supersession(store: store), "rebuilt as another store")]
        where try await container.readMarker(marker) != nil {
            throw ChronicleError(.unavailable, "store \(store) was \(what): it is not compacted")
        }
        // The newest complete baseline that verifies, every part read: the
        // logs it stands for go only if it holds them. One still being
        // written, or damaged, is passed over for the one before it.
        var chosen: (prefix: String, vector: [DeviceID: UInt64])?
        candidates: for names in try await baselines() {
            var vector: [DeviceID: UInt64]?
            var check = BaselinePartCheck(count: names.count)
            for (index, name) in names.enumerated() {
                let decoded: VerifiedLog
                do {
                    decoded = try await openBaselineLearning(try await container.get(name, maxBytes: decoder.limits.maxLogBytes))
                    // A last part not marked final: still being written.
                    if index == names.count - 1, decoded.header.kind == .baseline, !decoded.header.isFinalBaselinePart { continue candidates }
                    // Each part verifies alone: one swapped with another, or
                    // copied in from another baseline, shows only here.
                    try check.check(decoded, name: name, index: index)
                } catch let error as ChronicleError where !error.code.isTransient && error.code != .simulatedCrash {
                    report.passedOverBaselines.append(names[0].rawValue)
                    logger.warning("compaction passes over a baseline that does not verify", metadata: ["chronicle.baseline": "\(name)", "chronicle.error": "\(error)"])
                    // The next baseline check reads this part at once: it may
                    // be the only copy of saves the logs no longer hold.
                    try snapshot.setMetadata(Self.suspectBaselinePartKey, name.rawValue)
                    continue candidates
                }
                if name == names[0], decoded.header.kind == .baseline { vector = try decoded.baselineVector() }
                if name == names[names.count - 1], !decoded.header.isFinalBaselinePart { continue candidates }
            }
            guard let vector, let parsed = ContainerLayout.parseBaselinePart(names[0]) else { continue }
            chosen = (ContainerLayout.baselinePrefix(store: store, clock: parsed.clock, device: parsed.device, vector: parsed.vector), vector)
            break
        }
        guard let (prefix, vector) = chosen else { return report }
        report.baseline = prefix

        // Who has applied it: every device reporting within the retention period.
        let now = clock.nowMilliseconds()
        var reports: [DeviceID: AppliedReport] = [:]
        for name in try await container.listMarkers(prefix: ContainerLayout.appliedReportsPrefix(store: store)) {
            guard let payload = try? await container.readMarker(name, as: AppliedReport.self)?.payload else { continue }
            reports[payload.device] = payload
        }
        for device in try await devices() where device != snapshot.deviceID {
            // Within the retention period either way: a report dated further
            // ahead than that (a device whose clock runs years fast) would
            // hold compaction back until its date, and is passed over too.
            guard let applied = reports[device],
                  (now >= applied.milliseconds ? now - applied.milliseconds : applied.milliseconds - now) < retention else {
                report.passedOverDevices.append(device)
                continue
            }
            if vector.contains(where: { $0.key != device && (applied.vector[$0.key] ?? 0) < $0.value }) {
                report.waitingFor.append(device)
            }
        }
        let mine = try snapshot.vector()
        if vector.contains(where: { $0.key != snapshot.deviceID && (mine[$0.key] ?? 0) < $0.value }) {
            report.waitingFor.append(snapshot.deviceID)
        }
        // The marker first: from here on a device that misses a log looks for the baseline.
        let name = ContainerLayout.compaction(store: store)
        let horizon = CompactionHorizon(baseline: prefix, device: snapshot.deviceID, milliseconds: now, vector: vector,
                                        clocks: try snapshot.transactionClocks(at: vector))
        let existing = try await container.readMarker(name)
        guard report.waitingFor.isEmpty else {
            // Nothing is removed, but a marker this baseline covers moves to
            // it at once: devices catching up from a marker whose baseline
            // is damaged would otherwise keep this compaction waiting.
            if let existing, let current = try? CompactionHorizon(markerBytes: existing.bytes), current.baseline != prefix,
               current.vector.allSatisfy({ (vector[$0.key] ?? 0) >= $0.value }) {
                do {
                    _ = try await container.replaceMarker(name, horizon, expected: existing.version)
                } catch let error as ChronicleError where error.code == .markerConflict {}
            }
            return report
        }
        // Another device compacting at the same moment may write the marker
        // between the read and the write: read it again and decide again.
        var marker = existing
        markerWritten: for attempt in 1...3 {
            do {
                if let existing = marker {
                    let current = try? CompactionHorizon(markerBytes: existing.bytes)
                    // Never back: a marker that covers more stays (a newer
                    // baseline compacted by another device).
                    if let current, current.baseline != prefix, current.vector.allSatisfy({ (vector[$0.key] ?? 0) >= $0.value }) {
                        _ = try await container.replaceMarker(name, horizon, expected: existing.version)
                    } else if let current, current.baseline != prefix {
                        // The store was compacted with a baseline this one
                        // does not cover: that compaction stands.
                        report.baseline = current.baseline
                        return report
                    } else if current == nil {
                        _ = try await container.replaceMarker(name, horizon, expected: existing.version)
                    }
                } else {
                    _ = try await container.createMarker(name, horizon)
                }
                // Written (or there already): should the container lose it,
                // this device writes it again (it applied all it covers).
                try remember(horizon)
                break markerWritten
            } catch let error as ChronicleError where error.code == .markerConflict && attempt < 3 {
                marker = try await container.readMarker(name)
            }
        }

        // The logs it covers.
        for device in vector.keys.sorted(by: { $0.description < $1.description }) {
            for blob in try await container.listAll(prefix: ContainerLayout.logPrefix(store: store, device: device)) {
                guard let log = ContainerLayout.parseLog(blob.name), log.device == device, horizon.mayHaveRemoved(device: device, last: log.last) else { continue }
                do {
                    try await container.delete(blob.name)
                    report.removedLogs += 1
                    report.removedLogBytes += blob.size
                } catch let error as ChronicleError where error.code == .notFound {
                    // Removed by another device compacting at the same time.
                }
            }
        }
        // The baselines older than it (complete or not: an older one left
        // half-written is of no use either).
        for blob in try await container.listAll(prefix: ContainerLayout.baselinesPrefix(store: store)) {
            guard !blob.name.rawValue.hasPrefix(prefix), let part = ContainerLayout.parseBaselinePart(blob.name),
                  ContainerLayout.baselinePrefix(store: store, clock: part.clock, device: part.device, vector: part.vector) < prefix else { continue }
            do {
                try await container.delete(blob.name)
                if part.part == 1 { report.removedBaselines += 1 }
                report.removedBaselineBytes += blob.size
            } catch let error as ChronicleError where error.code == .notFound {
            }
        }
        logger.notice("compacted the store", metadata: [
            "chronicle.baseline": "\(prefix)", "chronicle.logs": "\(report.removedLogs)", "chronicle.baselines": "\(report.removedBaselines)",
        ])
        return report
    }
}

/// What one compaction did.
public struct CompactionReport: Sendable, Equatable {
    /// The baseline that stands for the removed logs (its folder), or
    /// nil if there was nothing to compact with.
    public var baseline: String?
    /// Logs removed.
    public var removedLogs = 0
    /// Their bytes.
    public var removedLogBytes = 0
    /// Older baselines removed (each with all its parts).
    public var removedBaselines = 0
    /// Their bytes.
    public var removedBaselineBytes = 0
    /// Devices whose reports are older than the retention period (or
    /// that never reported): compaction did not wait for them. When one
    /// comes back it applies the baseline and goes on from there.
    public var passedOverDevices: [DeviceID] = []
    /// Devices that reported within the retention period and have not
    /// applied the newest baseline's logs yet: nothing was removed, so
    /// that they do not have to apply a whole baseline to catch up.
    /// Compaction can run again once they have synced.
    public var waitingFor: [DeviceID] = []
    /// Newer baselines passed over because a part does not verify (the names
    /// of their first parts): publish a new one.
    public var passedOverBaselines: [String] = []

    /// Creates an empty report.
    public init() {}
}
