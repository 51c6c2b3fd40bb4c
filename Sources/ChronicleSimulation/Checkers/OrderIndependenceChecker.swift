import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import GRDB

/// Order independence: a fresh device that imports every save the container
/// holds, in one go, reaches the devices' state.
///
/// The reference is built from the container's logs, not from the devices:
/// every log of every device ID the container holds (a device whose files
/// went back in time leaves logs under an ID no device uses any more), its
/// transactions re-encoded as one log per device, from sequence 1 up to the
/// first gap, in a pristine container.
struct OrderIndependenceChecker: InvariantChecker {
    let invariant = "order independence (fresh replay)"

    func check(_ state: QuiescedState, _ report: inout CheckReport) async throws {
        let stores = state.stores
        let expected = try await stores[0].stateHash()
        let logs = try await StoreLogs.read(state.container.everything, store: stores[0].storeID, upgrades: state.upgrades)
        let (reference, records) = try await Self.reference(logs, store: stores[0].storeID, state: state)
        if reference != expected {
            var details: [String] = logs.conflicts
            details += logs.devices.compactMap { d in logs.stranded(d) > 0 ? "\(logs.stranded(d)) saves of device \(d) after a gap" : nil }
            if !logs.damaged.isEmpty { details.append("\(logs.damaged.count) logs do not verify") }
            report.violation("order independence: a fresh replay gives \(reference), devices \(expected)"
                             + (details.isEmpty ? "" : " (\(details.prefix(5).joined(separator: "; ")))"))
            let held = try await ConvergenceChecker.visibleRecords(stores[0])
            let onlyDevices = held.subtracting(records).sorted().prefix(3), onlyFresh = records.subtracting(held).sorted().prefix(3)
            report.violation("order independence: the devices alone show \(onlyDevices.isEmpty ? "nothing" : onlyDevices.joined(separator: ", ")); the fresh replay alone shows \(onlyFresh.isEmpty ? "nothing" : onlyFresh.joined(separator: ", "))")
        }
    }

    /// The state hash of a fresh device importing `logs`.
    ///
    /// A store rebuilt from another's baseline holds that store's past only
    /// in baselines, and its devices' logs start after it: with the
    /// lifecycle, the store's baselines come along, each device's saves as
    /// one log each, and the fresh device starts from the newest intact
    /// baseline.
    /// The state hash of a fresh device importing `logs`, and the records it shows.
    static func reference(_ logs: StoreLogs, store storeID: StoreID, state: QuiescedState) async throws -> (hash: String, records: Set<String>) {
        // With corruption faults a log can be damaged for good after every
        // device applied it: a device that joins starts from a baseline
        // that covers it, as it does after a rebuild.
        // And a device's logs can start after a gap that only a baseline
        // covers: its earlier logs were uploaded, taken into a baseline,
        // and then lost with a wipe of the container while their device
        // was away, and a folder twin of that device (which keeps the ID)
        // went on after the baseline's vector. A device that joins starts
        // from that baseline too; if no baseline covers the gap, the fresh
        // device stops at it and the hashes differ.
        let gapped = logs.devices.contains { logs.stranded($0) > 0 }
        let hasBaseline = try await !state.container.everything.listAll(prefix: ContainerLayout.baselinesPrefix(store: storeID)).isEmpty
        // After a compaction, a device's logs may all be gone (none left to
        // show a gap): only the baselines hold them.
        let compacted = try await state.container.everything.readMarker(ContainerLayout.compaction(store: storeID)) != nil
        let fromBaselines = !state.fates.isEmpty || state.corruption || ((gapped || compacted) && hasBaseline)
        let pristine = InMemoryContainer()
        _ = try await pristine.createMarker(ContainerLayout.activeStore, ActiveStorePointer(store: storeID))
        for device in logs.devices {
            // After a rebuild, one log per save: the fresh device starts
            // from a baseline and takes each log after its vector.
            let runs = !fromBaselines ? [logs.contiguous(device)] : logs.runs(device).flatMap { $0.map { [$0] } }
            for transactions in runs {
                guard let first = transactions.first?.sequence, let last = transactions.last?.sequence else { continue }
                let bytes = try LogEncoder(storeID: storeID).encode(transactions)
                try await pristine.put(ContainerLayout.log(store: storeID, device: device, first: first, last: last), bytes)
            }
            _ = try await pristine.createMarker(ContainerLayout.deviceRegistration(store: storeID, device: device), [])
        }
        if fromBaselines {
            for blob in try await state.container.everything.listAll(prefix: ContainerLayout.baselinesPrefix(store: storeID)) {
                try await pristine.put(blob.name, try await state.container.everything.get(blob.name))
            }
            // After a compaction, the baseline that stands for the removed
            // logs: a fresh device that starts from a newer baseline whose
            // publisher had not applied all of them takes them from it.
            if let horizon = try await state.container.everything.readMarker(ContainerLayout.compaction(store: storeID)) {
                _ = try await pristine.createMarker(ContainerLayout.compaction(store: storeID), horizon.bytes)
            }
        }
        // The store's records of the schema versions its baselines use,
        // from which the fresh device learns an earlier one.
        for name in try await state.container.everything.listMarkers(prefix: ContainerLayout.schemasPrefix(store: storeID)) {
            if let record = try await state.container.everything.readMarker(name) { _ = try await pristine.createMarker(name, record.bytes) }
        }
        return try await state.withNewDevice(DeviceID(index: 999), container: pristine) { fresh in
            _ = try await fresh.importLogs()
            return (try await fresh.stateHash(), try await ConvergenceChecker.visibleRecords(fresh))
        }
    }
}
