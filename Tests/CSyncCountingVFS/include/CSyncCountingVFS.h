#ifndef CSYNC_COUNTING_VFS_H
#define CSYNC_COUNTING_VFS_H

/// A SQLite VFS for tests that wraps the default VFS and counts the xSync
/// calls (fsync/fdatasync) made on each file, by file name.

/// Registers the counting VFS as SQLite's default VFS, wrapping the default
/// it finds. Idempotent and thread-safe. Connections opened afterwards go
/// through it. Returns SQLITE_OK, or SQLite's error code.
int chronicle_sync_counting_vfs_install(void);

/// The number of xSync calls so far on files whose full path starts with
/// `prefix` (a database's path counts its `-wal` and `-journal` too; a test's
/// own directory counts only that test's files).
long long chronicle_sync_counting_vfs_syncs(const char *prefix);

#endif
