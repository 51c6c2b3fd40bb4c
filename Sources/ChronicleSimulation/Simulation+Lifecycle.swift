import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Synchronization

/// What the lifecycle did in a run (``SimulationOptions/lifecycle``).
package struct LifecycleCounts: Sendable, Hashable, Codable {
    /// Devices that turned the cloud on at the same moment, first.
    package var firstEnables = 0
    /// Whether that moment fell in a container outage (the devices load their fallback stores).
    package var firstEnablesDuringOutage = false
    package var cloudEnabled = 0
    package var cloudDisabled = 0
    /// Deletions of the cloud store everywhere (plain, and after a migration to the local store).
    package var cloudDeletions = 0
    package var migrationsThenDeletions = 0
    package var reloads = 0
    package var localOnlyDeletions = 0
    package var migrationsToLocal = 0
    package var localStoreDeletions = 0
    package var rebuilds = 0
    /// Operations that failed (the container down, a store not loaded), as an app sees them.
    package var failedOperations = 0
    /// What the devices' managers reported.
    package var fallbackLoads = 0
    package var fallbackMerges = 0
    package var deletionsSeen = 0
    package var moves = 0
    package var accountChanges = 0
    /// Distinct cloud stores the run's account A went through.
    package var storesUsed = 0
    /// Runs on a container whose exclusive create is not reliable.
    package var unreliableCreateSeeds = 0

    package init() {}

    /// One line naming every count.
    package var summary: String {
        "\(firstEnables) first enables\(firstEnablesDuringOutage ? " (during an outage)" : ""), \(cloudEnabled) enables, \(cloudDisabled) disables, "
            + "\(cloudDeletions) cloud deletions (\(migrationsThenDeletions) after a migration), \(reloads) reloads, "
            + "\(localOnlyDeletions) local-only deletions, \(migrationsToLocal) migrations to local, \(localStoreDeletions) local store deletions, "
            + "\(rebuilds) rebuilds, \(failedOperations) failed operations; seen: \(fallbackLoads) fallback loads, \(fallbackMerges) fallback merges, "
            + "\(deletionsSeen) deletions, \(moves) moves, \(accountChanges) account changes; \(storesUsed) stores"
            + (unreliableCreateSeeds == 0 ? "" : "; exclusive create not reliable" + (unreliableCreateSeeds > 1 ? " in \(unreliableCreateSeeds) runs" : ""))
    }

    /// The sum of two runs' counts.
    package static func + (a: LifecycleCounts, b: LifecycleCounts) -> LifecycleCounts {
        var c = LifecycleCounts()
        c.firstEnables = a.firstEnables + b.firstEnables
        // A sum covers many moments: how many fell in an outage is counted apart.
        c.firstEnablesDuringOutage = false
        c.cloudEnabled = a.cloudEnabled + b.cloudEnabled
        c.cloudDisabled = a.cloudDisabled + b.cloudDisabled
        c.cloudDeletions = a.cloudDeletions + b.cloudDeletions
        c.migrationsThenDeletions = a.migrationsThenDeletions + b.migrationsThenDeletions
        c.reloads = a.reloads + b.reloads
        c.localOnlyDeletions = a.localOnlyDeletions + b.localOnlyDeletions
        c.migrationsToLocal = a.migrationsToLocal + b.migrationsToLocal
        c.localStoreDeletions = a.localStoreDeletions + b.localStoreDeletions
        c.rebuilds = a.rebuilds + b.rebuilds
        c.failedOperations = a.failedOperations + b.failedOperations
        c.fallbackLoads = a.fallbackLoads + b.fallbackLoads
        c.fallbackMerges = a.fallbackMerges + b.fallbackMerges
        c.deletionsSeen = a.deletionsSeen + b.deletionsSeen
        c.moves = a.moves + b.moves
        c.accountChanges = a.accountChanges + b.accountChanges
        c.storesUsed = a.storesUsed + b.storesUsed
        c.unreliableCreateSeeds = a.unreliableCreateSeeds + b.unreliableCreateSeeds
        return c
    }
}

