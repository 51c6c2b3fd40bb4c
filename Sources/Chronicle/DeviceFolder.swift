import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A device's own folder: its snapshots, the file naming the device, and
/// the lock that keeps a second process out.
///
/// ```
/// <folder>/chronicle.lock         flock(2)ed while a Store has the folder open; holds the owner's PID
/// <folder>/device.json            {"device": ..., "store": ..., "retired": [...]}: who this device is
/// <folder>/<store>.sqlite         the snapshot of each store the device has opened
/// <folder>/<store>.next.sqlite    a snapshot being built for a new device ID (see Store)
/// <folder>/retired/               snapshots of earlier device IDs, kept until their saves are uploaded
/// ```
///
/// Everything is created under the lock, so a folder that many processes
/// open at once for the first time still gets one device ID: the first
/// process writes `device.json` (atomically: temporary file, fsync, rename,
/// directory fsync) before any snapshot exists, the others read it.
final class DeviceFolder: @unchecked Sendable {
    // Unchecked: `fd` is set once in init and closed once in `release`,
    // which the owning Store calls from its actor (or deinit).

    /// The folder.
    let url: URL
    private var fd: Int32

    /// What `device.json` says.
    struct Identity: Codable, Equatable {
        /// The device's current ID.
        var device: DeviceID
        /// The store it last opened.
        var store: StoreID?
        /// Earlier IDs of this device, oldest first: IDs it gave up because
        /// its files went back in time (see ``Store``).
        var retired: [DeviceID]?
    }

    static let identityFile = "device.json"
    static let lockFile = "chronicle.lock"
    static let retiredFolder = "retired"

    /// Whether `folder` holds a container's `blobs/` and `markers/` folders.
    private static func isContainer(_ folder: URL) -> Bool {
        var isFolder: ObjCBool = false
        return FileManager.default.fileExists(atPath: folder.appendingPathComponent(ContainerLayout.Directory.blobs).path, isDirectory: &isFolder)
            && isFolder.boolValue
            && FileManager.default.fileExists(atPath: folder.appendingPathComponent(ContainerLayout.Directory.markers).path, isDirectory: &isFolder)
            && isFolder.boolValue
    }

    /// The store manager's folder (holding `manager.json`) that `url` is
    /// strictly inside, if any: a store manager keeps its local and
    /// fallback stores in folders of its own there.
    static func managingFolder(of url: URL) -> URL? {
        var folder = url.standardizedFileURL.resolvingSymlinksInPath()
        while true {
            let parent = folder.deletingLastPathComponent()
            if parent.path == folder.path || parent.path.isEmpty { return nil }
            folder = parent
            if FileManager.default.fileExists(atPath: folder.appendingPathComponent(StoreManager.stateFile).path) { return folder }
        }
    }

