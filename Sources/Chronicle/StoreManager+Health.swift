import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation

extension StoreManager {
    /// How the health monitor judges failed imports and elects the device
    /// that rebuilds a corrupted store. See `docs/health.md` for the rules.
    public struct HealthConfiguration: Sendable, Hashable {
        /// How long a device must import everything visible without a
        /// permanent failure, after loading the cloud store or after its
        /// last failure, before it is healthy (30 s by default). Only
        /// healthy devices stand for the election to rebuild a store.
        public var gracePeriod: Duration
        /// How long a damaged log (checksum, decoding or apply failure) may
        /// stay damaged before this device acts (60 s by default): its owner
        /// puts its own damaged logs back at its syncs, so most damage
        /// heals within this time. A failure of this device's own snapshot
        /// (SQLite reports it corrupt) is acted on at once.
        public var repairWait: Duration
        /// How long a missing log (a sequence gap), or a blob that stays
        /// unreadable (still arriving, torn), is waited for before it counts
        /// as a permanent failure (15 min by default): the limit on retries.
        /// A sync service can take a while to deliver a file.
        public var gapTimeout: Duration
        /// Where the container's exclusive create is not reliable: how long
        /// before a mark a healthy device must have stood to be chosen at
        /// once, and otherwise how long candidates stand before each device
        /// picks the winner by the deterministic rule (10 s by default).
        /// Make it longer than the sync service takes to deliver a file.
        public var electionWindow: Duration
        /// How long an election lease lasts (2 min by default): a lease
        /// whose rebuild has not finished by then is taken over, and an
        /// interrupted rebuild's last step (moving the active-store pointer)
        /// is finished by another device after this long. Without reliable
        /// exclusive create, a standing candidacy is refreshed every half of
        /// it, and the candidate chosen beforehand has this long after the
        /// mark to rebuild before the others decide among themselves.
        public var leaseDuration: Duration
        /// Whether healthy devices stand for election and rebuild a
        /// corrupted store by themselves (the default). When false, the app
        /// decides through ``StoreManagerDelegate`` and calls
        /// ``StoreManager/rebuildCloudStore(from:)`` itself.
        public var rebuildsAutomatically: Bool
        /// How long a device that marked the store waits for a healthy
        /// device to rebuild it before it stands itself, with its own copy
        /// (24 h by default; nil: never). A healthy device may just be away
        /// (a phone in a drawer) and hold saves this device lacks; a rebuild
        /// from this device's copy leaves out the saves only absent devices
        /// hold of a device that is gone for good. Waiting long makes that
        /// unlikely; an app that knows better asks its user (see
        /// ``StoreManagerDelegate``).
        public var unhealthyRebuildWait: Duration?
        /// How many bytes of other devices' logs each sync re-reads to find
        /// damage before a device that joins would (1 MiB by default; 0
        /// turns the scrub off). The scrub goes round the whole store over
        /// successive syncs.
        public var scrubBytesPerSync: Int = 1 << 20

        /// Creates a health configuration.
        public init(gracePeriod: Duration = .seconds(30), repairWait: Duration = .seconds(60), gapTimeout: Duration = .seconds(900),
                    electionWindow: Duration = .seconds(10), leaseDuration: Duration = .seconds(120), rebuildsAutomatically: Bool = true,
                    unhealthyRebuildWait: Duration? = .seconds(86_400)) {
            self.gracePeriod = gracePeriod
            self.repairWait = repairWait
            self.gapTimeout = gapTimeout
            self.electionWindow = electionWindow
            self.leaseDuration = leaseDuration
            self.rebuildsAutomatically = rebuildsAutomatically
            self.unhealthyRebuildWait = unhealthyRebuildWait
        }
    }

    /// What the health monitor knows of this device and the cloud store
    /// (``StoreManager/health()``).
    public struct Health: Sendable {
        /// How this device stands with the cloud store.
        public enum Status: String, Sendable, Hashable, Codable {
            /// Loaded; not yet a full grace period without a permanent failure.
            case checking
            /// Imported everything visible without a permanent failure for a
            /// grace period: it may rebuild the store if another device marks it.
            case healthy
            /// An import fails in a way a retry will not clear; the device
            /// waits for the log's owner to put it back, then rebuilds its
            /// own copy, then marks the store corrupted.
            case unhealthy
            /// This device marked the store corrupted and unloaded it; it
            /// moves to the rebuilt store at its next sync after the rebuild.
            case corrupted
        }

        /// Something that keeps this device from being healthy, or may.
        public struct Problem: Sendable, Hashable, Codable {
            /// What kind of failure.
            public enum Kind: String, Sendable, Hashable, Codable {
                /// A complete blob failed its checksums, decoding or applying: permanent.
                case damagedBlob
                /// A log of another device is not in the container (a
                /// sequence gap): transient until ``HealthConfiguration/gapTimeout``.
                case missingLog
                /// A blob that cannot be read yet (torn, still arriving, the
                /// container not answering): transient until ``HealthConfiguration/gapTimeout``.
                case unreadable
                /// This device's own snapshot failed (SQLite reports it corrupt): permanent.
                case localSnapshot
            }
            /// What kind.
            public var kind: Kind
            /// The blob (a log or baseline part name), or the missing sequence in words.
            public var blob: String
            /// Why, in words.
            public var reason: String
            /// When it was first seen, in milliseconds since 1970.
            public var since: UInt64
        }

        /// How the election to rebuild a corrupted store stands.
        public struct Election: Sendable, Hashable {
            /// The lease, where exclusive create is reliable.
            public var lease: ElectionLease?
            /// The candidates, where it is not.
            public var candidacies: [RebuildCandidacy]
            /// The candidate the deterministic rule picks now (most saves
            /// applied, then the smallest device ID).
            public var leader: DeviceID?
        }