/// The run's devices under store managers: opening, loading, the first
/// enables, quiescence on one cloud store.
extension Simulation {
    /// The configuration of a device's store (the manager's cloud store, or
    /// the store a device opens directly).
    func storeConfiguration(_ d: SimulatedDevice) -> Store.Configuration {
        let injector = CrashInjector { [crashes] _ in crashes.decide() }
        var configuration = Store.Configuration(
            schema: Workload.schema(version: d.schemaVersion), deviceID: d.initialID, directory: d.folder,
            container: accounts[d.account].view(for: d.initialID), clock: clock, seed: seed &+ UInt64(d.index) &* 31 &+ UInt64(d.syncs),
            logger: { var l = logger; l[metadataKey: "sim.device"] = "\(d.index)"; return l }(), durability: .normal, knownStore: options.lifecycle ? nil : d.knownStore[d.account])
            .crashing(with: injector)
            // A device that has imported nothing waits this long for a
            // baseline still being written (the run lasts seconds).
            .waitingForBaselines(.seconds(5))
        // Half the devices' apps ship their earlier schema versions; the
        // others learn them from the store's record of its versions.
        configuration.earlierSchemas = d.index % 2 == 0 ? Workload.earlierSchemas(before: d.schemaVersion) : []
        // A run lasts seconds: devices say how far they have applied often
        // enough for compactions with a retention of a fraction of that.
        configuration.appliedReportRefresh = .milliseconds(200)
        // Stores train their compression dictionary after a few saves, and
        // devices look for a lost one as often: every run exercises them.
        configuration.dictionaryTrainingSaves = 8
        configuration.dictionaryListingInterval = .milliseconds(200)
        configuration.automaticCompaction = automaticCompaction
        return configuration
    }

    /// Opens the device's manager (its persisted choice decides which store
    /// loads). A crash while it loads restarts it, as a relaunched app does.
    func openManager(_ d: SimulatedDevice) async throws {
        for attempt in 0... {
            // The app knows which account is signed in: a container whose
            // files vanish (a wipe) is then the same account's, emptied, not
            // another account's (see docs/lifecycle.md, "Accounts").
            var configuration = StoreManager.Configuration(
                store: storeConfiguration(d), cloudEnabledByDefault: false, accountToken: d.account == 0 ? "account-A" : "account-B",
                health: options.corruption ? Self.health : StoreManager.HealthConfiguration())
            configuration.beforeCarrying = notesHiddenRecords
            let manager = try await StoreManager.open(configuration)
            d.manager = manager
            let stream = manager.events()
            d.eventCollector = Task {
                var all: [StoreManager.Event] = []
                for await event in stream { all.append(event) }
                return all
            }
            if let error = await manager.loadError, error.code == .simulatedCrash, attempt < 50 {
                disturbances += 1
                note("device \(d.number) crashed loading its store and restarts")
                try await closeManager(d)
                continue
            }
            break
        }
        await refresh(d)
    }

    /// Closes the device's manager and keeps the events it published.
    func closeManager(_ d: SimulatedDevice) async throws {
        await absorbIdentityChanges(d)
        try? await d.manager?.close()
        if let collector = d.eventCollector { d.events += await collector.value }
        d.manager = nil
        d.eventCollector = nil
        d.store = nil
        d.loadedKind = nil
    }

    /// Takes in what the manager has loaded now (and what the store it
    /// replaced did to its device ID before it went).
    func refresh(_ d: SimulatedDevice) async {
        guard let manager = d.manager else { return }
        let store = try? await manager.store
        if store !== d.store {
            await absorbIdentityChanges(d)
            d.identityChangesSeen = 0
            d.store = store
        }
        let before = d.loadedKind
        d.loadedKind = await manager.loadedKind
        // A fallback store is merged into the cloud store that loads after
        // it (also at a restart: the open merges it).
        if before != .cloud, d.loadedKind == .cloud, let store { ledger.fallbackMerged(deviceIndex: d.index, into: store.storeID, as: store.deviceID) }
        await absorbIdentityChanges(d)
        if let store, d.loadedKind == .cloud {
            d.knownStore[d.account] = store.storeID
            // A device ID the manager gave up (deleting its copy of the
            // cloud store): no one puts back its logs any more.
            if let previous = d.cloudDeviceID, previous != store.deviceID, !d.retiredIDs.contains(previous) {
                d.retiredIDs.append(previous)
            }
            d.cloudDeviceID = store.deviceID
        }
    }

