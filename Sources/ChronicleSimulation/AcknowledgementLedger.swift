import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import GRDB

/// Every change of every save that returned success, with the version it
/// got: what "no acknowledged save lost" and "accounts stay apart" check.
///
/// A version is (clock, device). A device whose files went back in time
/// continues under a new device ID and re-submits the saves the container
/// lacks with their original clocks and new sequence numbers; the store
/// reports that as a mapping, which ``resubmitted(old:new:sequences:in:)``
/// applies so that each entry expects the version the save has now.
struct AcknowledgementLedger {
    /// Which of a device's stores a save went to (see ``StoreManager``).
    enum Place: Hashable {
        /// The account's cloud store (every save, without the lifecycle).
        case cloud
        /// The device's local store.
        case local
        /// The device's fallback store, used while the container could not be reached.
        case fallback
    }

    struct Entry {
        var kind: ChangeKind
        var entity: String
        var id: RecordID
        var fields: [String]
        /// The save's clock, which a re-submission keeps.
        var clock: HybridTimestamp
        /// The device ID and sequence the save has in the container.
        var device: DeviceID
        var sequence: UInt64
        /// The account (0 is A) and store it was saved in.
        var account: Int
        var store: StoreID
        var place: Place = .cloud
        /// The device that saved it (its index in the run).
        var deviceIndex = 0
        /// Deleted on purpose with its store (the device deleted its local store).
        var discarded = false
        /// For a save to a fallback store: the cloud store the fallback
        /// store was merged into (nil until it was).
        var mergedInto: StoreID?

        /// The version every device must hold the change at, or supersede.
        var version: Version { Version(clock: clock, device: device) }
    }

    private(set) var entries: [Entry] = []
    /// With the lifecycle: records that acknowledged saves removed
    /// (deleted, or hid by a cascade), with the newest such save's clock.
    var removed: [RecordID: HybridTimestamp] = [:]

    /// Records the changes of an acknowledged save.
    mutating func acknowledged(_ written: [Workload.Written], clock: HybridTimestamp, device: DeviceID, sequence: UInt64,
                               account: Int, store: StoreID, place: Place = .cloud, deviceIndex: Int = 0) {
        for w in written {
            entries.append(Entry(kind: w.kind, entity: w.entity, id: w.id, fields: w.fields, clock: clock, device: device,
                                 sequence: sequence, account: account, store: store, place: place, deviceIndex: deviceIndex))
        }
    }

    /// The device deleted its local store: what it saved there is gone on purpose.
    mutating func discardLocal(deviceIndex: Int) {
        for i in entries.indices where entries[i].place == .local && entries[i].deviceIndex == deviceIndex {
            entries[i].discarded = true
        }
    }

    /// The device deleted its local store after leaving cloud stores deleted
    /// on purpose: what it saved in those stores that the container never
    /// held was carried into that local store, and is gone with it too.
    /// Saves to a fallback store count as saves to the cloud store it was
    /// merged into.
    mutating func discardCarried(deviceIndex: Int, leftDeleted: (StoreID) -> Bool) {
        for i in entries.indices where entries[i].deviceIndex == deviceIndex {
            let store = entries[i].place == .fallback ? entries[i].mergedInto : entries[i].place == .cloud ? entries[i].store : nil
            if let store, leftDeleted(store) { entries[i].discarded = true }
        }
    }

    /// The device's fallback store was merged into the cloud store `store`,
    /// where the device saves as `device`: the merge writes the fields of
    /// records the cloud store held with their fallback clocks, under that
    /// ID, so `device` continues the fallback store's ID (see ``continues(_:_:)``).
    mutating func fallbackMerged(deviceIndex: Int, into store: StoreID, as device: DeviceID) {
        for i in entries.indices where entries[i].place == .fallback && entries[i].deviceIndex == deviceIndex {
            // A copy of the folder merges the saves the other copy made
            // before it was copied, under the same fallback ID.
            successors[entries[i].device, default: []].insert(device)
            if entries[i].mergedInto == nil { entries[i].mergedInto = store }
        }
    }

    /// The saves of device `old` listed in `sequences` were re-submitted by
    /// device `new` (same clocks, new sequences) in `store` (every store
    /// when nil): from now on they are expected at their new version.
    /// `clocks` (by old sequence) tells apart two saves that copies of one
    /// folder made under the same ID and sequence: only the one with that
    /// clock moved.
    mutating func resubmitted(old: DeviceID, new: DeviceID, sequences: [(old: UInt64, new: UInt64)],
                              clocks: [UInt64: HybridTimestamp] = [:], in store: StoreID? = nil) {
        successors[old, default: []].insert(new)
        let moved = Dictionary(sequences.map { ($0.old, $0.new) }, uniquingKeysWith: { first, _ in first })
        for i in entries.indices where entries[i].device == old && (store == nil || entries[i].store == store) {
            guard let sequence = moved[entries[i].sequence] else { continue }
            if let clock = clocks[entries[i].sequence], clock != entries[i].clock { continue }
            entries[i].device = new
            entries[i].sequence = sequence
        }
    }

    /// For each device ID given up, the IDs that continued it (see
    /// ``resubmitted(old:new:sequences:clocks:in:)``).
    private(set) var successors: [DeviceID: Set<DeviceID>] = [:]

    /// Whether `device` continued `original`, through one or more moves to
    /// a new ID: a save `original` made may come back under `device`, with
    /// its clock (a move to a rebuilt store carries an earlier ID's saves
    /// under the current one).
    func continues(_ device: DeviceID, _ original: DeviceID) -> Bool {
        var seen: Set<DeviceID> = []
        var next = [original]
        while let d = next.popLast() {
            for s in successors[d] ?? [] where seen.insert(s).inserted {
                if s == device { return true }
                next.append(s)
            }
        }
        return false
    }

    /// The entries saved under `account`.
    func entries(account: Int) -> [Entry] { entries.filter { $0.account == account } }
}