        /// One rebuild in the active store's history.
        public struct Rebuild: Sendable, Hashable {
            /// The store replaced.
            public var from: StoreID
            /// The store that replaced it.
            public var to: StoreID
            /// The device that rebuilt it.
            public var device: DeviceID
            /// When, in milliseconds since 1970.
            public var milliseconds: UInt64
            /// Why, when recorded.
            public var reason: String?
        }

        /// This device's health for the cloud store; nil while the cloud
        /// store is not in use (the cloud is off, or nothing was loaded yet).
        public var status: Status?
        /// The store it applies to.
        public var store: StoreID?
        /// Since when, in milliseconds since 1970.
        public var since: UInt64?
        /// The failures of the last sync (held logs apart), oldest first.
        public var problems: [Problem] = []
        /// Logs of other devices, applied here, that the scrub found damaged
        /// or missing in the container, oldest first: a device that joins
        /// could not import them, though this device holds their saves. If
        /// a log's owner has not put it back after
        /// ``HealthConfiguration/repairWait``, this device marks the store
        /// for a rebuild. They do not make this device unhealthy.
        public var storeDamage: [Problem] = []
        /// Logs held because they were written for a schema this app
        /// version does not know: waiting for an app upgrade, never a corruption.
        public var held: [String] = []
        /// The mark this device wrote, while it waits for the rebuild.
        public var marked: CorruptionMark?
        /// The container's corruption marks for the store.
        public var marks: [CorruptionMark] = []
        /// The election, while marks are out.
        public var election: Election?
        /// The rebuilds that led to the active store, newest first.
        public var history: [Rebuild] = []
        /// How exclusive create behaves in the container, which decides the
        /// election rule: a lease when reliable, the deterministic rule when not.
        public var reliableExclusiveCreate: Bool = true
    }

    /// What the manager keeps of the health monitor in `manager.json`.
    struct HealthRecord: Codable, Equatable {
        var store: StoreID
        var status: Health.Status
        var since: UInt64
        /// Since when the syncs had no permanent failure (nil while one stays).
        var cleanSince: UInt64?
        var problems: [String: Health.Problem] = [:]
        var held: [String] = []
        /// Whether this device already built its copy again for a failure
        /// (cleared once healthy): a failure that stays after that marks the store.
        var reloaded = false
        var marked: CorruptionMark?
        /// The app's answer to ``StoreManagerDelegate`` for the marks out now.
        var appHandles: Bool?
        /// This device's candidacy, while it stands (unreliable create).
        var candidacy: RebuildCandidacy?
        /// This device's own logs it put back, and when it first did: one
        /// it must put back again after the repair wait does not stay in
        /// the container (see ``markOwnLogLost(_:since:store:)``).
        var putBack: [String: UInt64]? = nil
        /// Logs of other devices, applied here, that the scrub found damaged
        /// or missing in the container, and when it first did.
        var scrubbed: [String: UInt64]? = nil
        /// When the scrub last found each of them.
        var scrubbedLastSeen: [String: UInt64]? = nil
    }

    // MARK: Reading

    /// This device's health and the store it is for, from the manager's
    /// record (no container read): for the simulation's watch.
    package var healthStatus: (status: Health.Status, store: StoreID)? {
        currentRecord.map { ($0.status, $0.store) }
    }

    /// The logs the scrub found damaged or missing in the container that
    /// are not back yet, with when each was first found, oldest first,
    /// from the manager's record (no container read; see
    /// ``Health/storeDamage``).
    package var storeDamageFound: [(blob: String, since: UInt64)] {
        (currentRecord?.scrubbed ?? [:]).map { (blob: $0.key, since: $0.value) }.sorted { ($0.since, $0.blob) < ($1.since, $1.blob) }
    }

    /// The record, as of the loaded cloud store: a store loaded since the
    /// last judgement is still being checked.
    private var currentRecord: HealthRecord? {
        guard let record = state.health else { return nil }
        if let loaded, loaded.kind == .cloud, loaded.store.storeID != record.store {
            return HealthRecord(store: loaded.store.storeID, status: .checking, since: configuration.store.clock.nowMilliseconds())
        }
        return record
    }

    /// What the health monitor knows: this device's health for the cloud
    /// store, the failures keeping it from being healthy, held logs, the
    /// container's corruption marks, the election, and the rebuilds that
    /// led to the active store.
    ///
    /// - Throws: what the container throws when it cannot be read.
    public func health() async throws -> Health {
        let record = currentRecord
        let container = configuration.store.container
        var health = Health(status: record?.status, store: record?.store ?? (loaded?.kind == .cloud ? loaded?.store.storeID : nil),
                            since: record?.since)
        health.reliableExclusiveCreate = container.capabilities.reliableExclusiveCreate
        if let record {
            health.problems = record.problems.values.sorted { ($0.since, $0.blob) < ($1.since, $1.blob) }
            health.held = record.held
            health.marked = record.marked
            let wait = configuration.health.repairWait.milliseconds
            health.storeDamage = (record.scrubbed ?? [:]).map { name, since in
                let seen = record.scrubbedLastSeen?[name].map { $0 > since ? " (found again \($0 &- since) ms later)" : "" } ?? ""
                return Health.Problem(kind: name.contains(" sequence ") ? .missingLog : .damagedBlob, blob: name,
                                      reason: "found by the scrub\(seen): a device that joins could not import it; if its owner has not put it back "
                                          + "\(wait) ms after it was first found, this device marks the store for a rebuild",
                                      since: since)
            }.sorted { ($0.since, $0.blob) < ($1.since, $1.blob) }
        }
        if let store = health.store {
            health.marks = try await marks(of: store)
            if !health.marks.isEmpty {
                let lease = try? await container.readMarker(ContainerLayout.election(store: store), as: ElectionLease.self)?.payload
                let candidacies = try await self.candidacies(of: store)
                health.election = Health.Election(lease: lease, candidacies: candidacies, leader: leader(of: candidacies, marks: health.marks))
            }
        }
        health.history = try await rebuildHistory()
        return health
    }

