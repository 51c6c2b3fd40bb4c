import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB

/// One device of a run: its folder, its open store, and what the workload
/// and the faults have done to it.
final class SimulatedDevice {
    /// Its place in the run (devices are numbered from 1 in messages).
    let index: Int
    /// The device ID its folder was created with. The store may continue
    /// under another one (see ``currentID``).
    let initialID: DeviceID
    /// Its folder: one subfolder per account.
    let root: URL
    var store: Store?
    /// With the lifecycle: the device's store manager, which store it has
    /// loaded, and the lifecycle events it published so far.
    var manager: StoreManager?
    var loadedKind: StoreManager.Kind?
    var eventCollector: Task<[StoreManager.Event], Never>?
    var events: [StoreManager.Event] = []
    var lifecycle = false
    /// The device ID its cloud store last wrote under.
    var cloudDeviceID: DeviceID?
    /// Whether it deleted its local store on purpose (what it held is gone).
    var deletedLocalStore = false
    var online = true
    /// The version of the workload's schema its app runs (see `Workload.upgraded`).
    var schemaVersion = 1
    var account = 0
    /// The store it last opened, per account.
    var knownStore: [Int: StoreID] = [:]
    var syncs = 0
    /// Saves attempted so far.
    var saves = 0
    /// An older copy of one account's folder, kept to restore later.
    var folderCopy: (account: Int, url: URL)?
    /// The device whose folder this one copied, if it is a twin.
    var twinOf: Int?
    /// The accounts whose folder went back in time (a restore, a lost
    /// `-wal`) and has not synced since: it has not met that account's
    /// container yet. A sync on another account does not count.
    var behindOn: Set<Int> = []
    /// Whether the files of some account went back in time and have not met
    /// their container since.
    var wentBackInTime: Bool { !behindOn.isEmpty }
    /// Device IDs it gave up (its store moved to a new one).
    var retiredIDs: [DeviceID] = []
    /// How many of its open store's ``Store/identityChanges`` the ledger has taken in.
    var identityChangesSeen = 0

    init(index: Int, initialID: DeviceID, root: URL) {
        self.index = index
        self.initialID = initialID
        self.root = root
    }

    /// What a manager's folder holds besides the cloud store's files: the
    /// local and fallback stores, the manager's state and lock, seeding folders.
    static let deviceOnlyEntries: Set<String> = ["local", "fallback", "rebuild", "manager.json", "manager.lock"]

    /// The device's number in messages.
    var number: Int { index + 1 }

    /// The folder of the account it is on.
    var folder: URL { folder(account: account) }

    /// Without the lifecycle, one folder per account; with it, one manager
    /// folder, whose container is the account's.
    func folder(account: Int) -> URL {
        lifecycle ? root.appendingPathComponent("manager") : root.appendingPathComponent("account-\(account)")
    }

    /// Where a save on the loaded store goes.
    var place: AcknowledgementLedger.Place {
        switch loadedKind {
        case .local: .local
        case .fallback: .fallback
        case .cloud, nil: .cloud
        }
    }

    /// The device ID it writes to the container under: its store's, or with
    /// the lifecycle its cloud store's (whichever store is loaded).
    var containerID: DeviceID? {
        guard lifecycle else { return store.map(Self.deviceID(of:)) }
        return (try? StoreManager.cloudDeviceID(in: folder)) ?? nil
    }

    /// The device ID its store writes under now.
    var currentID: DeviceID { store.map(Self.deviceID(of:)) ?? initialID }

    /// The device ID a store writes under now. The one place that reads it:
    /// a store whose files went back in time continues under a new ID.
    static func deviceID(of store: Store) -> DeviceID { store.deviceID }
}
