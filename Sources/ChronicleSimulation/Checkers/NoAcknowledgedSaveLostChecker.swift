import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import GRDB

/// No acknowledged save lost: for every save on account A that returned
/// success, every device holds each field it wrote at the save's version or
/// a newer one, has seen its insert, and each delete at its version or newer
/// (the save is there, or superseded by a write that wins the merge order).
///
/// With the lifecycle, a save is checked where the design says it is:
/// - saved in the cloud store every device ends on, in a store rebuilt as
///   another (followed to the end), or in a fallback store: on every device;
///   a record a merge found under another ID (its unique key) is looked for
///   under that one, and a delete also holds when the record is gone;
/// - saved in a local store: in that device's local store, unless the device
///   deleted its local store afterwards on purpose;
/// - saved in a cloud store deleted on purpose: deleted with it if the
///   container held it then; otherwise in the device's local store (carried
///   there), or on every device.
struct NoAcknowledgedSaveLostChecker: InvariantChecker {
    let invariant = "no acknowledged save lost"

    func check(_ state: QuiescedState, _ report: inout CheckReport) async throws {
        let stores = state.stores
        let final = stores[0].storeID
        // The logs the container held of each store that went: a deleted
        // store's as it was deleted and now, a rebuilt store's now.
        var held = state.deletedStoreLogs
        for (store, fate) in state.fates {
            // A device leaving a deleted store first puts back what the
            // container lost of its uploaded saves.
            guard fate == .deleted else { continue }
            let logs = try await StoreLogs.read(state.container.everything, store: store, upgrades: state.upgrades)
            held[store, default: []].formUnion(logs.devices.flatMap { device in logs.transactions[device]!.keys.map { LogKey(device: device, sequence: $0) } })
            // By name too: nobody repairs a deleted store's logs, so a bit
            // flip after the deletion leaves one that no longer decodes.
            for blob in try await state.container.everything.listAll(prefix: "\(store)/") {
                guard let parsed = ContainerLayout.parseLog(blob.name) else { continue }
                held[store, default: []].formUnion((parsed.first...parsed.last).map { LogKey(device: parsed.device, sequence: $0) })
            }
        }
        for case let (store, .superseded) in state.fates {
            let logs = try await StoreLogs.read(state.container.everything, store: store, upgrades: state.upgrades)
            held[store] = Set(logs.devices.flatMap { device in logs.transactions[device]!.keys.map { LogKey(device: device, sequence: $0) } })
        }
        var localStores: [Int: Snapshot?] = [:]
        defer { for case let snapshot?? in localStores.values { try? snapshot.close() } }
        // A local store belongs to the device, whichever account it was on.
        for ack in state.ledger.entries where !ack.discarded && (ack.account == 0 || ack.place == .local) {
            let lifecycle = ack.place != .cloud || !state.fates.isEmpty || ack.store != final
            switch Self.whereKept(ack, final: final, state, held: held) {
            case .gone:
                continue
            case .everyDevice:
                for (i, s) in stores.enumerated() {
                    for problem in try Self.problems(ack, in: s.snapshot, state, absentDeleteHolds: lifecycle) {
                        report.violation("lost: device \(i + 1) \(problem)" + (lifecycle ? " (saved by device \(ack.deviceIndex + 1) \(ack.placeDescription))" : ""))
                    }
                }
            case .localStore(let index, let orEveryDevice):
                if localStores[index] == nil { localStores[index] = try Self.localStore(of: state.devices[index], state) }
                let local = localStores[index]!
                let there = try local.map { try Self.problems(ack, in: $0, state, absentDeleteHolds: true, inLocalStore: true) } ?? ["(no local store)"]
                if there.isEmpty { continue }
                if orEveryDevice, try stores.allSatisfy({ try Self.problems(ack, in: $0.snapshot, state, absentDeleteHolds: true).isEmpty }) { continue }
                for problem in there {
                    report.violation("lost: device \(index + 1)'s local store \(problem)" + (orEveryDevice ? " (its cloud store \(ack.store) was deleted; not in the final store either)" : ""))
                }
            }
        }
    }