    /// Runs a manager operation the way an app does: a simulated crash
    /// restarts the device; any other error is what the app sees (counted,
    /// noted). Returns whether it went through.
    @discardableResult
    func managing(_ d: SimulatedDevice, _ what: String, _ body: (StoreManager) async throws -> Void) async throws -> Bool {
        guard let manager = d.manager else { return false }
        await absorbIdentityChanges(d)
        try await noteHidden(d)
        do {
            try await body(manager)
            await refresh(d)
            return true
        } catch let error as ChronicleError where error.code == .simulatedCrash {
            await refresh(d)
            try await restart(d, what)
        } catch {
            await refresh(d)
            lifecycleCounts.failedOperations += 1
            note("device \(d.number) \(what) failed: \(error)")
        }
        return false
    }

    /// With nothing loaded (a failed load), the app tries again.
    func ensureLoaded(_ d: SimulatedDevice) async throws {
        guard options.lifecycle, d.store == nil, let manager = d.manager, await manager.healthStatus?.status != .corrupted else { return }
        try await managing(d, "reloading") { _ = try await $0.reload() }
    }

    /// Chooses when the first devices turn the cloud on, and how many.
    func planFirstEnables() {
        // After every device saved a few times, on average, to its local store.
        firstEnableStep = options.devices * 3 + Int(lifecycleRandom.next() % UInt64(options.devices * 3 + 1))
        let count = options.firstEnables > 0 ? options.firstEnables
            : (options.devices < 2 ? 1 : 2 + Int(lifecycleRandom.next() % UInt64(options.devices - 1)))
        firstEnableCount = count
        firstEnablesDuringOutage = lifecycleRandom.next() % 5 == 0
    }

    /// The first devices turn the cloud on at the same moment, each with
    /// its own local data: none sees another's store before it decides.
    func firstEnables() async throws {
        var order = Array(devices.indices)
        for i in order.indices.reversed() where i > 0 {
            order.swapAt(i, Int(lifecycleRandom.next() % UInt64(i + 1)))
        }
        let chosen = order.prefix(firstEnableCount).map { devices[$0] }
        if firstEnablesDuringOutage {
            accounts[0].beUnavailable(forMilliseconds: 200 + lifecycleRandom.next() % 500)
            lifecycleCounts.firstEnablesDuringOutage = true
        }
        note("devices \(chosen.map { String($0.number) }.joined(separator: ", ")) turn the cloud on at the same moment"
             + (firstEnablesDuringOutage ? ", during a container outage" : ""))
        // No time passes between them.
        for d in chosen where d.account == 0 {
            // What it brings: its local store's records as it turns the cloud on.
            var local: [(entity: String, id: RecordID)]?
            if d.loadedKind == .local, let store = d.store { local = try await ConvergenceChecker.visibleRecordIDs(store) }
            if try await managing(d, "turning the cloud on", { _ = try await $0.setCloudEnabled(true) }) {
                if let local { firstEnableRecords[d.index] = local }
                lifecycleCounts.firstEnables += 1
                lifecycleCounts.cloudEnabled += 1
            }
        }
    }

    /// Syncs through the manager; returns the sync's report, nil when the
    /// local store is loaded.
    func managerSync(_ d: SimulatedDevice) async throws -> Store.SyncReport? {
        guard let manager = d.manager else { return nil }
        // A device that marked its store corrupted waits for the rebuild in sync().
        if d.store == nil, await manager.healthStatus?.status != .corrupted { _ = try await manager.reload() }
        if options.devicesRepairTheirLogs && d.syncs % 4 == 0, d.loadedKind == .cloud, let store = d.store {
            try await store.repairOwnLogs()
        }
        await absorbIdentityChanges(d)
        try await noteHidden(d)
        let report = try await manager.sync()
        await refresh(d)
        return report
    }

    /// Lifecycle quiescence: every device back on account A, with the
    /// cloud on (merging its local data), its store loaded.
    func quiesceLifecycle() async throws {
        for d in devices {
            if d.account != 0 {
                try await reopen(d) { d.account = 0 }
            }
            d.online = true
        }
        for _ in 0..<3 {
            clock.advance(byMilliseconds: 1_000)
            accounts[0].settle()
            for d in devices where d.loadedKind != .cloud { await bringToCloud(d) }
            if devices.allSatisfy({ $0.loadedKind == .cloud }) { break }
        }
    }

    /// Turns the cloud on for a device that is not on it (merging its local
    /// data), as its user would at the end of a run.
    func bringToCloud(_ d: SimulatedDevice) async {
        do {
            note("device \(d.number) turns the cloud on to quiesce (\(d.loadedKind?.rawValue ?? "nothing") loaded)")
            _ = try await d.manager?.setCloudEnabled(true)
        } catch {
            note("device \(d.number) turning the cloud on to quiesce failed: \(error)")
        }
        await refresh(d)
        if d.loadedKind != .cloud {
            do {
                _ = try await d.manager?.reload()
            } catch {
                note("device \(d.number) reloading to quiesce failed: \(error)")
            }
            await refresh(d)
        }
    }

