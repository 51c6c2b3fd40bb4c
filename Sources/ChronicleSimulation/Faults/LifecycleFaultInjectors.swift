import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import GRDB

// What users do through the store manager (with the lifecycle on): turn
// the cloud on and off, delete the cloud store, run maintenance
// operations. Each draws from the lifecycle's own stream.

/// A device turns the cloud off, or on (merging its local data, or, one
/// time in five, leaving it in the local store).
struct CloudToggleFault: FaultInjector {
    let probability: Probability

    func step(_ run: Simulation) async throws {
        guard run.options.lifecycle, probability.draw(&run.lifecycleRandom) else { return }
        let d = run.devices[Int(run.lifecycleRandom.next() % UInt64(run.devices.count))]
        guard let manager = d.manager else { return }
        let policy: StoreManager.LocalDataPolicy = run.lifecycleRandom.next() % 5 == 0 ? .useCloud : .merge
        if await manager.cloudEnabled {
            // Turned on, but the cloud store never loaded (a fallback store
            // meanwhile): turning it off cancels the merge of the local data.
            let mergeWaiting = d.loadedKind != .cloud
            if try await run.managing(d, "turning the cloud off", { _ = try await $0.setCloudEnabled(false) }) {
                run.lifecycleCounts.cloudDisabled += 1
                if mergeWaiting { run.firstEnableRecords[d.index] = nil }
            }
        } else if try await run.managing(d, "turning the cloud on", { _ = try await $0.setCloudEnabled(true, localData: policy) }) {
            run.lifecycleCounts.cloudEnabled += 1
        }
        run.note("device \(d.number) has the cloud \(await manager.cloudEnabled ? "on (\(policy))" : "off"), \(d.loadedKind?.rawValue ?? "nothing") loaded")
    }
}

/// A device on account A deletes the cloud store everywhere; half the
/// time it first copies it to its local store (``StoreManager/migrateCloudToLocal(deleteCloudStore:)``).
struct CloudDeletionFault: FaultInjector {
    let probability: Probability

    func step(_ run: Simulation) async throws {
        guard run.options.lifecycle, probability.draw(&run.lifecycleRandom) else { return }
        let d = run.devices[Int(run.lifecycleRandom.next() % UInt64(run.devices.count))]
        let migrateFirst = run.lifecycleRandom.next() % 2 == 0
        guard d.account == 0, d.online, d.loadedKind == .cloud, var store = d.store else { return }
        // A store rebuilt since the device last looked: the deletion would
        // first move it to the rebuilt store, and delete that one, which
        // the capture below must describe. The app syncs first, as one
        // showing its user the store to delete does.
        if try await run.accounts[0].everything.readMarker(ContainerLayout.supersession(store: store.storeID)) != nil {
            guard try await run.managing(d, "syncing before deleting the cloud store", { _ = try await $0.sync() }),
                  d.loadedKind == .cloud, let moved = d.store,
                  try await run.accounts[0].everything.readMarker(ContainerLayout.supersession(store: moved.storeID)) == nil
            else { return }
            store = moved
        }
        let deleted = store.storeID
        // What the container holds of the store as it goes: saves it never
        // got must reach their devices' local stores.
        let capture = try await DeletionCapture(store, run)
        let done = try await run.managing(d, "deleting the cloud store") { manager in
            if migrateFirst {
                _ = try await manager.migrateCloudToLocal(deleteCloudStore: true)
            } else {
                try await manager.deleteCloudStore(localOnly: false)
            }
        }
        // Deleted even if a crash stopped the call after the tombstone.
        if try await run.accounts[0].everything.readMarker(ContainerLayout.tombstone(store: deleted)) != nil {
            run.pendingDeletions[deleted] = nil
            run.adopt(capture, for: deleted)
            if done {
                run.lifecycleCounts.cloudDeletions += 1
                if migrateFirst { run.lifecycleCounts.migrationsThenDeletions += 1 }
            }
            run.note("device \(d.number) deleted the cloud store \(deleted) everywhere" + (migrateFirst ? ", after copying it to its local store" : ""))
        } else if !done {
            // A crash stopped it before the tombstone: the device's next
            // load may finish it (see ``Simulation/recordFates()``).
            run.pendingDeletions[deleted] = capture
        }
    }
}