    /// Creates the folder if needed and locks it, waiting up to `wait` for
    /// another holder to let go.
    ///
    /// - Throws: ``ChronicleError/Code/deviceInUse`` naming the holder's
    ///   process if the lock stays taken; ``ChronicleError/Code/io`` if the
    ///   folder cannot be created or is not a folder;
    ///   ``ChronicleError/Code/invalidValue`` if it is a container's folder
    ///   or inside one.
    init(_ url: URL, lockFile: String = DeviceFolder.lockFile, wait: Duration) async throws {
        self.url = url
        // A container's folder (blobs/ and markers/), or any folder inside
        // one, is never a device's: the device's files would sit among what
        // every device syncs. Checked before anything is created.
        let resolved = url.standardizedFileURL.resolvingSymlinksInPath()
        var folder = resolved
        while true {
            if Self.isContainer(folder) {
                let which = folder.path == resolved.path ? " (it holds blobs/ and markers/)" : " (inside the container at \(folder.path))"
                throw ChronicleError(.invalidValue, "\(url.path) is a container\(which), not a device folder: give each device a folder of its own, outside the container")
            }
            let parent = folder.deletingLastPathComponent()
            if parent.path == folder.path || parent.path.isEmpty { break }
            folder = parent
        }
        do {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        } catch {
            throw ChronicleError.file("cannot create the device folder \(url.path)", error)
        }
        let lockPath = url.appendingPathComponent(lockFile).path
        let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard fd >= 0 else { throw ChronicleError.system("cannot open \(lockPath)", errno: errno) }
        let deadline = ContinuousClock.now.advanced(by: wait)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let err = errno
            guard err == EWOULDBLOCK || err == EINTR else {
                close(fd)
                throw ChronicleError.system("cannot lock \(lockPath)", errno: err)
            }
            if ContinuousClock.now >= deadline {
                let holder = Self.readHolder(fd)
                close(fd)
                throw ChronicleError(.deviceInUse, "the device folder \(url.path) is in use by \(holder.map { "process \($0)" } ?? "another process"); "
                    + "one folder serves one open store at a time")
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        self.fd = fd
        // Name the holder for whoever waits next.
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
    }

    private static func readHolder(_ fd: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return nil }
        return Int32(String(decoding: buffer[0..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Lets go of the lock. Safe to call twice.
    func release() {
        guard fd >= 0 else { return }
        flock(fd, LOCK_UN)
        close(fd)
        fd = -1
    }

    deinit { release() }

    // MARK: Identity

    /// The largest `device.json` read: it holds an ID or two.
    static let identityFileLimit = 64 * 1024

    /// Reads `device.json`, or nil if the folder has none yet. Reads only a
    /// regular file (never through a link, never a FIFO) of at most
    /// ``identityFileLimit`` bytes.
    func readIdentity() throws -> Identity? {
        try Self.readIdentity(in: url)
    }

    /// Reads `device.json` of the device folder `directory` (without its
    /// lock), or nil if there is none yet; see ``readIdentity()``.
    static func readIdentity(in directory: URL) throws -> Identity? {
        let path = directory.appendingPathComponent(identityFile).path
        guard let bytes = try readSmallFile(path, limit: identityFileLimit, holding: "the device's ID") else { return nil }
        do {
            return try JSONDecoder().decode(Identity.self, from: Data(bytes))
        } catch {
            let failure = ChronicleError.decoding("\(path), the device file naming the device's ID,", error)
            throw ChronicleError(failure.code, failure.message + ". Restore it from a backup, or remove it: the device then takes its ID from its snapshots, "
                                 + "with every save in them (moving the whole folder aside would leave the saves not uploaded yet behind)",
                                 underlying: error)
        }
    }

    /// Reads a small file of the folder, or nil if there is none: only a
    /// regular file (never through a link, never a FIFO) of at most `limit` bytes.
    static func readSmallFile(_ path: String, limit: Int, holding what: String) throws -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            let err = errno
            if err == ENOENT { return nil }
            var st = stat()
            if err == ELOOP, lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFLNK {
                // O_NOFOLLOW's word for any link, where it points or not.
                throw ChronicleError.system("cannot read \(path): it is a symbolic link, and it should be a regular file holding \(what)", errno: err)
            }
            throw ChronicleError.system("cannot read \(path)", errno: err)
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            throw ChronicleError(.malformedBody, "\(path) is not a regular file; it should hold \(what) (move it aside to start this device afresh)")
        }
        guard Int(st.st_size) <= limit else {
            throw ChronicleError(.malformedBody, "\(path) is \(st.st_size) bytes; a file holding \(what) is far smaller (move it aside to start this device afresh)")
        }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size))
        let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n >= 0 else { throw ChronicleError.system("cannot read \(path)", errno: errno) }
        return Array(bytes[0..<n])
    }

    /// The identity the folder's snapshots name, for a folder that lost its
    /// `device.json`: the device of the snapshots there (if they agree).
    func identityFromSnapshots() -> Identity? {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        var found: [(StoreID, DeviceID)] = []
        for name in names where name.hasSuffix(".sqlite") && !name.hasSuffix(".next.sqlite") {
            let path = url.appendingPathComponent(name).path
            var st = stat()
            guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG,
                  let identity = try? Snapshot.identity(at: path) else { continue }
            found.append((identity.store, identity.device))
        }
        guard let first = found.first, found.allSatisfy({ $0.1 == first.1 }) else { return nil }
        return Identity(device: first.1, store: found.count == 1 ? first.0 : nil, retired: nil)
    }

