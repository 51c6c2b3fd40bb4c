import ChronicleCore
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A container in a directory: a local folder, a network share, or a folder
/// a sync service copies between machines. The embedded default.
///
/// Blobs live under `blobs/` and markers under `markers/`, at the paths their
/// names give (see ``ContainerLayout`` and `docs/container-layout.md`).
///
/// - A put writes a temporary file, fsyncs it, then `link(2)`s it to its name,
///   which fails if the name exists (so a blob is never replaced), and fsyncs
///   the directory. Readers see the whole blob or nothing.
/// - Marker changes hold an `flock(2)` on the marker's lock file, which the
///   kernel releases if the process dies, and replace the marker by an atomic
///   rename. Each marker file starts with its 8-byte big-endian version.
/// - Files that do not follow the name grammar (a sync service's conflict
///   copies, `.DS_Store`, temporary files) are never returned by listings; they
///   are reported by ``foreignEntries(prefix:)``.
public struct DirectoryContainer: Container {
    /// The container's root folder.
    public let root: URL
    public let capabilities: ContainerCapabilities
    private let counter = Counter()

    /// Opens (and creates, if needed) a container in `root`.
    ///
    /// - Parameter reliableExclusiveCreate: false for a folder that a sync
    ///   service copies between machines, where two devices can each create a
    ///   marker of the same name without seeing the other's.
    public init(root: URL, reliableExclusiveCreate: Bool = true) throws(ChronicleError) {
        self.root = root.standardizedFileURL
        self.capabilities = ContainerCapabilities(reliableExclusiveCreate: reliableExclusiveCreate)
        for sub in ["blobs", "markers", "tmp"] {
            try Self.makeDirectory(self.root.appendingPathComponent(sub).path)
        }
    }

    // MARK: Blobs

    public func put(_ name: ContainerName, _ bytes: [UInt8]) async throws {
        let path = blobPath(name)
        try Self.makeDirectory((path as NSString).deletingLastPathComponent)
        let temp = try writeTemporary(bytes)
        defer { unlink(temp) }
        if link(temp, path) != 0 {
            let err = errno
            guard err == EEXIST else { throw Self.posixError("link \(name)", err) }
            let existing = try Self.readFile(path, name: name)
            guard existing == bytes else {
                throw ChronicleError(.blobConflict, "blob \(name) already exists with different bytes (\(existing.count) stored, \(bytes.count) offered)")
            }
            return
        }
        try Self.syncDirectory((path as NSString).deletingLastPathComponent)
    }

    public func get(_ name: ContainerName) async throws -> [UInt8] {
        try Self.readFile(blobPath(name), name: name)
    }

