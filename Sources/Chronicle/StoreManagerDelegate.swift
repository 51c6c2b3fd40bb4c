import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot

/// Hooks into a ``StoreManager``'s lifecycle, for an app that wants to watch
/// or steer it beside ``StoreManager/events()``. Every method has a default
/// that does nothing (or, for a decision, what the manager does by itself),
/// so an app implements only what it needs.
///
/// The manager holds its delegate weakly and awaits each call, so a hook
/// may do asynchronous work, but should not call back into the manager and
/// wait for an operation in progress (that operation is the one calling).
public protocol StoreManagerDelegate: AnyObject, Sendable {
    /// A store is about to load.
    func storeManager(_ manager: StoreManager, willLoad kind: StoreManager.Kind) async
    /// A store is loaded and ready.
    func storeManager(_ manager: StoreManager, didLoad store: Store, kind: StoreManager.Kind) async
    /// Loading failed; nothing is loaded until ``StoreManager/reload()``.
    func storeManager(_ manager: StoreManager, failedLoading kind: StoreManager.Kind, error: ChronicleError) async
    /// A ``StoreManager/sync()`` imported other devices' changes.
    func storeManager(_ manager: StoreManager, didImport report: Store.SyncReport) async
    /// The loaded cloud store was deleted on purpose, by `device`. The answer
    /// decides what this device does after carrying its unsaved changes to
    /// its local store (the default: stay on the local store).
    func storeManager(_ manager: StoreManager, cloudStoreDeleted store: StoreID, by device: DeviceID) async -> StoreManager.DeletionResponse
    /// An operation failed; `context` says which, in words.
    func storeManager(_ manager: StoreManager, didEncounter error: ChronicleError, context: String) async
    /// The cloud store is corrupted (see ``StoreManager/Health``).
    ///
    /// - With `healthy` false, this device could not import `mark.blob`,
    ///   even after building its copy again: it wrote `mark` and unloaded
    ///   the store. It moves to the rebuilt store, carrying its saves, at
    ///   its next sync after a healthy device rebuilt it.
    /// - With `healthy` true, another device wrote `mark`, and this
    ///   healthy device is about to stand for the election to rebuild the
    ///   store.
    ///
    /// Return true to take over: this device then does nothing more by
    /// itself for these marks (no candidacy, no rebuild); the app may, for
    /// instance, ask its user, then call ``StoreManager/rebuildCloudStore(from:)``.
    /// The default returns false.
    func storeManager(_ manager: StoreManager, handleCloudContentCorruption mark: CorruptionMark, healthy: Bool) async -> Bool
}

extension StoreManagerDelegate {
    /// Does nothing.
    public func storeManager(_ manager: StoreManager, willLoad kind: StoreManager.Kind) async {}
    /// Does nothing.
    public func storeManager(_ manager: StoreManager, didLoad store: Store, kind: StoreManager.Kind) async {}
    /// Does nothing.
    public func storeManager(_ manager: StoreManager, failedLoading kind: StoreManager.Kind, error: ChronicleError) async {}
    /// Does nothing.
    public func storeManager(_ manager: StoreManager, didImport report: Store.SyncReport) async {}
    /// Stays on the local store.
    public func storeManager(_ manager: StoreManager, cloudStoreDeleted store: StoreID, by device: DeviceID) async -> StoreManager.DeletionResponse {
        .stayLocal
    }
    /// Does nothing.
    public func storeManager(_ manager: StoreManager, didEncounter error: ChronicleError, context: String) async {}
    /// Leaves it to the manager: returns false.
    public func storeManager(_ manager: StoreManager, handleCloudContentCorruption mark: CorruptionMark, healthy: Bool) async -> Bool {
        false
    }
}

extension StoreManager {
    /// What a device does once the cloud store it used was deleted on
    /// purpose and its unsaved changes are in its local store.
    public enum DeletionResponse: Sendable, Hashable {
        /// Keep working on the local store, with the cloud off (the default).
        case stayLocal
        /// Turn the cloud on again at once: a new cloud store, seeded from
        /// (or merged with) this device's local store.
        case recreateCloudStore
    }

    /// Where this device's data stands, for an app to show.
    public struct SyncStatus: Sendable {
        /// The loaded store, or nil while none is.
        public var kind: Kind?
        /// Its ID.
        public var storeID: StoreID?
        /// Whether a sync of the loaded cloud store has completed with
        /// everything visible imported and every save uploaded (always true
        /// for the local and fallback stores, which have nothing to sync).
        public var firstSyncComplete: Bool
        /// Saves of this device not yet in the container (0 with the local
        /// or fallback store loaded: they upload nothing).
        public var pendingUploads: Int
        /// With the local or fallback store loaded: saves this device made
        /// in its copy of the cloud store that never reached the container.
        /// They are on no other device; they upload when the cloud is turned
        /// on again (or go to the local store if that cloud store was
        /// deleted meanwhile). Nil without such a copy, or with the cloud
        /// store loaded (see ``pendingUploads``).
        public var cloudCopyPendingUploads: Int? = nil
        /// Sequence gaps the last sync waited on: logs of other devices it
        /// knows of but cannot see yet.
        public var waitingForLogs: Int
        /// How the last sync ended, if there was one.
        public var lastStatus: Store.SyncReport.Status?
        /// The last sync's error, if it failed; cleared by the next success.
        public var lastError: ChronicleError?
        /// The last cloud store deleted on purpose while this device used
        /// it, kept until the cloud store is loaded again: where its data
        /// went (see ``CloudDeletion``).
        public var lastCloudDeletion: CloudDeletion?
    }

    /// A cloud store deleted on purpose (``deleteCloudStore(localOnly:)``
    /// on some device) while this device used it: the store's data is
    /// gone everywhere, except what this device had not uploaded, which it
    /// carried into its local store.
    public struct CloudDeletion: Sendable, Hashable, Codable {
        /// The store deleted.
        public var store: StoreID
        /// The device that deleted it.
        public var by: DeviceID
        /// When this device left it, in milliseconds since 1970.
        public var milliseconds: UInt64
        /// Records this device carried into its local store.
        public var carried: Int
    }
}