    enum Kept {
        case everyDevice
        /// In that device's local store (or, if true, on every device).
        case localStore(Int, orEveryDevice: Bool)
        /// Deleted on purpose with its store.
        case gone
    }

    static func whereKept(_ ack: AcknowledgementLedger.Entry, final: StoreID, _ state: QuiescedState, held: [StoreID: Set<LogKey>]) -> Kept {
        switch ack.place {
        case .local: return .localStore(ack.deviceIndex, orEveryDevice: false)
        case .fallback:
            // Merged into the cloud store that loaded next: if a store
            // deleted on purpose held it, it went with that store.
            for versions in state.deletedStoreVersions.values {
                if let v = versions[ack.id], Self.holds(v, ack, state.ledger) { return .gone }
            }
            // Or its store's logs held the merge's copy (saved with a
            // newer clock) when it went.
            for saves in state.deletedStoreSaves.values {
                if let clocks = saves[ack.id], clocks.contains(where: { $0 >= ack.clock }) { return .gone }
            }
            // Otherwise it is where a save to that cloud store is.
            guard ack.mergedInto != nil else { return .everyDevice }
        case .cloud: break
        }
        var store = ack.place == .fallback ? ack.mergedInto! : ack.store
        var seen: Set<StoreID> = []
        while store != final, seen.insert(store).inserted {
            switch state.fates[store] {
            case .deleted?:
                // Deleted on purpose: with it went what the container held,
                // in the store's logs, or (for a store reached by rebuilds)
                // in what the deleting device's copy held.
                if held[ack.store]?.contains(LogKey(device: ack.device, sequence: ack.sequence)) == true { return .gone }
                // Or carried into the deleted store (by a move or a merge,
                // logged again under another device) before it went.
                if state.deletedStoreSaves[store]?[ack.id]?.contains(ack.clock) == true { return .gone }
                if let versions = state.deletedStoreVersions[store]?[ack.id], Self.holds(versions, ack, state.ledger) { return .gone }
                // A delete carried into it (by a move) of a record it never
                // had changed nothing there: it went with the store, and a
                // copy of the record in the device's local store (saved
                // there before the cloud was on) is that store's own.
                if ack.kind == .delete, ack.store != store, let versions = state.deletedStoreVersions[store], versions[ack.id] == nil,
                   state.deletedStoreSaves[store]?[ack.id] == nil {
                    return .gone
                }
                return .localStore(ack.deviceIndex, orEveryDevice: true)
            case .superseded(let next)?:
                store = next
            case nil:
                return .everyDevice
            }
        }
        return .everyDevice
    }

    /// Whether `versions` hold the save, or a write that wins over it.
    static func holds(_ versions: Snapshot.RecordVersions, _ ack: AcknowledgementLedger.Entry, _ ledger: AcknowledgementLedger) -> Bool {
        switch ack.kind {
        case .insert: return versions.inserted && ack.fields.allSatisfy { covers(versions.fields[$0], ack, ledger) }
        case .update: return ack.fields.allSatisfy { covers(versions.fields[$0], ack, ledger) }
        case .delete: return covers(versions.deleteVersion, ack, ledger)
        }
    }

    /// Whether `held` is the save's version or newer: the same clock from a
    /// later ID of the same device counts (a move carried the save under it).
    static func covers(_ held: Version?, _ ack: AcknowledgementLedger.Entry, _ ledger: AcknowledgementLedger) -> Bool {
        guard let held else { return false }
        return held >= ack.version || (held.clock == ack.clock && ledger.continues(held.device, ack.device))
    }

