import ChronicleCore

/// How hard a commit pushes data to disk. The snapshot is always in WAL
/// mode: a commit appends the transaction to the `-wal` file, and a
/// checkpoint later copies it into the main file.
public enum Durability: String, Sendable, CaseIterable {
    /// `synchronous = FULL`: every commit syncs the WAL (`fdatasync`)
    /// before it returns, so a save that returned survives a crash of the
    /// process, of the operating system, and a power loss. Costs one
    /// sync per save.
    case full
    /// `synchronous = NORMAL`: a commit is written to the WAL but not
    /// synced; the WAL is synced only at checkpoints (SQLite's automatic
    /// one, about every 1,000 pages, and ``Snapshot/close()``). A save
    /// that returned survives a crash of the process, since the operating
    /// system holds its writes. A crash of the operating system or a power
    /// loss can lose the saves committed since the last checkpoint: each
    /// is lost whole (the database stays consistent, with the state before
    /// them), but the app was told they succeeded, and one that `sync()`
    /// already uploaded is in the container while this device has
    /// forgotten it and will reuse its sequence numbers. Use it only
    /// where the machine's crash is not a concern (simulations,
    /// benchmarks, data that can be rebuilt).
    case normal

    /// The value of SQLite's `PRAGMA synchronous` for this setting
    /// (FULL is 2, NORMAL is 1).
    public var sqliteSynchronous: Int { self == .full ? 2 : 1 }
}