    /// The corruption marks of `store`, oldest first (unreadable ones left out).
    func marks(of store: StoreID) async throws -> [CorruptionMark] {
        let container = configuration.store.container
        var marks: [CorruptionMark] = []
        for name in try await container.listMarkers(prefix: ContainerLayout.corruptionMarksPrefix(store: store)) {
            do {
                if let mark = try await container.readMarker(name, as: CorruptionMark.self) { marks.append(mark.payload) }
            } catch let error as ChronicleError where !error.code.isTransient {
                // Damaged, oversized or not a mark: not one to act on.
                configuration.store.log.warning("a corruption mark cannot be read", metadata: ["chronicle.marker": "\(name)", "chronicle.error": "\(error)"])
            }
        }
        return marks.sorted { ($0.milliseconds, $0.device) < ($1.milliseconds, $1.device) }
    }

    private func candidacies(of store: StoreID) async throws -> [RebuildCandidacy] {
        let container = configuration.store.container
        var found: [RebuildCandidacy] = []
        for name in try await container.listMarkers(prefix: ContainerLayout.candidaciesPrefix(store: store)) {
            // A candidacy stands for the device its name says, or for none.
            if let candidacy = try? await container.readMarker(name, as: RebuildCandidacy.self),
               name == ContainerLayout.candidacy(store: store, device: candidacy.payload.device) {
                found.append(candidacy.payload)
            }
        }
        return found
    }

    /// The winner by the deterministic rule, as of now, once `marks` are
    /// out: the candidate chosen beforehand (``chosenBeforehand(_:marks:window:lease:)``)
    /// until a lease after the first mark; else, among the candidates still
    /// there (refreshed within a lease), those that stood before a window
    /// after the first mark, or all of them when none of those is left.
    private func leader(of candidacies: [RebuildCandidacy], marks: [CorruptionMark]) -> DeviceID? {
        Self.leader(of: candidacies, marks: marks, now: configuration.store.clock.nowMilliseconds(),
                    window: configuration.health.electionWindow.milliseconds, lease: configuration.health.leaseDuration.milliseconds)
    }

    /// The deterministic rule's winner at `now` (see the instance method).
    static func leader(of candidacies: [RebuildCandidacy], marks: [CorruptionMark], now: UInt64, window: UInt64, lease: UInt64) -> DeviceID? {
        guard let markedAt = marks.map(\.milliseconds).min() else { return nil }
        if now < markedAt &+ lease, let chosen = chosenBeforehand(candidacies, marks: marks, window: window, lease: lease) {
            return chosen
        }
        // Still there: refreshed within a lease, and not dated more than a
        // lease ahead (a clock far ahead, or a hand-written file, would
        // otherwise stand for ever).
        let alive = candidacies.filter { now &- min($0.milliseconds, now) <= lease && $0.milliseconds <= now &+ lease }
        let early = alive.filter { $0.since < markedAt &+ window }
        return Self.first(early.isEmpty ? alive : early)
    }

    /// The candidate that outranks every other one.
    static func first(_ candidacies: [RebuildCandidacy]) -> DeviceID? {
        candidacies.reduce(nil as RebuildCandidacy?) { best, next in best.map { $0.outranks(next) ? $0 : next } ?? next }?.device
    }

    /// The rebuilds behind the active store, newest first: the chain of
    /// supersession markers that end at it.
    private func rebuildHistory() async throws -> [Health.Rebuild] {
        let container = configuration.store.container
        guard let active = try await container.readMarker(ContainerLayout.activeStore, as: ActiveStorePointer.self)?.payload.store else { return [] }
        var replacedBy: [StoreID: (StoreID, StoreSupersession)] = [:]
        for store in try await container.listChildren(prefix: ContainerLayout.storesPrefix).compactMap(StoreID.init(string:)) {
            if let supersession = try? await container.readMarker(ContainerLayout.supersession(store: store), as: StoreSupersession.self)?.payload {
                replacedBy[supersession.store] = (store, supersession)
            }
        }
        var history: [Health.Rebuild] = []
        var current = active
        while let (from, supersession) = replacedBy[current], history.count < 64 {
            history.append(Health.Rebuild(from: from, to: current, device: supersession.device, milliseconds: supersession.milliseconds,
                                          reason: supersession.reason))
            replacedBy[current] = nil
            current = from
        }
        return history
    }

    // MARK: Judging

    /// The record for `store`, a fresh one (checking, from now) if the
    /// record is of another store.
    private func record(for store: StoreID, now: UInt64) -> HealthRecord {
        if let record = state.health, record.store == store { return record }
        // The grace period runs from the load.
        let loaded = min(loadedAt ?? now, now)
        return HealthRecord(store: store, status: .checking, since: loaded, cleanSince: loaded)
    }

    private func setHealth(_ record: HealthRecord) throws {
        guard state.health != record else { return }
        let changed = state.health?.status != record.status || state.health?.store != record.store
        state.health = record
        try Self.write(state, in: folder)
        if changed { continuations.publish(.healthChanged(record.status, record.store)) }
    }