    /// Writes `device.json` atomically and durably.
    func writeIdentity(_ identity: Identity) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data: Data
        do { data = try encoder.encode(identity) } catch { throw ChronicleError(.invalidValue, "cannot encode the device file", underlying: error) }
        try Self.writeAtomically(Array(data), to: url.appendingPathComponent(Self.identityFile).path, directory: url.path)
    }

    /// Writes `bytes` to `path` through a temporary file, fsync, rename and
    /// a directory fsync: readers see the old file or the new one.
    static func writeAtomically(_ bytes: [UInt8], to path: String, directory: String) throws {
        removeStaleTemporaries(of: path, in: directory)
        let temp = path + ".tmp-\(getpid())"
        let fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard fd >= 0 else { throw ChronicleError.system("cannot write \(temp)", errno: errno) }
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
            if n < 0 {
                if errno == EINTR { continue }
                break
            }
            written += n
        }
        let err = errno
        let synced = fsync(fd) == 0
        close(fd)
        guard written == bytes.count, synced, rename(temp, path) == 0 else {
            let failure = ChronicleError.system("cannot write \(path)", errno: written == bytes.count && synced ? errno : err)
            unlink(temp)
            throw failure
        }
        syncDirectory(directory)
    }

    /// Removes the temporary files of `path` that a process killed in the
    /// middle of ``writeAtomically(_:to:directory:)`` left (`<name>.tmp-<pid>`
    /// of a process that is gone); those of a live process are its own.
    static func removeStaleTemporaries(of path: String, in directory: String) {
        let prefix = (path as NSString).lastPathComponent + ".tmp-"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
        for name in names where name.hasPrefix(prefix) {
            guard let pid = pid_t(name.dropFirst(prefix.count)), pid > 0, pid != getpid() else { continue }
            if kill(pid, 0) != 0, errno == ESRCH {
                unlink((directory as NSString).appendingPathComponent(name))
            }
        }
    }

    static func syncDirectory(_ path: String) {
        let dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 {
            fsync(dir)
            close(dir)
        }
    }

    // MARK: Snapshot files

    /// The snapshot of `store`.
    func snapshotPath(_ store: StoreID) -> String { Self.snapshotPath(store, in: url) }

    /// The snapshot of `store` in the device folder `directory`.
    static func snapshotPath(_ store: StoreID, in directory: URL) -> String { directory.appendingPathComponent("\(store).sqlite").path }

    /// Where a snapshot for a new device ID is built before it replaces the current one.
    func nextSnapshotPath(_ store: StoreID) -> String { url.appendingPathComponent("\(store).next.sqlite").path }

    /// Removes a snapshot file and its `-wal` and `-shm`.
    static func removeSnapshotFiles(_ path: String) {
        for suffix in ["", "-wal", "-shm", "-journal"] { unlink(path + suffix) }
    }

    /// Moves a snapshot (with its `-wal` and `-shm`, if any) into `retired/`
    /// under a name that says which device it belonged to. Returns the new path.
    @discardableResult
    func retire(_ path: String, device: DeviceID?, reason: String) throws -> String {
        let folder = url.appendingPathComponent(Self.retiredFolder)
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw ChronicleError.file("cannot create \(folder.path)", error)
        }
        let base = (path as NSString).lastPathComponent.replacingOccurrences(of: ".sqlite", with: "")
        var target = folder.appendingPathComponent("\(base)-\(device.map { "\($0)" } ?? "unknown")-\(reason).sqlite").path
        var n = 1
        while FileManager.default.fileExists(atPath: target) {
            n += 1
            target = folder.appendingPathComponent("\(base)-\(device.map { "\($0)" } ?? "unknown")-\(reason)-\(n).sqlite").path
        }
        for suffix in ["-wal", "-shm", ""] where FileManager.default.fileExists(atPath: path + suffix) {
            guard rename(path + suffix, target + suffix) == 0 else {
                throw ChronicleError.system("cannot move \(path + suffix) to \(target + suffix)", errno: errno)
            }
        }
        Self.syncDirectory(folder.path)
        Self.syncDirectory(url.path)
        return target
    }

    /// Retired snapshots of `store`.
    func retiredSnapshots(of store: StoreID) -> [String] {
        let folder = url.appendingPathComponent(Self.retiredFolder)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.filter { $0.hasPrefix("\(store)") && $0.hasSuffix(".sqlite") }.sorted().map { folder.appendingPathComponent($0).path }
    }
}

extension DeviceID {
    /// A random-looking device ID drawn from `random` (a version-4 UUID's layout).
    static func drawn(_ random: inout SeededRandom) -> DeviceID {
        let high = (random.next() & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000
        let low = (random.next() & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
        return DeviceID(RecordID(high: high, low: low))
    }
}
