import ChronicleContainer
import ChronicleCore
import Foundation
import Logging

/// Moves logs between a snapshot and a container: uploads the outbox, and
/// imports other devices' logs in sequence order.
///
/// Imports stream: one log is held in memory at a time, and listings are
/// paged, so memory does not grow with the number of logs. A log that fails is
/// recorded and stops only its own device's sequence (later logs of that
/// device cannot apply without it); the other devices keep importing.
package struct Replayer: Sendable {
    /// The device's snapshot.
    package let snapshot: Snapshot
    /// The shared container.
    package let container: any Container
    /// How logs are verified.
    package var decoder: LogDecoder { snapshot.decoder(limits: limits, dictionaries: dictionaries) }
    private let limits: DecodingLimits
    private let dictionaries: [CompressionDictionary]
    /// Where diagnostics go.
    package let logger: Logger
    /// How many log names one listing call returns.
    package var pageSize = 512
    /// Where change events go as each batch of logs commits. When set, they
    /// are not kept in ``ImportReport/events`` (a cold start of a million
    /// records would otherwise hold a million events until the pass ends),
    /// and memory stays bounded by the batch.
    package var eventSink: (@Sendable ([RecordEvent]) -> Void)?
    /// Told how far ``upload()`` and ``importOnce()`` have got, after each
    /// log uploaded, baseline part applied and batch of logs applied; for
    /// progress reports. nil: nobody is told.
    package var progress: (@Sendable (SyncProgress) -> Void)?

    /// Creates a replayer.
    package init(snapshot: Snapshot, container: any Container, limits: DecodingLimits = DecodingLimits(),
                dictionaries: [CompressionDictionary] = [], logger: Logger) {
        self.snapshot = snapshot
        self.container = container
        self.limits = limits
        self.dictionaries = dictionaries
        var logger = logger
        logger[metadataKey: "chronicle.device"] = "\(snapshot.deviceID)"
        logger[metadataKey: "chronicle.store"] = "\(snapshot.storeID)"
        self.logger = logger
    }

    /// Uploads every pending save, grouped into logs. Returns the number of
    /// logs put. Safe to call again after any failure.
    ///
    /// - Throws: ``ChronicleError/Code/identityConflict`` if the container
    ///   already holds a different log for these sequences of this device
    ///   (another copy of this device's files uploaded first): the caller
    ///   must continue under a new device ID (``Store`` does).
    @discardableResult
    package func upload() async throws -> Int {
        // A store deleted on purpose takes no more saves: they stay pending,
        // for the store manager to carry into the local store.
        if try snapshot.pendingUploadCount() > 0, try await container.readMarker(ContainerLayout.tombstone(store: snapshot.storeID)) != nil {
            logger.notice("the store was deleted on purpose; its pending saves are not uploaded")
            return 0
        }
        try await register()
        do {
            try await refreshDictionariesIfDue()
        } catch let error as ChronicleError where error.code != .simulatedCrash {
            logger.warning("the store's compression dictionaries could not be listed", metadata: ["chronicle.error": "\(error)"])
        }
        guard try snapshot.pendingUploadCount() > 0 else { return 0 }
        try await checkSchemaVersion()
        let dictionary: CompressionDictionary?
        do {
            dictionary = try await uploadDictionary()
        } catch let error as ChronicleError where error.code != .simulatedCrash {
            // Saves go out compressed without one rather than wait.
            logger.warning("the store's compression dictionary could not be fetched or published", metadata: ["chronicle.error": "\(error)"])
            dictionary = snapshot.newestDictionary()?.dictionary
        }
        let encoder = LogEncoder(storeID: snapshot.storeID, dictionary: dictionary, version: LogEncoder.uploadVersion)
        // Sequences compaction covers are taken by another copy of these
        // files: other devices would pass over logs put there now.
        let compacted = try await compactionHorizon()?.vector[snapshot.deviceID] ?? 0
        var firstPut: UInt64?
        var count = 0
        var recorded = Set<UInt64>()
        // Groups stay under the cap every reader applies (a single save is
        // checked against it when it is made).
        let maxBytes = min(4 << 20, max(1, decoder.limits.maxBodyBytes / 2))
        while let plan = try snapshot.nextUpload(maxBytes: maxBytes) {
            // Between logs: each is put and marked uploaded, or not at all.
            try Task.checkCancellation()
            guard plan.first > compacted else {
                throw ChronicleError(.identityConflict, "the store's compacted history holds sequences through \(compacted) of this device, which another copy of its files uploaded")
            }
            let bytes = try encoder.encode(bodies: plan.transactions, device: snapshot.deviceID, schemaHash: snapshot.schema.hash)
            let name = ContainerLayout.log(store: snapshot.storeID, device: snapshot.deviceID, first: plan.first, last: plan.last)
            try await recordSchema(of: bytes, name: name, &recorded)
            try await putOwnLog(name, bytes)
            firstPut = firstPut ?? plan.first
            try snapshot.crashInjector?.check(.uploadAfterPut)
            try snapshot.markUploaded(plan, at: clock.nowMilliseconds())
            logger.debug("uploaded log", metadata: ["chronicle.log": "\(name)", "chronicle.bytes": "\(bytes.count)"])
            count += 1
            progress?(SyncProgress(phase: .uploading, logs: count, transactions: 0))
        }
        // A compaction that ran meanwhile and covers these sequences was
        // another copy's: other devices pass over what was just put.
        if let firstPut, let covered = try await compactionHorizon()?.vector[snapshot.deviceID], covered >= firstPut {
            throw ChronicleError(.identityConflict, "the store was compacted through sequence \(covered) of this device while it uploaded from \(firstPut): another copy of its files uploaded those sequences")
        }
        return count
    }

    /// Puts one of this device's logs. A blob already at its name that does
    /// not verify is this device's own log, damaged (a torn copy): it is
    /// replaced. One that verifies, or another log overlapping these
    /// sequences, holds other saves under this device's sequences:
    /// ``ChronicleError/Code/identityConflict``.
    private func putOwnLog(_ name: ContainerName, _ bytes: [UInt8]) async throws {
        do {
            try await container.put(name, bytes)
        } catch let error as ChronicleError where error.code == .blobConflict {
            // Nothing at the name: the conflict is another log overlapping
            // these sequences (a container refuses those too).
            let existing = try? await container.get(name, maxBytes: decoder.limits.maxLogBytes)
            let verified = if let existing { try? await openLearning(existing, name: name) } else { nil as VerifiedLog? }
            if let verified, let parsed = ContainerLayout.parseLog(name),
               let mine = try snapshot.outboxTransactions(first: parsed.first, last: parsed.last),
               try holds(verified, device: snapshot.deviceID, mine) {
                return
            }
            // A blob that does not verify is this device's own log only if
            // it is these bytes torn or rotted: another copy of these files
            // may have put other saves there, and other devices may have
            // applied them before they were damaged.
            guard let existing, verified == nil, Self.isDamagedCopy(existing, of: bytes) else {
                throw ChronicleError(.identityConflict, "the container already holds other saves where this device's log \(name.lastComponent) belongs", underlying: error)
            }
            try await container.delete(name)
            try await container.put(name, bytes)
            logger.notice("replaced a damaged copy of own log", metadata: ["chronicle.log": "\(name)"])
        }
    }

    /// Whether a verified log holds exactly the saves `bodies` of `device`
    /// (the same saves, whatever bytes another encoder gave them).
    private func holds(_ log: VerifiedLog, device: DeviceID, _ bodies: [LogEncoder.EncodedTransaction]) throws -> Bool {
        guard log.header.deviceID == device else { return false }
        return (try? log.transactions()) == (try snapshot.transactions(bodies, device: device))
    }

    /// Whether the container holds history of this device's ID that this
    /// snapshot did not write: a registration naming another incarnation
    /// (``Snapshot/incarnation(orStore:)``), or logs of this device after the
    /// last one this snapshot uploaded (other than the one it planned next).
    /// Returns why, or nil when the history is this snapshot's own.
    package func foreignHistory() async throws -> String? {
        let device = snapshot.deviceID
        if let incarnation, let marker = try await container.readMarker(ContainerLayout.deviceRegistration(store: snapshot.storeID, device: device)),
           let registered = DeviceRegistration(bytes: marker.bytes)?.incarnation, registered != incarnation {
            return "the container's registration of device \(device) names another copy of its files (\(registered.paddedHex), this one is \(incarnation.paddedHex))"
        }
        let frontier = try snapshot.uploadFrontier()
        let own = try snapshot.ownSequence()
        var cursor = frontier.lastUploaded.map { ContainerLayout.log(store: snapshot.storeID, device: device, first: $0.first, last: $0.last) }
        let prefix = ContainerLayout.logPrefix(store: snapshot.storeID, device: device)
        while true {
            let page = try await container.list(prefix: prefix, after: cursor, limit: pageSize)
            for blob in page {
                cursor = blob.name
                guard let parsed = ContainerLayout.parseLog(blob.name), parsed.device == device else { continue }
                if let planned = frontier.planned, planned.first == parsed.first, planned.last == parsed.last { continue }
                let range = parsed.first == parsed.last ? "sequence \(parsed.first)" : "sequences \(parsed.first) to \(parsed.last)"
                return "the container holds \(range) of device \(device), which these files did not upload; their last save is \(own)"
            }
            if page.count < pageSize { break }
        }
        // Compaction removes logs: a baseline covering more of this ID than
        // these files uploaded is history they did not write (a folder
        // restored from an older copy, or a copy of it on a second machine).
        if let horizon = try await compactionHorizon(), let covered = horizon.vector[device], covered > (frontier.lastUploaded?.last ?? 0) {
            return "the store's compacted history holds sequences through \(covered) of device \(device), which these files did not upload; their last save is \(own)"
        }
        return nil
    }

    /// This snapshot's incarnation, recorded in its registration. Set by
    /// ``Store``; nil registers without one.
    package var incarnation: UInt64?

    /// Checks this device's own logs in the container and puts back, from
    /// the outbox (which keeps every saved body), any that are missing (an
    /// upload that never arrived, a wiped or pruned container) or damaged
    /// (bit rot, a torn copy). Other devices never applied a damaged log
    /// (imports are all or nothing), so replacing it with the bytes it should
    /// have is safe. Returns the names repaired.
    ///
    /// This checks every log; ``repairOwnLogs(from:budget:)`` checks a bounded
    /// window per call, which is what each sync does.
    package func repairOwnLogs() async throws -> [ContainerName] {
        var repaired: [ContainerName] = []
        var cursor: ContainerName?
        repeat {
            let pass = try await repairOwnLogs(from: cursor, budget: RepairBudget(listed: pageSize, verifiedBytes: .max))
            repaired += pass.repaired
            cursor = pass.next
        } while cursor != nil
        return repaired
    }

    /// Puts back every one of this device's logs that the container lacks
    /// or holds damaged, as ``repairOwnLogs()`` does, but passes over the
    /// logs another copy of its files wrote at its names. A device that
    /// moves to a new ID (because of such logs) does this first: its logs
    /// that are only damaged stay its own, and other devices can import
    /// them again, instead of stopping at them for good.
    package func repairOwnLogsPassingOverOthers() async throws -> [ContainerName] {
        var repaired: [ContainerName] = []
        var cursor: ContainerName?
        repeat {
            let pass = try await repairLogs(of: nil, from: cursor, budget: RepairBudget(listed: pageSize, verifiedBytes: .max), passingOverOthers: true)
            repaired += pass.repaired
            cursor = pass.next
        } while cursor != nil
        return repaired
    }

    /// How much one bounded repair pass may do.
    package struct RepairBudget: Sendable, Hashable {
        /// Log names listed.
        package var listed: Int
        /// Bytes of logs read back and verified.
        package var verifiedBytes: Int

        /// Creates a budget.
        package init(listed: Int = 256, verifiedBytes: Int = 4 << 20) {
            self.listed = listed
            self.verifiedBytes = verifiedBytes
        }
    }

    /// One bounded repair pass over this device's own logs, starting after
    /// `cursor` (nil: from the first). Lists at most `budget.listed` names,
    /// puts back every log of that window the outbox uploaded but the
    /// container lacks, and reads back at most `budget.verifiedBytes` of
    /// them, replacing any that do not verify. Returns what it repaired and
    /// where the next pass starts (nil once it reached the end).
    package func repairOwnLogs(from cursor: ContainerName?, budget: RepairBudget) async throws -> (repaired: [ContainerName], next: ContainerName?) {
        try await repairLogs(of: nil, from: cursor, budget: budget)
    }

    /// One bounded repair pass over the logs of `inherited`, an earlier ID
    /// of this device whose uploaded saves the snapshot keeps (see
    /// ``Snapshot/inherit(from:groups:)``): after a wipe, or bit rot, only
    /// this device can put them back. A log at one of those names that
    /// verifies with other saves belongs to another copy of that ID, which
    /// repairs it: it is left alone.
    package func repairInheritedLogs(of inherited: DeviceID, from cursor: ContainerName?, budget: RepairBudget) async throws -> (repaired: [ContainerName], next: ContainerName?) {
        try await repairLogs(of: inherited, from: cursor, budget: budget)
    }

    /// The repair pass for this device's own logs (`inherited` nil) or an
    /// earlier ID's.
    ///
    /// With `passingOverOthers`, a log at one of this device's names that
    /// holds other saves (another copy of its files wrote it) is left alone
    /// instead of reported as an ``ChronicleError/Code/identityConflict``.
    private func repairLogs(of inherited: DeviceID?, from cursor: ContainerName?, budget: RepairBudget,
                            passingOverOthers: Bool = false) async throws -> (repaired: [ContainerName], next: ContainerName?) {
        let encoder = LogEncoder(storeID: snapshot.storeID, version: LogEncoder.uploadVersion)
        let device = inherited ?? snapshot.deviceID
        func groups() throws -> [(UInt64, UInt64)] {
            try inherited.map { try snapshot.inheritedGroups(of: $0) } ?? snapshot.uploadedGroups()
        }
        func bodies(_ first: UInt64, _ last: UInt64) throws -> [LogEncoder.EncodedTransaction]? {
            try inherited.map { try snapshot.inheritedTransactions(of: $0, first: first, last: last) } ?? snapshot.outboxTransactions(first: first, last: last)
        }
        let prefix = ContainerLayout.logPrefix(store: snapshot.storeID, device: device)
        let page = try await container.list(prefix: prefix, after: cursor, limit: max(1, budget.listed))
        let reachedEnd = page.count < max(1, budget.listed)
        let start = cursor.flatMap(ContainerLayout.parseLog)?.first ?? 0
        let end = reachedEnd ? UInt64.max : (page.last.flatMap { ContainerLayout.parseLog($0.name) }?.first ?? UInt64.max)
        var repaired: [ContainerName] = []
        var recorded = Set<UInt64>()
        // Missing: uploaded groups in this window that the listing lacks.
        let present = Set(page.map(\.name))
        var registered = false
        // Logs compaction removed on purpose are not put back (read only
        // when a log is missing: the compaction marker says which).
        var horizon: CompactionHorizon??
        for (first, last) in try groups() where first > start && first <= end {
            let name = ContainerLayout.log(store: snapshot.storeID, device: device, first: first, last: last)
            guard !present.contains(name), let transactions = try bodies(first, last) else { continue }
            if horizon == nil { horizon = .some(try await compactionHorizon()) }
            if let compacted = horizon ?? nil, compacted.mayHaveRemoved(device: device, last: last) { continue }
            if !registered { try await register(inherited); registered = true }
            let bytes = try encoder.encode(bodies: transactions, device: device, schemaHash: snapshot.schema.hash)
            try await recordSchema(of: bytes, name: name, &recorded)
            try snapshot.notePutBack(name, at: clock.nowMilliseconds())
            do {
                if inherited == nil { try await putOwnLog(name, bytes) } else { try await container.put(name, bytes) }
            } catch let error as ChronicleError where inherited == nil ? error.code == .identityConflict && passingOverOthers : error.code == .blobConflict {
                // Other logs hold some of these sequences (another copy of
                // these files cut the same saves into other logs): the rest
                // goes back on its own, or devices that applied those logs
                // wait at it for good.
                repaired += try await putBackUncovered(of: device, first: first, last: last, transactions, &recorded)
                continue
            }
            logger.notice("re-uploaded missing log", metadata: ["chronicle.log": "\(name)"])
            repaired.append(name)
        }
        // Damaged: read back what the byte budget allows, and put back what does not verify.
        var verified = 0
        let uploaded = inherited == nil ? Set(try snapshot.uploadedGroups().map { LogKey(first: $0.0, last: $0.1) }) : []
        for blob in page where verified < budget.verifiedBytes {
            guard let parsed = ContainerLayout.parseLog(blob.name), parsed.device == device,
                  let transactions = try bodies(parsed.first, parsed.last) else { continue }
            verified += blob.size
            let stored = try? await container.get(blob.name, maxBytes: decoder.limits.maxLogBytes)
            let bytes = try encoder.encode(bodies: transactions, device: device, schemaHash: snapshot.schema.hash)
            // Encoding is deterministic: this device's log is exactly these bytes.
            if stored == bytes { continue }
            // A log that verifies but is not one of this name (another
            // device's, or another of this device's, copied over it) is
            // damage like any other: no copy of these files wrote it there.
            if let stored, let log = try? await openLearning(stored, name: blob.name), log.header.deviceID == device, log.header.storeID == snapshot.storeID,
               (log.header.firstSequence, log.header.lastSequence) == (parsed.first, parsed.last) {
                // Other bytes that verify: the same saves encoded otherwise
                // (another LZ4 build), or someone else's saves.
                if try holds(log, device: device, transactions) { continue }
                if inherited != nil || passingOverOthers { continue }
                throw ChronicleError(.identityConflict, "the container holds other saves where this device's log \(blob.name.lastComponent) belongs")
            }
            // Damaged. This device's own only if it put this very log, or
            // the blob is these bytes torn or rotted: a log another copy of
            // these files put there (which others may have applied) is not
            // this device's to replace.
            if inherited == nil, !uploaded.contains(LogKey(first: parsed.first, last: parsed.last)),
               !(stored.map { Self.isDamagedCopy($0, of: bytes) } ?? false) {
                continue
            }
            try snapshot.notePutBack(blob.name, at: clock.nowMilliseconds())
            try await container.delete(blob.name)
            try await recordSchema(of: bytes, name: blob.name, &recorded)
            try await container.put(blob.name, bytes)
            logger.notice("repaired own log", metadata: ["chronicle.log": "\(blob.name)"])
            repaired.append(blob.name)
        }
        return (repaired, reachedEnd ? nil : page.last?.name)
    }

    /// Puts back, as logs of their own, the parts of `first...last` (saves of
    /// `device`, this device or an earlier ID of it) that no other log of
    /// `device` in the container holds, provided every log that holds the
    /// other parts verifies and holds these very saves there. Anything else
    /// (a log that does not verify yet, other saves: another copy's history)
    /// puts nothing back.
    private func putBackUncovered(of device: DeviceID, first: UInt64, last: UInt64, _ bodies: [LogEncoder.EncodedTransaction],
                                  _ recorded: inout Set<UInt64>) async throws -> [ContainerName] {
        let mine = try snapshot.transactions(bodies, device: device)
        guard mine.count == Int(last - first + 1), mine.first?.sequence == first else { return [] }
        var covered = IndexSet()
        for blob in try await logs(of: device, overlapping: first...last) {
            guard let parsed = ContainerLayout.parseLog(blob.name), (parsed.first, parsed.last) != (first, last),
                  let bytes = try? await container.get(blob.name, maxBytes: decoder.limits.maxLogBytes),
                  let log = try? await openLearning(bytes, name: blob.name), log.header.deviceID == device,
                  let theirs = try? log.transactions() else { return [] }
            for t in theirs where (first...last).contains(t.sequence) {
                guard t == mine[Int(t.sequence - first)] else { return [] }
                covered.insert(Int(t.sequence))
            }
        }
        guard !covered.isEmpty else { return [] }
        var free = IndexSet(integersIn: Int(first)...Int(last))
        free.subtract(covered)
        let encoder = LogEncoder(storeID: snapshot.storeID, version: LogEncoder.uploadVersion)
        var put: [ContainerName] = []
        for range in free.rangeView {
            let (a, b) = (UInt64(range.lowerBound), UInt64(range.upperBound - 1))
            let name = ContainerLayout.log(store: snapshot.storeID, device: device, first: a, last: b)
            let bytes = try encoder.encode(bodies: Array(bodies[Int(a - first)...Int(b - first)]), device: device, schemaHash: snapshot.schema.hash)
            try await recordSchema(of: bytes, name: name, &recorded)
            try snapshot.notePutBack(name, at: clock.nowMilliseconds())
            do { try await container.put(name, bytes) } catch let error as ChronicleError where error.code == .blobConflict { continue }
            logger.notice("put back the part of a log that other logs do not hold", metadata: ["chronicle.log": "\(name)"])
            put.append(name)
        }
        return put
    }

    /// Applies, whole, the logs `names` (a scrub's ``ScrubFindings/straddling``)
    /// that still start at or before what this device applied of their
    /// device and go on past it. Whole: where another copy of that device's
    /// files made other saves under the sequences this device applied (from
    /// a baseline that copy published, say), those saves merge in too.
    /// Returns what it applied; a log that fails is recorded, for the next
    /// import or scrub.
    package func applyStraddling(_ names: [ContainerName]) async throws -> ImportReport {
        var report = ImportReport()
        for name in names {
            guard let parsed = ContainerLayout.parseLog(name), parsed.device != snapshot.deviceID else { continue }
            let applied = try snapshot.vector()[parsed.device] ?? 0
            guard parsed.first <= applied, parsed.last > applied, case .log(let log) = await fetch(name, device: parsed.device, into: &report) else { continue }
            let result = try snapshot.apply([(log, name.rawValue)], whole: [name.rawValue])
            if let failure = result.failure {
                recordFailure(name.rawValue, device: parsed.device, failure.error, into: &report)
                continue
            }
            if case .applied(let transactions, let events) = result.outcomes.first {
                logger.notice("applied a log that overlaps what this device had applied of its device", metadata: ["chronicle.log": "\(name)"])
                report.appliedLogs += 1
                report.appliedTransactions += transactions
                report.eventCount += events.count
                if let eventSink { eventSink(events) } else { report.events += events }
            }
        }
        return report
    }

    /// The logs of `device` in the container that hold any of `sequences`.
    /// A log overlapping a sequence starts in its shard or the one before
    /// it (`ContainerLayout.maxSequencesPerLog`): only those shards are listed.
    private func logs(of device: DeviceID, overlapping sequences: ClosedRange<UInt64>) async throws -> [BlobInfo] {
        let firstShard = sequences.lowerBound / ContainerLayout.sequencesPerShard
        var found: [BlobInfo] = []
        for shard in (firstShard == 0 ? 0 : firstShard - 1)...(sequences.upperBound / ContainerLayout.sequencesPerShard) {
            let prefix = ContainerLayout.logShardPrefix(store: snapshot.storeID, device: device, shard: shard)
            var cursor: ContainerName?
            while true {
                let page = try await container.list(prefix: prefix, after: cursor, limit: pageSize)
                found += page.filter { blob in
                    ContainerLayout.parseLog(blob.name).map { $0.device == device && $0.first <= sequences.upperBound && $0.last >= sequences.lowerBound } ?? false
                }
                guard page.count == pageSize, let last = page.last else { break }
                cursor = last.name
            }
        }
        return found
    }

    /// What one scrub pass found: logs of other devices, applied by this
    /// device, that no longer verify in the container, and sequences this
    /// device applied whose log is gone. A device that joins could not build
    /// the store from these; their owners put their own back at their syncs.
    package struct ScrubFindings: Sendable {
        /// Damaged logs.
        package var damaged: [ContainerName] = []
        /// Missing logs, in words ("<device's log prefix> sequence N").
        package var missing: [String] = []
        /// Logs this device applied that the container now holds with other
        /// contents under the same name, or in place of which it holds other
        /// logs over the same sequences: another copy of their device's
        /// files wrote other saves there (and a wipe, or a lost upload, let
        /// its version win). This device's copy holds saves no other device
        /// will import, and lacks the ones the container has.
        package var replaced: [ContainerName] = []
        /// Logs of other devices that start at or before the sequence this
        /// device applied of their device and go on past it: the next
        /// sequences, which an import (listing after what was applied)
        /// does not see. See ``applyStraddling(_:)``.
        package var straddling: [ContainerName] = []
        /// Where the next pass starts (nil once the pass reached the end).
        package var next: ContainerName?
    }

    /// One bounded scrub pass over the store's logs of other devices,
    /// after `cursor`: reads back (within the byte budget) the logs this
    /// device has applied, and notes gaps between them, then re-reads
    /// `recheck` (logs found damaged before) and looks again for the logs
    /// of `recheckMissing` (sequences found missing before, in the words of
    /// ``ScrubFindings/missing``): those still missing are among the
    /// findings' missing ones, wherever the pass's window is.
    package func scrubLogs(from cursor: ContainerName?, budget: RepairBudget, recheck: [ContainerName] = [],
                           recheckMissing: [String] = []) async throws -> ScrubFindings {
        let page = try await container.list(prefix: ContainerLayout.logsPrefix(store: snapshot.storeID), after: cursor, limit: max(1, budget.listed))
        let vector = try snapshot.vector()
        var findings = ScrubFindings()
        var verified = 0
        var previous: ContainerLayout.ParsedLogName?
        var toRead: [ContainerName] = []
        for blob in page {
            guard let parsed = ContainerLayout.parseLog(blob.name), parsed.device != snapshot.deviceID else { continue }
            let applied = vector[parsed.device] ?? 0
            if parsed.first <= applied, parsed.last > applied { findings.straddling.append(blob.name) }
            if let p = previous, p.device == parsed.device, p.last + 1 < parsed.first, p.last < applied {
                findings.missing.append("\(ContainerLayout.logPrefix(store: snapshot.storeID, device: parsed.device)) sequence \(p.last + 1)")
            }
            previous = parsed
            guard parsed.last <= applied, verified < budget.verifiedBytes else { continue }
            verified += blob.size
            toRead.append(blob.name)
        }
        // Logs this device applied that the listing no longer shows at all
        // (their sequences in no listed log of their device): a damaged log
        // whose owner deleted it to put it back and whose upload was then
        // lost, say. Nothing else tells: with no later log of that device,
        // there is no gap to see.
        let upper = page.count < max(1, budget.listed) ? nil : page.last?.name.rawValue
        var listed: [DeviceID: [ClosedRange<UInt64>]] = [:]
        for blob in page {
            if let parsed = ContainerLayout.parseLog(blob.name) { listed[parsed.device, default: []].append(parsed.first...parsed.last) }
        }
        let applied = try snapshot.appliedLogs(after: cursor?.rawValue, through: upper)
        let listedNames = Set(page.map(\.name.rawValue))
        for log in applied where !listedNames.contains(log.name) {
            if (listed[log.device] ?? []).contains(where: { $0.overlaps(log.first...log.last) }) {
                // Other logs of its device hold its sequences now: that
                // device's files went back in time and saved again under
                // them (its folder and the container put back from older
                // copies), and this copy went apart from the container.
                if let name = try? ContainerName(log.name), !findings.replaced.contains(name) { findings.replaced.append(name) }
                continue
            }
            let words = "\(ContainerLayout.logPrefix(store: snapshot.storeID, device: log.device)) sequence \(log.first)"
            if !findings.missing.contains(words) { findings.missing.append(words) }
        }
        // An applied log whose blob is not the length it had is read
        // whatever the budget: it may hold other saves now.
        let ledger = Dictionary(applied.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        for blob in page where ledger[blob.name.rawValue].map({ $0.bytes != blob.size }) ?? false { toRead.append(blob.name) }
        // Sequences found missing before: a log of their device that holds
        // them now (put back, or a sync service that brought the file
        // back) ends the finding, once it reads back whole (it is read
        // here, not when the pass's window reaches it).
        var back: [ContainerName] = []
        for words in recheckMissing where !findings.missing.contains(words) {
            guard let (device, sequence) = Self.missingSequence(words), device != snapshot.deviceID,
                  words.hasPrefix(ContainerLayout.logPrefix(store: snapshot.storeID, device: device) + " ") else { continue }
            let holding = try await logs(of: device, overlapping: sequence...sequence)
            if holding.isEmpty { findings.missing.append(words) } else { back += holding.map(\.name) }
        }
        for name in Set(toRead).union(recheck).union(back).sorted() {
            do {
                let bytes = try await container.get(name, maxBytes: decoder.limits.maxLogBytes)
                let log = try await openLearning(bytes, name: name)
                // A log that is not one of this name (another log copied
                // over it) is damage, for its owner to put back, not another
                // copy of the owner's files saving again.
                guard let parsed = ContainerLayout.parseLog(name), log.header.deviceID == parsed.device, log.header.storeID == snapshot.storeID,
                      (log.header.firstSequence, log.header.lastSequence) == (parsed.first, parsed.last) else {
                    findings.damaged.append(name)
                    continue
                }
                if let kept = ledger[name.rawValue]?.checksum, let header = try? decoder.header(of: bytes, name: name), header.bodyChecksum != kept {
                    findings.replaced.append(name)
                }
            } catch let error as ChronicleError where error.code == .notFound || error.code.isTransient {
                // Gone or unreachable now: the listing decides next time.
            } catch {
                findings.damaged.append(name)
            }
        }
        // Logs compaction removed on purpose are not missing.
        if !findings.missing.isEmpty || !findings.replaced.isEmpty, let horizon = try await compactionHorizon() {
            findings.replaced.removeAll { name in
                ContainerLayout.parseLog(name).map { horizon.mayHaveRemoved(device: $0.device, last: $0.last) } ?? false
            }
            findings.missing.removeAll { words in
                guard let (device, sequence) = Self.missingSequence(words) else { return false }
                return horizon.mayHaveRemoved(device: device, last: sequence)
            }
        }
        findings.next = page.count < max(1, budget.listed) ? nil : page.last?.name
        return findings
    }

    /// The device and sequences of a finding of the scrub: a log's name
    /// (damaged or replaced), or a missing log in the words of
    /// ``ScrubFindings/missing``.
    package static func findingSpan(_ finding: String) -> (device: DeviceID, sequences: ClosedRange<UInt64>)? {
        if let (device, sequence) = missingSequence(finding) { return (device, sequence...sequence) }
        guard let name = try? ContainerName(finding), let parsed = ContainerLayout.parseLog(name), parsed.first <= parsed.last else { return nil }
        return (parsed.device, parsed.first...parsed.last)
    }

    /// The device and sequence of a missing log in the words of
    /// ``ScrubFindings/missing`` ("<device's log prefix> sequence N").
    static func missingSequence(_ words: String) -> (device: DeviceID, sequence: UInt64)? {
        guard let range = words.range(of: " sequence "), let sequence = UInt64(words[range.upperBound...]),
              let device = words[..<range.lowerBound].split(separator: "/").last.flatMap({ DeviceID(string: String($0)) })
        else { return nil }
        return (device, sequence)
    }

    /// One log's range of sequences.
    private struct LogKey: Hashable {
        var first: UInt64
        var last: UInt64
    }

    /// Whether `stored` is `bytes` damaged in transit or at rest: a prefix
    /// of them (a torn copy), or the same length with a few bits flipped.
    /// Another device's log under the same name differs far more.
    package static func isDamagedCopy(_ stored: [UInt8], of bytes: [UInt8]) -> Bool {
        if stored.count < bytes.count { return bytes.starts(with: stored) }
        guard stored.count == bytes.count else { return false }
        var flipped = 0
        for (a, b) in zip(stored, bytes) where a != b {
            flipped += (a ^ b).nonzeroBitCount
            if flipped > 8 { return false }
        }
        return true
    }

    /// Makes sure this device is listed in the store's device registrations,
    /// which is how other devices find its logs. A registration made
    /// without an incarnation is given this snapshot's.
    package func register() async throws {
        try await register(nil)
    }

    /// Registers this device, or (without an incarnation: another copy may
    /// hold that ID) an earlier ID of it whose logs it puts back.
    private func register(_ inherited: DeviceID?) async throws {
        let device = inherited ?? snapshot.deviceID
        let incarnation = inherited == nil ? self.incarnation : nil
        let name = ContainerLayout.deviceRegistration(store: snapshot.storeID, device: device)
        let registration = DeviceRegistration(device: device, incarnation: incarnation)
        if let marker = try await container.readMarker(name) {
            if let incarnation, DeviceRegistration(bytes: marker.bytes)?.incarnation == nil {
                _ = try? await container.replaceMarker(name, DeviceRegistration(device: device, incarnation: incarnation),
                                                       expected: marker.version)
            }
            return
        }
        do {
            _ = try await container.createMarker(name, registration)
        } catch let error as ChronicleError where error.code == .markerConflict {
            // Registered concurrently: what we wanted.
        }
    }

    /// The devices of the store: those registered, and those with a folder
    /// of logs (a device whose registration is missing, lost or not synced
    /// yet is still imported). One marker listing and one folder read.
    package func devices() async throws -> [DeviceID] {
        let prefix = ContainerLayout.deviceRegistrationsPrefix(store: snapshot.storeID)
        let registered = try await container.listMarkers(prefix: prefix).compactMap { DeviceID(string: String($0.lastComponent)) }
        let withLogs = try await container.listChildren(prefix: ContainerLayout.logsPrefix(store: snapshot.storeID)).compactMap { DeviceID(string: $0) }
        return Set(registered + withLogs).sorted { $0.description < $1.description }
    }

    /// Whether a snapshot that has applied nothing of other devices starts
    /// from the store's newest complete baseline before importing logs.
    package var startsFromBaseline = true

    /// Imports what is new in the container once. A snapshot that has
    /// applied nothing of other devices first applies the newest complete
    /// baseline, if there is one (see ``startsFromBaseline``), then the logs
    /// after it.
    ///
    /// - Throws: `CancellationError` if the task is cancelled. The import
    ///   stops between logs: the logs fetched so far are applied (each one
    ///   whole), and the next import goes on after them.
    package func importOnce() async throws -> ImportReport {
        var report = ImportReport()
        var vector = try snapshot.vector()
        // Not again once it has: a baseline whose vector names nobody (that
        // of an empty store) leaves the vector as it was.
        if startsFromBaseline, !vector.contains(where: { $0.key != snapshot.deviceID && $0.value > 0 }), try snapshot.heldBaseline() == nil {
            switch try await applyNewestBaseline(into: &report) {
            case .applied: vector = try snapshot.vector()
            case .waiting: return report
            case .none:
                // A store that starts from a baseline cannot be built from
                // its logs: wait for the baseline (still arriving through a
                // sync service, say) rather than start without it for good.
                do {
                    if try await container.readMarker(ContainerLayout.origin(store: snapshot.storeID)) != nil {
                        report.waitingForBaseline = ContainerLayout.origin(store: snapshot.storeID).rawValue
                        return report
                    }
                } catch let error as ChronicleError where error.code.isTransient {
                    report.failures.append(.init(name: ContainerLayout.origin(store: snapshot.storeID).rawValue, device: snapshot.deviceID, error: error))
                    return report
                }
            }
        }
        try Task.checkCancellation()
        let devices = try await devices()
        try await importLogs(of: devices, after: vector, into: &report)
        try await applyBaselinesOfDevicesWithoutLogs(devices, into: &report)
        try await catchUpWithCompaction(into: &report)
        try await noteMissingEnds(into: &report)
        if try !report.gaps.isEmpty || snapshot.metadata("gaps_since") != nil { try await healGapsFromBaselines(into: &report) }
        return report
    }

    /// How long a device that starts from nothing waits for the store's
    /// newest baseline to be complete (its publisher still writing parts, or
    /// a sync service still copying them) before it falls back to an older
    /// baseline or to the logs. Measured from the clock in the baseline's
    /// name (the publisher's), so a publisher that died mid-way holds no one
    /// up for longer than this.
    package var baselineWait: Duration = .seconds(60)

    /// How often an import reads the other devices' applied reports to
    /// find the ends of histories the container lost (see
    /// ``noteMissingEnds(into:)``): the interval at which devices refresh
    /// their reports.
    package var missingEndCheckInterval: Duration = .seconds(600)

    /// Sequences of devices (each device's first sequence of a log found
    /// replaced under its name) that a baseline to start from must not
    /// cover: a baseline published before the replacement may hold the
    /// version of that log the container no longer has. Such baselines are
    /// passed over, and the logs imported instead.
    package var passOverBaselinesCovering: [DeviceID: UInt64] = [:]

    /// The clock ``baselineWait`` is measured on.
    package var clock: any PhysicalClock = SystemClock()
    /// How many saves of its own a device makes before it trains the
    /// store's compression dictionary, when the store has none.
    package var dictionaryTrainingSaves = Replayer.defaultDictionaryTrainingSaves
    /// How often an upload looks for a newer dictionary, and puts back one
    /// the container lost.
    package var dictionaryListingInterval = Replayer.defaultDictionaryListingInterval

    /// Writes this device's snapshot as a baseline of the store: every part,
    /// then the final one, so a reader that sees the final part and every
    /// part before it has the whole baseline. Returns the folder the parts
    /// are in and how many there are.
    ///
    /// `damaged` names a baseline found damaged that this one stands in
    /// for. If this one has the same name (the same state), the damaged
    /// copy's parts go first: split into parts of another size (published
    /// with other `partBytes`), they would clash with these, and a mix of
    /// the two splits is no baseline.
    @discardableResult
    package func publishBaseline(partBytes: Int = Snapshot.baselinePartBytes, for target: StoreID? = nil,
                                 publisher: DeviceID? = nil, replacing damaged: String? = nil) async throws -> (prefix: String, parts: Int, records: Int) {
        let store = target ?? snapshot.storeID
        if store == snapshot.storeID, try !snapshot.vector().contains(where: { $0.key != snapshot.deviceID && $0.value > 0 }) {
            // A copy that has not started from the store's baseline yet (one
            // still arriving, or passed over) holds only this device's own
            // saves: published, it would be the newest baseline, and devices
            // that join would start from it without the store's past.
            let others = try await baselines().contains { ContainerLayout.parseBaselinePart($0[0])?.device != snapshot.deviceID }
            let origin = try await container.readMarker(ContainerLayout.origin(store: store)) != nil
            if others || origin {
                throw ChronicleError(.unavailable, "this device has not imported the store's baseline yet; it can publish a baseline once it has")
            }
        }
        try await recordSchema(in: store)
        let export = try snapshot.baselineExport(partBytes: partBytes, for: store, publisher: publisher)
        let digest = ContainerLayout.vectorDigest(export.vector, schemaHash: snapshot.schema.hash)
        let prefix = ContainerLayout.baselinePrefix(store: store, clock: export.clock, device: publisher ?? snapshot.deviceID, vector: digest)
        // A publish of this very state cut off before its final part (a
        // crash, a killed process) left parts no reader uses (readers take
        // a baseline only once it is whole); split another way, they would
        // clash with this publish's. They go first.
        let earlier = try await container.listAll(prefix: prefix)
        let replacingDamaged = prefix == damaged
        if !earlier.isEmpty, try await replacingDamaged ? true : !isWholeBaseline(earlier.map(\.name)) {
            logger.notice(replacingDamaged ? "removing the damaged copy of this baseline before publishing it again" : "removing the parts of an earlier publish of this baseline that did not finish",
                          metadata: ["chronicle.baseline": "\(prefix)", "chronicle.parts": "\(earlier.count)"])
            for blob in earlier {
                do { try await container.delete(blob.name) } catch let error as ChronicleError where error.code == .notFound {}
            }
        }
        var parts = 0
        var records = 0
        while let part = try export.nextPart() {
            let name = ContainerLayout.baselinePart(store: store, clock: part.clock, device: part.device,
                                                    vector: digest, part: part.number)
            do {
                try await container.put(name, part.bytes)
            } catch let error as ChronicleError where error.code == .blobConflict {
                // This device published this very baseline before (same
                // state, same name), and the container's copy of the part
                // no longer verifies (damaged, or torn by a put cut off):
                // it is put back, as a device puts back its own logs.
                let existing = try await container.get(name, maxBytes: decoder.limits.maxLogBytes)
                guard (try? LogDecoder(schema: nil, limits: decoder.limits).decode(existing)) == nil else { throw error }
                logger.notice("replacing a damaged copy of a part of this device's baseline", metadata: ["chronicle.baseline": "\(name)"])
                try await container.delete(name)
                try await container.put(name, part.bytes)
            }
            parts += 1
            records += part.records
        }
        // A put that reported success may still not have arrived (a sync
        // service can drop a file): a baseline is published only once every
        // part is seen in the container.
        let arrived = try await container.listAll(prefix: prefix).count
        guard arrived == parts else {
            throw ChronicleError(.unavailable, "baseline \(prefix): \(arrived) of its \(parts) parts arrived in the container; publish it again")
        }
        logger.info("published baseline", metadata: ["chronicle.baseline": "\(prefix)", "chronicle.parts": "\(parts)", "chronicle.records": "\(records)"])
        return (prefix, parts, records)
    }

    /// Whether the parts `names` (one baseline's) are all there, numbered
    /// from 1 with none missing, the last one verifying and marked final.
    private func isWholeBaseline(_ names: [ContainerName]) async throws -> Bool {
        let numbered = names.compactMap { name in ContainerLayout.parseBaselinePart(name).map { ($0.part, name) } }.sorted { $0.0 < $1.0 }
        guard !numbered.isEmpty, numbered.enumerated().allSatisfy({ $0.element.0 == UInt64($0.offset + 1) }) else { return false }
        let bytes = try await container.get(numbered[numbered.count - 1].1, maxBytes: decoder.limits.maxLogBytes)
        guard let header = try? LogDecoder(schema: nil, limits: decoder.limits).decode(bytes).header else { return false }
        return header.kind == .baseline && header.isFinalBaselinePart && header.baselinePart == UInt64(numbered.count)
    }

    /// The store's complete baselines, newest first: per baseline, its part
    /// names in order (a baseline is complete when its last listed part is
    /// marked final and every number before it is there; that mark is
    /// checked when the part is read).
    package func baselines() async throws -> [[ContainerName]] {
        var byFolder: [String: [(UInt64, ContainerName)]] = [:]
        for blob in try await container.listAll(prefix: ContainerLayout.baselinesPrefix(store: snapshot.storeID)) {
            guard let parsed = ContainerLayout.parseBaselinePart(blob.name) else { continue }
            byFolder[ContainerLayout.baselinePrefix(store: parsed.store, clock: parsed.clock, device: parsed.device, vector: parsed.vector), default: []]
                .append((parsed.part, blob.name))
        }
        return byFolder.sorted { $0.key > $1.key }.compactMap { _, parts in
            let sorted = parts.sorted { $0.0 < $1.0 }
            guard sorted.enumerated().allSatisfy({ $0.element.0 == UInt64($0.offset + 1) }) else { return nil }
            return sorted.map(\.1)
        }
    }

    private enum BaselineStart { case applied, waiting, none }

    /// Applies the newest baseline that applies whole; a baseline that fails
    /// (a part damaged, or parts that do not match their names) is recorded
    /// and the next older one is tried. A baseline still incomplete is waited
    /// for while it is younger than ``baselineWait`` (the pass then imports
    /// nothing: logs applied now would make the baseline useless), then
    /// passed over. This device's own baselines are never applied to it: it
    /// holds everything they hold.
    private func applyNewestBaseline(into report: inout ImportReport) async throws -> BaselineStart {
        let candidates: [[ContainerName]]
        do {
            candidates = try await baselines().filter { ContainerLayout.parseBaselinePart($0[0])?.device != snapshot.deviceID }
        } catch let error as ChronicleError {
            report.failures.append(.init(name: ContainerLayout.baselinesPrefix(store: snapshot.storeID), device: snapshot.deviceID, error: error))
            return .none
        }
        candidates: for names in candidates {
            // Check the last part first: a baseline still being written (or
            // copied by a sync service) is skipped before anything is applied.
            let last = names[names.count - 1]
            let lastBytes: [UInt8]
            do {
                lastBytes = try await container.get(last, maxBytes: decoder.limits.maxLogBytes)
                let header = try decoder.header(of: lastBytes)
                guard header.kind == .baseline, header.isFinalBaselinePart, header.baselinePart == UInt64(names.count) else {
                    throw ChronicleError(.incompleteBaseline, "\(last) is not the final part of its baseline: parts are missing or still arriving")
                }
            } catch let error as ChronicleError where error.code == .incompleteBaseline || error.code == .shortRead {
                let published = ContainerLayout.parseBaselinePart(last)?.clock.milliseconds ?? 0
                let age = clock.nowMilliseconds() &- min(published, clock.nowMilliseconds())
                if age < UInt64(baselineWait.components.seconds) * 1000 {
                    report.waitingForBaseline = names[0].rawValue
                    return .waiting
                }
                report.passedOverBaselines.append(names[0].rawValue)
                continue
            } catch let error as ChronicleError {
                recordFailure(last.rawValue, device: snapshot.deviceID, error, into: &report)
                continue
            }
            guard let summary = try await applyBaseline(names, lastBytes: lastBytes, into: &report) else { continue candidates }
            report.baseline = summary
            report.baselinePrefix = names[0].rawValue.split(separator: "/").dropLast().joined(separator: "/") + "/"
            logger.info("started from baseline", metadata: ["chronicle.baseline": "\(names[0])", "chronicle.records": "\(summary.records)"])
            return .applied
        }
        return .none
    }

    /// Applies the baseline whose parts are `names` (the last one's bytes
    /// already read and checked to be its final part), part by part; a join,
    /// like applying logs. Returns its summary, or nil if a part failed (the
    /// failure is recorded) or the baseline is one to pass over.
    func applyBaseline(_ names: [ContainerName], lastBytes: [UInt8], into report: inout ImportReport) async throws -> Snapshot.BaselineSummary? {
        let last = names[names.count - 1]
        var check = BaselinePartCheck(count: names.count)
        func open(_ index: Int) async -> Result<VerifiedLog, any Error> {
            do {
                let name = names[index]
                let bytes = name == last ? lastBytes : try await container.get(name, maxBytes: decoder.limits.maxLogBytes)
                let part = try await openBaselineLearning(bytes)
                try check.check(part, name: name, index: index)
                return .success(part)
            } catch {
                return .failure(error)
            }
        }
        var application = snapshot.baselineApplication()
        var opened = await open(0)
        for (index, name) in names.enumerated() {
            do {
                let part = try opened.get()
                if index == 0, !passOverBaselinesCovering.isEmpty, case let vector = try part.baselineVector(),
                   passOverBaselinesCovering.contains(where: { (vector[$0.key] ?? 0) >= $0.value }) {
                    report.passedOverBaselines.append(names[0].rawValue)
                    return nil
                }
                // The part applies on a thread of its own (the snapshot's
                // writes block their thread) while the next one is fetched
                // and verified.
                let applying = Task.detached(priority: Task.currentPriority) { [application] in
                    var application = application
                    let events = try application.apply(part)
                    return (application, events)
                }
                if index + 1 < names.count { opened = await open(index + 1) }
                let events: [RecordEvent]
                (application, events) = try await applying.value
                progress?(SyncProgress(phase: .baseline, logs: Int(part.header.baselinePart), transactions: 0, total: names.count))
                report.eventCount += events.count
                if let eventSink { eventSink(events) } else { report.events += events }
            } catch let error as ChronicleError where error.code != .simulatedCrash {
                recordFailure(name.rawValue, device: snapshot.deviceID, error, into: &report)
                return nil
            }
        }
        // The last part was checked to be final, so it completed the application.
        return application.summary
    }

    /// The most logs, and bytes of log bodies, applied in one SQLite
    /// transaction. The batch being applied and the next one, fetched
    /// meanwhile, are held together: 8 MiB each keeps an import's bodies
    /// within the 16 MiB one batch held when fetching waited for it.
    package var batchLimits = (logs: 256, bytes: 8 << 20)

    /// One device's logs during an import: where its listing goes on, and
    /// the logs fetched and not applied yet, in sequence order.
    private struct Lane {
        let device: DeviceID
        let prefix: String
        /// Through the logs fetched so far.
        var through: UInt64
        var cursor: ContainerName?
        /// Listed, not fetched yet.
        var listed: ArraySlice<BlobInfo> = []
        var listedAll = false
        /// False once nothing more of this device is fetched this pass (a
        /// log that failed, a gap, a listing that failed).
        var fetching = true
        /// Fetched, waiting to be applied (a share of the batch limits at
        /// most, so taking from the front costs little).
        var queue: [(name: ContainerName, log: VerifiedLog)] = []
        var queuedBytes = 0
        /// The gap found after the queued logs, reported once they applied.
        var gap: (expected: UInt64, found: UInt64)?
        /// Nothing more of this device this pass, not even what was queued
        /// (one of its logs failed to apply).
        var stopped = false
        /// Whether this pass looked for a log overlapping the sequences
        /// applied (see ``Replayer/straddlingLog(of:)``).
        var probed = false
        /// The queued logs that overlap what was applied, applied whole.
        var whole: Set<String> = []

        init(device: DeviceID, store: StoreID, after start: UInt64) {
            self.device = device
            prefix = ContainerLayout.logPrefix(store: store, device: device)
            through = start
            cursor = start == 0 ? nil : ContainerLayout.log(store: store, device: device, first: start, last: .max)
        }

        /// Whether more logs of the device may come after those queued.
        var mayHaveMore: Bool { !stopped && fetching && !(listedAll && listed.isEmpty) }
        var nextClock: HybridTimestamp? { queue.first?.log.header.minClock }

        mutating func take() -> (name: ContainerName, log: VerifiedLog) {
            let next = queue.removeFirst()
            queuedBytes -= next.log.body.count
            return next
        }

        mutating func stop() {
            stopped = true
            queue.removeAll()
            queuedBytes = 0
        }
    }

    /// Imports the logs of `devices` after the sequences `vector` holds, all
    /// devices together in the order of their clocks (each device's logs in
    /// sequence order): a change then mostly arrives after the changes it
    /// builds on (a note after the folder another device made it in), which
    /// the merge applies on its fast paths. The order changes nothing of the
    /// result (the merge is order-independent); it changes what it costs.
    ///
    /// Each pass fetches a share of the batch limits per device, applies
    /// the fetched logs in clock order for as long as every device that may
    /// have more still has some fetched, and fetches again. A device whose
    /// log fails (to fetch or to apply) or shows a gap stops there for this
    /// pass; the others go on.
    func importLogs(of devices: [DeviceID], after vector: [DeviceID: UInt64], into report: inout ImportReport) async throws {
        var lanes = devices.map { Lane(device: $0, store: snapshot.storeID, after: vector[$0] ?? 0) }
        var filled = false
        while true {
            for i in lanes.indices where !lanes[i].stopped && lanes[i].queue.isEmpty && !lanes[i].mayHaveMore {
                // Everything fetched applied: the gap after it shows now.
                if let gap = lanes[i].gap {
                    report.gaps.append(.init(device: lanes[i].device, expected: gap.expected, found: gap.found))
                }
                lanes[i].stop()
            }
            let active = lanes.indices.filter { !lanes[$0].stopped }
            if active.isEmpty { return }
            let share = (logs: max(1, batchLimits.logs / active.count), bytes: max(1, batchLimits.bytes / active.count))
            if !filled {
                for i in active {
                    await fill(&lanes[i], upTo: share, into: &report)
                }
            }
            let cancelled = Task.isCancelled
            var batch: [(name: ContainerName, log: VerifiedLog, lane: Int)] = []
            var batchBytes = 0
            // Cancelled, every fetched log is applied (the shares bound them).
            while cancelled || (batch.count < batchLimits.logs && batchBytes < batchLimits.bytes) {
                var best: Int?
                for i in active {
                    guard let clock = lanes[i].nextClock else { continue }
                    if let b = best, lanes[b].nextClock! <= clock { continue }
                    best = i
                }
                guard let best else { break }
                let next = lanes[best].take()
                batch.append((next.name, next.log, best))
                batchBytes += next.log.body.count
                // Its next log may come before the others' next ones: fetch it first.
                if lanes[best].queue.isEmpty, lanes[best].mayHaveMore, !cancelled { break }
            }
            // The batch applies on a thread of its own while the next logs
            // are fetched and verified: reading and checking logs then costs
            // the import no time of its own when a second core is free.
            // What the batch did is taken in (devices stopped by a failure
            // or a gap, with the logs fetched for them meanwhile) before the
            // next batch is made.
            let applying = startApplying(batch, whole: lanes.reduce(into: Set<String>()) { $0.formUnion($1.whole) })
            filled = false
            if !cancelled {
                for i in active where !lanes[i].stopped {
                    await fill(&lanes[i], upTo: share, into: &report)
                }
                filled = true
            }
            try apply(batch, lanes: &lanes, into: &report, first: await applying?.result)
            if cancelled {
                // Keep what was fetched (each log applies whole), then stop.
                throw CancellationError()
            }
        }
    }

    /// Fetches logs of `lane` until it holds its share, its logs end, or
    /// one cannot be used (a failure or a gap: the device stops there).
    private func fill(_ lane: inout Lane, upTo share: (logs: Int, bytes: Int), into report: inout ImportReport) async {
        while lane.mayHaveMore, lane.queue.count < share.logs, lane.queuedBytes < share.bytes, !Task.isCancelled {
            if lane.listed.isEmpty {
                do {
                    let page = try await container.list(prefix: lane.prefix, after: lane.cursor, limit: pageSize)
                    lane.listed = page[...]
                    lane.listedAll = page.count < pageSize
                    if let last = page.last { lane.cursor = last.name }
                } catch {
                    let error = error as? ChronicleError ?? ChronicleError(.io, "listing \(lane.prefix) failed: \(error)", underlying: error)
                    report.failures.append(.init(name: lane.prefix, device: lane.device, error: error))
                    lane.fetching = false
                }
                continue
            }
            let blob = lane.listed.removeFirst()
            guard let parsed = ContainerLayout.parseLog(blob.name), parsed.device == lane.device else {
                // A file someone else left among the logs (a sync
                // service's conflicted copy, a backup, a note): no log,
                // so nothing this device waits for. Passed over, and said.
                if !report.passedOver.contains(blob.name.rawValue) {
                    report.passedOver.append(blob.name.rawValue)
                    logger.warning("passed over an entry among a device's logs that is not a log", metadata: ["chronicle.entry": "\(blob.name)"])
                }
                continue
            }
            if parsed.last <= lane.through { continue }
            if parsed.first > lane.through + 1 {
                // Before calling it a gap: a log that starts at or before
                // what was applied and goes on past it holds the next
                // sequences (two copies of one device folder cut their
                // saves into logs otherwise, or made other saves under the
                // same sequences). Its listing sorts before the cursor; it
                // is applied whole.
                if !lane.probed, let straddling = await straddlingLog(of: lane) {
                    lane.probed = true
                    let fetched = await fetch(straddling, device: lane.device, into: &report)
                    guard case .log(let log) = fetched else {
                        if case .gone = fetched { lane.gap = (lane.through + 1, parsed.first) }
                        lane.fetching = false
                        return
                    }
                    lane.queue.append((straddling, log))
                    lane.whole.insert(straddling.rawValue)
                    lane.queuedBytes += log.body.count
                    lane.through = log.header.lastSequence
                    lane.cursor = ContainerLayout.log(store: snapshot.storeID, device: lane.device, first: lane.through, last: .max)
                    lane.listed = []
                    lane.listedAll = false
                    continue
                }
                lane.gap = (lane.through + 1, parsed.first)
                lane.fetching = false
                return
            }
            // A log that fails: the device's sequence stops before it. A
            // log gone since the listing (a compaction removed it, a sync
            // service moved it) is no failure of the log: the device waits
            // there as for a log not visible yet, and the next pass lists
            // again (or starts from the baseline that covers it).
            let log: VerifiedLog
            switch await fetch(blob.name, device: lane.device, into: &report) {
            case .log(let fetched): log = fetched
            case .failed:
                lane.fetching = false
                return
            case .gone:
                lane.gap = (lane.through + 1, parsed.first)
                lane.fetching = false
                return
            }
            lane.queue.append((blob.name, log))
            lane.queuedBytes += log.body.count
            lane.through = parsed.last
        }
    }

    /// The log of `lane`'s device that holds sequences both through and
    /// after what the lane has (the one that goes furthest), if any. A
    /// listing that fails finds nothing: the gap stands this pass.
    private func straddlingLog(of lane: Lane) async -> ContainerName? {
        guard let overlapping = try? await logs(of: lane.device, overlapping: lane.through...(lane.through + 1)) else { return nil }
        return overlapping.compactMap { blob in ContainerLayout.parseLog(blob.name).map { (blob.name, $0) } }
            .filter { $0.1.first <= lane.through && $0.1.last > lane.through }
            .max { $0.1.last < $1.1.last }?.0
    }

    /// What ``fetch(_:device:into:)`` found.
    private enum Fetched {
        /// The log, verified.
        case log(VerifiedLog)
        /// The log could not be used; the failure is recorded.
        case failed
        /// No blob under the name any more (it was listed a moment ago):
        /// nothing recorded.
        case gone
    }

    /// Fetches and verifies one log; a failure is recorded.
    private func fetch(_ name: ContainerName, device: DeviceID, into report: inout ImportReport) async -> Fetched {
        let bytes: [UInt8]
        do {
            bytes = try await container.get(name, maxBytes: decoder.limits.maxLogBytes)
        } catch let error as ChronicleError where error.code == .notFound {
            logger.info("a listed log was gone when read; the device waits there this pass", metadata: ["chronicle.log": "\(name)"])
            return .gone
        } catch {
            let error = error as? ChronicleError ?? ChronicleError(.io, "reading \(name) failed: \(error)", underlying: error)
            recordFailure(name.rawValue, device: device, error, into: &report)
            return .failed
        }
        do {
            let log = try await openLearning(bytes, name: name)
            guard log.header.deviceID == device, log.header.storeID == snapshot.storeID,
                  ContainerLayout.parseLog(name).map({ ($0.first, $0.last) }) ?? (0, 0) == (log.header.firstSequence, log.header.lastSequence)
            else {
                throw ChronicleError(.malformedBody, "\(name) holds sequences \(log.header.firstSequence)...\(log.header.lastSequence) of device \(log.header.deviceID), which its name does not match")
            }
            return .log(log)
        } catch {
            let error = error as? ChronicleError ?? ChronicleError(.io, "reading \(name) failed: \(error)", underlying: error)
            recordFailure(name.rawValue, device: device, error, into: &report)
            return .failed
        }
    }

    /// Starts applying `batch` in one go on a thread of its own (the
    /// snapshot's writes block their thread); nil for an empty batch.
    /// ``apply(_:lanes:into:first:)`` takes in its outcome.
    private func startApplying(_ batch: [(name: ContainerName, log: VerifiedLog, lane: Int)], whole: Set<String>) -> Task<Snapshot.BatchOutcome, any Error>? {
        guard !batch.isEmpty else { return nil }
        let snapshot = self.snapshot
        let logs = batch.map { ($0.log, $0.name.rawValue) }
        return Task.detached(priority: Task.currentPriority) { try snapshot.apply(logs, whole: whole) }
    }

    /// Applies `batch` (logs of several devices, in the order to apply
    /// them) in as few SQLite transactions as it takes. A log that fails or
    /// shows a gap stops its device (its later logs are dropped from this
    /// pass); the logs of other devices after it are applied again.
    ///
    /// `first` is the outcome of applying the whole batch, when
    /// ``startApplying(_:whole:)`` already did.
    private func apply(_ batch: [(name: ContainerName, log: VerifiedLog, lane: Int)], lanes: inout [Lane], into report: inout ImportReport,
                       first: Result<Snapshot.BatchOutcome, any Error>? = nil) throws {
        var pending = batch[...]
        var started = first
        while !pending.isEmpty {
            let result: Snapshot.BatchOutcome
            do {
                if let outcome = started {
                    started = nil
                    result = try outcome.get()
                } else {
                    result = try snapshot.apply(pending.map { ($0.log, $0.name.rawValue) }, whole: lanes.reduce(into: Set<String>()) { $0.formUnion($1.whole) })
                }
            } catch let error as ChronicleError where error.code != .simulatedCrash {
                // The transaction could not commit: nothing of it applied,
                // and nothing more is tried this pass.
                let first = pending[pending.startIndex]
                recordFailure(first.name.rawValue, device: lanes[first.lane].device, error, into: &report)
                for i in lanes.indices { lanes[i].stop() }
                return
            }
            var stoppedAt: Int?
            for (offset, outcome) in result.outcomes.enumerated() {
                let entry = pending[pending.startIndex + offset]
                switch outcome {
                case .applied(let transactions, let events):
                    report.appliedLogs += 1
                    report.appliedTransactions += transactions
                    report.eventCount += events.count
                    if let eventSink { eventSink(events) } else { report.events += events }
                case .alreadyApplied:
                    break
                case .gap(let expected, let found):
                    report.gaps.append(.init(device: lanes[entry.lane].device, expected: expected, found: found))
                    stoppedAt = offset
                }
            }
            progress?(SyncProgress(phase: .importing, logs: report.appliedLogs, transactions: report.appliedTransactions))
            if let failure = result.failure {
                let entry = pending[pending.startIndex + failure.index]
                recordFailure(entry.name.rawValue, device: lanes[entry.lane].device, failure.error, into: &report)
                stoppedAt = failure.index
            }
            guard let stoppedAt else { return }
            let lane = pending[pending.startIndex + stoppedAt].lane
            lanes[lane].stop()
            pending = pending[(pending.startIndex + stoppedAt + 1)...].filter { $0.lane != lane }[...]
        }
    }

    func recordFailure(_ name: String, device: DeviceID, _ error: ChronicleError, into report: inout ImportReport) {
        let attempts = (try? snapshot.recordFailure(name: name, error: error)) ?? 1
        logger.warning("import failed", metadata: ["chronicle.log": "\(name)", "chronicle.error": "\(error)", "chronicle.attempts": "\(attempts)"])
        report.failures.append(.init(name: name, device: device, error: error))
    }
}

/// How far an upload or an import has got: what ``Store/sync(progress:)``
/// tells its `progress` closure.
public struct SyncProgress: Sendable, Hashable {
    /// What the sync is doing.
    public enum Phase: String, Sendable, Hashable {
        /// Putting this device's pending saves into the container as logs.
        case uploading
        /// Applying a baseline's parts (a device that starts from nothing).
        case baseline
        /// Applying other devices' logs.
        case importing
    }

    /// What the sync is doing.
    public var phase: Phase
    /// Done so far in this phase: logs uploaded, baseline parts applied, or
    /// logs imported.
    public var logs: Int
    /// Transactions imported so far (0 in the other phases).
    public var transactions: Int
    /// How many there are in all, when known ahead (the parts of a baseline).
    public var total: Int?

    /// Creates a progress report.
    public init(phase: Phase, logs: Int, transactions: Int, total: Int? = nil) {
        self.phase = phase
        self.logs = logs
        self.transactions = transactions
        self.total = total
    }
}

/// What one import pass did.
public struct ImportReport: Sendable {
    /// A log that could not be imported.
    public struct Failure: Sendable {
        /// The blob name.
        public var name: String
        /// Its device.
        public var device: DeviceID
        /// Why. A failure whose code ``ChronicleError/Code/isTransient`` (a
        /// blob not fully visible yet, a container not answering, a full
        /// disk) may clear on a later pass.
        public var error: ChronicleError

        /// Creates a failure.
        public init(name: String, device: DeviceID, error: ChronicleError) {
            self.name = name
            self.device = device
            self.error = error
        }
    }

    /// A device whose next log is not visible yet.
    public struct Gap: Sendable {
        /// The device.
        public var device: DeviceID
        /// The sequence it needs next.
        public var expected: UInt64
        /// The first sequence of the next log found; for a gap at the end
        /// (``atEnd``), the sequence after the last one other devices
        /// applied.
        public var found: UInt64
        /// Whether no later log of the device is listed at all: other
        /// devices report having applied its saves through `found - 1`,
        /// and the container holds none of them after `expected - 1`.
        public var atEnd: Bool = false
    }

    /// Logs applied.
    public var appliedLogs = 0
    /// Transactions applied.
    public var appliedTransactions = 0
    /// What the app sees change. Empty in the reports of a ``Store``, which
    /// sends the events to ``Store/changes(bufferLimit:)`` as each batch
    /// commits instead.
    public var events: [RecordEvent] = []
    /// How many change events the pass produced.
    public var eventCount = 0
    /// Logs that failed.
    public var failures: [Failure] = []
    /// Entries among a device's logs that are not logs (a sync service's
    /// conflicted copy, a backup someone left there): passed over.
    public var passedOver: [String] = []
    /// Devices waiting for a missing log.
    public var gaps: [Gap] = []
    /// The baseline the pass started from, if it applied one.
    package var baseline: Snapshot.BaselineSummary?
    /// Set when the compaction marker shows that this device's history of
    /// some device (its own included) went apart from the container's: why.
    /// The store builds this device's copy again from the container.
    package var historyApart: String?
    /// The container folder of that baseline's parts.
    package var baselinePrefix: String?
    /// The incomplete baseline the pass is waiting for (see
    /// ``Store/Configuration/baselineWait``): it imported nothing else.
    public var waitingForBaseline: String?
    /// The store's compaction marker as the pass read it (`.some(nil)`: there
    /// is none), or nil if the pass did not read it.
    package var compactionMarker: Marker??
    /// Incomplete baselines older than ``Store/Configuration/baselineWait`` that the
    /// pass passed over (a publisher that died mid-way; for the health
    /// monitor to clean up).
    public var passedOverBaselines: [String] = []

    /// Whether the pass left something to wait for: a log not visible yet
    /// (a gap, a blob still arriving, a container not answering), a full
    /// disk, or a baseline still being written. A later pass may clear it.
    public var isWaiting: Bool {
        !gaps.isEmpty || waitingForBaseline != nil || failures.contains { $0.error.code.isTransient } || !held.isEmpty
    }

    /// Logs written for a schema this device does not know (a newer app
    /// version's, say): not applied and not a corruption. They wait for an
    /// app upgrade, their device's later logs wait behind them, and every
    /// other device's logs keep applying.
    public var held: [Failure] {
        failures.filter { $0.error.code == .schemaMismatch }
    }

    /// The failures a later pass will not clear by itself: damaged or
    /// foreign logs that only their owner (or the health monitor) can
    /// repair. A held log (``held``) is not one of them.
    public var permanentFailures: [Failure] {
        failures.filter { !$0.error.code.isTransient && $0.error.code != .schemaMismatch }
    }

    /// Creates an empty report.
    public init() {}
}

extension Replayer {
    /// Records, in `store` (by default this snapshot's), the schema of
    /// logs or baselines this device puts there: devices on a later version
    /// that meet them read their earlier version there (see
    /// ``ContainerLayout/schema(store:hash:)``). One marker read when the
    /// record is there; written when it is not (a new version, a container
    /// that lost its markers). A schema whose JSON is over a marker's size
    /// is not recorded: such devices must be given the version by their app.
    package func recordSchema(_ recorded: Schema? = nil, in target: StoreID? = nil) async throws {
        let schema = recorded ?? snapshot.schema
        let name = ContainerLayout.schema(store: target ?? snapshot.storeID, hash: schema.hash)
        let bytes = Array(try Snapshot.json(schema).utf8)
        guard bytes.count <= Marker.maxBytes else { return }
        if let current = try? await container.readMarker(name) {
            // A record that does not hold this schema (damaged, or another
            // schema's JSON) is put right: devices learn nothing from it.
            if let held = try? Schema(json: Data(current.bytes)), held.hash == schema.hash { return }
            _ = try? await container.replaceMarker(name, bytes, expected: current.version)
            return
        }
        do {
            _ = try await container.createMarker(name, bytes)
        } catch let error as ChronicleError where error.code == .markerConflict {
            // Recorded concurrently by another device on this version.
        }
    }

    /// Refuses to upload the first logs of a schema that another schema of
    /// the same version number already uses in the store: devices would
    /// take one for the other's later or earlier version, and hold its logs
    /// for good. A device whose schema the store records already goes on
    /// (the newcomer is the one to change its version).
    ///
    /// - Throws: ``ChronicleError/Code/schemaMismatch``; the saves stay
    ///   pending, uploaded once the app's schema has a version of its own.
    private func checkSchemaVersion() async throws {
        let own = snapshot.schema
        guard let names = await Self.recordedSchemaNames(in: container, store: snapshot.storeID),
              !names.contains(where: { ContainerLayout.parseSchemaHash($0) == own.hash }) else { return }
        let known = Set(snapshot.earlier.map(\.source.hash))
        for other in await Self.recordedSchemas(named: names, in: container, skipping: known) where other.version == own.version {
            throw ChronicleError(.schemaMismatch, "the store already uses another schema with version \(own.version) (\(other.hashString)); this app's schema (\(own.hashString)) differs from it under the same version, so other devices could not tell the two apart. Give the changed schema a higher version number (chronicle schema diff shows what differs); this device's saves stay pending until then")
        }
    }

    /// ``recordSchema(_:in:)`` for the schema a log of this device is
    /// written for: the current one, or an earlier one a save was made in.
    private func recordSchema(of bytes: [UInt8], name: ContainerName, _ recorded: inout Set<UInt64>) async throws {
        guard let hash = try? decoder.header(of: bytes, name: name).schemaHash, recorded.insert(hash).inserted else { return }
        if hash == snapshot.schema.hash { return try await recordSchema() }
        if let earlier = snapshot.earlier.first(where: { $0.source.hash == hash })?.source { try await recordSchema(earlier) }
    }

    /// Verifies a log; one of a schema this device does not know is read
    /// through the store's record of that schema when it is an earlier
    /// version (see ``learnSchema(of:at:)``).
    func openLearning(_ bytes: [UInt8], name: ContainerName) async throws -> VerifiedLog {
        let location = ContainerLayout.location(of: name)
        return try await learning(bytes, at: location) { decoder, bytes throws(ChronicleError) in try decoder.open(bytes, at: location) }
    }

    /// ``openLearning(_:name:)`` for a baseline part (format 1, which
    /// needs no location).
    func openBaselineLearning(_ bytes: [UInt8]) async throws -> VerifiedLog {
        try await learning(bytes, at: nil) { decoder, bytes throws(ChronicleError) in try decoder.open(bytes) }
    }

    /// `read` with this replayer's decoder; once more after learning the
    /// log's schema if it failed for a schema this device did not know.
    private func learning<T>(_ bytes: [UInt8], at location: LogLocation?, _ read: (LogDecoder, [UInt8]) throws(ChronicleError) -> T) async throws -> T {
        var failure: ChronicleError
        do {
            return try read(decoder, bytes)
        } catch {
            failure = error
        }
        // Compressed against a dictionary this device does not keep yet.
        if failure.code == .unknownDictionary {
            if let reason = await fetchDictionary(for: bytes, at: location) {
                throw ChronicleError(.unknownDictionary, "\(failure.message); \(reason): the log waits until a device that keeps the dictionary publishes it again",
                                     underlying: failure)
            }
            do {
                return try read(decoder, bytes)
            } catch {
                failure = error
            }
        }
        guard failure.code == .schemaMismatch else { throw failure }
        if await learnSchema(of: bytes, at: location) { return try read(decoder, bytes) }
        if let hash = try? decoder.header(of: bytes, at: location).schemaHash,
           let marker = try? await container.readMarker(ContainerLayout.schema(store: snapshot.storeID, hash: hash)),
           let other = try? Schema(json: Data(marker.bytes)), other.hash == hash, other.version == snapshot.schema.version {
            throw ChronicleError(.schemaMismatch, "written for another schema with this app's version number \(other.version) (\(other.hashString); this app's is \(snapshot.schema.hashString)): an app changed its schema without raising the version. The log waits until one of the two schemas gets a version of its own", underlying: failure)
        }
        throw failure
    }

    /// For a log or baseline part of a schema this device does not know:
    /// reads the store's record of that schema and learns it, if it is an
    /// earlier version the device can read through (see
    /// ``Snapshot/learn(_:)``). Returns whether it did; a record that does
    /// not read, or whose JSON does not hash to its name, teaches nothing.
    func learnSchema(of bytes: [UInt8], at location: LogLocation? = nil) async -> Bool {
        guard let hash = try? decoder.header(of: bytes, at: location).schemaHash,
              let marker = try? await container.readMarker(ContainerLayout.schema(store: snapshot.storeID, hash: hash)),
              let schema = try? Schema(json: Data(marker.bytes)), schema.hash == hash
        else { return false }
        do {
            return try snapshot.learn(schema)
        } catch {
            logger.warning("could not keep an earlier schema version", metadata: ["chronicle.error": "\(error)"])
            return false
        }
    }

    /// The schemas `store` records its logs use (see
    /// ``ContainerLayout/schema(store:hash:)``), those whose JSON reads and
    /// hashes to their name; `skipping` those already known. Best effort:
    /// a listing or a record that fails gives nothing.
    package static func recordedSchemas(in container: any Container, store: StoreID, skipping known: Set<UInt64> = []) async -> [Schema] {
        guard let names = await recordedSchemaNames(in: container, store: store) else { return [] }
        return await recordedSchemas(named: names, in: container, skipping: known)
    }

    /// The names of the store's schema records; nil if the listing fails.
    private static func recordedSchemaNames(in container: any Container, store: StoreID) async -> [ContainerName]? {
        try? await container.listMarkers(prefix: ContainerLayout.schemasPrefix(store: store))
    }

    /// ``recordedSchemas(in:store:skipping:)`` for names already listed.
    private static func recordedSchemas(named names: [ContainerName], in container: any Container, skipping known: Set<UInt64>) async -> [Schema] {
        var schemas: [Schema] = []
        for name in names {
            guard let hash = ContainerLayout.parseSchemaHash(name), !known.contains(hash),
                  let marker = try? await container.readMarker(name),
                  let schema = try? Schema(json: Data(marker.bytes)), schema.hash == hash else { continue }
            schemas.append(schema)
        }
        return schemas
    }

    /// Learns every earlier version of the schema the store records (see
    /// ``Snapshot/learn(_:)``), so that every reading of its logs (imports,
    /// and the checks of this device's own history) reads them. One
    /// listing when nothing is new.
    package func learnRecordedSchemas() async {
        let known = Set([snapshot.schema.hash] + snapshot.earlier.map(\.source.hash))
        guard let names = await Self.recordedSchemaNames(in: container, store: snapshot.storeID) else { return }
        let others = await Self.recordedSchemas(named: names, in: container, skipping: known)
        // Records the store lost (a wiped container, a person) of versions
        // this device knows are written again, for devices that join; not
        // one whose version another schema of the store already has (the
        // upload says so: see `checkSchemaVersion`).
        let taken = Set(others.map(\.version))
        let present = Set(names.compactMap(ContainerLayout.parseSchemaHash))
        for schema in [snapshot.schema] + snapshot.earlier.map(\.source) where !present.contains(schema.hash) && !taken.contains(schema.version) {
            try? await recordSchema(schema)
        }
        // Latest first: an earlier version is read through the ones after it.
        for schema in others.sorted(by: { $0.version > $1.version }) where schema.version < snapshot.schema.version {
            do {
                _ = try snapshot.learn(schema)
            } catch {
                logger.warning("could not keep an earlier schema version", metadata: ["chronicle.error": "\(error)"])
            }
        }
    }
}
