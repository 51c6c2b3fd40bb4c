import ChronicleCore

/// The codes of the store and its device folder.
extension ChronicleError.Code {
    /// Another process, or another open ``Store`` in this process, holds
    /// the device folder. The message names the process when it can.
    public static let deviceInUse = Self("deviceInUse", transient: true)
    /// The ``Store`` was closed (``Store/close()``): every call after it
    /// (a read, a save, a sync, ``Store/changes(bufferLimit:)``, an
    /// observation on ``Store/reader``) throws this. Open the store again
    /// to go on.
    public static let closed = Self("closed")
}