    private func setStatus(_ status: Health.Status, _ record: inout HealthRecord, now: UInt64) {
        guard record.status != status else { return }
        record.status = status
        record.since = now
        configuration.store.log.notice("health of the cloud store changed", metadata: ["chronicle.store": "\(record.store)", "chronicle.health": "\(status.rawValue)"])
    }

    /// Judges a sync of the loaded cloud store: tracks its failures, moves
    /// the device between checking, healthy and unhealthy, and acts on a
    /// failure that stays (builds the copy again, then marks the store). A
    /// healthy device looks for other devices' marks and stands for the
    /// election to rebuild. The container not answering only postpones
    /// what it would do.
    func assessHealth(after report: Store.SyncReport, of store: Store) async throws {
        do {
            try await judge(report, of: store)
        } catch let error as ChronicleError where error.code.isTransient && error.code != .storeNotLoaded {
            configuration.store.log.notice("the health check waits for the container", metadata: ["chronicle.error": "\(error)"])
        }
    }

    private func judge(_ report: Store.SyncReport, of store: Store) async throws {
        let health = configuration.health
        let now = configuration.store.clock.nowMilliseconds()
        var record = record(for: store.storeID, now: now)
        var problems: [String: Health.Problem] = [:]
        // Held logs are no failure; a container that does not answer, or a
        // full disk here, says nothing about the store's content; nor does a
        // log waiting for its compression dictionary (any device that keeps
        // it publishes it again).
        for failure in report.imported.failures
        where ![.schemaMismatch, .unavailable, .diskFull, .unknownDictionary].contains(failure.error.code) {
            let kind: Health.Problem.Kind = failure.error.code == .databaseCorrupt ? .localSnapshot
                : failure.error.code.isTransient ? .unreadable : .damagedBlob
            problems[failure.name] = Health.Problem(kind: kind, blob: failure.name, reason: "\(failure.error.code): \(failure.error.message)",
                                                    since: record.problems[failure.name]?.since ?? now)
        }
        for gap in report.imported.gaps {
            let key = "\(ContainerLayout.logPrefix(store: store.storeID, device: gap.device)) sequence \(gap.expected)"
            problems[key] = Health.Problem(kind: .missingLog, blob: key,
                                           reason: gap.atEnd
                                               ? "sequence \(gap.expected) of device \(gap.device) is not in the container (other devices applied its saves through \(gap.found - 1), and no log of them is listed)"
                                               : "sequence \(gap.expected) of device \(gap.device) is not in the container (its next log starts at \(gap.found))",
                                           since: record.problems[key]?.since ?? now)
        }
        record.problems = problems
        let held = report.imported.held.map(\.name)
        if held != record.held { continuations.publish(.waitingForAppUpgrade(store.storeID, logs: held)) }
        record.held = held
        // This device's own logs that do not stay in the container.
        var putBack = (record.putBack ?? [:]).filter { now &- $0.value < 10 * health.repairWait.milliseconds }
        var lost: (name: String, since: UInt64)?
        for name in report.repairedLogs.map(\.rawValue) {
            let since = putBack[name] ?? now
            putBack[name] = since
            if now &- since >= health.repairWait.milliseconds, lost == nil { lost = (name, since) }
        }
        record.putBack = putBack.isEmpty ? nil : Self.bounded(putBack)

        let permanent = problems.values.filter { problem in
            switch problem.kind {
            case .damagedBlob, .localSnapshot: true
            case .missingLog, .unreadable: now &- problem.since >= health.gapTimeout.milliseconds
            }
        }
        // What a device that joins would fail on, though this one holds it.
        var scrubbed = (record.scrubbed ?? [:]).filter { now &- $0.value < 10 * health.repairWait.milliseconds }
        var stale: (name: String, since: UInt64)?
        if permanent.isEmpty, health.scrubBytesPerSync > 0 {
            let damagedBefore = scrubbed.keys.filter { !$0.contains(" sequence ") }
            let missingBefore = scrubbed.keys.filter { $0.contains(" sequence ") }
            let findings = try await store.scrub(recheck: damagedBefore, recheckMissing: missingBefore, bytes: health.scrubBytesPerSync)
            // Logs that hold the sequences after what this device applied
            // of their device, starting before them (a copy of that
            // device's folder cut or made its saves otherwise): applied.
            try await store.applyStraddling(findings.straddling)
            // A log this device applied that the container holds with other
            // saves now: this copy went apart from the container. It is
            // built again from the container (its own saves carried), once
            // until it is next healthy; a log replaced again after that is
            // store damage like any other.
            if let replaced = findings.replaced.first, !record.reloaded {
                record.reloaded = true
                try setHealth(record)
                let reason = "the container holds other saves where a log this device applied was (another copy of its device's files wrote them)"
                // Not from a baseline that covers the log: it may hold the
                // version the container no longer has (this device's own
                // earlier one, say).
                let covering = ContainerLayout.parseLog(replaced).map { [$0.device: $0.first] } ?? [:]
                try await rebuildLocalCopy(of: store, for: Health.Problem(kind: .damagedBlob, blob: replaced.rawValue, reason: reason, since: now),
                                           passingOver: covering)
                // The baselines published before hold the version the
                // container lost (this device's among them): a device that
                // joins starts from this one, the newest, instead.
                if loaded?.store === store, state.health?.status != .corrupted {
                    do {
                        _ = try await store.publishBaseline()
                    } catch let error as ChronicleError where error.code != .simulatedCrash {
                        configuration.store.log.warning("publishing a baseline after building the copy again failed", metadata: ["chronicle.error": "\(error)"])
                    }
                }
                return
            }
            let found = findings.damaged.map(\.rawValue) + findings.replaced.map(\.rawValue)
            let earlier = scrubbed
            for name in damagedBefore where !found.contains(name) { scrubbed[name] = nil }
            // A missing log that is back ends its finding: if it goes
            // missing again, its owner gets the whole repair wait again.
            for name in missingBefore where !findings.missing.contains(name) { scrubbed[name] = nil }
            for name in found + findings.missing {
                // A log found damaged before and missing now, or the other
                // way round, never came back whole: its wait goes on.
                let since = scrubbed[name] ?? Self.sameLogFoundBefore(name, in: earlier) ?? now
                scrubbed[name] = since
                record.scrubbedLastSeen = (record.scrubbedLastSeen ?? [:]).merging([name: now]) { _, new in new }
                if now &- since >= health.repairWait.milliseconds, stale == nil { stale = (name, since) }
            }
        }
        record.scrubbed = scrubbed.isEmpty ? nil : Self.bounded(scrubbed)
        record.scrubbedLastSeen = record.scrubbedLastSeen?.filter { scrubbed[$0.key] != nil }
        if record.scrubbedLastSeen?.isEmpty == true { record.scrubbedLastSeen = nil }
        if permanent.isEmpty {
            let clean = record.cleanSince ?? now
            record.cleanSince = clean
            if record.status == .unhealthy { setStatus(.checking, &record, now: now) }
            if record.status == .checking, now &- clean >= health.gracePeriod.milliseconds {
                setStatus(.healthy, &record, now: now)
                record.reloaded = false
            }
        } else {
            record.cleanSince = nil
            setStatus(.unhealthy, &record, now: now)
        }
        // A failure that stays past the owner's time to repair it.
        let acting = permanent.filter { $0.kind == .localSnapshot || now &- $0.since >= health.repairWait.milliseconds }
            .min { ($0.since, $0.blob) < ($1.since, $1.blob) }
        if let acting {
            await withdrawCandidacy(&record)
            if !record.reloaded {
                record.reloaded = true
                try setHealth(record)
                try await rebuildLocalCopy(of: store, for: acting)
                return
            }
            try await markCorrupted(store, acting, record)
            return
        }
        try setHealth(record)
        if let lost {
            try await markForRebuild(lost.name, store: store,
                                     reason: "this device's own log does not stay in the container: put back first \(now &- lost.since) ms before, it is missing or damaged again")
        } else if let stale {
            try await markForRebuild(stale.name, store: store,
                                     reason: "a log this device applied is damaged or missing in the container and its owner did not put it back (first seen \(now &- stale.since) ms before): a device that joins could not build the store")
        }
        if record.status == .healthy {
            try await watchForMarks(of: store)
        } else if record.candidacy != nil {
            await withdrawCandidacy(&record)
            try setHealth(record)
        }
    }

