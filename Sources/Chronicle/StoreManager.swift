import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Owns which store is loaded on this device, the **local store** or the
/// **cloud store**, and hands the app the loaded ``Store``.
///
/// - The local store is this device's own: nothing is uploaded, nothing is
///   imported. An app works in it while the user keeps the cloud off.
/// - The cloud store is the container's active store, synced with every
///   other device.
///
/// Whether the cloud is on is a per-device choice, kept in the manager's
/// folder, so the next launch loads the same store. Turning it on brings
/// the local store's records into the cloud store (see
/// ``LocalDataPolicy``); turning it off goes back to the local store as the
/// device left it. Nothing is deleted by a toggle.
///
/// ```swift
/// let manager = try await StoreManager.open(StoreManager.Configuration(
///     store: Store.Configuration(schema: schema, directory: appSupport, container: container)))
/// let store = try await manager.store        // the local store at first
/// try await manager.setCloudEnabled(true)   // now the cloud store, holding the local records too
/// ```
///
/// While nothing is loaded (during a switch, or after a failed load),
/// ``store`` and every operation that needs a store throw
/// ``ChronicleError/Code/storeNotLoaded`` (``loadError`` says why a load
/// failed). Every switch closes the ``Store`` the app held, whose calls then
/// throw ``ChronicleError/Code/closed``: fetch ``store`` again when
/// ``Event/didLoad(_:_:)`` arrives.
///
/// The manager's folder (``Configuration/store``'s `directory`) holds:
///
/// ```
/// <folder>/manager.lock        held while a manager has the folder open
/// <folder>/manager.json        {"cloudEnabled": ..., "mergePending": ...}
/// <folder>/device.json, …      the cloud store's device files (see ``Store``)
/// <folder>/local/device/       the local store's device folder
/// <folder>/local/container/    the local store's own container, which no other device sees
/// ```
///
/// The folder is the cloud store's device folder, so a folder an app used
/// with ``Store/open(_:)`` opens under a manager as it was, with the cloud on.
public actor StoreManager {
    /// How to open a manager.
    public struct Configuration: Sendable {
        /// The cloud store's configuration. Its `directory` is the manager's
        /// folder (see ``StoreManager``); its `container` the shared one.
        /// The local store takes the same schema, clock and durability.
        public var store: Store.Configuration
        /// Whether the cloud is on when the folder is new (afterwards the
        /// folder's own choice wins). Off by default, as a user would expect
        /// of an app that has not been asked yet. A folder that already holds
        /// a cloud store's files (from ``Store/open(_:)``) starts with the
        /// cloud on, whatever this says.
        public var cloudEnabledByDefault: Bool
        /// How many records one transaction of a merge carries.
        public var mergeBatchSize: Int
        /// The account the app is signed in to, if it knows; nil uses the
        /// container's own token (its `account` marker, written by the first
        /// device that needs one). When the token changes, the device unloads
        /// the cloud store at once and loads the new account's (see
        /// ``Event/accountChanged(from:to:)``): data of one account never
        /// appears in another.
        public var accountToken: String?
        /// How the container's first store is filled from the local store
        /// (see ``SeedStrategy``). When the container already has a store,
        /// ``LocalDataPolicy`` decides instead.
        public var seedStrategy: SeedStrategy
        /// Data the app ships to fill the container's first store (see
        /// ``SeedData``); nil for none.
        public var seedData: SeedData?
        /// How the health monitor judges failed imports and elects a
        /// rebuilder (see ``HealthConfiguration``).
        public var health: HealthConfiguration
        /// Called with a cloud store this device leaves (deleted, or
        /// replaced by another) just before its saves are carried out of it;
        /// the simulation notes there what the store does not show.
        package var beforeCarrying: (@Sendable (Store) async throws -> Void)?

        /// Creates a configuration.
        public init(store: Store.Configuration, cloudEnabledByDefault: Bool = false, mergeBatchSize: Int = 500,
                    accountToken: String? = nil, seedStrategy: SeedStrategy = .copyRecords, seedData: SeedData? = nil,
                    health: HealthConfiguration = HealthConfiguration()) {
            self.store = store
            self.health = health
            self.seedData = seedData
            self.seedStrategy = seedStrategy
            self.accountToken = accountToken
            self.cloudEnabledByDefault = cloudEnabledByDefault
            self.mergeBatchSize = max(1, mergeBatchSize)
        }
    }

    /// Which of the two stores.
    public enum Kind: String, Sendable, Hashable, Codable {
        /// The device-only store.
        case local
        /// The container's active store.
        case cloud
        /// A device-only store the app works on while the container cannot
        /// be reached and this device has no copy of the cloud store yet;
        /// merged into the cloud store, then removed, once it can be.
        case fallback
    }

    /// What becomes of the local store's records when the cloud is turned on.
    public enum LocalDataPolicy: String, Sendable, Hashable {
        /// The local records enter the cloud store as ordinary saves of
        /// this device (the default). A record whose unique key the cloud
        /// store already has is not copied: references to it are pointed at
        /// the cloud's record. Records the cloud store already holds, or
        /// held and deleted, keep the cloud's version. The merge is
        /// resumable: if it is interrupted, the next load finishes it.
        case merge
        /// The local records stay in the local store only.
        case useCloud
        /// The local store replaces the cloud content: a destructive choice
        /// an app should confirm with its user first. The cloud store is
        /// rebuilt from the local store under a new store ID (see
        /// ``StoreManager/rebuildCloudStore(from:)``); the previous store
        /// stays in the container as its predecessor, and every device
        /// carries over its saves the previous store never got. Other
        /// devices' saves that it had are replaced, not merged.
        case overwriteCloudWithLocal
    }

    /// How the container's first store is filled from the local store when
    /// a device turns the cloud on and the container has no store yet. The
    /// store becomes the container's active store only when it is complete:
    /// until then no other device sees it.
    public enum SeedStrategy: Sendable {
        /// Every local record, through ordinary saves in batches (the default).
        case copyRecords
        /// The app's closure fills the new store (the second argument) from
        /// the local store (the first), with ordinary writes.
        case manual(@Sendable (_ local: Store, _ new: Store) async throws -> Void)
        /// The new store starts empty; the local records stay in the local store.
        case empty
        /// The local snapshot's whole state (every record with its merge
        /// versions), published as the new store's baseline in one pass:
        /// fast for a large local store, and no record is saved again.
        case fileCopy
    }

    /// Data an app ships to fill the container's first store (SharedCoreData's
    /// seed store): applied once, by the device that creates the store,
    /// before its local records; records with a unique key another device
    /// also brings end as one record.
    public enum SeedData: Sendable {
        /// Records to insert, each with its entity, values and (optionally)
        /// a fixed ID, so two copies of the seed name the same records.
        case records([SeedRecord])
        /// Every record of a Chronicle snapshot file of the same schema
        /// (a device's `<store>.sqlite`, or one built for the app bundle).
        case snapshot(URL)
    }

    /// One record of ``SeedData/records(_:)``.
    public struct SeedRecord: Sendable, Hashable {
        /// Its entity.
        public var entity: String
        /// Its ID; nil draws one.
        public var id: RecordID?
        /// Its values, references included.
        public var values: [String: Value]

        /// Creates a seed record.
        public init(entity: String, id: RecordID? = nil, values: [String: Value]) {
            self.entity = entity
            self.id = id
            self.values = values
        }
    }

    /// What happened, for an app that shows it or reacts to it.
    public enum Event: Sendable {
        /// A store is about to load; ``StoreManager/store`` throws
        /// ``ChronicleError/Code/storeNotLoaded`` until it has.
        case willLoad(Kind)
        /// A store is loaded and ready.
        case didLoad(Kind, StoreID)
        /// Loading failed; nothing is loaded. The error says why.
        case failedLoading(Kind, ChronicleError)
        /// The loaded store was closed (a switch, or ``StoreManager/close()``).
        case didUnload(Kind)
        /// Local records were merged into the cloud store.
        case mergedLocalData(MergeReport)
        /// The cloud store was deleted on purpose (by `by`, this device or
        /// another): the device fell back to its local store, carrying into
        /// it the saves the container never got, and turned the cloud off.
        case cloudStoreDeleted(StoreID, by: DeviceID, carried: MergeReport)
        /// The local store was deleted (``StoreManager/deleteLocalStore()``).
        case deletedLocalStore
        /// The container now belongs to another account: the cloud store of
        /// the previous one was unloaded (its files stay on this device, for
        /// when that account comes back) and the new account's is loaded.
        case accountChanged(from: String, to: String)
        /// The container could not be reached (``ChronicleError/Code/unavailable``) and this device has no copy
        /// of the cloud store: the app works on the fallback store until
        /// ``StoreManager/sync()`` or ``StoreManager/reload()`` finds the
        /// container again.
        case usingFallbackStore(ChronicleError)
        /// The fallback store's records were merged into the cloud store,
        /// and the fallback store removed.
        case mergedFallbackStore(MergeReport)
        /// This device rebuilt the cloud content as a new store
        /// (``StoreManager/rebuildCloudStore(from:)``).
        case rebuiltCloudStore(StoreID, from: StoreID)
        /// The cloud store was rebuilt as a new store, and this device moved
        /// to it, carrying over its saves the new store did not cover.
        case movedToStore(StoreID, from: StoreID, carried: MergeReport)
        /// This device's health for the cloud store changed (see ``Health``).
        case healthChanged(Health.Status, StoreID)
        /// An import kept failing: this device builds its copy of the cloud
        /// store again from the container (under a new device ID, carrying
        /// its saves the container lacks) before it calls the store corrupted.
        case rebuildingLocalCopy(StoreID, reason: String)
        /// A corruption mark: written by this device, which then unloaded
        /// the store (`healthy` false), or seen by a healthy device, which
        /// stands for the election to rebuild it (`healthy` true).
        case cloudContentCorrupted(CorruptionMark, healthy: Bool)
        /// This device won the election to rebuild the corrupted store, and
        /// rebuilds it now (``rebuiltCloudStore(_:from:)`` follows).
        case electedToRebuild(StoreID)
        /// The logs of the cloud store this device holds, waiting for an
        /// app upgrade, changed: written for a schema this app version does
        /// not know (a later version's), they are not applied and are not a
        /// corruption (see `docs/schema-evolution.md`). Empty once none is
        /// held any more.
        case waitingForAppUpgrade(StoreID, logs: [String])
    }

    /// What a merge of the local store into the cloud store did.
    public struct MergeReport: Sendable, Hashable {
        /// Creates an empty report.
        public init() {}
        /// Records saved into the cloud store.
        public var copied = 0
        /// Local records whose unique key the cloud store already had; the
        /// cloud's record stands for them.
        public var deduplicated = 0
        /// For each record counted in ``deduplicated``, the destination's
        /// record that stands for it: an app holding the source record's ID
        /// finds its data under this one.
        public var duplicates: [RecordID: RecordID] = [:]
        /// Local records the cloud store already held (an earlier merge) or
        /// had deleted.
        public var alreadyPresent = 0
        /// Records deleted from the destination because the source had
        /// deleted them: unsaved changes carried over, or the deletes of a
        /// merged store (records another copy of it had already merged, or
        /// never merged at all, are kept deleted).
        public var deleted = 0
        /// Transactions the merge saved.
        public var transactions = 0
    }

    /// What the manager keeps in `manager.json`.
    struct State: Codable, Equatable {
        var cloudEnabled: Bool
        /// The cloud was turned on with ``LocalDataPolicy/merge`` and the
        /// merge has not finished.
        var mergePending: Bool
        /// A store this device is moving away from, because it was rebuilt
        /// as another: its saves the new store lacks are carried over at the
        /// next load.
        var leaving: StoreID? = nil
        /// The account token last seen (see ``Configuration/accountToken``).
        var account: String? = nil
        /// For each other account this device used, the store it last used
        /// there (see ``switchAccount(from:to:)``).
        var accountStores: [String: StoreID]? = nil
        /// While moving: this device's last sequence in the new store before
        /// it saved its carried saves there.
        var moveBase: UInt64? = nil
        /// Accounts whose store still has to receive the local store's
        /// records: the cloud was turned on (merging) under them, and the
        /// account changed before the merge was done.
        var mergesWaiting: [String]? = nil
        /// The last cloud store deleted on purpose while this device used it
        /// (see ``SyncStatus/lastCloudDeletion``).
        var lastDeletion: CloudDeletion? = nil
        /// The cloud was turned on with ``LocalDataPolicy/overwriteCloudWithLocal``
        /// and the rebuild from the local store has not finished.
        var overwritePending: Bool? = nil
        /// The stores this device left because they were deleted on purpose,
        /// with their tombstones (the newest 32): if the container loses a
        /// tombstone and a device that was away puts such a store back, this
        /// device writes the tombstone again.
        var deletedStores: [DeletedStore]? = nil
        /// The stores this device moved into that replaced another (the
        /// newest 16): see ``restoreLineage(of:)``.
        var lineages: [Lineage]? = nil
        /// Per store (its ID), the device IDs whose logs this device keeps
        /// there: the seeding device of a store it created, its own ID
        /// before it deleted its copy. Kept here as well as in the snapshot,
        /// which can go back in time (a lost `-wal`): a move carries their
        /// saves from the container's logs.
        var keptDevices: [String: [DeviceID]]? = nil
        /// The health monitor's record of the cloud store (see ``Health``).
        var health: HealthRecord? = nil
    }

    /// A store deleted on purpose, as its tombstone said.
    struct DeletedStore: Codable, Equatable {
        var store: StoreID
        var tombstone: StoreTombstone
    }

    static let stateFile = "manager.json"
    static let lockFile = "manager.lock"
    static let stateFileLimit = 1 << 20

    /// The manager's configuration.
    public nonisolated let configuration: Configuration
    let folder: DeviceFolder
    var state: State
    var loaded: (kind: Kind, store: Store)?
    let continuations = EventContinuations<Event>()
    /// The app's hooks, held weakly.
    weak var delegate: (any StoreManagerDelegate)?
    /// Sync state of the loaded store.
    private var firstSyncComplete = false
    var lastReport: Store.SyncReport?
    /// The store that replaced the loaded one and starts from a baseline of
    /// a schema this app version does not know (a later version rebuilt
    /// it): the device stays on its store until the app upgrades.
    private var waitingToJoin: (store: StoreID, baseline: String)?
    var lastError: ChronicleError?
    private var firstSyncWaiters: [CheckedContinuation<Void, any Error>] = []
    /// What seeding the container's first store copied from the local store.
    private var seedReport: MergeReport?
    /// The logs of the device that seeded a new store, for this device to keep.
    private var seedLogs: (store: StoreID, devices: [(device: DeviceID, logs: [(first: UInt64, last: UInt64, transactions: [Transaction])])])?
    /// Set by ``close()``: every later call throws ``ChronicleError/Code/closed``.
    private var isClosed = false
    /// When the loaded store was loaded (its health's grace period starts there).
    var loadedAt: UInt64?
    /// Set while the cloud store is loaded again because SQLite reported its
    /// snapshot damaged (see ``Store/Configuration/snapshotDamaged``).
    var snapshotDamaged = false
    /// How many IDs this manager drew for rebuilds (each draw differs).
    private var rebuildDraws = 0

    /// Throws ``ChronicleError/Code/closed`` once the manager is closed: it
    /// no longer holds the folder, and another manager may.
    private func checkOpen() throws {
        if isClosed { throw ChronicleError(.closed, "the store manager is closed; open it again to go on") }
    }

    private init(configuration: Configuration, folder: DeviceFolder, state: State) {
        self.configuration = configuration
        self.folder = folder
        self.state = state
    }

    /// Locks the manager's folder and loads the store its persisted choice
    /// names (the cloud store if the cloud is on, else the local store).
    ///
    /// A merge that an earlier run began and did not finish is finished
    /// first.
    ///
    /// - Throws: ``ChronicleError/Code/deviceInUse`` if another manager
    ///   holds the folder. A failure to load the store itself does not
    ///   throw: the manager opens with nothing loaded, ``loadError`` says
    ///   why, and ``reload()`` tries again.
    public static func open(_ configuration: Configuration) async throws -> StoreManager {
        let directory = configuration.store.directory
        let folder = try await DeviceFolder(directory, lockFile: lockFile, wait: configuration.store.lockWait)
        do {
            let state: State
            if let persisted = try readState(in: directory) {
                state = persisted
            } else {
                let hasCloudStore = FileManager.default.fileExists(atPath: directory.appendingPathComponent(DeviceFolder.identityFile).path)
                state = State(cloudEnabled: configuration.cloudEnabledByDefault || hasCloudStore, mergePending: false)
                try write(state, in: folder)
            }
            let manager = StoreManager(configuration: configuration, folder: folder, state: state)
            await manager.loadChosen()
            try? await manager.finishOverwrite()
            return manager
        } catch {
            folder.release()
            throw error
        }
    }

    /// The snapshot file of the store a manager in `directory` loads, for
    /// a reader that does not open the store (SQLite lets readers in beside
    /// a writer): the cloud store's, or the local store's when the cloud is
    /// off. With the cloud on and no copy of the cloud store yet, the
    /// fallback store's, if the device saved there while the container
    /// could not be reached.
    ///
    /// - Throws: ``ChronicleError/Code/notFound`` if there is none yet;
    ///   ``ChronicleError/Code/malformedBody`` for a damaged `manager.json`
    ///   or `device.json`.
    package static func snapshotPath(in directory: URL) throws -> String {
        let state = try readState(in: directory)
        let cloudEnabled = state?.cloudEnabled ?? true
        if cloudEnabled, try snapshotLocation(of: .cloud, in: directory) == nil {
            let fallback = directory.appendingPathComponent(Kind.fallback.rawValue).appendingPathComponent(accountKey(state?.account))
                .appendingPathComponent("device")
            if let identity = try DeviceFolder.readIdentity(in: fallback), let store = identity.store {
                let path = DeviceFolder.snapshotPath(store, in: fallback)
                if FileManager.default.fileExists(atPath: path) {
                    try Snapshot.requireRegularFiles(path)
                    return path
                }
            }
        }
        let folder = deviceFolder(of: cloudEnabled ? .cloud : .local, in: directory)
        // A move to the store that replaced this device's store that has
        // not finished yet (it waits for that store's baseline): the device's
        // records are still in its copy of the store it is leaving.
        if cloudEnabled, let leaving = state?.leaving {
            let path = DeviceFolder.snapshotPath(leaving, in: folder)
            if FileManager.default.fileExists(atPath: path) {
                try Snapshot.requireRegularFiles(path)
                return path
            }
        }
        guard let identity = try DeviceFolder.readIdentity(in: folder) else {
            throw ChronicleError(.notFound, "\(directory.path) is not a device folder yet (run `chronicle save`, `chronicle import` or `chronicle sync` first)")
        }
        guard let store = identity.store else {
            throw ChronicleError(.notFound, "\(directory.path) has no snapshot yet (run `chronicle save`, `chronicle import` or `chronicle sync` first)")
        }
        let path = DeviceFolder.snapshotPath(store, in: folder)
        // Followed through a link, as the store itself opens it (see
        // ``Snapshot/requireRegularFiles(_:)``): a reader and a writer of
        // one folder agree on what is there.
        var st = stat()
        guard stat(path, &st) == 0 else {
            throw ChronicleError(.notFound, "\(directory.path) has no snapshot of store \(store) (run `chronicle sync` first)")
        }
        try Snapshot.requireRegularFiles(path)
        return path
    }

    /// Where the snapshot of one of the stores of the manager's folder
    /// `directory` is, and whose it is, for a reader while that store is not
    /// loaded (nil if the store has none yet).
    package static func snapshotLocation(of kind: Kind, in directory: URL) throws -> (path: String, store: StoreID, device: DeviceID)? {
        let folder = deviceFolder(of: kind, in: directory)
        guard let identity = try DeviceFolder.readIdentity(in: folder), let store = identity.store else { return nil }
        let path = DeviceFolder.snapshotPath(store, in: folder)
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        return (path, store, identity.device)
    }

    /// The device ID the cloud store of the manager's folder `directory`
    /// writes under (nil before it was first opened).
    package static func cloudDeviceID(in directory: URL) throws -> DeviceID? {
        try DeviceFolder.readIdentity(in: deviceFolder(of: .cloud, in: directory))?.device
    }

    /// `manager.json` of the manager's folder `directory`, or nil if there is none yet.
    static func readState(in directory: URL) throws -> State? {
        let path = directory.appendingPathComponent(stateFile).path
        guard let bytes = try DeviceFolder.readSmallFile(path, limit: stateFileLimit, holding: "the store manager's state") else { return nil }
        do {
            return try JSONDecoder().decode(State.self, from: Data(bytes))
        } catch {
            throw ChronicleError(.invalidValue, "\(path) is not a store manager's state file: restore it from a backup, or remove it (the manager then starts with the default cloud setting; the device's stores and their saves stay as they are)", underlying: error)
        }
    }

    /// The device folder of one of the stores of the manager's folder `directory`.
    /// Whether `directory` is a device folder a store manager (or a store)
    /// has used: it holds `manager.json` or `device.json`.
    package static func hasBeenUsed(_ directory: URL) -> Bool {
        FileManager.default.fileExists(atPath: directory.appendingPathComponent(stateFile).path)
            || FileManager.default.fileExists(atPath: directory.appendingPathComponent(DeviceFolder.identityFile).path)
    }

    static func deviceFolder(of kind: Kind, in directory: URL) -> URL {
        kind == .cloud ? directory : directory.appendingPathComponent(kind.rawValue).appendingPathComponent("device")
    }

    /// Whether this device uses the cloud store (persisted).
    public var cloudEnabled: Bool { state.cloudEnabled }

    /// Which store is loaded, or nil while none is.
    public var loadedKind: Kind? { loaded?.kind }

    /// Why the last load failed, while nothing is loaded because of it
    /// (nil once a load succeeds).
    public internal(set) var loadError: ChronicleError?

    /// The loaded store.
    ///
    /// - Throws: ``ChronicleError/Code/storeNotLoaded`` while none is.
    public var store: Store {
        get throws {
            try checkOpen()
            guard let loaded else {
                if let loadError {
                    throw ChronicleError(.storeNotLoaded, "no store is loaded: the last load failed (\(loadError.code): \(loadError.message))", underlying: loadError)
                }
                throw ChronicleError(.storeNotLoaded, "no store is loaded (a switch is under way, or the manager is closed)")
            }
            return loaded.store
        }
    }

    /// Sets the app's hooks (held weakly; nil removes them).
    public func setDelegate(_ delegate: (any StoreManagerDelegate)?) {
        self.delegate = delegate
    }

    /// Where this device's data stands: the loaded store, its first sync,
    /// saves waiting to upload, logs it waits for, the last error.
    public func syncStatus() throws -> SyncStatus {
        try checkOpen()
        var status = SyncStatus(kind: loaded?.kind, storeID: loaded?.store.storeID, firstSyncComplete: firstSyncComplete,
                                pendingUploads: 0, waitingForLogs: lastReport?.imported.gaps.count ?? 0,
                                lastStatus: lastReport?.status, lastError: lastError, lastCloudDeletion: state.lastDeletion)
        // The local and fallback stores upload nothing.
        if let loaded, loaded.kind == .cloud {
            status.pendingUploads = try loaded.store.snapshot.pendingUploadCount()
        } else if loaded != nil {
            do {
                status.cloudCopyPendingUploads = try cloudCopyPendingUploads()
            } catch {
                // The status still answers; the copy is looked at again at the next load.
                configuration.store.log.warning("cannot count the saves waiting in the copy of the cloud store", metadata: ["chronicle.error": "\(error)"])
            }
        }
        return status
    }

    /// The saves not yet uploaded in this device's copy of the cloud store,
    /// read from its file while another store is loaded (nil if there is
    /// no copy).
    private func cloudCopyPendingUploads() throws -> Int? {
        guard let location = try Self.snapshotLocation(of: .cloud, in: configuration.store.directory) else { return nil }
        try Snapshot.requireRegularFiles(location.path)
        do {
            var readOnly = GRDB.Configuration()
            readOnly.readonly = true
            let queue = try DatabaseQueue(path: location.path, configuration: readOnly)
            defer { try? queue.close() }
            return try queue.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM _chronicle_outbox WHERE uploaded = 0") ?? 0 }
        } catch {
            throw ChronicleError.sqlite(error, .database, "reading the copy of the cloud store at \(location.path) failed")
        }
    }

    /// Returns once a ``sync()`` of the loaded store has completed with
    /// everything visible imported and every save uploaded: at once with the
    /// local or fallback store loaded, or if that sync already happened.
    /// It does not sync by itself; automatic or app-driven syncs do.
    ///
    /// - Throws: ``ChronicleError/Code/storeNotLoaded`` if the store is
    ///   unloaded (a switch, a failure, ``close()``) before that sync;
    ///   `CancellationError` if the task is cancelled.
    public func waitForFirstSync() async throws {
        try checkOpen()
        guard loaded != nil else { throw ChronicleError(.storeNotLoaded, "no store is loaded") }
        if firstSyncComplete { return }
        try Task.checkCancellation()
        try await withCheckedThrowingContinuation { firstSyncWaiters.append($0) }
    }

    /// Wakes the first-sync waiters, with `error` if the store went away.
    private func settleFirstSync(_ error: ChronicleError?) {
        let waiters = firstSyncWaiters
        firstSyncWaiters = []
        for waiter in waiters {
            if let error { waiter.resume(throwing: error) } else { waiter.resume() }
        }
    }

    /// Lifecycle events from now on. Each call returns an independent stream.
    ///
    /// The first stream asked for also begins with what happened before it
    /// was: the load that ``open(_:)`` did (a merge it finished, a fallback
    /// store, a deleted or rebuilt store it found), so an app that
    /// subscribes right after opening misses nothing.
    ///
    /// ```swift
    /// let manager = try await StoreManager.open(configuration)
    /// for await event in manager.events() {   // starts with willLoad, didLoad, …
    ///     print(event)
    /// }
    /// ```
    public nonisolated func events() -> AsyncStream<Event> {
        continuations.subscribe()
    }

    /// Turns the cloud on or off for this device, and loads the other store.
    ///
    /// Turning it on with ``LocalDataPolicy/merge`` copies the local
    /// store's records into the cloud store (see ``LocalDataPolicy``). The
    /// choice is persisted before anything else happens, so a crash during
    /// the switch ends, at the next ``open(_:)``, in the store chosen, with
    /// the merge finished. Setting the current value reloads nothing.
    ///
    /// - Returns: what the local store brought into the cloud store (also
    ///   when it seeded the container's first store), or nil if nothing was
    ///   brought (turning the cloud off, ``LocalDataPolicy/useCloud``).
    /// - Throws: whatever loading the chosen store throws (the manager is
    ///   then left with nothing loaded; ``reload()`` tries again).
    @discardableResult
    public func setCloudEnabled(_ enabled: Bool, localData: LocalDataPolicy = .merge) async throws -> MergeReport? {
        try checkOpen()
        guard enabled != state.cloudEnabled || loaded == nil else { return nil }
        var next = state
        next.cloudEnabled = enabled
        next.mergePending = enabled && localData == .merge
        next.overwritePending = enabled && localData == .overwriteCloudWithLocal ? true : nil
        if !enabled, var record = next.health, record.candidacy != nil {
            // A device that leaves the cloud store does not stand for its
            // elections. (One that only closes, an app or a command that
            // ends, still stands: it syncs again when it next runs.)
            await withdrawCandidacy(&record)
            next.health = record
        }
        try await unload()
        try Self.write(next, in: folder)
        state = next
        var report = try await load()
        if enabled, !state.cloudEnabled {
            // The store this device last used was deleted on purpose, and
            // the device fell back to its local store (carrying its unsaved
            // changes there); the cloud was asked for: join or start the
            // container's store now.
            state.cloudEnabled = true
            state.mergePending = localData == .merge
            state.overwritePending = localData == .overwriteCloudWithLocal ? true : nil
            try await unload()
            try Self.write(state, in: folder)
            report = try await load()
        }
        try await finishOverwrite()
        return report
    }

    /// Replaces the cloud content with the local store's, if the cloud was
    /// turned on with ``LocalDataPolicy/overwriteCloudWithLocal`` and that
    /// has not happened yet: a rebuild from the local store (see
    /// ``rebuildCloudStore(from:)``), so the previous cloud store stays in the
    /// container as the new one's predecessor.
    private func finishOverwrite() async throws {
        guard state.overwritePending == true, loaded?.kind == .cloud else { return }
        try await rebuildCloudStore(from: .local)
        state.overwritePending = nil
        try Self.write(state, in: folder)
    }

    /// Closes the loaded store and loads the chosen one again (after a
    /// failed load, for instance).
    @discardableResult
    public func reload() async throws -> MergeReport? {
        try checkOpen()
        try await unload()
        return try await load()
    }

    /// Closes the loaded store, ends the event streams and lets go of the
    /// folder. The manager cannot be used afterwards.
    public func close() async throws {
        guard !isClosed else { return }
        isClosed = true
        defer {
            continuations.finish()
            folder.release()
        }
        try await unload()
    }

    // MARK: Loading

    /// Loads what `state` names; on failure, publishes it and leaves nothing loaded.
    private func loadChosen() async {
        _ = try? await load()
    }

    func load() async throws -> MergeReport? {
        do {
            return try await loadChecking()
        } catch let error as ChronicleError where error.code.isTransient {
            // Only on the account this device's files are for: a load that
            // was switching accounts (the app names another one) has not
            // switched, and the store it has a copy of is the other account's.
            guard configuration.accountToken.map({ $0 == state.account }) ?? true else { throw error }
            if try await loadOffline(after: error) { return nil }
            // No copy of a store to work on: the fallback store, as when
            // the container is down from the start.
            guard error.code == .unavailable, state.cloudEnabled, state.leaving == nil, loaded == nil, try lastStore() == nil,
                  state.health?.status != .corrupted else { throw error }
            try await loadFallback(after: error)
            loadError = nil
            return nil
        }
    }

    /// Nothing to work on until the container answers: works on the
    /// fallback store (merged into the cloud store once it answers).
    private func loadFallback(after error: ChronicleError) async throws {
        let fallback = try await Store.open(configuration(for: .fallback))
        loaded = (.fallback, fallback)
        continuations.publish(.usingFallbackStore(error))
        didLoad(.fallback, fallback)
        await delegate?.storeManager(self, didLoad: fallback, kind: .fallback)
    }

    /// After the container stopped answering part-way through a load (a
    /// server that went down between two of its reads): a device with its
    /// copy of the store it last used opens that, as it does when the
    /// container is down from the start, and its next sync does the checks
    /// the load could not finish. Returns false (the load failed) when it
    /// has no such copy, was in the middle of leaving that store, or has
    /// local data to bring into the cloud store first.
    private func loadOffline(after error: ChronicleError) async throws -> Bool {
        // Not while local data waits to be merged in, or to replace the
        // cloud's: that load must finish (a reload, once the container answers).
        guard state.cloudEnabled, state.leaving == nil, loaded == nil, !state.mergePending, state.overwritePending != true,
              let last = try lastStore(), !(state.health?.status == .corrupted && state.health?.marked?.store == last) else { return false }
        let store: Store
        do {
            store = try await Store.open(configuration(for: .cloud), exactly: last)
        } catch {
            return false
        }
        configuration.store.log.notice("the container stopped answering while the store loaded; working on this device's copy until it answers",
                                       metadata: ["chronicle.store": "\(last)", "chronicle.error": "\(error)"])
        loaded = (.cloud, store)
        didLoad(.cloud, store)
        await delegate?.storeManager(self, didLoad: store, kind: .cloud)
        return true
    }

    private func loadChecking() async throws -> MergeReport? {
        let kind: Kind = state.cloudEnabled ? .cloud : .local
        continuations.publish(.willLoad(kind))
        await delegate?.storeManager(self, willLoad: kind)
        do {
            if kind == .cloud {
                // Read by nearly every step below: an unreadable one is repaired first.
                do {
                    try await Store.repairUnreadablePointer(in: configuration.store.container, known: try lastStore(), log: configuration.store.log)
                } catch let error as ChronicleError where error.code.isTransient {
                    // Offline: the store's own open decides what to do.
                }
            }
            if kind == .cloud, let token = try await accountToken(), let previous = state.account, previous != token {
                try await switchAccount(from: previous, to: token)
            } else if kind == .cloud, state.account == nil, let token = try await accountToken() {
                // A fallback store made before any account was known (a
                // first launch without the container) is this account's.
                let unknown = fallbackFolder
                state.account = token
                if FileManager.default.fileExists(atPath: unknown.path), !FileManager.default.fileExists(atPath: fallbackFolder.path) {
                    do {
                        try FileManager.default.moveItem(at: unknown, to: fallbackFolder)
                    } catch {
                        throw ChronicleError.file("cannot move the fallback store at \(unknown.path) to \(fallbackFolder.path)", error)
                    }
                }
                try Self.write(state, in: folder)
            }
            if kind == .cloud, let deleted = try await lastStoreDeletedOnPurpose() {
                if let leaving = state.leaving, leaving != deleted.store,
                   FileManager.default.fileExists(atPath: DeviceFolder.snapshotPath(leaving, in: configuration.store.directory)) {
                    // It was moving to that store and had not finished (the
                    // store's baseline was not imported yet): its saves are
                    // still in the store it was leaving, and go from there.
                    try await leaveDeletedStore(leaving, by: deleted.tombstone, open: nil)
                    DeviceFolder.removeSnapshotFiles(DeviceFolder.snapshotPath(deleted.store, in: configuration.store.directory))
                } else {
                    // The store this device used was deleted while it was away.
                    try await leaveDeletedStore(deleted.store, by: deleted.tombstone, open: nil)
                }
                return nil
            }
            let store: Store
            let last = kind == .cloud && state.leaving == nil ? try lastStore() : nil
            var staying: StoreID?
            if let last {
                do {
                    try await restoreLineage(of: last)
                } catch let error as ChronicleError where error.code.isTransient {
                    // Offline: the store's own open decides what to do.
                }
            }
            if let last, try await marker(ContainerLayout.supersession(store: last), as: StoreSupersession.self) != nil {
                // Rebuilt while this device was away.
                state.leaving = last
                try Self.write(state, in: folder)
            } else if let last, let active = try await marker(ContainerLayout.activeStore, as: ActiveStorePointer.self)?.store, active != last {
                if try await replaced(last, by: active) {
                    // Another store became the active one while this device was away.
                    state.leaving = last
                    try Self.write(state, in: folder)
                } else {
                    // The pointer names a store this one did not go to (one
                    // still being seeded, one deleted, or one this store
                    // outranks, the pointer read before it settled): this
                    // device stays on its store, which holds its saves,
                    // until the pointer leads somewhere it can carry them.
                    staying = last
                }
            }
            if kind == .cloud, let leaving = state.leaving,
               let deleted = try await deletedSuccessor(of: leaving) {
                // Rebuilt, and the store it became was then deleted on purpose.
                try await leaveDeletedStore(leaving, by: deleted, open: nil)
                return nil
            }
            if kind == .cloud, state.leaving == nil, let marked = state.health?.marked, state.health?.status == .corrupted,
               let last = try lastStore(), last == marked.store {
                // This device marked the store corrupted: it waits for the rebuild.
                throw corruptionError(marked)
            }
            if kind == .cloud, let leaving = state.leaving {
                store = try await move(from: leaving)
            } else if kind == .cloud {
                do {
                    var seeded = false
                    seedReport = nil
                    if try lastStore() == nil {
                        // A pointer naming a store this device left because it
                        // was deleted (the container lost the tombstone): the
                        // deletion is written again, and the store not joined.
                        if let remembered = state.deletedStores, !remembered.isEmpty {
                            // Joining looks at the pointer, or at the stores
                            // the container holds when it has none.
                            var named = Set(try await configuration.store.container.listChildren(prefix: ContainerLayout.storesPrefix)
                                .compactMap(StoreID.init(string:)))
                            if let pointer = try await marker(ContainerLayout.activeStore, as: ActiveStorePointer.self)?.store { named.insert(pointer) }
                            for deleted in remembered where named.contains(deleted.store) {
                                _ = try await reassertDeletion(of: deleted.store)
                            }
                        }
                    }
                    let bringsLocal = state.mergePending || state.overwritePending == true
                    // A device with a copy of a store puts that store back
                    // (see Store.open) rather than starting another.
                    if bringsLocal || configuration.seedData != nil, try lastStore() == nil,
                       try await configuration.store.container.readMarker(ContainerLayout.activeStore) == nil,
                       try await createFirstStore(bringingLocalData: bringsLocal) {
                        // The local records are in it already.
                        state.mergePending = false
                        state.overwritePending = nil
                        try Self.write(state, in: folder)
                        seeded = true
                    }
                    do {
                        store = try await Store.open(configuration(for: .cloud), exactly: staying)
                    } catch let error as ChronicleError where error.code == .markerConflict {
                        // Deleted on purpose since this load looked: leave it.
                        guard let deleted = try await lastStoreDeletedOnPurpose() else { throw error }
                        try await leaveDeletedStore(deleted.store, by: deleted.tombstone, open: nil)
                        return nil
                    }
                    try await keepSeedLogs(store)
                    if seeded {
                        // Show the app its records at once.
                        do {
                            _ = try await store.sync()
                        } catch {
                            configuration.store.log.warning("the new store was seeded but could not be imported yet", metadata: ["chronicle.error": "\(error)"])
                        }
                    }
                } catch let error as ChronicleError where error.code == .unavailable && !hasSnapshot() {
                    try await loadFallback(after: error)
                    return nil
                }
            } else {
                store = try await Store.open(configuration(for: kind))
            }
            loaded = (kind, store)
            var report: MergeReport? = kind == .cloud ? seedReport : nil
            seedReport = nil
            if let report { continuations.publish(.mergedLocalData(report)) }
            if kind == .cloud, FileManager.default.fileExists(atPath: fallbackFolder.path) {
                // Saves made while the container could not be reached join the cloud store.
                let merged = try await merge(.fallback, into: store)
                do {
                    try FileManager.default.removeItem(at: fallbackFolder)
                } catch {
                    throw ChronicleError.file("cannot remove the fallback store at \(fallbackFolder.path)", error)
                }
                // The folder of fallback stores goes with its last one.
                let parent = fallbackFolder.deletingLastPathComponent()
                if (try? FileManager.default.contentsOfDirectory(atPath: parent.path))?.isEmpty == true {
                    try? FileManager.default.removeItem(at: parent)
                }
                continuations.publish(.mergedFallbackStore(merged))
            }
            if kind == .cloud, state.mergePending {
                report = try await merge(.local, into: store)
                state.mergePending = false
                try Self.write(state, in: folder)
                continuations.publish(.mergedLocalData(report!))
            }
            if kind == .cloud, state.lastDeletion != nil {
                // The cloud store is back: the deletion is history.
                state.lastDeletion = nil
                try Self.write(state, in: folder)
            }
            didLoad(kind, store)
            await delegate?.storeManager(self, didLoad: store, kind: kind)
            return report
        } catch {
            let failure = (error as? ChronicleError)
                ?? ChronicleError(.io, "cannot load the \(kind.rawValue) store: \(error)", underlying: error)
            if let open = loaded?.store {
                try? await open.close()
            }
            loaded = nil
            loadError = failure
            continuations.publish(.failedLoading(kind, failure))
            await delegate?.storeManager(self, failedLoading: kind, error: failure)
            throw failure
        }
    }

    // MARK: Cloud content

    /// Syncs the loaded cloud store (see ``Store/sync(progress:)``, which
    /// `progress` is passed to), then
    /// checks that it was not deleted on purpose by another device (see
    /// ``checkCloudContent()``). With the local store loaded there is
    /// nothing to sync: returns nil.
    ///
    /// - Throws: ``ChronicleError/Code/storeNotLoaded`` while no store is
    ///   loaded, and what the sync throws.
    @discardableResult
    public func sync(progress: (@Sendable (SyncProgress) -> Void)? = nil) async throws -> Store.SyncReport? {
        try checkOpen()
        do {
            return try await syncLoaded(progress: progress)
        } catch where Store.isCorruption(error) && loaded?.kind == .cloud {
            // This device's copy of the store is damaged: it is kept aside,
            // and the store loaded again from the container, with the saves
            // not uploaded yet that could be read back.
            configuration.store.log.error("the snapshot of the cloud store is damaged; loading the store again from the container",
                                          metadata: ["chronicle.error": "\(error)"])
            continuations.publish(.rebuildingLocalCopy(loaded!.store.storeID, reason: "the snapshot is damaged: \(error)"))
            try await unload()
            snapshotDamaged = true
            defer { snapshotDamaged = false }
            _ = try await load()
            return try await syncLoaded(progress: progress)
        } catch {
            let failure = (error as? ChronicleError) ?? ChronicleError(.io, "sync failed: \(error)", underlying: error)
            if failure.code != .storeNotLoaded { lastError = failure }
            await delegate?.storeManager(self, didEncounter: failure, context: "syncing the cloud store")
            throw failure
        }
    }

    private func syncLoaded(progress: (@Sendable (SyncProgress) -> Void)?) async throws -> Store.SyncReport? {
        if loaded?.kind == .fallback {
            // Is the container back?
            try await unload()
            _ = try await load()
        }
        if loaded == nil, state.cloudEnabled, state.health?.status == .corrupted {
            // Rebuilt yet? Then this loads the new store, else it throws.
            try await followRebuild()
        } else if loaded == nil, state.cloudEnabled, let failed = loadError, failed.code == .unavailable {
            // The last load waited for something still on its way (the
            // baseline of the store this device moves to, the container):
            // it is tried again, as the next load would.
            _ = try await load()
        }
        guard loaded?.kind == .cloud else {
            _ = try store
            return nil
        }
        if try await checkCloudContent(), loaded?.kind != .cloud { return nil }
        let cloud = try store
        // If the store is deleted while this sync uploads, what it uploads
        // is carried to the local store too.
        let from = try cloud.snapshot.firstPendingUploadSequence()
        var report = try await cloud.sync(progress: progress)
        if let waiting = waitingToJoin, waiting.store != cloud.storeID {
            // The move to the store that replaced this one waits for an app upgrade.
            report.imported.failures.append(.init(name: waiting.baseline, device: cloud.deviceID, error: ChronicleError(
                .schemaMismatch, "store \(waiting.store), which replaced this device's store, starts from a baseline of a schema this app version does not know (a later version rebuilt it): this device stays on its store, and moves there with its saves once its app upgrades")))
        }
        if loaded?.store === cloud {
            lastReport = report
            lastError = nil
            if report.status == .upToDate, !firstSyncComplete {
                firstSyncComplete = true
                settleFirstSync(nil)
            }
        }
        if report.imported.appliedTransactions > 0 { await delegate?.storeManager(self, didImport: report) }
        if try await !checkCloudContent(carryingFrom: from), loaded?.store === cloud {
            try await assessHealth(after: report, of: cloud)
        }
        return report
    }

    /// Whether the loaded cloud store is still the container's: if another
    /// device deleted it on purpose (``deleteCloudStore(localOnly:)``, which
    /// leaves a tombstone), this device falls back to its local store,
    /// carrying into it every save of this device the container never got,
    /// turns the cloud off and publishes ``Event/cloudStoreDeleted(_:by:carried:)``.
    ///
    /// Content that merely vanished (no tombstone: a sync service or a user
    /// removed files) is not a deletion: the device keeps the store, and its
    /// syncs put back its own logs (see ``Store/sync(progress:)``).
    ///
    /// The same check also moves the device to the store that replaced its
    /// store (``rebuildCloudStore(from:)``), and to the new account's store
    /// when the account changed (``Configuration/accountToken``).
    ///
    /// - Returns: true if the loaded store changed.
    @discardableResult
    public func checkCloudContent() async throws -> Bool {
        try checkOpen()
        return try await checkCloudContent(carryingFrom: nil)
    }

    @discardableResult
    private func checkCloudContent(carryingFrom from: UInt64?) async throws -> Bool {
        guard let current = loaded, current.kind == .cloud else { return false }
        let storeID = current.store.storeID
        let container = configuration.store.container
        if let token = try await accountToken(), let previous = state.account, previous != token {
            try await unload()
            try await switchAccount(from: previous, to: token)
            _ = try await load()
            return true
        }
        if let tombstone = try await container.readMarker(ContainerLayout.tombstone(store: storeID), as: StoreTombstone.self) {
            try await leaveDeletedStore(storeID, by: tombstone.payload, open: current.store, carryingFrom: from)
            return true
        }
        try await restoreLineage(of: storeID)
        try await finishInterruptedRebuild(of: storeID)
        let pointer = try await container.readMarker(ContainerLayout.activeStore, as: ActiveStorePointer.self)
        if let pointer {
            guard pointer.payload.store != storeID, try await replaced(storeID, by: pointer.payload.store) else { return false }
            // A store this app version cannot start: stay (see ``move(from:)``).
            if let baseline = await baselineNeedingUpgrade(in: pointer.payload.store) {
                waitingToJoin = (pointer.payload.store, baseline)
                return false
            }
        } else {
            // No pointer: the store that replaced this one may have been
            // deleted since (its deletion removed the pointer). Leaving
            // finds out, and carries what that store never got.
            guard try await container.readMarker(ContainerLayout.supersession(store: storeID)) != nil else {
                // Neither deleted nor replaced: the container lost the
                // pointer (its files were lost, or the deletion of another
                // store that had taken it removed it). It goes back to this
                // store, as a device opening it would put it back; where
                // another active store's device puts back its own first,
                // the next check ranks the two (see ``replaced(_:by:)``).
                // Without it, a device turning the cloud on beside two
                // such stores could join neither.
                do {
                    _ = try await container.createMarker(ContainerLayout.activeStore, ActiveStorePointer(store: storeID))
                    configuration.store.log.notice("the container lost the active-store pointer; put it back naming this store",
                                                   metadata: ["chronicle.store": "\(storeID)"])
                } catch let error as ChronicleError where error.code == .markerConflict {
                    // Another device put one back first.
                }
                return false
            }
        }
        // Rebuilt as another store, or merged into the active one: move to it.
        state.leaving = storeID
        try Self.write(state, in: folder)
        try await unload()
        _ = try await load()
        return true
    }

    /// Whether `store`, which is not the store the active-store pointer
    /// names (`pointer`), was replaced by another: rebuilt (its supersession
    /// marker), or else merged into the active store (`pointer`, or the
    /// store its rebuilds led to). A store that is not the active one and was neither rebuilt
    /// nor deleted lost the active-store pointer to another store (one
    /// created while its pointer was missing after the container lost
    /// files, or beside it where exclusive create is not reliable): the
    /// pointer decides, and this device writes the supersession marker that
    /// sends every device of `store` there, carrying its saves.
    /// False if the active store is not a store to join (deleted, rebuilt itself, or
    /// still being seeded).
    func replaced(_ store: StoreID, by pointer: StoreID) async throws -> Bool {
        let container = configuration.store.container
        if try await reassertDeletion(of: pointer) { return false }
        if try await container.readMarker(ContainerLayout.supersession(store: store), as: StoreSupersession.self) != nil { return true }
        if try await container.readMarker(ContainerLayout.tombstone(store: store)) != nil { return false }
        // A pointer read before its last move (a sync service delivers
        // markers late) can name a store rebuilt since: the store that
        // stands for it is the end of its chain of rebuilds.
        let active = try await successors(of: pointer).prefix { $0 != store }.last ?? pointer
        guard try await !Store.isWithdrawnOrTentative(active, in: container) else {
            // The pointer names the store this one replaced (put back by a
            // device still on it after the container lost files): it goes
            // to this store.
            if try await container.readMarker(ContainerLayout.supersession(store: active), as: StoreSupersession.self)?.payload.store == store {
                try await movePointer(from: active, to: store)
            }
            return false
        }
        if try await outranks(store, active) {
            // This store wins: the pointer goes back to it, and the other
            // store's devices merge into it when they see the pointer.
            var moved = try await movePointer(from: pointer, to: store)
            if !moved, active != pointer { moved = try await movePointer(from: active, to: store) }
            if moved {
                configuration.store.log.notice("two stores were active; the pointer goes back to this one, which the other merges into",
                                               metadata: ["chronicle.store": "\(store)", "chronicle.other": "\(active)"])
            }
            return false
        }
        let merged = StoreSupersession(store: active, device: try DeviceFolder.readIdentity(in: configuration.store.directory)?.device ?? DeviceID(index: 0),
                                       milliseconds: configuration.store.clock.nowMilliseconds(), vector: [:])
        do {
            _ = try await container.createMarker(ContainerLayout.supersession(store: store), merged)
            configuration.store.log.notice("the store lost the active-store pointer to another; merging into it",
                                           metadata: ["chronicle.store": "\(store)", "chronicle.active": "\(active)"])
        } catch let error as ChronicleError where error.code == .markerConflict {
            // Another device of the store wrote it first: follow theirs.
        }
        return true
    }

    /// Points the active-store pointer at `store` if it names `active`
    /// (compare-and-swap: a pointer moved meanwhile is left to the next
    /// check). Returns whether it moved.
    @discardableResult
    func movePointer(from active: StoreID, to store: StoreID) async throws -> Bool {
        let container = configuration.store.container
        guard let pointer = try await container.readMarker(ContainerLayout.activeStore, as: ActiveStorePointer.self),
              pointer.payload.store == active else { return false }
        do {
            _ = try await container.replaceMarker(ContainerLayout.activeStore, ActiveStorePointer(store: store), expected: pointer.version)
            return true
        } catch let error as ChronicleError where error.code == .markerConflict {
            return false
        }
    }

    /// If `store` is one this device left because it was deleted on
    /// purpose, and the container lost its tombstone (a device that was
    /// away put it back after the container lost its files), writes the
    /// tombstone again, as it was, and removes a pointer naming the store:
    /// a deleted store never comes back. Returns whether it was such a store.
    private func reassertDeletion(of store: StoreID) async throws -> Bool {
        guard let deleted = state.deletedStores?.first(where: { $0.store == store }) else { return false }
        let container = configuration.store.container
        // A store left because the store it was rebuilt as was deleted: the
        // container still tells that while the chain and its tombstone are
        // there, and a tombstone of its own would hide where its devices'
        // saves went.
        if try await container.readMarker(ContainerLayout.tombstone(store: store)) == nil,
           try await deletedSuccessor(of: store) != nil {
            return true
        }
        do {
            _ = try await container.createMarker(ContainerLayout.tombstone(store: store), deleted.tombstone)
            configuration.store.log.notice("a store deleted on purpose came back without its tombstone; wrote it again",
                                           metadata: ["chronicle.store": "\(store)"])
        } catch let error as ChronicleError where error.code == .markerConflict {
            // The tombstone is there.
        }
        if let pointer = try await container.readMarker(ContainerLayout.activeStore, as: ActiveStorePointer.self), pointer.payload.store == store {
            do {
                try await container.deleteMarker(ContainerLayout.activeStore, expected: pointer.version)
            } catch let error as ChronicleError where error.code == .markerConflict || error.code == .notFound {
                // Moved meanwhile.
            }
        }
        return true
    }

    /// Which of two active stores the other merges into: a store rebuilt
    /// from a baseline (its `origin` marker) first, since merging carries
    /// saves and such a store's past is in its baseline, not in saves; then
    /// the one created first (store IDs are time-ordered). Every device
    /// ranks the same two stores alike, so merges never go both ways.
    private func outranks(_ store: StoreID, _ other: StoreID) async throws -> Bool {
        let container = configuration.store.container
        let mine = try await container.readMarker(ContainerLayout.origin(store: store)) != nil
        let theirs = try await container.readMarker(ContainerLayout.origin(store: other)) != nil
        if mine != theirs { return mine }
        return store < other
    }

    /// The store `device.json` last named, if this device still has its snapshot.
    private func lastStore() throws -> StoreID? {
        let directory = configuration.store.directory
        guard let store = try DeviceFolder.readIdentity(in: directory)?.store,
              FileManager.default.fileExists(atPath: DeviceFolder.snapshotPath(store, in: directory))
        else { return nil }
        return store
    }

    /// The marker `name` of the container, or nil if there is none or the
    /// container cannot be reached (the store's own open decides what to do offline).
    func marker<P: MarkerPayload>(_ name: ContainerName, as type: P.Type) async throws -> P? {
        do {
            return try await configuration.store.container.readMarker(name, as: type)?.payload
        } catch let error as ChronicleError where error.code.isTransient {
            return nil
        }
    }

    /// The store `device.json` last named, if a tombstone says it was deleted.
    private func lastStoreDeletedOnPurpose() async throws -> (store: StoreID, tombstone: StoreTombstone)? {
        guard let store = try lastStore(), let tombstone = try await marker(ContainerLayout.tombstone(store: store), as: StoreTombstone.self)
        else { return nil }
        return (store, tombstone)
    }

    /// Falls back from a cloud store deleted on purpose to the local store:
    /// carries this device's saves the container never got into the local
    /// store, turns the cloud off, removes the store's snapshot, loads the
    /// local store. Every step can be repeated, so a crash anywhere is
    /// finished by the next load.
    private func leaveDeletedStore(_ storeID: StoreID, by tombstone: StoreTombstone, open: Store?, carryingFrom from: UInt64? = nil,
                                   alsoCarrying unsynced: Set<HybridTimestamp> = []) async throws {
        let device = tombstone.device
        let cloud: Store
        if let open { cloud = open } else { cloud = try await Store.open(configuration(for: .cloud), exactly: storeID) }
        var carried = MergeReport()
        do {
            // What the container lost of this device's uploaded saves goes
            // back first: the deleted store's logs stay as what it held.
            // Those saves go to the local store too: a log missing now may
            // never have arrived (a sync service reported it stored and
            // dropped it), and then the store did not hold them when it was
            // deleted.
            // With those put back since the deletion by an earlier attempt
            // that a crash interrupted: the container holds them now.
            let repaired = (try? await cloud.repairOwnLogs()) ?? []
            let putBack = Set(repaired + (try cloud.snapshot.logsPutBack(since: tombstone.milliseconds)))
            var lostSaves: [Transaction] = []
            if !putBack.isEmpty {
                let inherited = try cloud.snapshot.inheritedSaves()
                for name in putBack {
                    guard let log = ContainerLayout.parseLog(name) else { continue }
                    if log.device == cloud.deviceID {
                        lostSaves += try cloud.snapshot.ownTransactions(within: log.first, log.last)
                    } else {
                        lostSaves += inherited.filter { $0.deviceID == log.device && (log.first...log.last).contains($0.sequence) }
                    }
                }
            }
            // Left for a store that replaced it and was then deleted: the
            // saves that store never got (beyond its vector) were deleted
            // by no one, and go too.
            var from = from
            if from == nil,
               let replaced = try await configuration.store.container.readMarker(ContainerLayout.supersession(store: storeID), as: StoreSupersession.self)?.payload {
                from = (replaced.vector[cloud.deviceID] ?? 0) + 1
            }
            // Saves made after the deletion go too, even if something
            // uploaded them since (a baseline, a maintenance operation):
            // nobody chose to delete them.
            // And saves whose log the container holds damaged even after
            // the repair (a sync service that keeps damaging it): the
            // deleted store never held them either.
            // And saves uploaded after the deletion: a device that did not
            // see the tombstone (a sync service lost it for a while, and a
            // device that remembers the deletion wrote it again later) put
            // them into a store already deleted, which never held them.
            let pending = try cloud.snapshot.pendingUploadTransactions(alsoFrom: from)
                + cloud.snapshot.ownTransactions(since: HybridTimestamp(milliseconds: tombstone.milliseconds, counter: 0))
                + cloud.snapshot.ownTransactions(uploadedSince: tombstone.milliseconds)
                + (try await cloud.savesNotInContainer())
                + lostSaves
                + (unsynced.isEmpty ? [] : try cloud.snapshot.ownTransactions(since: unsynced.min()!).filter { unsynced.contains($0.clock) })
            let ids = Set(pending.flatMap { $0.changes.map(\.recordID) })
            if !ids.isEmpty {
                try await configuration.beforeCarrying?(cloud)
                let local = try await Store.open(configuration(for: .local))
                do {
                    carried = try await RecordCopy(schema: configuration.store.schema, batchSize: configuration.mergeBatchSize,
                                                   existing: .overwrite, only: ids).run(from: cloud, into: local)
                    try await local.close()
                } catch {
                    try? await local.close()
                    throw error
                }
            }
        } catch {
            if open == nil { try? await cloud.close() }
            throw error
        }
        let remembered = ((state.deletedStores ?? []).filter { $0.store != storeID } + [DeletedStore(store: storeID, tombstone: tombstone)]).suffix(32)
        state = State(cloudEnabled: false, mergePending: false, leaving: nil, account: state.account, accountStores: state.accountStores,
                      mergesWaiting: state.mergesWaiting,
                      lastDeletion: CloudDeletion(store: storeID, by: device, milliseconds: configuration.store.clock.nowMilliseconds(),
                                                  carried: carried.copied + carried.deleted),
                      deletedStores: Array(remembered), lineages: state.lineages, keptDevices: state.keptDevices)
        try Self.write(state, in: folder)
        loaded = nil
        settleFirstSync(ChronicleError(.storeNotLoaded, "the cloud store \(storeID) was deleted before its first sync"))
        try await cloud.close()
        if open != nil { continuations.publish(.didUnload(.cloud)) }
        DeviceFolder.removeSnapshotFiles(DeviceFolder.snapshotPath(storeID, in: configuration.store.directory))
        continuations.publish(.cloudStoreDeleted(storeID, by: device, carried: carried))
        if await delegate?.storeManager(self, cloudStoreDeleted: storeID, by: device) == .recreateCloudStore {
            try await setCloudEnabled(true)
            return
        }
        _ = try await load()
    }

    // MARK: Accounts

    /// The account token now: the app's, or the container's (written here
    /// if the container has none); nil if the container cannot be reached.
    ///
    /// A marker that cannot be read (cut short, not JSON: written by hand,
    /// or by a tool) is written again with the token this device last saw
    /// there, so that the devices of the account keep recognising it; a
    /// device that never saw one leaves it for one that did (nil: no
    /// account change is seen until then), since a token of its own would
    /// look like another account to every other device.
    private func accountToken() async throws -> String? {
        if let token = configuration.accountToken { return token }
        let container = configuration.store.container
        do {
            let marker: Marker?
            do {
                marker = try await container.readMarker(ContainerLayout.account)
            } catch let error as ChronicleError where !error.code.isTransient && error.code != .foreignEntry {
                return try await rewriteAccountMarker(current: nil, because: error)
            }
            if let marker {
                if let token = try? AccountToken(markerBytes: marker.bytes).token { return token }
                return try await rewriteAccountMarker(current: marker, because: ChronicleError(.malformedBody, "the account marker is not valid"))
            }
            var random = SeededRandom(seed: configuration.store.seed ^ configuration.store.clock.nowMilliseconds() ^ 0x4143_434F_554E_5400)
            let token = (0..<2).map { _ in random.next().paddedHex }.joined()
            do {
                _ = try await container.createMarker(ContainerLayout.account, AccountToken(token: token))
                return token
            } catch let error as ChronicleError where error.code == .markerConflict {
                return try await container.readMarker(ContainerLayout.account, as: AccountToken.self)?.payload.token
            }
        } catch let error as ChronicleError where error.code.isTransient {
            return nil
        }
    }

    /// Writes the account marker again, with the token this device last saw
    /// (see ``accountToken()``); returns that token, or nil if this device
    /// never saw one.
    private func rewriteAccountMarker(current: Marker?, because error: ChronicleError) async throws -> String? {
        let container = configuration.store.container
        guard let known = state.account else {
            configuration.store.log.warning("the container's account marker cannot be read, and this device never saw the account's token; a device that did writes it again",
                                            metadata: ["chronicle.error": "\(error)"])
            return nil
        }
        do {
            if let current {
                _ = try await container.replaceMarker(ContainerLayout.account, AccountToken(token: known), expected: current.version)
            } else {
                try await container.deleteMarker(ContainerLayout.account, expected: nil)
                _ = try await container.createMarker(ContainerLayout.account, AccountToken(token: known))
            }
            configuration.store.log.notice("the container's account marker could not be read; wrote it again with the account this device knows",
                                           metadata: ["chronicle.error": "\(error)"])
        } catch let conflict as ChronicleError where conflict.code == .markerConflict || conflict.code == .notFound {
            // Another device wrote it again first: theirs is read next time.
        }
        return known
    }

    /// Forgets the previous account's store, so it is never put back into
    /// this account's container; the next load takes the new account's
    /// active store, or seeds a new one from the local store.
    private func switchAccount(from previous: String, to token: String) async throws {
        // Asked first: if the container cannot say, nothing has changed yet.
        let noStore = try await configuration.store.container.readMarker(ContainerLayout.activeStore) == nil
        let directory = configuration.store.directory
        let lock = try await DeviceFolder(directory, wait: configuration.store.lockWait)
        defer { lock.release() }
        var stores = state.accountStores ?? [:]
        if var identity = try lock.readIdentity() {
            // Remember the previous account's store (or the one this device
            // was leaving): when that account comes back, its store is found
            // again, with any saves not uploaded yet, and if it was deleted or
            // rebuilt meanwhile, the device leaves or moves from it as usual.
            if let store = state.leaving ?? identity.store { stores[previous] = store }
            var next = stores[token]
            if let store = next, !FileManager.default.fileExists(atPath: DeviceFolder.snapshotPath(store, in: directory)) { next = nil }
            if identity.store != next {
                identity.store = next
                try lock.writeIdentity(identity)
            }
        }
        lock.release()
        state.accountStores = stores
        state.account = token
        state.leaving = nil
        state.moveBase = nil
        // A merge asked for under the previous account waits for it (the
        // user turned the cloud on for that account's store); one asked for
        // under this account before it switched away is due again.
        var waiting = Set(state.mergesWaiting ?? [])
        if state.mergePending { waiting.insert(previous) }
        state.mergePending = noStore || waiting.remove(token) != nil
        state.mergesWaiting = waiting.isEmpty ? nil : waiting.sorted()
        try Self.write(state, in: folder)
        configuration.store.log.notice("the container belongs to another account now", metadata: ["chronicle.account": "\(token)"])
        continuations.publish(.accountChanged(from: previous, to: token))
    }

    // MARK: Rebuilding

    /// Rebuilds the cloud content under a new store ID, which every device
    /// then moves to, and returns the new ID.
    ///
    /// The new store is seeded from `source` (this device's copy of the
    /// cloud store, or its local store) by ordinary saves of a seeding
    /// device of its own, uploaded and covered by a baseline before anyone
    /// can see it. Then the old store's supersession marker names the new
    /// store and how far it covers each device's saves, and the active-store
    /// pointer moves to it (compare-and-swap: if another device replaced the
    /// pointer first, the new store is abandoned and this throws
    /// ``ChronicleError/Code/markerConflict``).
    ///
    /// Every device, this one included, moves at its next ``sync()`` or
    /// load: it carries into the new store its saves the new store does not
    /// cover, then removes its copy of the old store. No acknowledged save
    /// is lost: a save the rebuilding device had not imported is beyond the
    /// vector, so its own device carries it.
    ///
    /// - Throws: ``ChronicleError/Code/storeNotLoaded`` unless the cloud
    ///   store is loaded; ``ChronicleError/Code/unavailable`` (try again
    ///   after a sync) if the store started from a baseline (it was rebuilt
    ///   or seeded) that this device has not imported yet.
    @discardableResult
    public func rebuildCloudStore(from source: Kind = .cloud) async throws -> StoreID {
        try checkOpen()
        return try await rebuild(from: source, as: nil, reason: nil)
    }

    /// A new store ID, drawn from the configuration's seed and the clock.
    func drawStoreID() throws(ChronicleError) -> StoreID {
        let clock = configuration.store.clock
        try HybridTimestamp.checkPhysical(clock.nowMilliseconds(), doing: "making a store")
        var random = SeededRandom(seed: configuration.store.seed ^ clock.nowMilliseconds() ^ 0x5245_4255_494C_4400 ^ UInt64(rebuildDraws))
        rebuildDraws &+= 1
        var generator = RecordIDGenerator(seed: random.next())
        return StoreID(generator.next(milliseconds: clock.nowMilliseconds()))
    }

    /// ``rebuildCloudStore(from:)`` under the ID `chosen` (one drawn if
    /// nil), recording `reason` in the supersession marker.
    func rebuild(from source: Kind, as chosen: StoreID?, reason: String?) async throws -> StoreID {
        guard let current = loaded, current.kind == .cloud else {
            throw ChronicleError(.storeNotLoaded, "the cloud store is not loaded: turn the cloud on first")
        }
        let old = current.store
        let container = configuration.store.container
        let clock = configuration.store.clock
        // Everything the container holds first: the vector below says what
        // the replaced store held. From the local store, this device's saves
        // not uploaded yet stay so, and its move carries them like every
        // other device's: uploaded now, they would be inside the replaced
        // store's vector, where no device carries them.
        var held: [ImportReport.Failure] = []
        do {
            held = source == .cloud ? try await old.sync().imported.held : try await old.importLogs().held
        } catch {
            configuration.store.log.warning("rebuilding from what this device has: the store could not be synced", metadata: ["chronicle.error": "\(error)"])
        }
        // A copy without the logs it holds (another app version's) would
        // rebuild the store without their saves: their writer's, lost for
        // every device if it does not come back.
        let heldLog = held.first?.name ?? (state.health?.store == old.storeID ? state.health?.held.first : nil)
        if source == .cloud, let heldLog {
            throw ChronicleError(.schemaMismatch, "this device holds logs it cannot read (\(heldLog), written for a schema version this app does not know): rebuilt from its copy, the store would lose their saves. Rebuild from a device on that version, or upgrade this app first")
        }
        // A store that started from a baseline (a rebuilt or seeded one)
        // holds saves no device carries: the baseline's. A copy that has not
        // applied it yet (still arriving) would rebuild the store without them.
        if source == .cloud, try old.snapshot.heldBaseline() == nil,
           try await container.readMarker(ContainerLayout.origin(store: old.storeID)) != nil {
            throw ChronicleError(.unavailable, "this device has not imported the baseline the store \(old.storeID) started from yet: rebuilt from its copy, the store would lose what that baseline holds. Sync until it has, then rebuild")
        }
        // What the replaced store held of each device: saves beyond it are
        // carried into the new store by the devices that made them.
        let vector = try old.snapshot.vector()
        let newID = try chosen ?? drawStoreID()
        var random = SeededRandom(seed: configuration.store.seed ^ clock.nowMilliseconds() ^ 0x5055_424C_4953_4845 ^ UInt64(rebuildDraws))
        rebuildDraws &+= 1

        if source == .cloud {
            // The old store's whole merge state (records, deletions,
            // duplicates, every version) as the new store's baseline: saves
            // beyond the vector continue there unchanged, and merge with it
            // exactly as they would have in the old store. Published under
            // an ID of its own, so this device starts from it too.
            let publisher = DeviceID.drawn(&random)
            for attempt in 1...3 {
                do {
                    try await old.publishBaseline(for: newID, into: container, publisher: publisher)
                    _ = try await container.createMarker(ContainerLayout.origin(store: newID), StoreOrigin(milliseconds: clock.nowMilliseconds()))
                    break
                } catch let error as ChronicleError where error.code == .unavailable && attempt < 3 {
                    configuration.store.log.notice("publishing the rebuilt store's baseline again", metadata: ["chronicle.error": "\(error)"])
                }
            }
        } else {
            try await seed(newID, strategy: .copyRecords)
        }

        // Publish: the supersession marker first, then the pointer.
        let supersession = StoreSupersession(store: newID, device: old.deviceID, milliseconds: clock.nowMilliseconds(), vector: vector,
                                             fromBaseline: source == .cloud, reason: reason)
        let name = ContainerLayout.supersession(store: old.storeID)
        do {
            // Exclusive: the first rebuild of a store is the one every device moves to.
            _ = try await container.createMarker(name, supersession)
        } catch let error as ChronicleError where error.code == .markerConflict {
            _ = try? await container.createMarker(ContainerLayout.tombstone(store: newID),
                                                  StoreTombstone(device: old.deviceID, milliseconds: clock.nowMilliseconds()))
            throw ChronicleError(.markerConflict, "the store \(old.storeID) was rebuilt by another device first; this device moves to that store at its next sync")
        }
        do {
            if try await container.readMarker(ContainerLayout.activeStore) == nil,
               try await container.readMarker(ContainerLayout.tombstone(store: old.storeID)) == nil {
                // The container lost the pointer (a wipe), and every device
                // that would put it back is waiting for this rebuild: the
                // rebuilt store takes it.
                do {
                    _ = try await container.createMarker(ContainerLayout.activeStore, ActiveStorePointer(store: newID))
                } catch let error as ChronicleError where error.code == .markerConflict {
                    // Put back meanwhile: checked below.
                }
            }
            guard let pointer = try await container.readMarker(ContainerLayout.activeStore, as: ActiveStorePointer.self),
                  pointer.payload.store == old.storeID || pointer.payload.store == newID else {
                throw ChronicleError(.markerConflict, "the active store is no longer \(old.storeID): another device replaced it first")
            }
            // Another device may have finished this rebuild's last step for
            // it (see ``finishInterruptedRebuild(of:)``).
            if pointer.payload.store == old.storeID {
                _ = try await container.replaceMarker(ContainerLayout.activeStore, ActiveStorePointer(store: newID), expected: pointer.version)
            }
            // A deletion everywhere that raced this rebuild wins: the rebuilt
            // store is deleted too, and its pointer goes.
            if let deletion = try await container.readMarker(ContainerLayout.tombstone(store: old.storeID), as: StoreTombstone.self)?.payload {
                _ = try? await container.createMarker(ContainerLayout.tombstone(store: newID), deletion)
                if let moved = try await container.readMarker(ContainerLayout.activeStore, as: ActiveStorePointer.self), moved.payload.store == newID {
                    try? await container.deleteMarker(ContainerLayout.activeStore, expected: moved.version)
                }
                throw ChronicleError(.markerConflict, "the store \(old.storeID) was deleted everywhere while this device rebuilt it; the rebuilt store is deleted too")
            }
        } catch {
            // Nobody will use the new store, and the old one was not replaced by it.
            _ = try? await container.createMarker(ContainerLayout.tombstone(store: newID),
                                                  StoreTombstone(device: old.deviceID, milliseconds: clock.nowMilliseconds()))
            if let mine = try? await container.readMarker(name, as: StoreSupersession.self), mine.payload.store == newID {
                try? await container.deleteMarker(name, expected: mine.version)
            }
            throw error
        }
        continuations.publish(.rebuiltCloudStore(newID, from: old.storeID))
        state.leaving = old.storeID
        try Self.write(state, in: folder)
        try await unload()
        _ = try await load()
        return newID
    }

    /// Fills the new store `id` from a seeding device of its own (a folder
    /// under `rebuild/`, removed afterwards): `body` saves into it; then it
    /// uploads everything and publishes a baseline, before any device can
    /// see the store.
    @discardableResult
    private func seed(_ id: StoreID, _ body: (Store) async throws -> Void) async throws -> DeviceID {
        let seedFolder = configuration.store.directory.appendingPathComponent("rebuild").appendingPathComponent(id.description)
        var seedConfiguration = configuration.store
        seedConfiguration.directory = seedFolder
        seedConfiguration.deviceID = nil
        seedConfiguration.knownStore = nil
        seedConfiguration.openedByManager = true
        let seeder = try await Store.open(seedConfiguration, exactly: id)
        do {
            try await body(seeder)
            try await confirmUploaded(seeder, "the new store \(id) is not published")
            if try seeder.snapshot.ownSequence() > 0 { _ = try await seeder.publishBaseline() }
            // The seeding device is gone once this returns: this device
            // keeps its logs' bodies, to put them back if the container
            // loses them (see ``keepSeedLogs(_:)``).
            seedLogs = try await uploadedLogs(of: seeder)
            try await seeder.close()
        } catch {
            try? await seeder.close()
            throw error
        }
        try? FileManager.default.removeItem(at: seedFolder)
        // The folder of seeds goes with its last one (rmdir: only if empty).
        _ = rmdir(seedFolder.deletingLastPathComponent().path)
        return seeder.deviceID
    }

    /// Seeds the new store `id` with the app's ``Configuration/seedData``,
    /// then from the local store by `strategy`, and returns the seeding
    /// device (nil if nothing was seeded).
    @discardableResult
    private func seed(_ id: StoreID, strategy: SeedStrategy) async throws -> DeviceID? {
        let shipped = try configuration.seedData.map(seedRows)
        switch strategy {
        case .empty where shipped == nil:
            return nil
        case .empty, .copyRecords, .manual, .fileCopy:
            let local = try await Store.open(configuration(for: .local))
            do {
                let seeder = try await seed(id) { seeder in
                    if let shipped {
                        _ = try await RecordCopy(schema: self.configuration.store.schema, batchSize: self.configuration.mergeBatchSize, existing: .keep)
                            .run(from: .rows(shipped), into: seeder)
                    }
                    switch strategy {
                    case .empty: return
                    case .fileCopy:
                        // The local snapshot's whole state, as the new store's baseline.
                        try await local.publishBaseline(for: id, into: self.configuration.store.container)
                        _ = try await self.configuration.store.container.createMarker(
                            ContainerLayout.origin(store: id), StoreOrigin(milliseconds: self.configuration.store.clock.nowMilliseconds()))
                        var report = MergeReport()
                        report.copied = try local.snapshot.recordCounts().values.reduce(0, +)
                        self.seedReport = report
                        return
                    default: break
                    }
                    if case .manual(let migrate) = strategy {
                        try await migrate(local, seeder)
                    } else {
                        self.seedReport = try await RecordCopy(schema: self.configuration.store.schema, batchSize: self.configuration.mergeBatchSize,
                                                               existing: .keep).run(from: local, into: seeder)
                    }
                }
                try await local.close()
                return seeder
            } catch {
                try? await local.close()
                throw error
            }
        }
    }

    /// The records of the app's seed data, ready to copy.
    private func seedRows(_ data: SeedData) throws -> [RecordID: RecordCopy.SourceRow] {
        let schema = configuration.store.schema
        var rows: [RecordID: RecordCopy.SourceRow] = [:]
        switch data {
        case .records(let records):
            var random = SeededRandom(seed: configuration.store.seed ^ 0x5345_4544_5345_4544)
            var generator = RecordIDGenerator(seed: random.next())
            for record in records {
                guard let index = schema.entities.firstIndex(where: { $0.name == record.entity }) else {
                    throw ChronicleError(.unknownEntity, "the seed data names entity \(record.entity), which the schema does not have")
                }
                let entity = schema.entities[index]
                for name in record.values.keys where entity.fieldIndex(named: name) == nil {
                    throw ChronicleError(.unknownAttribute, "the seed data names \(entity.name).\(name), which the schema does not have")
                }
                let id = record.id ?? generator.next(milliseconds: configuration.store.clock.nowMilliseconds())
                guard rows[id] == nil else {
                    throw ChronicleError(.invalidValue, "the seed data names record \(id) twice (as \(schema.entities[rows[id]!.entity].name) and \(record.entity))")
                }
                let keys = entity.uniqueConstraints.map { $0.map { record.values[$0]?.databaseValue ?? .null } }
                rows[id] = RecordCopy.SourceRow(entity: index, id: id, values: record.values, keys: keys)
            }
        case .snapshot(let url):
            let found = try Snapshot.identity(at: url.path)
            guard found.schema.hash == schema.hash else {
                throw ChronicleError(.schemaMismatch, "the seed snapshot \(url.path) has schema \(found.schema.hashString), not this store's \(schema.hashString)")
            }
            var config = GRDB.Configuration()
            config.readonly = true
            do {
                let queue = try DatabaseQueue(path: url.path, configuration: config)
                try queue.read { db in
                    for (index, entity) in schema.entities.enumerated() {
                        for row in try Row.fetchAll(db, sql: "SELECT * FROM \(entity.name.quotedDatabaseIdentifier)") {
                            let id: RecordID = row["id"]
                            rows[id] = RecordCopy.SourceRow(entity: index, id: id, values: try Store.values(row, entity: entity),
                                                            keys: entity.uniqueConstraints.map { $0.map { row[$0] as DatabaseValue } })
                        }
                    }
                }
            } catch let error as ChronicleError {
                throw error
            } catch {
                throw ChronicleError.sqlite(error, .database, "cannot read the seed snapshot \(url.path)")
            }
        }
        return rows
    }

    /// Creates the container's first store, seeded with the app's
    /// ``Configuration/seedData`` and (with `bringingLocalData`) from the
    /// local store by ``Configuration/seedStrategy``, and makes it the active store only
    /// once it is complete. Returns false if another device made a store
    /// active first (this device then joins it and merges its local data,
    /// as when the container had one), or if the container holds a store
    /// already.
    private func createFirstStore(bringingLocalData: Bool) async throws -> Bool {
        let container = configuration.store.container
        let clock = configuration.store.clock
        var random = SeededRandom(seed: configuration.store.seed ^ clock.nowMilliseconds() ^ 0x4649_5253_5453_5452)
        var generator = RecordIDGenerator(seed: random.next())
        try HybridTimestamp.checkPhysical(clock.nowMilliseconds(), doing: "making the container's first store")
        let id = StoreID(generator.next(milliseconds: clock.nowMilliseconds()))
        // A container with stores but no pointer lost its pointer: never seed
        // a store beside them (opening the store puts the pointer back).
        for store in try await container.listChildren(prefix: ContainerLayout.storesPrefix).compactMap(StoreID.init(string:)) {
            if try await !Store.isWithdrawnOrTentative(store, in: container) { return false }
        }
        // Invisible to devices looking for a store until the pointer names it.
        _ = try await container.createMarker(ContainerLayout.tentative(store: id), TentativeStore(milliseconds: clock.nowMilliseconds()))
        let seeder = try await seed(id, strategy: bringingLocalData ? configuration.seedStrategy : .empty)
        do {
            _ = try await container.createMarker(ContainerLayout.activeStore, ActiveStorePointer(store: id))
        } catch let error as ChronicleError where error.code == .markerConflict {
            if try await container.readMarker(ContainerLayout.activeStore, as: ActiveStorePointer.self)?.payload.store != id {
                // Another device's store won: nobody will use this one.
                _ = try? await container.createMarker(ContainerLayout.tombstone(store: id),
                                                      StoreTombstone(device: seeder ?? DeviceID(id.rawValue), milliseconds: clock.nowMilliseconds()))
                return false
            }
        }
        try await container.deleteMarker(ContainerLayout.tentative(store: id), expected: nil)
        return true
    }

    /// The tombstone of the last store in `store`'s chain of rebuilds, if
    /// that store was deleted on purpose.
    private func deletedSuccessor(of store: StoreID) async throws -> StoreTombstone? {
        let chain: [StoreID]
        do {
            chain = try await successors(of: store)
        } catch let error as ChronicleError where error.code.isTransient {
            return nil
        }
        guard let last = chain.last else { return nil }
        return try await marker(ContainerLayout.tombstone(store: last), as: StoreTombstone.self)
    }

    /// The stores `store` was rebuilt as, in order, by its supersession
    /// markers: its successor, that one's, and so on (at most 64, and none
    /// twice).
    func successors(of store: StoreID) async throws -> [StoreID] {
        var chain: [StoreID] = []
        var seen: Set<StoreID> = [store]
        var current = store
        while chain.count < 64,
              let next = try await configuration.store.container.readMarker(ContainerLayout.supersession(store: current), as: StoreSupersession.self)?.payload.store,
              seen.insert(next).inserted {
            chain.append(next)
            current = next
        }
        return chain
    }

    /// When the store that replaced `old` (rebuilt from a baseline,
    /// `supersession`) has no complete baseline that verifies, only damaged
    /// ones, for longer than ``HealthConfiguration/repairWait``, and this
    /// device's copy of `old` (`previous`) holds everything the damaged one
    /// did (its vector covers the supersession's): publishes that copy as
    /// the new store's baseline, as the rebuild did, and removes the damaged
    /// parts. Without it, a rebuilt store whose only baseline was damaged
    /// after its rebuilder left for good could never be joined: every
    /// device would wait for it, with its saves out of reach.
    ///
    /// - Returns: whether it published one.
    private func standInForDamagedBaseline(of supersession: StoreSupersession, from previous: Store) async throws -> Bool {
        guard supersession.continuesUnchanged else { return false }
        let container = configuration.store.container
        let store = supersession.store
        let decoder = await decoder(for: store)
        var byFolder: [String: [(part: UInt64, name: ContainerName)]] = [:]
        for blob in try await container.listAll(prefix: ContainerLayout.baselinesPrefix(store: store)) {
            guard let parsed = ContainerLayout.parseBaselinePart(blob.name) else { continue }
            byFolder[ContainerLayout.baselinePrefix(store: parsed.store, clock: parsed.clock, device: parsed.device, vector: parsed.vector), default: []]
                .append((parsed.part, blob.name))
        }
        var damaged: [ContainerName] = []
        for (_, parts) in byFolder {
            var bad = false
            var final = false
            for part in parts.sorted(by: { $0.part < $1.part }) {
                do {
                    let decoded = try decoder.decode(try await container.get(part.name, maxBytes: decoder.limits.maxLogBytes))
                    final = decoded.header.isFinalBaselinePart
                } catch let error as ChronicleError where error.code.isTransient || error.code == .notFound || error.code == .schemaMismatch {
                    // Unreachable now, gone meanwhile, or another app version's: no damage seen.
                    return false
                } catch {
                    bad = true
                }
            }
            let complete = parts.map(\.part).sorted() == Array(1...UInt64(parts.count))
            if bad {
                damaged += parts.map(\.name)
            } else if complete && final {
                return false
            }
        }
        let key = "successor_baseline_damaged"
        let now = configuration.store.clock.nowMilliseconds()
        guard !damaged.isEmpty else {
            try previous.snapshot.setMetadata(key, "")
            return false
        }
        let seen = try previous.snapshot.metadata(key).map { $0.split(separator: " ") }
        let since = seen.flatMap { $0.count == 2 && $0[0] == Substring(store.description) ? UInt64($0[1]) : nil }
        guard let since else {
            try previous.snapshot.setMetadata(key, "\(store) \(now)")
            return false
        }
        guard now &- since >= configuration.health.repairWait.milliseconds else { return false }
        let vector = try previous.snapshot.vector()
        guard supersession.vector.allSatisfy({ (vector[$0.key] ?? 0) >= $0.value }) else { return false }
        var random = SeededRandom(seed: configuration.store.seed ^ now ^ 0x5354_414E_4449_4E00)
        try await previous.publishBaseline(for: store, into: container, publisher: DeviceID.drawn(&random))
        for name in damaged {
            do { try await container.delete(name) } catch let error as ChronicleError where error.code == .notFound {}
        }
        configuration.store.log.warning("the baseline the rebuilt store starts from is damaged, and its publisher did not put it back; published this device's copy of the store it replaced in its place",
                                        metadata: ["chronicle.store": "\(store)", "chronicle.parts": "\(damaged.count)"])
        return true
    }

    /// Opens the store that replaced `old`, carrying into it this device's
    /// saves it does not cover, then removes the copy of `old`.
    private func move(from old: StoreID) async throws -> Store {
        let container = configuration.store.container
        let supersession = try await container.readMarker(ContainerLayout.supersession(store: old), as: StoreSupersession.self)?.payload
        // A store that starts from a baseline this app version cannot read
        // (a later version rebuilt it) would leave this device with nothing
        // it can apply: it stays on its store, with its data and its saves,
        // and moves once its app upgrades.
        let target = try? await container.readMarker(ContainerLayout.activeStore, as: ActiveStorePointer.self)?.payload.store
        waitingToJoin = nil
        for candidate in Set([supersession?.store, target].compactMap { $0 }) where candidate != old {
            if let baseline = await baselineNeedingUpgrade(in: candidate),
               FileManager.default.fileExists(atPath: DeviceFolder.snapshotPath(old, in: configuration.store.directory)) {
                waitingToJoin = (candidate, baseline)
                configuration.store.log.notice("staying on the store until the app upgrades: the store that replaced it starts from a baseline of a later schema",
                                               metadata: ["chronicle.store": "\(old)", "chronicle.next": "\(candidate)"])
                return try await Store.open(configuration(for: .cloud), exactly: old)
            }
        }
        // What to carry, read while the old store is open (one store of a folder is open at a time).
        var carry: (rows: [RecordID: RecordCopy.SourceRow], only: Set<RecordID>, fields: [RecordID: Set<String>], clock: HybridTimestamp,
                    survivors: [RecordID: RecordID], deleted: [RecordID: (entity: String, saves: [Transaction])])?
        var unchanged: [Transaction] = []
        // This device's ID in the old store.
        var previousDevice: DeviceID?
        let oldPath = DeviceFolder.snapshotPath(old, in: configuration.store.directory)
        if FileManager.default.fileExists(atPath: oldPath) {
            let previous = try await Store.open(configuration(for: .cloud), exactly: old)
            do {
                previousDevice = previous.deviceID
                if let supersession {
                    do {
                        _ = try await standInForDamagedBaseline(of: supersession, from: previous)
                    } catch let error as ChronicleError where error.code != .simulatedCrash {
                        configuration.store.log.notice("could not check the rebuilt store's baseline", metadata: ["chronicle.error": "\(error)"])
                    }
                }
                let covered = supersession?.vector[previous.deviceID] ?? 0
                let saves = try previous.snapshot.pendingUploadTransactions(alsoFrom: supersession == nil ? nil : covered + 1)
                if let supersession, supersession.continuesUnchanged {
                    // A save the vector covers but this device never marked
                    // uploaded is covered only if the old store holds it as
                    // it was made: another copy of these files may have put
                    // other saves under the same sequences.
                    let held = try await heldAsMade(saves.filter { $0.sequence <= covered }, device: previous.deviceID, in: old)
                    unchanged = saves.filter { $0.sequence > covered || !held.contains($0.sequence) }
                    // The saves whose logs this device keeps for a seeding
                    // device or an earlier ID of its own go too, where the
                    // new store does not cover them (all of them, for a
                    // merge): nobody else carries them.
                    let inherited = try previous.snapshot.inheritedSaves().filter { $0.sequence > supersession.vector[$0.deviceID] ?? 0 }
                    // Saves of this device beyond the vector that only the
                    // old store's logs still hold (its files went back in
                    // time: a lost -wal, a restored copy) go too.
                    let forgotten = try await savesOnlyInLogs(of: previous.deviceID, in: old, after: covered, besides: unchanged)
                    // And the saves of the devices whose logs it keeps, that
                    // its files no longer hold (see ``State/keptDevices``).
                    var keptForgotten: [Transaction] = []
                    for kept in state.keptDevices?[old.description] ?? [] where kept != previous.deviceID {
                        keptForgotten += try await savesOnlyInLogs(of: kept, in: old, after: supersession.vector[kept] ?? 0,
                                                                   besides: inherited.filter { $0.deviceID == kept })
                    }
                    // Merged into another store (an empty vector): the saves
                    // of every other device of the old store go too, from
                    // its logs. Each device carries its own, but one gone
                    // for good before it moved (its folder removed) carries
                    // nothing, and the winner never had them. Carried
                    // unchanged by every device that moves, they merge as
                    // they did in the old store, whoever carries them first.
                    var othersSaves: [Transaction] = []
                    if supersession.vector.isEmpty {
                        let carriedAlready = Set(state.keptDevices?[old.description] ?? []).union(inherited.map(\.deviceID)).union([previous.deviceID])
                        for other in try await container.listChildren(prefix: ContainerLayout.logsPrefix(store: old)).compactMap(DeviceID.init(string:))
                        where !carriedAlready.contains(other) {
                            othersSaves += try await savesOnlyInLogs(of: other, in: old, after: 0, besides: [])
                        }
                    }
                    unchanged = (inherited + keptForgotten + othersSaves).sorted { $0.clock < $1.clock }
                        + (unchanged + forgotten).sorted { $0.sequence < $1.sequence }
                }
                var only: Set<RecordID> = []
                var fields: [RecordID: Set<String>] = [:]
                var whole: Set<RecordID> = []
                var deleted: [RecordID: String] = [:]
                for save in saves {
                    for change in save.changes {
                        only.insert(change.recordID)
                        switch change.kind {
                        case .insert: whole.insert(change.recordID)
                        case .update: fields[change.recordID, default: []].formUnion(change.values.map(\.name))
                        case .delete: deleted[change.recordID] = change.entity
                        }
                    }
                }
                // A carried insert of a record the new store already has
                // changes nothing there: its later updates, if any, do.
                for id in whole where fields[id] == nil { fields[id] = [] }
                if !only.isEmpty {
                    try await configuration.beforeCarrying?(previous)
                    // The deleted ones whole: the new store may not know them yet.
                    var histories: [RecordID: (entity: String, saves: [Transaction])] = [:]
                    for (id, entity) in deleted {
                        if let saves = try previous.snapshot.history(of: entity, id) { histories[id] = (entity, saves) }
                    }
                    carry = (try await RecordCopy.extract(from: previous, schema: configuration.store.schema, only: only), only, fields,
                             try previous.snapshot.latestClock(), try previous.snapshot.survivors(of: only), histories)
                }
                try await previous.close()
            } catch {
                try? await previous.close()
                throw error
            }
        }
        let store = try await Store.open(configuration(for: .cloud))
        try await keepSeedLogs(store)
        var report = MergeReport()
        // The store may have been replaced again meanwhile (rebuilt twice,
        // or merged after a rebuild): follow the chain to the store opened.
        // Where every step continues unchanged, the saves go on unchanged
        // into the last one, as if the device had moved at each step.
        var last = supersession
        var predecessor = old
        var seen: Set<StoreID> = [old]
        while let step = last, step.continuesUnchanged, step.store != store.storeID, seen.insert(step.store).inserted {
            predecessor = step.store
            last = try await container.readMarker(ContainerLayout.supersession(store: step.store), as: StoreSupersession.self)?.payload
        }
        if let last, last.store == store.storeID { try keepLineage(store.storeID, predecessor: predecessor, last) }
        if store.storeID != old, let supersession, supersession.continuesUnchanged, let last, last.continuesUnchanged, last.store == store.storeID {
            do {
                try await continueUnchanged(unchanged, in: store, supersession: last, &report)
                // What the vector says the new store holds, it may hold
                // another version of (a device's files went back in time and
                // saved again under the same sequences), or not hold at all
                // (the rebuilder's copy went back in time): the writes this
                // device's copy has and the new store lacks are saved again,
                // with their clocks. Writes of other devices still on their
                // way into the new store may be saved twice so; they merge
                // as one.
                if let previousDevice, FileManager.default.fileExists(atPath: oldPath) {
                    report.transactions += try await store.keepWrites(fromCopyAt: oldPath, of: old, device: previousDevice)
                }
            } catch {
                try? await store.close()
                throw error
            }
        } else if store.storeID != old {
            do {
                // Import first: what the carried saves refer to must be there.
                _ = try await store.sync()
                if let carry {
                    var copy = RecordCopy(schema: configuration.store.schema, batchSize: configuration.mergeBatchSize, existing: .overwrite, only: carry.only)
                    copy.fields = carry.fields
                    copy.sourceClock = carry.clock
                    copy.survivors = carry.survivors
                    copy.deletedHistories = carry.deleted
                    report = try await copy.run(from: .rows(carry.rows), into: store)
                }
            } catch {
                try? await store.close()
                throw error
            }
        }
        state.leaving = nil
        state.moveBase = nil
        try Self.write(state, in: folder)
        if store.storeID != old {
            DeviceFolder.removeSnapshotFiles(oldPath)
            continuations.publish(.movedToStore(store.storeID, from: old, carried: report))
        }
        return store
    }

    /// What a store replaced: the store before it and that store's
    /// supersession marker, kept in `manager.json` so that the markers can
    /// be put back if the container loses them.
    struct Lineage: Codable, Equatable {
        var store: StoreID
        var predecessor: StoreID
        var supersession: StoreSupersession
    }

    private func keepLineage(_ store: StoreID, predecessor: StoreID, _ supersession: StoreSupersession) throws {
        let kept = (state.lineages ?? []).filter { $0.store != store } + [Lineage(store: store, predecessor: predecessor, supersession: supersession)]
        state.lineages = Array(kept.suffix(16))
        try Self.write(state, in: folder)
    }

    /// Puts back what the container lost of how `store` came to be: its
    /// predecessor's supersession marker (without it, a device still on the
    /// predecessor would take it for a live store and put its pointer back,
    /// and the two would be ranked as if neither replaced the other) and,
    /// for a store rebuilt from a baseline, its origin marker (without it, a
    /// new device would start from logs that lack the past). Runs before
    /// any decision that reads them: at every load and every check. One
    /// marker read when nothing is lost.
    private func restoreLineage(of store: StoreID) async throws {
        guard let lineage = state.lineages?.last(where: { $0.store == store }) else { return }
        let container = configuration.store.container
        let marker = ContainerLayout.supersession(store: lineage.predecessor)
        guard try await container.readMarker(marker) == nil else { return }
        guard try await container.readMarker(ContainerLayout.tombstone(store: lineage.predecessor)) == nil else { return }
        do {
            _ = try await container.createMarker(marker, lineage.supersession)
            configuration.store.log.notice("the container lost the marker that says which store this one replaced; put it back",
                                           metadata: ["chronicle.store": "\(store)", "chronicle.predecessor": "\(lineage.predecessor)"])
        } catch let error as ChronicleError where error.code == .markerConflict {
            // Another device put it back first.
        }
        if lineage.supersession.fromBaseline, try await container.readMarker(ContainerLayout.origin(store: store)) == nil {
            do {
                _ = try await container.createMarker(ContainerLayout.origin(store: store), StoreOrigin(milliseconds: lineage.supersession.milliseconds))
            } catch let error as ChronicleError where error.code == .markerConflict {
                // Another device put it back first.
            }
        }
    }

    /// The first part of a baseline of `store`, if `store` starts from a
    /// baseline (it was rebuilt, or seeded from one) and every complete one
    /// it holds is of a schema this app version does not know and cannot
    /// read through a migration: one a later app version wrote. nil when
    /// one is readable, or none is there (still arriving).
    private func baselineNeedingUpgrade(in store: StoreID) async -> String? {
        let container = configuration.store.container
        guard (try? await container.readMarker(ContainerLayout.origin(store: store))) != nil,
              let blobs = try? await container.listAll(prefix: ContainerLayout.baselinesPrefix(store: store)) else { return nil }
        let firsts = blobs.filter { ContainerLayout.parseBaselinePart($0.name)?.part == 1 }
        guard !firsts.isEmpty else { return nil }
        let decoder = await decoder(for: store)
        for blob in firsts {
            guard let bytes = try? await container.get(blob.name, maxBytes: decoder.limits.maxLogBytes),
                  let header = try? decoder.header(of: bytes) else { return nil }
            if header.schemaHash == configuration.store.schema.hash || decoder.earlier[header.schemaHash] != nil { return nil }
        }
        return firsts[0].name.rawValue
    }

    /// A decoder for `store`'s logs: the app's schema, its earlier versions
    /// the app names, and those the store records its logs use.
    private func decoder(for store: StoreID) async -> LogDecoder {
        let app = configuration.store
        let known = Set([app.schema.hash] + app.earlierSchemas.map(\.hash))
        let recorded = await Replayer.recordedSchemas(in: app.container, store: store, skipping: known)
        var configuration = app
        configuration.earlierSchemas += recorded
        let decoder = configuration.decoder
        // Logs compressed against the store's dictionaries read with them.
        guard let published = try? await app.container.publishedDictionaries(store: store).found, !published.isEmpty else { return decoder }
        return LogDecoder(schema: decoder.schema, limits: decoder.limits, dictionaries: published.map(\.dictionary),
                          earlier: Array(decoder.earlier.values))
    }

    /// The sequences of `saves` (of `device`) that `store`'s logs in the
    /// container hold exactly as they were made. A log that does not
    /// verify holds none of them.
    private func heldAsMade(_ saves: [Transaction], device: DeviceID, in store: StoreID) async throws -> Set<UInt64> {
        guard let low = saves.first?.sequence, let high = saves.last?.sequence else { return [] }
        let container = configuration.store.container
        let decoder = await decoder(for: store)
        let made = Dictionary(saves.map { ($0.sequence, $0) }, uniquingKeysWith: { a, _ in a })
        var held = Set<UInt64>()
        for blob in try await container.listAll(prefix: ContainerLayout.logPrefix(store: store, device: device)) {
            guard let parsed = ContainerLayout.parseLog(blob.name), parsed.device == device, parsed.last >= low, parsed.first <= high,
                  let transactions = try? decoder.open(try await container.get(blob.name, maxBytes: decoder.limits.maxLogBytes), name: blob.name).transactions()
            else { continue }
            for t in transactions where made[t.sequence] == t { held.insert(t.sequence) }
        }
        return held
    }

    /// The saves of `device` after `covered` that `store`'s logs in the
    /// container hold and `besides` does not: saves these files no longer
    /// know, or made again under the same sequence after going back in
    /// time. Logs that do not verify are left out.
    private func savesOnlyInLogs(of device: DeviceID, in store: StoreID, after covered: UInt64, besides: [Transaction]) async throws -> [Transaction] {
        let container = configuration.store.container
        let decoder = await decoder(for: store)
        let known = Dictionary(besides.filter { $0.deviceID == device }.map { ($0.sequence, $0) }, uniquingKeysWith: { a, _ in a })
        var found: [Transaction] = []
        for blob in try await container.listAll(prefix: ContainerLayout.logPrefix(store: store, device: device)) {
            guard let parsed = ContainerLayout.parseLog(blob.name), parsed.device == device, parsed.last > covered,
                  let transactions = try? decoder.open(try await container.get(blob.name, maxBytes: decoder.limits.maxLogBytes), name: blob.name).transactions()
            else { continue }
            found += transactions.filter { $0.sequence > covered && known[$0.sequence] != $0 }
        }
        return found
    }

    /// Moving to a store rebuilt from a baseline of the old one (or to the
    /// store the old one was merged into): imports that baseline, then
    /// saves this device's saves beyond it (every save, for a merge) again,
    /// unchanged (same clocks, same changes, the next sequence numbers), so
    /// they merge exactly as they did in the old store: a record another
    /// device deleted later stays deleted, whichever device moves first.
    ///
    /// - Throws: ``ChronicleError/Code/unavailable`` while the baseline is
    ///   not imported (the move is finished at the next sync or load).
    private func continueUnchanged(_ saves: [Transaction], in store: Store, supersession: StoreSupersession,
                                   _ report: inout MergeReport) async throws {
        _ = try await store.sync()
        let device = store.deviceID
        let vector = try store.snapshot.vector()
        let applied = vector[device] ?? 0
        // The whole baseline, not only this device's part of it: a snapshot
        // that applied other devices' logs first would never start from it.
        guard supersession.vector.allSatisfy({ (vector[$0.key] ?? 0) >= $0.value }) else {
            throw ChronicleError(.unavailable, "the baseline of the rebuilt store \(store.storeID) is not imported yet; the move finishes at the next sync")
        }
        // Where this device's saves in the new store stood before the move
        // (kept, so a move a crash interrupted skips what it saved already).
        if state.moveBase == nil {
            state.moveBase = applied
            try Self.write(state, in: folder)
        }
        let remaining = Array(saves.dropFirst(Int(applied - min(applied, state.moveBase ?? applied))))
        guard !remaining.isEmpty else { return }
        // Saved in the new snapshot, they upload at the next sync, as any
        // save does: not here, where opening a device would upload them (a
        // device that opens to delete the cloud store would then delete them
        // with it, instead of keeping its unsynced saves).
        _ = try store.snapshot.adopt(remaining)
        report.copied += Set(remaining.flatMap { $0.changes.map(\.recordID) }).count
        report.transactions += remaining.count
    }

    /// The bodies of every log `store`'s device has in the container, by log.
    private func uploadedLogs(of store: Store) async throws -> (store: StoreID, devices: [(device: DeviceID, logs: [(first: UInt64, last: UInt64, transactions: [Transaction])])]) {
        var logs: [(first: UInt64, last: UInt64, transactions: [Transaction])] = []
        for blob in try await configuration.store.container.listAll(prefix: ContainerLayout.logPrefix(store: store.storeID, device: store.deviceID)) {
            guard let parsed = ContainerLayout.parseLog(blob.name),
                  let transactions = try store.snapshot.ownTransactions(first: parsed.first, last: parsed.last) else { continue }
            logs.append((parsed.first, parsed.last, transactions))
        }
        var devices = [(device: store.deviceID, logs: logs)]
        // And the logs it keeps for others (a seeding device, its earlier
        // IDs): a copy deleted twice in a row must not drop them.
        for device in try store.snapshot.inheritedDevices() where device != store.deviceID {
            var kept: [(first: UInt64, last: UInt64, transactions: [Transaction])] = []
            for (first, last) in try store.snapshot.inheritedGroups(of: device) {
                guard let encoded = try store.snapshot.inheritedTransactions(of: device, first: first, last: last) else { continue }
                kept.append((first, last, try store.snapshot.transactions(encoded, device: device)))
            }
            devices.append((device, kept))
        }
        return (store.storeID, devices)
    }

    /// Keeps in `store`'s snapshot the bodies of the logs of a device ID
    /// this device gave up: the device that seeded the store here, or its
    /// own ID before it deleted its copy of the store. Nobody else has
    /// them, and without them a container that lost those logs (a wiped
    /// account) would lose their saves for every device that does not start
    /// from a baseline. Repairs put them back like this device's own.
    ///
    /// The logs of the devices kept for `store` that its snapshot no longer
    /// holds (its files went back in time) are kept again from the
    /// container, while it has them.
    private func keepSeedLogs(_ store: Store) async throws {
        defer { seedLogs = nil }
        if let kept = state.keptDevices?[store.storeID.description], !kept.isEmpty {
            do {
                try await store.keepLogs(of: kept)
            } catch let error as ChronicleError where error.code.isTransient {
                configuration.store.log.notice("the logs this device keeps for others could not be checked", metadata: ["chronicle.error": "\(error)"])
            }
        }
        guard let seed = seedLogs, seed.store == store.storeID else { return }
        var kept = state.keptDevices ?? [:]
        let key = store.storeID.description
        for (device, logs) in seed.devices where device != store.deviceID {
            try store.snapshot.inherit(logs: logs, of: device)
            if !(kept[key] ?? []).contains(device) { kept[key, default: []].append(device) }
        }
        // The newest stores only: a device keeps few.
        if kept.count > 16, let oldest = kept.keys.sorted().first { kept[oldest] = nil }
        if kept != (state.keptDevices ?? [:]) {
            state.keptDevices = kept
            try Self.write(state, in: folder)
        }
    }

    /// Uploads the store's pending saves and checks that the container
    /// holds every log of this device, putting back any it lost (a sync
    /// service can drop a file after reporting it stored), before the
    /// device gives up its copy of them.
    ///
    /// - Throws: ``ChronicleError/Code/unavailable`` (ending with
    ///   `consequence`) if the container does not keep them.
    private func confirmUploaded(_ store: Store, _ consequence: String) async throws {
        _ = try await store.upload()
        let pending = try store.snapshot.pendingUploadCount()
        guard pending == 0 else {
            throw ChronicleError(.unavailable, "\(pending) save(s) could not be uploaded; \(consequence)")
        }
        for _ in 0..<3 where try await store.repairOwnLogs().isEmpty { return }
        throw ChronicleError(.unavailable, "the container does not keep this device's logs; \(consequence)")
    }

    // MARK: Maintenance

    /// Deletes the cloud store.
    ///
    /// - `localOnly: true`: this device's copy only. Its pending saves are
    ///   uploaded first (if that fails, nothing is deleted), then the
    ///   snapshot is removed and rebuilt from the container, from the
    ///   newest baseline. The device continues under a new device ID.
    /// - `localOnly: false`: everywhere. A tombstone in the container tells
    ///   every device that the store was deleted on purpose; each falls back
    ///   to its local store at its next ``sync()`` or load, carrying its
    ///   unsaved changes there, and turns the cloud off. The active-store
    ///   pointer is removed, so turning the cloud on again starts a new
    ///   store. The store's logs stay in the container, under its ID (for
    ///   `chronicle dump`), as what it held when it was deleted.
    ///
    /// - Throws: ``ChronicleError/Code/storeNotLoaded`` unless the cloud
    ///   store is loaded.
    public func deleteCloudStore(localOnly: Bool) async throws {
        try checkOpen()
        guard var current = loaded, current.kind == .cloud else {
            if let deletion = state.lastDeletion {
                throw ChronicleError(.storeNotLoaded, "the cloud store \(deletion.store) was already deleted everywhere, by device \(deletion.by): "
                                     + "the cloud is off on this device, and what it had not uploaded is in its local store")
            }
            throw ChronicleError(.storeNotLoaded, "the cloud store is not loaded: turn the cloud on first")
        }
        // The saves not uploaded when the user chose to delete: they go to
        // the local store, even if moving to a store that replaced this one
        // uploads them first (by their clocks, which a move keeps).
        let unsynced = Set(try current.store.snapshot.pendingUploadTransactions(alsoFrom: nil).map(\.clock))
        // A store replaced or deleted since this device last looked is left
        // first, as a sync leaves it (carrying this device's saves): what
        // is deleted then is the store the device is on now.
        if try await checkCloudContent() {
            guard let now = loaded, now.kind == .cloud else { return }
            current = now
        }
        let store = current.store
        if localOnly {
            try await confirmUploaded(store, "the local copy of the cloud store is kept")
            // The new copy keeps the bodies of the old ID's logs, to put
            // them back if the container loses them: nobody else has them.
            seedLogs = try await uploadedLogs(of: store)
            try await unload()
            let path = DeviceFolder.snapshotPath(store.storeID, in: configuration.store.directory)
            let lock = try await DeviceFolder(configuration.store.directory, wait: configuration.store.lockWait)
            defer { lock.release() }
            if var identity = try lock.readIdentity() {
                // A fresh snapshot under the old ID would reuse its sequence numbers.
                var random = SeededRandom(seed: configuration.store.seed ^ UInt64(bitPattern: Int64(configuration.store.clock.nowMilliseconds())))
                identity.retired = (identity.retired ?? []) + [identity.device]
                identity.device = .drawn(&random)
                try lock.writeIdentity(identity)
            }
            DeviceFolder.removeSnapshotFiles(path)
            lock.release()
            _ = try await load()
            return
        }
        let container = configuration.store.container
        let tombstone = StoreTombstone(device: store.deviceID, milliseconds: configuration.store.clock.nowMilliseconds())
        do {
            _ = try await container.createMarker(ContainerLayout.tombstone(store: store.storeID), tombstone)
        } catch let error as ChronicleError where error.code == .markerConflict {
            // Deleted already, by this device or another.
        }
        // A rebuild of the store that raced this deletion: the store it
        // became goes too (the user deletes the cloud store, whatever it
        // was rebuilt as meanwhile), and so does a pointer naming any of them.
        let successors = try await successors(of: store.storeID)
        for successor in successors {
            do {
                _ = try await container.createMarker(ContainerLayout.tombstone(store: successor), tombstone)
            } catch let error as ChronicleError where error.code == .markerConflict {
                // Deleted already.
            }
        }
        let deleted = Set(successors + [store.storeID])
        if let pointer = try await container.readMarker(ContainerLayout.activeStore, as: ActiveStorePointer.self),
           deleted.contains(pointer.payload.store) {
            do {
                try await container.deleteMarker(ContainerLayout.activeStore, expected: pointer.version)
            } catch let error as ChronicleError where error.code == .markerConflict || error.code == .notFound {
                // Moved meanwhile: a rebuild that sees the tombstone takes its pointer back.
            }
        }
        try await leaveDeletedStore(store.storeID, by: tombstone, open: store, alsoCarrying: unsynced)
    }

    /// Deletes the account's whole cloud content, not only the store in
    /// use: UbiquityStoreManager's `deleteCloudContainerLocalOnly:`.
    ///
    /// - `localOnly: true`: this device's copy of the cloud content, which
    ///   is its copy of the loaded cloud store (a device keeps no copy of a
    ///   store it left): as ``deleteCloudStore(localOnly:)`` with `true`.
    /// - `localOnly: false`: every store the container holds, the active
    ///   one, stores it replaced and stores no device uses any more, is
    ///   deleted on purpose. The loaded cloud store goes first, as
    ///   ``deleteCloudStore(localOnly:)`` deletes it (this device carries
    ///   what it had not uploaded into its local store); then every other
    ///   store gets a tombstone, so a device still on one of them, or back
    ///   on one from a folder restored from a backup, falls back to its
    ///   local store with its saves the container never got, as from a
    ///   deleted store, and no device joins one again. The active-store
    ///   pointer is removed: turning the cloud on again starts a new store.
    ///   The stores' logs stay in the container, under their IDs, as what
    ///   each held when it was deleted. Works with the cloud off too.
    ///
    /// - Returns: the stores deleted by this call (none for `localOnly`).
    /// - Throws: ``ChronicleError/Code/storeNotLoaded`` for `localOnly`
    ///   unless the cloud store is loaded.
    @discardableResult
    public func deleteCloudContainer(localOnly: Bool) async throws -> [StoreID] {
        try checkOpen()
        if localOnly {
            guard loaded?.kind == .cloud else {
                throw ChronicleError(.storeNotLoaded, "the cloud store is not loaded: this device holds no copy of the cloud content (turn the cloud on first)")
            }
            try await deleteCloudStore(localOnly: true)
            return []
        }
        let container = configuration.store.container
        var deleted: [StoreID] = []
        var deleter = try DeviceFolder.readIdentity(in: configuration.store.directory)?.device
        if loaded?.kind == .cloud {
            let store = try self.store
            deleter = store.deviceID
            try await deleteCloudStore(localOnly: false)
            if let tombstone = try await marker(ContainerLayout.tombstone(store: store.storeID), as: StoreTombstone.self) {
                deleted.append(store.storeID)
                deleter = tombstone.device
            }
        }
        var stores = Set(try await container.listChildren(prefix: ContainerLayout.storesPrefix).compactMap(StoreID.init(string:)))
        for name in try await container.listMarkers(prefix: ContainerLayout.storesPrefix) {
            if let first = name.rawValue.split(separator: "/").first, let store = StoreID(string: String(first)) { stores.insert(store) }
        }
        let pointer = try await container.readMarker(ContainerLayout.activeStore, as: ActiveStorePointer.self)
        if let pointer { stores.insert(pointer.payload.store) }
        let tombstone = StoreTombstone(device: deleter ?? DeviceID(index: 0), milliseconds: configuration.store.clock.nowMilliseconds())
        for store in stores.sorted() where !deleted.contains(store) {
            do {
                _ = try await container.createMarker(ContainerLayout.tombstone(store: store), tombstone)
                deleted.append(store)
            } catch let error as ChronicleError where error.code == .markerConflict {
                // Deleted already.
            }
        }
        if let pointer {
            do {
                try await container.deleteMarker(ContainerLayout.activeStore, expected: pointer.version)
            } catch let error as ChronicleError where error.code == .markerConflict || error.code == .notFound {
                // Gone already, or a store started since (seeded after this
                // call listed the stores): that one is not deleted.
            }
        }
        configuration.store.log.notice("deleted the cloud content everywhere", metadata: ["chronicle.stores": "\(deleted.count)"])
        return deleted
    }

    /// Deletes the local store: with the cloud store loaded, its files go;
    /// with the local store loaded, it is replaced by an empty one.
    public func deleteLocalStore() async throws {
        try checkOpen()
        let wasLoaded = loaded?.kind == .local
        if wasLoaded { try await unload() }
        let local = configuration.store.directory.appendingPathComponent("local")
        do {
            if FileManager.default.fileExists(atPath: local.path) { try FileManager.default.removeItem(at: local) }
        } catch {
            throw ChronicleError.file("cannot delete the local store at \(local.path)", error)
        }
        continuations.publish(.deletedLocalStore)
        if wasLoaded { _ = try await load() }
    }

    /// Copies the cloud store's records into the local store (the cloud's
    /// values win for records both have), turns the cloud off and loads the
    /// local store; with `deleteCloudStore`, then deletes the cloud store
    /// everywhere (see ``deleteCloudStore(localOnly:)``).
    ///
    /// - Throws: ``ChronicleError/Code/storeNotLoaded`` unless the cloud
    ///   store is loaded.
    @discardableResult
    public func migrateCloudToLocal(deleteCloudStore deleting: Bool = false) async throws -> MergeReport {
        try checkOpen()
        guard let current = loaded, current.kind == .cloud else {
            throw ChronicleError(.storeNotLoaded, "the cloud store is not loaded: there is nothing to migrate")
        }
        let local = try await Store.open(configuration(for: .local))
        let report: MergeReport
        do {
            let before = try local.snapshot.latestClock()
            report = try await RecordCopy(schema: configuration.store.schema, batchSize: configuration.mergeBatchSize, existing: .overwrite)
                .run(from: current.store, into: local)
            let after = try local.snapshot.latestClock()
            if after > before { try Self.noteCopies(in: local.snapshot, of: current.store.snapshot.storeID, after: before, through: after) }
            try await local.close()
        } catch {
            try? await local.close()
            throw error
        }
        if deleting {
            try await deleteCloudStore(localOnly: false)
        } else {
            try await setCloudEnabled(false)
        }
        return report
    }

    /// Publishes a load, and starts its sync status afresh.
    private func didLoad(_ kind: Kind, _ store: Store) {
        loadError = nil
        loadedAt = configuration.store.clock.nowMilliseconds()
        firstSyncComplete = kind != .cloud
        lastReport = nil
        lastError = nil
        if firstSyncComplete { settleFirstSync(nil) }
        continuations.publish(.didLoad(kind, store.storeID))
    }

    /// Where the fallback store lives while it holds saves.
    /// One per account (by the account token last seen), so that saves made
    /// while one account's container could not be reached never join
    /// another account's store: they wait for their own account.
    private var fallbackFolder: URL {
        configuration.store.directory.appendingPathComponent(Kind.fallback.rawValue).appendingPathComponent(Self.accountKey(state.account))
    }

    /// A folder name for an account token (any string an app supplies):
    /// 16 hex digits of its FNV-1a hash, or `no-account` before any token was seen.
    static func accountKey(_ token: String?) -> String {
        guard let token else { return "no-account" }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in token.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return hash.paddedHex
    }

    /// Whether this device has a copy of a cloud store to work on offline.
    private func hasSnapshot() -> Bool {
        (try? FileManager.default.contentsOfDirectory(atPath: configuration.store.directory.path))?
            .contains { $0.hasSuffix(".sqlite") && !$0.hasSuffix(".next.sqlite") } ?? false
    }

    func unload() async throws {
        guard let current = loaded else { return }
        loaded = nil
        settleFirstSync(ChronicleError(.storeNotLoaded, "the \(current.kind.rawValue) store was unloaded before its first sync"))
        try await current.store.close()
        continuations.publish(.didUnload(current.kind))
    }

    /// The configuration of one of the two stores.
    func configuration(for kind: Kind) throws -> Store.Configuration {
        var config = configuration.store
        let root = configuration.store.directory
        config.directory = Self.deviceFolder(of: kind, in: root)
        config.snapshotDamaged = kind == .cloud && snapshotDamaged
        config.openedByManager = true
        guard kind != .cloud else { return config }
        let base = kind == .fallback ? fallbackFolder : root.appendingPathComponent(kind.rawValue)
        config.directory = base.appendingPathComponent("device")
        // An ID of its own: its records may seed the cloud store with a
        // baseline naming this ID, which must never write logs there.
        config.deviceID = nil
        config.container = try DirectoryContainer(root: base.appendingPathComponent("container"), create: true)
        config.knownStore = nil
        return config
    }

    static func write(_ state: State, in folder: DeviceFolder) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data: Data
        do { data = try encoder.encode(state) } catch { throw ChronicleError(.invalidValue, "cannot encode the manager's state", underlying: error) }
        try DeviceFolder.writeAtomically(Array(data), to: folder.url.appendingPathComponent(stateFile).path, directory: folder.url.path)
    }

    // MARK: Merging local data

    /// The metadata key of the local store's record of its copies of cloud
    /// stores: one line per migration, "store after through" (the clocks
    /// its saves took, as raw values, after `after` through `through`).
    private static let copiesKey = "copies_of_cloud"

    /// Remembers that the local store's saves with clocks after `after`
    /// through `through` copied the records of cloud store `store`
    /// (``migrateCloudToLocal(deleteCloudStore:)``): a later merge into
    /// that store does not take them for edits (``RecordCopy/copies``).
    static func noteCopies(in snapshot: Snapshot, of store: StoreID, after: HybridTimestamp, through: HybridTimestamp) throws {
        var lines = try snapshot.metadata(copiesKey)?.split(separator: "\n").map(String.init) ?? []
        lines.append("\(store) \(after.rawValue) \(through.rawValue)")
        try snapshot.setMetadata(copiesKey, lines.suffix(64).joined(separator: "\n"))
    }

    /// The clock ranges of the local store's saves that copied cloud store
    /// `store`'s records (``noteCopies(in:of:after:through:)``).
    static func copies(in snapshot: Snapshot, of store: StoreID) throws -> [ClosedRange<HybridTimestamp>] {
        try snapshot.metadata(copiesKey)?.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ")
            guard parts.count == 3, parts[0] == "\(store)", let after = UInt64(parts[1]), let through = UInt64(parts[2]), after < through else { return nil }
            return HybridTimestamp(rawValue: after + 1)...HybridTimestamp(rawValue: through)
        } ?? []
    }

    /// Copies the local (or fallback) store's records into `cloud`, in batches of
    /// ``Configuration/mergeBatchSize`` records.
    ///
    /// Records keep their IDs, which makes the merge idempotent: a record
    /// the cloud store already has (from an interrupted merge, or an
    /// earlier one), or had and deleted, gets only the fields the merged
    /// store wrote later than the cloud store did (an edit made while the
    /// cloud was away, on this folder or a copy of it), and is otherwise
    /// left alone. A record whose
    /// unique key a visible cloud record already has is not copied, and
    /// references to it point at that record. References to records not yet
    /// copied are set by updates once their targets exist.
    private func merge(_ kind: Kind, into cloud: Store) async throws -> MergeReport {
        // Import what other devices have first, so a local record whose
        // unique key the cloud already has is recognised here. Offline, the
        // merge goes ahead: de-duplication on import settles such records
        // the same way once the devices meet (see docs/merge.md).
        do {
            _ = try await cloud.sync()
        } catch {
            configuration.store.log.notice("merging local data before the cloud store could be synced", metadata: ["chronicle.error": "\(error)"])
        }
        let local = try await Store.open(configuration(for: kind))
        do {
            var copy = RecordCopy(schema: configuration.store.schema, batchSize: configuration.mergeBatchSize, existing: .newer)
            copy.copies = try Self.copies(in: local.snapshot, of: cloud.snapshot.storeID)
            let report = try await copy.run(from: local, into: cloud)
            // For the next merge: a delete of one of these reaches the
            // record it was found as.
            try local.snapshot.noteMerged(report.duplicates, into: cloud.snapshot.storeID)
            try await local.close()
            return report
        } catch {
            try? await local.close()
            throw error
        }
    }
}

