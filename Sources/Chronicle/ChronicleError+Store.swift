import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import GRDB

/// The codes of the store and its device folder.
extension ChronicleError.Code {
    /// Another process, or another open ``Store`` in this process, holds
    /// the device folder. The message names the process when it can.
    public static let deviceInUse = Self("deviceInUse", transient: true)

    /// A ``StoreManager`` has no store loaded: a switch between the local
    /// and the cloud store is under way, the last load failed (see
    /// ``StoreManager/Event/failedLoading(_:_:)``), or the manager is closed.
    public static let storeNotLoaded = Self("storeNotLoaded", transient: true)

    /// The ``Store`` was closed (``Store/close()``): every call after it
    /// (a read, a save, a sync, ``Store/changes(bufferLimit:)``, an
    /// observation on ``Store/reader``) throws this. Open the store again
    /// to go on.
    public static let closed = Self("closed")

    /// This device could not import the cloud store's content, even after
    /// building its copy again from the container: it marked the store
    /// corrupted and unloaded it. A healthy device rebuilds the store under
    /// a new ID, and this device moves there, carrying its saves, at its
    /// next ``StoreManager/sync(progress:)`` after that (see
    /// ``StoreManager/health()``).
    public static let cloudContentCorrupted = Self("cloudContentCorrupted", transient: true)

    /// A ``StoreContext`` save found records changed both in the context
    /// and underneath it, under ``MergePolicy/error``: nothing was saved,
    /// and the context keeps its changes. ``ChronicleError/mergeConflicts``
    /// lists the records and attributes.
    public static let mergeConflict = Self("mergeConflict")

    /// A change or a save on a ``StoreContext`` that never saves: a main
    /// context made read-only, or a scratch context.
    public static let readOnlyContext = Self("readOnlyContext")
}