    /// A log a device that joins could not import, though this healthy
    /// device holds its saves: one of its own that does not stay in the
    /// container after it puts it back (a sync service that keeps losing
    /// the file), or another device's, applied here, that stays damaged or
    /// missing past the repair wait (found by the scrub). This device marks
    /// the store and stays loaded: it may rebuild the store itself.
    private func markForRebuild(_ name: String, store: Store, reason: String) async throws {
        let container = configuration.store.container
        let now = configuration.store.clock.nowMilliseconds()
        let markName = ContainerLayout.corruptionMark(store: store.storeID, device: store.deviceID)
        guard try await container.readMarker(markName) == nil else { return }
        let mark = CorruptionMark(device: store.deviceID, store: store.storeID, blob: name, reason: reason, milliseconds: now, healthy: true)
        do {
            _ = try await container.createMarker(markName, mark)
        } catch let error as ChronicleError where error.code == .markerConflict {
            return
        }
        // The election that follows says so (``Event/cloudContentCorrupted(_:healthy:)``).
        configuration.store.log.warning("a log a joining device needs is damaged or missing for good; marked the store for a rebuild",
                                      metadata: ["chronicle.store": "\(store.storeID)", "chronicle.blob": "\(name)", "chronicle.reason": "\(reason)"])
    }

    /// Builds this device's copy of the store again from the container,
    /// carrying its saves the container lacks, then syncs and judges again:
    /// a failure that stays then marks the store.
    private func rebuildLocalCopy(of store: Store, for problem: Health.Problem, passingOver: [DeviceID: UInt64] = [:]) async throws {
        configuration.store.log.warning("an import keeps failing; building this device's copy of the store again from the container",
                                        metadata: ["chronicle.store": "\(store.storeID)", "chronicle.blob": "\(problem.blob)", "chronicle.reason": "\(problem.reason)"])
        continuations.publish(.rebuildingLocalCopy(store.storeID, reason: "\(problem.blob): \(problem.reason)"))
        let again: Store.SyncReport
        do {
            _ = try await store.rebuildLocalCopy(reason: "an import kept failing (\(problem.blob): \(problem.reason))", passingOver: passingOver)
            again = try await store.sync()
        } catch let error as ChronicleError where error.code.isTransient || error.code == .simulatedCrash {
            throw error
        } catch let error as ChronicleError {
            // The copy could not be built: the store is what fails.
            configuration.store.log.error("building the copy again failed", metadata: ["chronicle.error": "\(error)"])
            guard var record = state.health else { return }
            record.problems[problem.blob]?.reason += "; building the copy again failed: \(error.code)"
            try await markCorrupted(store, record.problems[problem.blob] ?? problem, record)
            return
        }
        lastReport = again
        try await judge(again, of: store)
    }

