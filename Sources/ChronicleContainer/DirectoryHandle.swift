import ChronicleCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An open folder of a directory container, reached from the container's
/// root one name at a time with `O_NOFOLLOW`: no path is ever resolved
/// through a symbolic link, so nothing a person or a sync service puts in
/// the container can send a read or a write outside it. Every operation
/// names an entry of this folder relative to its descriptor (`openat`,
/// `mkdirat`, `linkat`, `renameat`, `unlinkat`), and only regular files are
/// read: a symbolic link, FIFO, socket, device or folder where a file
/// belongs is a ``ChronicleError/Code/foreignEntry``.
///
/// The descriptor closes when the handle is released.
final class DirectoryHandle: Sendable {
    /// The open folder.
    let fd: Int32
    /// Its path from the container's root, for messages ("blobs/s/logs").
    let path: String

    private init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit { close(fd) }

    /// The path of entry `name` from the container's root.
    func pathOf(_ name: String) -> String { path.isEmpty ? name : path + "/" + name }

    // MARK: Opening folders

    /// Opens a container's root folder; nil if there is nothing at `path`.
    /// Follows a symbolic link at `path` itself only when told to (the
    /// folders above it are the caller's business).
    static func openRoot(_ path: String, followSymbolicLink: Bool) throws(ChronicleError) -> DirectoryHandle? {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (followSymbolicLink ? 0 : O_NOFOLLOW))
        if fd >= 0 { return DirectoryHandle(fd: fd, path: "") }
        let err = errno
        if err == ENOENT { return nil }
        var st = stat()
        if err == ENOTDIR || err == ELOOP, lstat(path, &st) == 0 {
            let kind = EntryKind(mode: st.st_mode)
            if kind == .symbolicLink {
                throw ChronicleError(.foreignEntry, "the container folder \(path) is a symbolic link; name the folder it points to, or allow a linked root (`rootMayBeSymlink: true`, `--follow-root-symlink` in the CLI)")
            }
            throw ChronicleError(.foreignEntry, "the container path \(path) is \(kind.phrase), not a folder")
        }
        throw ChronicleError.system("open container folder \(path)", errno: err)
    }

    /// Opens the folder `name` in this one; nil if it does not exist and
    /// `create` is false (never nil when `create` is true). Anything but a real folder there (a symbolic link
    /// to one included) is a ``ChronicleError/Code/foreignEntry``.
    func directory(_ name: String, create: Bool) throws(ChronicleError) -> DirectoryHandle? {
        var created = false
        while true {
            let sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if sub >= 0 { return DirectoryHandle(fd: sub, path: pathOf(name)) }
            let err = errno
            switch err {
            case EINTR:
                continue
            case ENOENT where create:
                if created {
                    throw ChronicleError(.unavailable, "folder \(pathOf(name)) vanished while it was being created; retry")
                }
                if mkdirat(fd, name, 0o755) != 0 && errno != EEXIST {
                    throw ChronicleError.system("create folder \(pathOf(name))", errno: errno)
                }
                created = true
            case ENOENT:
                return nil
            case ENOTDIR, ELOOP:
                let kind = try self.kind(of: name) ?? .unknown
                throw foreign(name, kind, expected: "a folder")
            default:
                throw ChronicleError.system("open folder \(pathOf(name))", errno: err)
            }
        }
    }

    /// Opens the folders `components` below this one, in turn; nil if one
    /// is missing and `create` is false.
    func directory(components: some Sequence<Substring>, create: Bool) throws(ChronicleError) -> DirectoryHandle? {
        var current = self
        for component in components {
            guard let next = try current.directory(String(component), create: create) else { return nil }
            current = next
        }
        return current
    }

    // MARK: Entries

    /// What is at `name`, without following a link; nil if nothing is.
    func kind(of name: String) throws(ChronicleError) -> EntryKind? {
        try status(of: name).map { EntryKind(mode: $0.st_mode) }
    }

    /// The kind of an entry ``entries()`` listed: the one `readdir` gave,
    /// or, where it gave none, what is there now (nil if nothing is).
    func kind(of entry: (name: String, kind: EntryKind?)) throws(ChronicleError) -> EntryKind? {
        if let kind = entry.kind { return kind }
        return try kind(of: entry.name)
    }

    /// `fstatat` of `name` without following a link; nil if nothing is there.
    func status(of name: String) throws(ChronicleError) -> stat? {
        var st = stat()
        if fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 { return st }
        let err = errno
        if err == ENOENT || err == ENOTDIR { return nil }
        throw ChronicleError.system("stat \(pathOf(name))", errno: err)
    }

    /// The names in this folder with their kinds (nil where the file system
    /// does not report one), unsorted, without `.` and `..`.
    func entries() throws(ChronicleError) -> [(name: String, kind: EntryKind?)] {
        // A descriptor of its own: a duplicate would share (and move) the read position.
        let own = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard own >= 0 else { throw ChronicleError.system("open folder \(path)", errno: errno) }
        guard let dir = fdopendir(own) else {
            let err = errno
            close(own)
            throw ChronicleError.system("read folder \(path)", errno: err)
        }
        defer { closedir(dir) }
        var result: [(name: String, kind: EntryKind?)] = []
        while let entry = readdir(dir) {
            let name = Self.name(of: entry)
            if name == "." || name == ".." { continue }
            result.append((name, EntryKind(direntType: Self.type(of: entry))))
        }
        return result
    }

    // A `dirent` from `readdir` is only as long as its name needs (`d_reclen`),
    // and may end at the end of mapped memory: its fields are read in place,
    // never by copying the whole struct (`entry.pointee`), which reads up to
    // `sizeof(struct dirent)` bytes and can fault.
    private static let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
    private static let typeOffset = MemoryLayout<dirent>.offset(of: \dirent.d_type)!

    private static func name(of entry: UnsafeMutablePointer<dirent>) -> String {
        String(cString: UnsafeRawPointer(entry).advanced(by: nameOffset).assumingMemoryBound(to: CChar.self))
    }

    private static func type(of entry: UnsafeMutablePointer<dirent>) -> UInt8 {
        UnsafeRawPointer(entry).load(fromByteOffset: typeOffset, as: UInt8.self)
    }

    // MARK: Files

    /// The bytes of the regular file `name`, or nil if there is none.
    ///
    /// Opens with `O_NOFOLLOW | O_NONBLOCK` and checks with `fstat` that it
    /// opened a regular file, so a FIFO cannot block the reader and a link
    /// cannot lead it elsewhere; checks the size against `maxBytes` before
    /// allocating anything, so memory stays bounded by the cap whatever the
    /// file's size.
    ///
    /// - Throws: ``ChronicleError/Code/foreignEntry`` for anything but a
    ///   regular file, ``ChronicleError/Code/sizeOverCap`` for a file larger
    ///   than `maxBytes`.
    func readFile(_ name: String, maxBytes: Int, what: String) throws(ChronicleError) -> [UInt8]? {
        // Checked before opening too: opening a device can have effects of its own.
        guard let before = try kind(of: name) else { return nil }
        guard before == .regularFile else { throw foreign(name, before, expected: "a regular file") }
        let file = openat(fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        if file < 0 {
            let err = errno
            if err == ENOENT { return nil }
            if err == ELOOP { throw foreign(name, .symbolicLink, expected: "a regular file") }
            throw ChronicleError.system("open \(what)", errno: err)
        }
        defer { close(file) }
        return try Self.readRegularFile(file, maxBytes: maxBytes, what: what)
    }

    /// Reads the open file `file` whole after checking with `fstat` that it
    /// is a regular file (``ChronicleError/Code/foreignEntry`` otherwise) of
    /// at most `maxBytes` (``ChronicleError/Code/sizeOverCap`` otherwise,
    /// before anything is allocated).
    static func readRegularFile(_ file: Int32, maxBytes: Int, what: String) throws(ChronicleError) -> [UInt8] {
        var st = stat()
        guard fstat(file, &st) == 0 else { throw ChronicleError.system("stat \(what)", errno: errno) }
        let kind = EntryKind(mode: st.st_mode)
        guard kind == .regularFile else {
            throw ChronicleError(.foreignEntry, "\(what) is \(kind.phrase), not a regular file: refused")
        }
        guard st.st_size <= maxBytes else {
            throw ChronicleError(.sizeOverCap, "\(what) is \(st.st_size) bytes, over the cap of \(maxBytes): refused before reading")
        }
        let size = Int(st.st_size)
        var failure: Int32 = 0
        let bytes = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            var done = 0
            while done < size {
                let n = read(file, buffer.baseAddress! + done, size - done)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    break
                }
                if n == 0 { break }  // the file shrank since fstat
                done += n
            }
            count = done
        }
        if failure != 0 { throw ChronicleError.system("read \(what)", errno: failure) }
        return bytes
    }

    /// Creates the file `name`, which must not exist, writes `bytes` and
    /// fsyncs it. A partly written file is removed.
    func writeNewFile(_ name: String, _ bytes: [UInt8]) throws(ChronicleError) {
        let file = openat(fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard file >= 0 else { throw ChronicleError.system("create \(pathOf(name))", errno: errno) }
        defer { close(file) }
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { write(file, $0.baseAddress! + written, $0.count - written) }
            if n < 0 {
                if errno == EINTR { continue }
                let err = errno
                unlinkat(fd, name, 0)
                throw ChronicleError.system("write \(pathOf(name))", errno: err)
            }
            written += n
        }
        guard fsync(file) == 0 else {
            let err = errno
            unlinkat(fd, name, 0)
            throw ChronicleError.system("fsync \(pathOf(name))", errno: err)
        }
    }

    /// Hard-links this folder's `name` as `target` in `folder`, which fails
    /// with `EEXIST` if anything is there. Returns 0 or the errno.
    func link(_ name: String, as target: String, in folder: DirectoryHandle) -> Int32 {
        linkat(fd, name, folder.fd, target, 0) == 0 ? 0 : errno
    }

    /// Renames this folder's `name` to `target` in `folder`, replacing the
    /// entry there (a link is replaced, never followed).
    func rename(_ name: String, as target: String, in folder: DirectoryHandle) throws(ChronicleError) {
        guard renameat(fd, name, folder.fd, target) == 0 else {
            throw ChronicleError.system("rename \(pathOf(name)) to \(folder.pathOf(target))", errno: errno)
        }
    }

    /// Removes the entry `name` (a link itself, never what it points to).
    /// Removing a missing entry succeeds; a folder is a
    /// ``ChronicleError/Code/foreignEntry``.
    func remove(_ name: String) throws(ChronicleError) {
        guard unlinkat(fd, name, 0) != 0 else { return }
        let err = errno
        if err == ENOENT { return }
        if err == EISDIR || err == EPERM, try kind(of: name) == .directory { throw foreign(name, .directory, expected: "a file") }
        throw ChronicleError.system("remove \(pathOf(name))", errno: err)
    }

    /// Makes this folder's entries durable.
    func sync() throws(ChronicleError) {
        guard fsync(fd) == 0 else { throw ChronicleError.system("fsync folder \(path)", errno: errno) }
    }

    /// Runs `body` holding an exclusive `flock(2)` on the lock file `name`
    /// (created if needed), which the kernel releases if the process dies.
    /// Two holders exclude each other across processes and within one.
    /// How long a container lock is waited for.
    static let lockWaitMilliseconds = 10_000

    func withLock<R>(_ name: String, _ body: () throws(ChronicleError) -> R) throws(ChronicleError) -> R {
        let file = openat(fd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o644)
        guard file >= 0 else {
            let err = errno
            if err == ELOOP { throw foreign(name, .symbolicLink, expected: "a lock file") }
            throw ChronicleError.system("open lock \(pathOf(name))", errno: err)
        }
        defer { close(file) }
        var st = stat()
        guard fstat(file, &st) == 0 else { throw ChronicleError.system("stat lock \(pathOf(name))", errno: errno) }
        let kind = EntryKind(mode: st.st_mode)
        guard kind == .regularFile else { throw foreign(name, kind, expected: "a lock file") }
        // Holders keep these locks for a few file operations; one held much
        // longer is a stuck process or a hostile one. Wait a bounded time,
        // then fail as unavailable (transient), never block for ever.
        var waited = 0
        while flock(file, LOCK_EX | LOCK_NB) != 0 {
            let err = errno
            guard err == EWOULDBLOCK || err == EINTR else { throw ChronicleError.system("lock \(pathOf(name))", errno: err) }
            guard waited < Self.lockWaitMilliseconds else {
                throw ChronicleError(.unavailable, "\(pathOf(name)) in the container stayed locked by another process for \(Self.lockWaitMilliseconds / 1000) s; try again later")
            }
            usleep(5_000)
            waited += 5
        }
        defer { flock(file, LOCK_UN) }
        return try body()
    }

    // MARK: Errors

    func foreign(_ name: String, _ kind: EntryKind, expected: String) -> ChronicleError {
        ChronicleError(.foreignEntry, "\(pathOf(name)) in the container is \(kind.phrase), where Chronicle keeps \(expected): refused (Chronicle never follows links or reads anything but regular files in a container; remove it)")
    }
}