    /// After quiescence: every manager closed, so that every event it
    /// published is in, then opened again on the same store.
    func collectLifecycleEvents() async throws {
        for d in devices {
            try await closeManager(d)
            try await openManager(d)
        }
        var stores = Set<StoreID>()
        for d in devices {
            if verbose { note("device \(d.number)'s lifecycle events: \(d.events.map { "\($0)" }.joined(separator: "; "))") }
            for event in d.events {
                switch event {
                case .didLoad(.cloud, let store): if d.account == 0 { stores.insert(store) }
                case .usingFallbackStore: lifecycleCounts.fallbackLoads += 1
                case .mergedFallbackStore: lifecycleCounts.fallbackMerges += 1
                case .cloudStoreDeleted: lifecycleCounts.deletionsSeen += 1
                case .movedToStore: lifecycleCounts.moves += 1
                case .accountChanged: lifecycleCounts.accountChanges += 1
                default: break
                }
            }
        }
        lifecycleCounts.storesUsed = stores.count
    }

    /// Every record that a merge or copy found under another ID (the same
    /// unique key), in the order they happened: source ID to the record
    /// that stands for it.
    var duplicates: [RecordID: RecordID] {
        var result: [RecordID: RecordID] = [:]
        for d in devices {
            for event in d.events {
                switch event {
                case .mergedLocalData(let r), .mergedFallbackStore(let r), .cloudStoreDeleted(_, _, let r), .movedToStore(_, _, let r):
                    result.merge(r.duplicates) { _, new in new }
                default: break
                }
            }
        }
        return result
    }
}

/// One log of a store: a device's sequence.
struct LogKey: Hashable {
    var device: DeviceID
    var sequence: UInt64
}

extension Simulation {
    /// A store of account A that some device still holds a copy of, and
    /// that the container says was deleted on purpose or rebuilt as another.
    func storeBeingLeft() async throws -> StoreID? {
        let container = accounts[0].everything
        for d in devices {
            guard let store = try? StoreManager.snapshotLocation(of: .cloud, in: d.folder)?.store else { continue }
            let deleted = try await container.readMarker(ContainerLayout.tombstone(store: store)) != nil
            let rebuilt = try await container.readMarker(ContainerLayout.supersession(store: store)) != nil
            if deleted || rebuilt { return store }
        }
        return nil
    }
}

/// What became of a store of account A, as its markers said.
enum StoreFate: Hashable {
    /// Deleted on purpose (a tombstone).
    case deleted
    /// Rebuilt as another store (a supersession marker).
    case superseded(by: StoreID)
}

extension Simulation {
    /// Reads the fates the container's markers tell (before a wipe removes
    /// them, and before the checks).
    func recordFates() async throws {
        let container = accounts[0].everything
        for marker in try await container.listMarkers(prefix: "") {
            let parts = marker.rawValue.split(separator: "/")
            guard parts.count == 2, let store = StoreID(string: String(parts[0])) else { continue }
            if marker == ContainerLayout.tombstone(store: store) {
                fates[store] = .deleted
                if deletedAt[store] == nil, let tombstone = try await container.readMarker(marker, as: StoreTombstone.self) {
                    deletedAt[store] = tombstone.payload.milliseconds
                }
            } else if marker == ContainerLayout.supersession(store: store), fates[store] == nil,
                      let next = try await container.readMarker(marker, as: StoreSupersession.self) {
                fates[store] = .superseded(by: next.payload.store)
                if next.payload.fromBaseline { rebuiltFromBaseline.insert(next.payload.store) }
            }
        }
        // A deletion a crash stopped is finished by the device's next load,
        // on the store its store became by then if it was replaced meanwhile.
        for (store, capture) in pendingDeletions {
            var current = store
            var seen: Set<StoreID> = []
            while case .superseded(let next)? = fates[current], seen.insert(current).inserted { current = next }
            if fates[current] == .deleted, deletedStoreVersions[current] == nil {
                pendingDeletions[store] = nil
                adopt(capture, for: current)
            }
        }
    }
}