    /// Writes this device's corruption mark, unloads the store and tells the app.
    private func markCorrupted(_ store: Store, _ problem: Health.Problem, _ judged: HealthRecord) async throws {
        var record = judged
        let now = configuration.store.clock.nowMilliseconds()
        let mark = CorruptionMark(device: store.deviceID, store: store.storeID, blob: problem.blob, reason: problem.reason, milliseconds: now)
        let container = configuration.store.container
        let name = ContainerLayout.corruptionMark(store: store.storeID, device: store.deviceID)
        do {
            _ = try await container.createMarker(name, mark)
        } catch let error as ChronicleError where error.code == .markerConflict {
            if let existing = try await container.readMarker(name) {
                _ = try await container.replaceMarker(name, mark, expected: existing.version)
            }
        }
        // The app hears of it through the delegate and the events: a warning, not an error of the call.
        configuration.store.log.warning("the cloud store is corrupted: marked it and unloaded it; a healthy device rebuilds it",
                                      metadata: ["chronicle.store": "\(store.storeID)", "chronicle.blob": "\(problem.blob)", "chronicle.reason": "\(problem.reason)"])
        record.marked = mark
        setStatus(.corrupted, &record, now: now)
        try setHealth(record)
        continuations.publish(.cloudContentCorrupted(mark, healthy: false))
        try await unload()
        loadError = corruptionError(mark)
        let handled = await delegate?.storeManager(self, handleCloudContentCorruption: mark, healthy: false) ?? false
        if state.health?.store == mark.store {
            state.health?.appHandles = handled
            try Self.write(state, in: folder)
        }
    }

    /// The error calls get while this device waits for a rebuild.
    func corruptionError(_ mark: CorruptionMark) -> ChronicleError {
        ChronicleError(.cloudContentCorrupted,
                       "the cloud store \(mark.store) is corrupted (\(mark.blob): \(mark.reason)); this device marked it and waits for a healthy device to rebuild it")
    }

    /// While this device has marked its store corrupted: loads the rebuilt
    /// store if there is one now (carrying this device's saves), else throws.
    func followRebuild() async throws {
        guard let mark = state.health?.marked else { return }
        let container = configuration.store.container
        try await finishInterruptedRebuild(of: mark.store)
        let pointer = try await container.readMarker(ContainerLayout.activeStore, as: ActiveStorePointer.self)?.payload.store
        let rebuilt = try await container.readMarker(ContainerLayout.supersession(store: mark.store)) != nil
        var moved = false
        if let pointer, pointer != mark.store {
            moved = rebuilt
            if !moved { moved = try await replaced(mark.store, by: pointer) }
        }
        guard moved else {
            if !rebuilt, try await standWhileCorrupted(mark) { return }
            throw ChronicleError(.storeNotLoaded, corruptionError(mark).message, underlying: corruptionError(mark))
        }
        // Rebuilt: the load moves this device there with its saves.
        state.health = nil
        state.leaving = mark.store
        try Self.write(state, in: folder)
        loadError = nil
        _ = try await load()
    }

    /// No healthy device rebuilt the store within ``HealthConfiguration/unhealthyRebuildWait``
    /// after this device marked it (none may be left: every other device failed too):
    /// this device stands with its own copy, ranked below any healthy
    /// candidate, and rebuilds if it wins. What its copy lacks is beyond the
    /// new store's vector, so every device that made it carries it over.
    /// Returns whether it rebuilt (and loaded the new store).
    private func standWhileCorrupted(_ mark: CorruptionMark) async throws -> Bool {
        let now = configuration.store.clock.nowMilliseconds()
        guard configuration.health.rebuildsAutomatically, state.health?.appHandles != true, state.cloudEnabled, loaded == nil,
              let wait = configuration.health.unhealthyRebuildWait,
              now &- min(mark.milliseconds, now) >= max(wait, configuration.health.leaseDuration).milliseconds,
              FileManager.default.fileExists(atPath: DeviceFolder.snapshotPath(mark.store, in: configuration.store.directory))
        else { return false }
        let store = try await Store.open(configuration(for: .cloud), exactly: mark.store)
        loaded = (.cloud, store)
        do {
            // Nor does a device that holds logs it cannot read, as a last resort.
            guard var record = state.health, record.held.isEmpty else { throw CancellationError() }
            let won = configuration.store.container.capabilities.reliableExclusiveCreate
                ? try await takeLease(of: store)
                : try await stand(for: store, &record, healthy: false, marks: [mark])
            guard let newID = won else {
                loaded = nil
                try await store.close()
                return false
            }
            configuration.store.log.notice("no healthy device rebuilt the corrupted store; this device rebuilds it from its own copy",
                                           metadata: ["chronicle.store": "\(mark.store)", "chronicle.newStore": "\(newID)"])
            continuations.publish(.electedToRebuild(mark.store))
            _ = try await rebuild(from: .cloud, as: newID, reason: "corruption: device \(mark.device) reported \(mark.blob): \(mark.reason); no healthy device was left to rebuild it")
        } catch {
            if loaded?.store === store {
                loaded = nil
                try? await store.close()
            }
            if error is CancellationError { return false }
            throw error
        }
        await clearEpisode(of: mark.store)
        state.health = nil
        try Self.write(state, in: folder)
        return true
    }

    // MARK: Electing