/// Fans events out to every subscriber, buffering all of them: lifecycle
/// events are few.
final class EventContinuations<Element: Sendable>: Sendable {
    private struct State {
        var continuations: [UInt64: AsyncStream<Element>.Continuation] = [:]
        /// Events published before anyone subscribed (the load of
        /// `open`): the first subscriber gets them first. Nil once it has.
        var early: [Element]? = []
        var finished = false
    }

    /// How many early events are kept for the first subscriber.
    static var earlyLimit: Int { 1_000 }
    private let state = Mutex(State())
    private let nextID = Atomic<UInt64>(0)

    func subscribe() -> AsyncStream<Element> {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self)
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.continuations.removeValue(forKey: id) }
        }
        // Under the lock, so that no event published meanwhile comes before
        // the early ones; finished outside it (finishing runs onTermination,
        // which takes the lock).
        let finished = state.withLock { s in
            for element in s.early ?? [] { continuation.yield(element) }
            s.early = nil
            if !s.finished { s.continuations[id] = continuation }
            return s.finished
        }
        if finished { continuation.finish() }
        return stream
    }

    func publish(_ element: Element) {
        state.withLock { s in
            if s.early != nil, s.early!.count < Self.earlyLimit { s.early!.append(element) }
            for c in s.continuations.values { c.yield(element) }
        }
    }

    func finish() {
        let all = state.withLock { s in
            s.finished = true
            defer { s.continuations.removeAll() }
            return Array(s.continuations.values)
        }
        for c in all { c.finish() }
    }
}