/// A device runs one maintenance operation: reload, delete its copy of
/// the cloud store (local only), migrate the cloud store to its local
/// store, delete its local store, or rebuild the cloud store from its copy
/// under a new store ID.
struct MaintenanceFault: FaultInjector {
    let probability: Probability

    func step(_ run: Simulation) async throws {
        guard run.options.lifecycle, probability.draw(&run.lifecycleRandom) else { return }
        let d = run.devices[Int(run.lifecycleRandom.next() % UInt64(run.devices.count))]
        let choice = run.lifecycleRandom.next() % 10
        guard d.manager != nil else { return }
        let cloud = d.loadedKind == .cloud && d.online
        switch choice {
        case 0...2:
            if try await run.managing(d, "reloading", { _ = try await $0.reload() }) { run.lifecycleCounts.reloads += 1 }
            run.note("device \(d.number) reloaded: \(d.loadedKind?.rawValue ?? "nothing") loaded")
        case 3...4 where cloud:
            if try await run.managing(d, "deleting its copy of the cloud store", { try await $0.deleteCloudStore(localOnly: true) }) {
                run.lifecycleCounts.localOnlyDeletions += 1
                run.note("device \(d.number) deleted its copy of the cloud store and rebuilt it from the container")
            }
        case 5...6 where cloud && d.account == 0:
            if try await run.managing(d, "migrating the cloud store to local", { _ = try await $0.migrateCloudToLocal() }) {
                run.lifecycleCounts.migrationsToLocal += 1
                run.note("device \(d.number) copied the cloud store to its local store and turned the cloud off")
            }
        case 7:
            // What it saved locally goes with the store, on purpose.
            run.ledger.discardLocal(deviceIndex: d.index)
            // So do the saves it carried there from cloud stores deleted on
            // purpose that it has left (a store rebuilt into one: followed).
            try await run.recordFates()
            let onStore = try? StoreManager.snapshotLocation(of: .cloud, in: d.folder)?.store
            run.ledger.discardCarried(deviceIndex: d.index) { store in
                var current = store
                var seen: Set<StoreID> = []
                while case .superseded(let next)? = run.fates[current], seen.insert(current).inserted { current = next }
                return run.fates[current] == .deleted && onStore != current
            }
            d.deletedLocalStore = true
            if try await run.managing(d, "deleting its local store", { try await $0.deleteLocalStore() }) {
                run.lifecycleCounts.localStoreDeletions += 1
                run.note("device \(d.number) deleted its local store")
            }
        case 8...9 where cloud && d.account == 0:
            if try await run.managing(d, "rebuilding the cloud store", { _ = try await $0.rebuildCloudStore() }) {
                run.lifecycleCounts.rebuilds += 1
                run.note("device \(d.number) rebuilt the cloud store as \(d.store.map { "\($0.storeID)" } ?? "?")")
            }
        default:
            break
        }
    }
}

/// What a store deleted on purpose held as it went, as the checkers need
/// it: the container's logs and the deleting device's copy.
struct DeletionCapture {
    var keys: Set<LogKey>
    var saves: [RecordID: Set<HybridTimestamp>] = [:]
    var records: Set<RecordID>
    var versions: [RecordID: Snapshot.RecordVersions]
    var now: UInt64

    init(_ store: Store, _ run: Simulation) async throws {
        let held = try await StoreLogs.read(run.accounts[0].everything, store: store.storeID, upgrades: run.options.upgrades)
        records = try await run.allRecords(store)
        versions = try await run.recordVersions(store)
        now = run.clock.nowMilliseconds()
        keys = Set(held.devices.flatMap { device in held.transactions[device]!.keys.map { LogKey(device: device, sequence: $0) } })
        for device in held.devices {
            for t in held.transactions[device]!.values {
                for change in t.changes { saves[change.recordID, default: []].insert(t.clock) }
            }
        }
    }
}

extension Simulation {
    /// Records that `deleted` went, holding what `capture` says.
    func adopt(_ capture: DeletionCapture, for deleted: StoreID) {
        deletedStoreLogs[deleted] = capture.keys
        deletedStoreSaves[deleted] = capture.saves
        for id in capture.records { deletedWithStore[id] = capture.now }
        // And every record the container's logs held as it went, even
        // if a log is lost afterwards (nobody repairs a deleted store).
        for id in capture.saves.keys { deletedWithStore[id] = max(deletedWithStore[id] ?? capture.now, capture.now) }
        deletedStoreVersions[deleted] = capture.versions
    }
}