    /// On a healthy device: stands for elections to come (where exclusive
    /// create is not reliable); if a device marked the store corrupted,
    /// asks the app, then takes the lease or applies the rule, and rebuilds
    /// if it wins.
    private func watchForMarks(of store: Store) async throws {
        let container = configuration.store.container
        let marks = try await marks(of: store.storeID)
        guard var record = state.health, record.store == store.storeID else { return }
        // A copy without the logs it holds (another app version's) would
        // rebuild the store without their saves: this device does not stand.
        let stands = !container.capabilities.reliableExclusiveCreate && configuration.health.rebuildsAutomatically && record.held.isEmpty
        guard let first = marks.first else {
            record.appHandles = nil
            if stands {
                _ = try await stand(for: store, &record, healthy: true, marks: [])
            } else {
                await withdrawCandidacy(&record)
            }
            try setHealth(record)
            return
        }
        // A store already rebuilt (its pointer not moved yet) is not rebuilt again.
        guard try await container.readMarker(ContainerLayout.supersession(store: store.storeID)) == nil else { return }
        if record.appHandles == nil {
            continuations.publish(.cloudContentCorrupted(first, healthy: true))
            let handled = await delegate?.storeManager(self, handleCloudContentCorruption: first, healthy: true) ?? false
            record.appHandles = handled
            try setHealth(record)
        }
        guard record.appHandles == false, configuration.health.rebuildsAutomatically, record.held.isEmpty else {
            await withdrawCandidacy(&record)
            try setHealth(record)
            return
        }
        let won = container.capabilities.reliableExclusiveCreate
            ? try await takeLease(of: store)
            : try await stand(for: store, &record, healthy: true, marks: marks)
        guard let newID = won else { return }
        configuration.store.log.notice("elected to rebuild the corrupted cloud store", metadata: ["chronicle.store": "\(store.storeID)", "chronicle.newStore": "\(newID)"])
        continuations.publish(.electedToRebuild(store.storeID))
        let reason = "corruption: device \(first.device) reported \(first.blob): \(first.reason)"
        _ = try await rebuild(from: .cloud, as: newID, reason: reason)
        await clearEpisode(of: store.storeID)
    }

    /// Where exclusive create is reliable: creates the election lease, or
    /// takes over one that expired (or that this device held before it
    /// restarted). Returns the new store's ID if this device holds it.
    private func takeLease(of store: Store) async throws -> StoreID? {
        let container = configuration.store.container
        let name = ContainerLayout.election(store: store.storeID)
        let now = configuration.store.clock.nowMilliseconds()
        let lease = configuration.health.leaseDuration.milliseconds
        let mine = ElectionLease(device: store.deviceID, newStore: try drawStoreID(), expires: now &+ lease)
        do {
            let current: Marker?
            do {
                current = try await container.readMarker(name)
            } catch let error as ChronicleError where !error.code.isTransient && error.code != .foreignEntry {
                // A marker file cut short inside its version, or too big to
                // be one (written by hand, or by a tool): no one holds it.
                // It goes, and the lease is created again (exclusively, so
                // one of the devices that do this at once gets it).
                configuration.store.log.notice("the election lease cannot be read; removing it and taking the lease",
                                               metadata: ["chronicle.error": "\(error)"])
                try await container.deleteMarker(name, expected: nil)
                _ = try await container.createMarker(name, mine)
                return mine.newStore
            }
            if let current {
                // A lease that cannot be read, or that claims longer than a
                // lease lasts (written by hand, or by a clock far ahead), is
                // no lease: it is taken over like an expired one.
                let payload = try? ElectionLease(markerBytes: current.bytes)
                let valid = payload.map { $0.expires <= now &+ lease } ?? false
                guard !valid || payload?.device == store.deviceID || (payload?.expires ?? 0) <= now else { return nil }
                if payload?.device != store.deviceID {
                    configuration.store.log.notice("the election lease expired (or is not a lease) without a rebuild; taking it over",
                                                   metadata: ["chronicle.device": "\(payload.map { "\($0.device)" } ?? "?")"])
                }
                _ = try await container.replaceMarker(name, mine, expected: current.version)
            } else {
                _ = try await container.createMarker(name, mine)
            }
        } catch let error as ChronicleError where error.code == .markerConflict || error.code == .notFound {
            return nil
        }
        return mine.newStore
    }

    /// Where exclusive create is not reliable: stands (or says it is still
    /// there) and, once `marks` are out, returns a new store ID if the
    /// deterministic rule picks this device.
    ///
    /// A healthy device stands from the time it is healthy, marks or not,
    /// refreshing its candidacy every half lease (every sync while marks
    /// are out). The candidates that stood at least an election window
    /// before the first mark, refreshed within a lease before it and did
    /// not unload the store on a mark of their own were visible to every device when the
    /// mark was made: every device picks the same one of them, at once, by
    /// marker contents alone. Without such a candidate, or when the one
    /// picked has not rebuilt a lease after the mark, the candidates still
    /// there decide after each has stood for a window.
    private func stand(for store: Store, _ record: inout HealthRecord, healthy: Bool, marks: [CorruptionMark]) async throws -> StoreID? {
        let container = configuration.store.container
        let now = configuration.store.clock.nowMilliseconds()
        let lease = configuration.health.leaseDuration.milliseconds
        let window = configuration.health.electionWindow.milliseconds
        var mine: RebuildCandidacy
        if let standing = record.candidacy, standing.healthy == healthy, standing.device == store.deviceID {
            mine = standing
        } else {
            // Stood under the ID this device had before it moved to a new
            // one: that candidacy names a device that no longer syncs.
            if let earlier = record.candidacy, earlier.device != store.deviceID {
                try? await container.deleteMarker(ContainerLayout.candidacy(store: store.storeID, device: earlier.device), expected: nil)
            }
            let applied = try store.snapshot.vector().values.reduce(0, &+)
            mine = RebuildCandidacy(device: store.deviceID, applied: applied, since: now, milliseconds: now, healthy: healthy)
        }
        if record.candidacy != mine || !marks.isEmpty || now &- min(mine.milliseconds, now) >= lease / 2 {
            mine.milliseconds = now
            let name = ContainerLayout.candidacy(store: store.storeID, device: store.deviceID)
            if let current = try await container.readMarker(name) {
                _ = try? await container.replaceMarker(name, mine, expected: current.version)
            } else {
                _ = try? await container.createMarker(name, mine)
            }
        }
        record.candidacy = mine
        try setHealth(record)
        guard let first = marks.first else { return nil }
        let candidacies = try await candidacies(of: store.storeID)
        let leader = leader(of: candidacies, marks: marks)
        // The one chosen beforehand acts at once; otherwise each waits a
        // window after it stood, and until a window after the mark, so
        // that it sees every candidacy of the window after the mark.
        let beforehand = healthy && now < first.milliseconds &+ lease
            && Self.chosenBeforehand(candidacies, marks: marks, window: window, lease: lease) != nil
        guard beforehand || now &- mine.since >= window && now >= min(first.milliseconds, now) &+ window else { return nil }
        return leader == store.deviceID ? try drawStoreID() : nil
    }