extension Simulation {
    /// The records a save removed from its store: those it deleted, and the
    /// notes a folder's deletion hid with it (the cascade). A merge copies
    /// only the records a store still has, so the checker must know which
    /// ones a save removed.
    func removed(by written: [Workload.Written], in store: Store) async throws -> [RecordID] {
        let deleted = written.filter { $0.kind == .delete }.map(\.id)
        let folders = written.filter { $0.kind == .delete && $0.entity == "Folder" }.map(\.id)
        guard !folders.isEmpty else { return deleted }
        let note = Workload.schema.entities.firstIndex { $0.name == "Note" }!
        return try await store.read { db in
            try folders.flatMap { folder in
                // Notes whose state is compact in their row (see
                // `docs/merge.md`) show their raw folder there.
                try RecordID.fetchAll(db, sql: """
                    SELECT id FROM _chronicle_refs WHERE target = ? AND entity = ?
                    UNION SELECT id FROM \(SnapshotTables.rows("Note").quotedDatabaseIdentifier) WHERE folder = ? AND _chronicle_version IS NOT NULL
                    """, arguments: [folder, note, folder])
            }
        } + deleted
    }
}

extension Simulation {
    /// The records a store knows but does not show: deleted, hidden by a
    /// cascade, or duplicates of a record with the same unique key. A
    /// rebuild seeds its new store with what the store shows, and a move
    /// carries what it shows, so these do not reach the new store, and the
    /// checker must not look for them there.
    static func hiddenRecords(_ store: Store) async throws -> Set<RecordID> {
        let schema = store.snapshot.schema
        return try await store.read { db in
            var hidden = Set<RecordID>()
            for (index, entity) in schema.entities.enumerated() {
                let sql = "SELECT id FROM _chronicle_records WHERE entity = ? AND id NOT IN (SELECT id FROM \(entity.name.quotedDatabaseIdentifier))"
                hidden.formUnion(try RecordID.fetchAll(db, sql: sql, arguments: [index]))
            }
            return hidden
        }
    }

    /// What a store a device leaves does not show as it leaves it, noted
    /// when the manager is about to carry its saves out (a store left
    /// while the device loads, after importing what it had not yet seen,
    /// is never loaded for ``noteHidden(_:)`` to look at).
    var notesHiddenRecords: @Sendable (Store) async throws -> Void {
        { [hiddenWhenCarried] store in
            let hidden = try await Self.hiddenRecords(store)
            hiddenWhenCarried.ids.withLock { $0.formUnion(hidden) }
        }
    }
}

extension Simulation {
    /// Every record a store knows, shown or not: those with merge state of
    /// their own, and those whose state lives compactly in their row (an
    /// independent entity's first inserts have no `_chronicle_records` row).
    func allRecords(_ store: Store) async throws -> Set<RecordID> {
        try await store.read { db in
            var all = Set(try RecordID.fetchAll(db, sql: "SELECT id FROM _chronicle_records"))
            for entity in store.snapshot.schema.entities {
                all.formUnion(try RecordID.fetchAll(db, sql: "SELECT id FROM \(entity.name.quotedDatabaseIdentifier)"))
            }
            return all
        }
    }

    /// The versions a store holds of each record it knows (see
    /// ``Snapshot/recordVersions(entity:id:)``).
    func recordVersions(_ store: Store) async throws -> [RecordID: Snapshot.RecordVersions] {
        var result: [RecordID: Snapshot.RecordVersions] = [:]
        for (index, entity) in store.snapshot.schema.entities.enumerated() {
            let ids = try await store.read { db in
                try RecordID.fetchAll(db, sql: "SELECT id FROM _chronicle_records WHERE entity = ? UNION SELECT id FROM \(entity.name.quotedDatabaseIdentifier)",
                                      arguments: [index])
            }
            for id in ids { result[id] = try store.snapshot.recordVersions(entity: entity.name, id: id) }
        }
        return result
    }

    /// Before an operation that may rebuild or move the device's cloud
    /// store: what its copy does not show (see ``hiddenRecords(_:)``).
    func noteHidden(_ d: SimulatedDevice) async throws {
        guard d.loadedKind == .cloud, d.account == 0, let store = d.store else { return }
        do {
            hiddenBeforeMoves.formUnion(try await Self.hiddenRecords(store))
        } catch let error as ChronicleError where error.code == .closed {
            // Switched away meanwhile: nothing to move from.
        }
    }
}

/// Record IDs that concurrent tasks add to.
final class SharedRecordSet: Sendable {
    let ids = Mutex<Set<RecordID>>([])
}