    public func list(prefix: String, after: ContainerName?, limit: Int) async throws -> [BlobInfo] {
        let base = root.appendingPathComponent("blobs").path
        var page: [BlobInfo] = []
        // Names outside the grammar are skipped here (see `foreignEntries`),
        // and a file deleted since the walk is simply gone.
        for rel in try walk(base: base, prefix: prefix, after: after?.rawValue).sorted() {
            guard page.count < limit else { break }
            guard let name = try? ContainerName(rel) else { continue }
            var st = stat()
            guard lstat(base + "/" + rel, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
            page.append(BlobInfo(name: name, size: Int(st.st_size)))
        }
        return page
    }

    public func delete(_ name: ContainerName) async throws {
        if unlink(blobPath(name)) != 0 && errno != ENOENT {
            throw Self.posixError("delete \(name)", errno)
        }
    }

    /// Entries under `prefix` whose names are outside the grammar: files a
    /// sync service or a person left in the container. Listings skip them;
    /// `chronicle inspect` reports them.
    public func foreignEntries(prefix: String = "") -> [String] {
        var foreign: [String] = []
        for sub in ["blobs", "markers"] {
            let base = root.appendingPathComponent(sub).path
            guard let e = FileManager.default.enumerator(atPath: base) else { continue }
            while let rel = e.nextObject() as? String {
                var isDir: ObjCBool = false
                _ = FileManager.default.fileExists(atPath: base + "/" + rel, isDirectory: &isDir)
                if isDir.boolValue { continue }
                let name = sub == "markers" ? String(rel.dropSuffix(".lock")) : rel
                if rel.hasPrefix(prefix) && !ContainerName.isValid(name) { foreign.append("\(sub)/\(rel)") }
            }
        }
        return foreign.sorted()
    }

    // MARK: Markers

    public func readMarker(_ name: ContainerName) async throws -> Marker? {
        try Self.readMarkerFile(markerPath(name), name: name)
    }

    public func createMarker(_ name: ContainerName, _ bytes: [UInt8]) async throws -> Marker {
        let path = markerPath(name)
        try Self.makeDirectory((path as NSString).deletingLastPathComponent)
        let marker = Marker(bytes: bytes, version: 1)
        let temp = try writeTemporary(Self.markerFileBytes(marker))
        defer { unlink(temp) }
        if link(temp, path) != 0 {
            let err = errno
            if err == EEXIST { throw ChronicleError(.markerConflict, "marker \(name) already exists") }
            throw Self.posixError("create marker \(name)", err)
        }
        try Self.syncDirectory((path as NSString).deletingLastPathComponent)
        return marker
    }

    public func replaceMarker(_ name: ContainerName, _ bytes: [UInt8], expected: UInt64) async throws -> Marker {
        let path = markerPath(name)
        return try withMarkerLock(path) { () throws -> Marker in
            guard let current = try Self.readMarkerFile(path, name: name) else {
                throw ChronicleError(.markerConflict, "marker \(name) does not exist (expected version \(expected))")
            }
            guard current.version == expected else {
                throw ChronicleError(.markerConflict, "marker \(name) is at version \(current.version), expected \(expected)")
            }
            let marker = Marker(bytes: bytes, version: expected + 1)
            let temp = try writeTemporary(Self.markerFileBytes(marker))
            guard rename(temp, path) == 0 else {
                let err = errno
                unlink(temp)
                throw Self.posixError("replace marker \(name)", err)
            }
            try Self.syncDirectory((path as NSString).deletingLastPathComponent)
            return marker
        }
    }

    public func deleteMarker(_ name: ContainerName, expected: UInt64?) async throws {
        let path = markerPath(name)
        try withMarkerLock(path) { () throws in
            guard let current = try Self.readMarkerFile(path, name: name) else { return }
            if let expected, current.version != expected {
                throw ChronicleError(.markerConflict, "marker \(name) is at version \(current.version), expected \(expected)")
            }
            if unlink(path) != 0 && errno != ENOENT { throw Self.posixError("delete marker \(name)", errno) }
            try Self.syncDirectory((path as NSString).deletingLastPathComponent)
        }
    }

    public func listMarkers(prefix: String) async throws -> [ContainerName] {
        try walk(base: root.appendingPathComponent("markers").path, prefix: prefix).compactMap { try? ContainerName($0) }.sorted()
    }

    // MARK: Files

    private func blobPath(_ name: ContainerName) -> String { root.path + "/blobs/" + name.rawValue }
    private func markerPath(_ name: ContainerName) -> String { root.path + "/markers/" + name.rawValue }

    /// Writes `bytes` to a new temporary file, fsynced, and returns its path.
    /// Temporary names only need to be unique; they never affect behaviour.
    private func writeTemporary(_ bytes: [UInt8]) throws(ChronicleError) -> String {
        let path = root.path + "/tmp/\(getpid())-\(counter.next())-\(UInt64.random(in: 0...UInt64.max)).tmp"
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw Self.posixError("create temporary file", errno) }
        defer { close(fd) }
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
            if n < 0 {
                if errno == EINTR { continue }
                let err = errno
                unlink(path)
                throw Self.posixError("write temporary file", err)
            }
            written += n
        }
        guard fsync(fd) == 0 else {
            let err = errno
            unlink(path)
            throw Self.posixError("fsync temporary file", err)
        }
        return path
    }

    private func withMarkerLock<R>(_ path: String, _ body: () throws -> R) throws -> R {
        try Self.makeDirectory((path as NSString).deletingLastPathComponent)
        let fd = open(path + ".lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw Self.posixError("open marker lock", errno) }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else { throw Self.posixError("lock marker", errno) }
        }
        defer { flock(fd, LOCK_UN) }
        return try body()
    }

    /// The relative paths of the regular files under `base` that start with
    /// `prefix` and sort after `after`, unsorted; callers check the grammar.
    /// Descends only into directories that can hold such names, and, given
    /// `after`, skips directories whose every name sorts before it (so a
    /// paged listing reads only what is left). Reads directories with
    /// `readdir`: the file type comes from `d_type`, with no `stat` per file.
    private func walk(base: String, prefix: String, after: String? = nil) throws(ChronicleError) -> [String] {
        let slash = prefix.lastIndex(of: "/")
        let dirPart = slash.map { String(prefix[..<$0]) } ?? ""
        if !dirPart.isEmpty && !ContainerName.isValid(dirPart) {
            throw ChronicleError(.invalidName, "listing prefix \(String(reflecting: prefix)) is outside the name grammar")
        }
        var result: [String] = []
        func visit(_ relative: String) throws(ChronicleError) {
            let full = relative.isEmpty ? base : base + "/" + relative
            guard let dir = opendir(full) else {
                // No directory: nothing stored under it yet.
                if errno == ENOENT || errno == ENOTDIR { return }
                throw Self.posixError("list \(full)", errno)
            }
            defer { closedir(dir) }
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.baseAddress!.assumingMemoryBound(to: CChar.self)) }
                if name == "." || name == ".." { continue }
                let rel = relative.isEmpty ? name : relative + "/" + name
                var type = Int32(entry.pointee.d_type)
                if type == Int32(DT_UNKNOWN) {
                    var st = stat()
                    guard lstat(full + "/" + name, &st) == 0 else { continue }
                    type = (st.st_mode & S_IFMT) == S_IFDIR ? Int32(DT_DIR) : (st.st_mode & S_IFMT) == S_IFREG ? Int32(DT_REG) : Int32(DT_UNKNOWN)
                }
                if type == Int32(DT_DIR) {
                    // Descend only where the prefix can still match, and names can still follow `after`.
                    let inside = rel + "/"
                    if let after, after > inside, !after.hasPrefix(inside) { continue }
                    if rel.hasPrefix(prefix) || prefix.hasPrefix(inside) { try visit(rel) }
                } else if type == Int32(DT_REG), rel.hasPrefix(prefix), after.map({ rel > $0 }) ?? true {
                    result.append(rel)
                }
            }
        }
        try visit(dirPart)
        return result
    }

    private static func readFile(_ path: String, name: ContainerName) throws(ChronicleError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let err = errno
            if err == ENOENT { throw ChronicleError(.notFound, "no blob named \(name)") }
            throw posixError("open \(name)", err)
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw posixError("stat \(name)", errno) }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size))
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                throw posixError("read \(name)", errno)
            }
            if n == 0 { break }
            done += n
        }
        return Array(bytes[0..<done])
    }

    private static func readMarkerFile(_ path: String, name: ContainerName) throws(ChronicleError) -> Marker? {
        let bytes: [UInt8]
        do {
            bytes = try readFile(path, name: name)
        } catch where error.code == .notFound {
            return nil
        }
        guard bytes.count >= 8 else {
            throw ChronicleError(.malformedBody, "marker \(name) is \(bytes.count) bytes, shorter than its version")
        }
        let version = bytes[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return Marker(bytes: Array(bytes[8...]), version: version)
    }

    private static func markerFileBytes(_ marker: Marker) -> [UInt8] {
        withUnsafeBytes(of: marker.version.bigEndian) { Array($0) } + marker.bytes
    }

    private static func makeDirectory(_ path: String) throws(ChronicleError) {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw ChronicleError(.io, "cannot create directory \(path): \(error.localizedDescription)")
        }
    }

    private static func syncDirectory(_ path: String) throws(ChronicleError) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw posixError("open directory \(path)", errno) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw posixError("fsync directory \(path)", errno) }
    }

    static func posixError(_ what: String, _ err: Int32) -> ChronicleError {
        let message = String(cString: strerror(err))
        // Out of space, I/O errors and stale network handles may pass.
        let transient = [EAGAIN, EBUSY, ENOSPC, EIO, ESTALE, ETIMEDOUT, EINTR].contains(err)
        return ChronicleError(transient ? .unavailable : .io, "\(what): \(message) (errno \(err))")
    }
}

/// A process-wide counter for unique temporary names.
private final class Counter: Sendable {
    private let value = Atomic<UInt64>(0)
    func next() -> UInt64 { value.wrappingAdd(1, ordering: .relaxed).newValue }
}

extension String {
    fileprivate func dropSuffix(_ suffix: String) -> Substring {
        hasSuffix(suffix) ? dropLast(suffix.count) : Substring(self)
    }
}
