import ChronicleCore

/// The codes containers raise, beside the I/O codes every module shares
/// (``ChronicleError/Code/notFound``, ``ChronicleError/Code/unavailable``,
/// ``ChronicleError/Code/io``, ``ChronicleError/Code/diskFull``).
extension ChronicleError.Code {
    /// A store UUID, device ID or blob name does not follow the grammar.
    public static let invalidName = Self("invalidName")
    /// Different bytes were put under an existing immutable name.
    public static let blobConflict = Self("blobConflict")
    /// A marker's compare-and-swap lost against another writer.
    public static let markerConflict = Self("markerConflict")
    /// Something that is not Chronicle's sits in a container: a symbolic
    /// link, a FIFO, a device, a socket, a folder where a blob or marker
    /// belongs, or a name outside the grammar. Chronicle never follows,
    /// opens for reading or writes through such an entry; a person must
    /// remove it. Not transient.
    public static let foreignEntry = Self("foreignEntry")
}
