import ChronicleCore

/// The codes of the snapshot, the replayer and the SQLite underneath.
extension ChronicleError.Code {
    /// The snapshot belongs to another store, device or schema.
    public static let storeMismatch = Self("storeMismatch")
    /// A log could not be applied to the snapshot.
    public static let applyFailed = Self("applyFailed")
    /// A baseline's parts are not all there (yet): its final part, or a
    /// part before it, is missing. Retried later.
    public static let incompleteBaseline = Self("incompleteBaseline", transient: true)
    /// A SQLite error underneath, other than those with a code of their own
    /// (``databaseCorrupt``, ``ChronicleError/Code/diskFull``,
    /// ``ChronicleError/Code/unavailable`` for a busy database,
    /// ``ChronicleError/Code/io``). The underlying error is GRDB's
    /// `DatabaseError`.
    public static let database = Self("database")
    /// The snapshot file is damaged or is not a SQLite database
    /// (`SQLITE_CORRUPT`, `SQLITE_NOTADB`). Not transient: retrying reads
    /// the same bytes. The underlying error is GRDB's `DatabaseError`.
    public static let databaseCorrupt = Self("databaseCorrupt")
    /// The container holds history for this device that the device's own
    /// files do not (its folder was restored from an older copy, copied
    /// to a second machine, or lost its snapshot). The device continues
    /// under a new device ID; this code names the reason in reports.
    public static let identityConflict = Self("identityConflict")
    /// A simulation made the device crash here (never raised in production).
    public static let simulatedCrash = Self("simulatedCrash")
}