    /// The candidate every device picks as soon as it sees `marks`: among
    /// the healthy ones that stood at least `window` before the first mark,
    /// refreshed their candidacy within `lease` before it and did not mark
    /// the store as a device that could not import it, the first by ``RebuildCandidacy/outranks(_:)``. A function of the
    /// markers' contents only, never of a device's clock.
    static func chosenBeforehand(_ candidacies: [RebuildCandidacy], marks: [CorruptionMark], window: UInt64, lease: UInt64) -> DeviceID? {
        guard let markedAt = marks.map(\.milliseconds).min() else { return nil }
        let marked = Set(marks.filter { $0.healthy != true }.map(\.device))
        // A candidacy refreshed more than a lease after the first mark was
        // written by a clock far ahead, or by hand: not one to count on.
        return first(candidacies.filter { c in
            c.healthy && !marked.contains(c.device) && c.since &+ window <= markedAt && c.milliseconds &+ lease >= markedAt
                && c.milliseconds <= markedAt &+ lease
        })
    }

    /// Takes back this device's candidacy: it is no longer healthy on the
    /// store, or left it.
    func withdrawCandidacy(_ record: inout HealthRecord) async {
        guard let candidacy = record.candidacy else { return }
        record.candidacy = nil
        try? await configuration.store.container.deleteMarker(ContainerLayout.candidacy(store: record.store, device: candidacy.device), expected: nil)
    }

    /// After a rebuild: the marks, lease and candidacies of the store it
    /// replaced go (the supersession marker keeps the reason).
    private func clearEpisode(of store: StoreID) async {
        let container = configuration.store.container
        var names = (try? await container.listMarkers(prefix: ContainerLayout.corruptionMarksPrefix(store: store))) ?? []
        names += (try? await container.listMarkers(prefix: ContainerLayout.candidaciesPrefix(store: store))) ?? []
        names.append(ContainerLayout.election(store: store))
        for name in names {
            try? await container.deleteMarker(name, expected: nil)
        }
    }

    /// A rebuild whose device stopped between its supersession marker and
    /// moving the active-store pointer: once the lease time has passed,
    /// any device moves the pointer for it (compare-and-swap), so that
    /// every device follows to the rebuilt store.
    func finishInterruptedRebuild(of store: StoreID) async throws {
        let container = configuration.store.container
        guard let supersession = try await container.readMarker(ContainerLayout.supersession(store: store), as: StoreSupersession.self)?.payload,
              supersession.fromBaseline,
              let pointer = try await container.readMarker(ContainerLayout.activeStore, as: ActiveStorePointer.self), pointer.payload.store == store
        else { return }
        let now = configuration.store.clock.nowMilliseconds()
        guard now &- min(supersession.milliseconds, now) >= configuration.health.leaseDuration.milliseconds,
              try await container.readMarker(ContainerLayout.tombstone(store: supersession.store)) == nil,
              try await container.readMarker(ContainerLayout.origin(store: supersession.store)) != nil
        else { return }
        if try await movePointer(from: store, to: supersession.store) {
            configuration.store.log.notice("finished an interrupted rebuild: the active store is now the rebuilt one",
                                           metadata: ["chronicle.store": "\(store)", "chronicle.newStore": "\(supersession.store)"])
        }
    }
}

extension StoreManager {
    /// How many logs the health record follows per kind (put back, found
    /// by the scrub): a container that lost a device's whole history makes
    /// it put back every log at once, and `manager.json` must stay small.
    /// The ones followed longest are kept: they are the ones a verdict
    /// waits on.
    package static let followedLogsLimit = 128

    /// When the scrub first found the log of `finding` under its other
    /// name (damaged or replaced: the blob's name; missing: its device and
    /// sequence), among `earlier` findings.
    static func sameLogFoundBefore(_ finding: String, in earlier: [String: UInt64]) -> UInt64? {
        guard let span = Replayer.findingSpan(finding) else { return nil }
        return earlier.compactMap { name, since -> UInt64? in
            guard name != finding, let other = Replayer.findingSpan(name), other.device == span.device,
                  other.sequences.overlaps(span.sequences) else { return nil }
            return since
        }.min()
    }

    /// `followed` cut to ``followedLogsLimit`` entries, oldest first kept.
    package static func bounded(_ followed: [String: UInt64]) -> [String: UInt64] {
        guard followed.count > followedLogsLimit else { return followed }
        return Dictionary(uniqueKeysWithValues: followed.sorted { ($0.value, $0.key) < ($1.value, $1.key) }.prefix(followedLogsLimit).map { ($0.key, $0.value) })
    }
}

extension Duration {
    /// The duration in whole milliseconds (negative ones as 0).
    var milliseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        return UInt64(seconds) * 1000 + UInt64(attoseconds / 1_000_000_000_000_000)
    }
}