    /// What `snapshot` lacks of the save.
    static func problems(_ ack: AcknowledgementLedger.Entry, in snapshot: Snapshot, _ state: QuiescedState,
                         absentDeleteHolds: Bool, inLocalStore: Bool = false) throws -> [String] {
        let none = Version(clock: .zero, device: DeviceID(index: 0))
        var id = ack.id
        var versions = try snapshot.recordVersions(entity: ack.entity, id: id)
        var hops = 0
        // A record a merge found under another ID was never inserted under
        // its own. Not for a delete: a merge copies only the records its
        // store still has, so the record a merge found in place of a deleted
        // one came from another copy of it (a twin's older copy of the same
        // fallback store), and deleting one record deletes no other.
        while ack.kind != .delete, versions == nil || versions?.inserted == false, let other = state.duplicates[id], hops < 16 {
            id = other
            versions = try snapshot.recordVersions(entity: ack.entity, id: id)
            hops += 1
        }
        guard let v = versions else {
            if ack.kind == .delete && absentDeleteHolds { return [] }
            // The record, and the one a merge found in its place.
            var chain = [ack.id]
            while let other = state.duplicates[chain.last!], chain.count < 16, !chain.contains(other) { chain.append(other) }
            for id in chain where absentDeleteHolds {
                // A merge, a move or a rebuild copies only the records a store
                // still has: a record a later save removed is not copied at all.
                if let removed = state.ledger.removed[id], removed >= ack.clock { return [] }
                // Nor does a rebuild or a move copy records the old store did not
                // show (merged into a record of the same unique key, or hidden by
                // a cascade).
                if state.hiddenBeforeMoves.contains(id) { return [] }
                // A record a cloud store held when it was deleted on purpose went
                // with it (what its devices had not uploaded is in their local stores).
                if !inLocalStore, let deletedAt = state.deletedWithStore[id], ack.clock.milliseconds <= deletedAt { return [] }
            }
            return ["knows nothing of \(ack.entity) \(ack.id) (\(ack.kind) at \(ack.version))"]
        }
        var problems: [String] = []
        switch ack.kind {
        case .insert, .update:
            if ack.kind == .insert && !v.inserted { problems.append("never applied the insert of \(ack.entity) \(ack.id)") }
            // A record found under another ID holds the other record's values.
            guard id == ack.id else { break }
            for f in ack.fields where !covers(v.fields[f], ack, state.ledger) {
                problems.append("holds \(ack.entity) \(ack.id).\(f) at \(v.fields[f] ?? none), older than acknowledged \(ack.version)")
            }
        case .delete:
            if !covers(v.deleteVersion, ack, state.ledger), !supersededByLaterWrite(ack, v, state.ledger) {
                problems.append("missed the delete of \(ack.entity) \(ack.id) at \(ack.version)")
            }
        }
        return problems
    }

    /// Whether an acknowledged write to the record made after the delete
    /// (by a device that had not seen it: a twin's copy of the same
    /// fallback store, merged by copying its records) brought the record
    /// back, as a write newer than a delete does (docs/merge.md), and the
    /// snapshot holds that write.
    static func supersededByLaterWrite(_ ack: AcknowledgementLedger.Entry, _ v: Snapshot.RecordVersions, _ ledger: AcknowledgementLedger) -> Bool {
        guard v.inserted else { return false }
        return ledger.entries.contains { later in
            later.id == ack.id && later.kind != .delete && !later.discarded && later.clock > ack.clock
                && later.fields.allSatisfy { covers(v.fields[$0], later, ledger) }
        }
    }

    /// The device's local store, opened read-only beside its manager (which
    /// has the cloud store loaded), or nil if it has none.
    static func localStore(of d: SimulatedDevice, _ state: QuiescedState) throws -> Snapshot? {
        guard let location = try StoreManager.snapshotLocation(of: .local, in: d.folder) else { return nil }
        return try Snapshot(path: location.path, schema: Workload.finalSchema(upgrades: state.upgrades), storeID: location.store, deviceID: location.device,
                            durability: .normal, earlierSchemas: Workload.earlierSchemas(before: 2))
    }
}

extension AcknowledgementLedger.Entry {
    /// Where the save went, for messages.
    var placeDescription: String {
        switch place {
        case .cloud: "to cloud store \(store)"
        case .local: "to its local store"
        case .fallback: "to its fallback store"
        }
    }
}
