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
/// names give (see `docs/container-layout.md`).
///
/// - **Confined.** Every operation opens the root, then every folder and file
///   below it one name at a time with `O_NOFOLLOW`: a symbolic link
///   anywhere inside is never followed, so nothing is read or written outside
///   the folder. Only regular files are read, opened with `O_NONBLOCK` and
///   checked with `fstat`: a link, FIFO, socket, device or folder at a blob's
///   or marker's name is a ``ChronicleError/Code/foreignEntry``.
/// - **Bounded.** ``get(_:maxBytes:)`` compares the file's size with the cap
///   before allocating; markers are read up to ``Marker/maxBytes``.
/// - A put writes a temporary file in `tmp/`, fsyncs it, then `link(2)`s it to
///   its name, which fails if the name exists (so a blob is never replaced),
///   and fsyncs the folder. Readers see the whole blob or nothing. A log's put
///   holds the `flock(2)` of its device (the lock file of the device's
///   registration marker) around the check that no other log of the device
///   overlaps its range and the link, so two processes cannot both store
///   overlapping logs of one device.
/// - Marker changes hold an `flock(2)` on the marker's lock file, which the
///   kernel releases if the process dies, and replace the marker by an atomic
///   rename. Each marker file starts with its 8-byte big-endian version.
///   Marker names ending in `.lock` are reserved for those lock files.
/// - **Present.** The root's `blobs/`, `markers/` and `tmp/` are made only by
///   `init(root:create: true)`; if they vanish later (a share unmounted under
///   a running app), operations fail with the transient
///   ``ChronicleError/Code/unavailable`` instead of making them anew.
/// - Temporary files a killed writer left in `tmp/` are removed when the
///   container is opened (see ``removeStaleTemporaryFiles(now:limit:)``).
/// - Files that do not follow the name grammar (a sync service's conflict
///   copies, `.DS_Store`) are never returned by listings; they are reported
///   by ``foreignEntries(prefix:)``, with every link, FIFO, socket, device
///   and misplaced folder. Listings do return such entries when their names
///   follow the grammar, so that reading them fails loudly instead of the
///   name being skipped in silence.
public struct DirectoryContainer: Container {
    /// The container's root folder.
    public let root: URL
    public let capabilities: ContainerCapabilities
    private let rootMayBeSymlink: Bool
    private let counter = Counter()

    /// How old a temporary file of a writer that has ended must be before
    /// it is removed (15 minutes): a margin for writers in another process
    /// namespace of the same machine, whose process IDs this one cannot see.
    public static let staleTemporaryFileAge: Duration = .seconds(15 * 60)
    /// How old a temporary file must be before it is removed when its writer
    /// cannot be checked (24 hours): one written on another machine, before
    /// the last boot, or by an older version.
    public static let abandonedTemporaryFileAge: Duration = .seconds(24 * 60 * 60)

    /// Opens the container in `root`.
    ///
    /// A folder is a container when it holds `blobs/` or `markers/` (missing
    /// ones of `blobs/`, `markers/` and `tmp/` are then created). A folder that
    /// does not exist, or holds neither (an empty mount point of a network
    /// share that is not mounted), is ``ChronicleError/Code/notFound`` unless
    /// `create` is true: a mistyped or unmounted path never silently becomes
    /// a new, separate container. Create one explicitly with `create: true`
    /// or `chronicle init --container DIR`.
    ///
    /// - Parameters:
    ///   - create: make the folder (and its parents) and the container's
    ///     folders if they are missing.
    ///   - reliableExclusiveCreate: false for a folder that a sync service
    ///     copies between machines, where two devices can each create a
    ///     marker of the same name without seeing the other's.
    ///   - rootMayBeSymlink: accept a `root` that is itself a symbolic link
    ///     (links inside the container are never followed).
    /// - Throws: ``ChronicleError/Code/notFound`` as above,
    ///   ``ChronicleError/Code/foreignEntry`` for a linked root (unless
    ///   allowed) or a `blobs/`, `markers/` or `tmp/` that is not a folder.
    public init(root: URL, create: Bool = false, reliableExclusiveCreate: Bool = true,
                rootMayBeSymlink: Bool = false) throws(ChronicleError) {
        let root = root.standardizedFileURL
        // Everything that can throw runs before a stored property is set.
        try Self.prepare(root.path, create: create, rootMayBeSymlink: rootMayBeSymlink)
        self.root = root
        self.capabilities = ContainerCapabilities(reliableExclusiveCreate: reliableExclusiveCreate)
        self.rootMayBeSymlink = rootMayBeSymlink
    }

    /// Checks that `path` holds a container (or makes one) and that its
    /// `blobs/`, `markers/` and `tmp/` are there, and tidies `tmp/`.
    private static func prepare(_ path: String, create: Bool, rootMayBeSymlink: Bool) throws(ChronicleError) {
        var handle = try DirectoryHandle.openRoot(path, followSymbolicLink: rootMayBeSymlink)
        if handle == nil && create {
            do {
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            } catch {
                throw ChronicleError.file("cannot create the container folder \(path)", error)
            }
            handle = try DirectoryHandle.openRoot(path, followSymbolicLink: rootMayBeSymlink)
        }
        guard let rootFolder = handle else {
            throw ChronicleError(.notFound, "no container at \(path): the folder does not exist. Create a container with `chronicle init --container \(path)` (or `DirectoryContainer(root:create: true)`)")
        }
        if !create, try rootFolder.kind(of: ContainerLayout.Directory.blobs) == nil, try rootFolder.kind(of: ContainerLayout.Directory.markers) == nil {
            // A folder holding other things is no place for a new container.
            if let entries = try? rootFolder.entries().map(\.name), !entries.isEmpty {
                throw ChronicleError(.notFound, "no container at \(path): the folder holds other files (\(entries.sorted().prefix(3).joined(separator: ", "))\(entries.count > 3 ? ", …" : "")) and no blobs/ or markers/ folder"
                                     + (entries.contains("device.json") ? "; it is a device folder. Name the container folder the devices share" : ". If it is a network share, check that it is mounted; otherwise name the container folder"))
            }
            throw ChronicleError(.notFound, "no container at \(path): the folder holds no blobs/ or markers/ folder. If it is a network share, check that it is mounted; to make a new container there, run `chronicle init --container \(path)` (or open it with `create: true`)")
        }
        for folder in [ContainerLayout.Directory.blobs, ContainerLayout.Directory.markers] { _ = try rootFolder.directory(folder, create: true) }
        let tmp = try rootFolder.directory(ContainerLayout.Directory.temporary, create: true)!
        // Best effort: a container that cannot be tidied can still be used.
        _ = try? removeStaleTemporaryFiles(in: tmp, now: Date(), limit: 4096)
    }

    // MARK: Blobs

    public func put(_ name: ContainerName, _ bytes: [UInt8]) async throws {
        guard let log = ContainerLayout.parseLog(name) else { return try putBlob(name, bytes, in: folder(ContainerLayout.Directory.blobs)) }
        try Self.checkLogSpan(log, name)
        // The lock of the device's registration marker.
        let (folders, leaf) = Self.split(ContainerLayout.deviceRegistration(store: log.store, device: log.device))
        let devices = try folder(ContainerLayout.Directory.markers).directory(components: folders, create: true)!
        try devices.withLock(leaf + ContainerLayout.Directory.lockSuffix) { () throws(ChronicleError) in
            let blobs = try folder(ContainerLayout.Directory.blobs)
            try refuseOverlap(log, name, in: blobs)
            try putBlob(name, bytes, in: blobs)
        }
    }

    /// Throws ``ChronicleError/Code/blobConflict`` if a log of `log`'s device
    /// other than `name` overlaps its range. Such a log starts at most
    /// ``ContainerLayout/maxSequencesPerLog`` - 1 before `log.first`, so it is
    /// in `log.first`'s shard, the one before it, or (up to `log.last`) after.
    private func refuseOverlap(_ log: ContainerLayout.ParsedLogName, _ name: ContainerName, in blobs: DirectoryHandle) throws(ChronicleError) {
        let perShard = ContainerLayout.sequencesPerShard
        let firstShard = log.first / perShard
        for shard in (firstShard == 0 ? 0 : firstShard - 1)...(log.last / perShard) {
            let prefix = ContainerLayout.logShardPrefix(store: log.store, device: log.device, shard: shard)
            guard let folder = try blobs.directory(components: prefix.split(separator: "/"), create: false) else { continue }
            for entry in try folder.entries() {
                // `<first, 16 hex>-<last, 16 hex>.chlog`: the range is read before the name is built.
                let leaf = entry.name.utf8
                guard leaf.count == 39, let first = UInt64(entry.name.prefix(16), radix: 16), first <= log.last,
                      let last = UInt64(entry.name.dropFirst(17).prefix(16), radix: 16), last >= log.first,
                      let other = try? ContainerName(prefix + entry.name), other != name,
                      let parsed = ContainerLayout.parseLog(other)
                else { continue }
                throw ChronicleError(.blobConflict, "log \(name) overlaps the stored log \(other) of device \(log.device) (sequences \(parsed.first)...\(parsed.last)): two writers use one device ID (a copied device folder?)")
            }
        }
    }

    private func putBlob(_ name: ContainerName, _ bytes: [UInt8], in blobs: DirectoryHandle) throws(ChronicleError) {
        let (folders, leaf) = Self.split(name)
        var folder = try blobs.directory(components: folders, create: true)!
        let tmp = try self.folder(ContainerLayout.Directory.temporary)
        let temp = try writeTemporary(bytes, in: tmp)
        defer { try? tmp.remove(temp) }
        var err = tmp.link(temp, as: leaf, in: folder)
        // Another process's compaction removes folders it leaves empty: one
        // removed between its opening here and the link is made again.
        for _ in 0..<3 where err == ENOENT {
            folder = try blobs.directory(components: folders, create: true)!
            err = tmp.link(temp, as: leaf, in: folder)
        }
        if err == 0 { return try folder.sync() }
        guard err == EEXIST else { throw ChronicleError.system("link \(name)", errno: err) }
        let existing: [UInt8]?
        do {
            existing = try folder.readFile(leaf, maxBytes: bytes.count, what: "blob \(name)")
        } catch where error.code == .sizeOverCap {
            throw ChronicleError(.blobConflict, "blob \(name) already exists, larger than the \(bytes.count) bytes offered", underlying: error)
        }
        guard let existing else {
            throw ChronicleError(.unavailable, "blob \(name) was removed while it was being put; retry")
        }
        guard existing == bytes else {
            throw ChronicleError(.blobConflict, "blob \(name) already exists with different bytes (\(existing.count) stored, \(bytes.count) offered)")
        }
    }

    public func get(_ name: ContainerName, maxBytes: Int) async throws -> [UInt8] {
        let (folders, leaf) = Self.split(name)
        guard let folder = try folder(ContainerLayout.Directory.blobs).directory(components: folders, create: false),
              let bytes = try folder.readFile(leaf, maxBytes: maxBytes, what: "blob \(name)")
        else { throw ChronicleError(.notFound, "no blob named \(name)") }
        return bytes
    }

    public func list(prefix: String, after: ContainerName?, limit: Int) async throws -> [BlobInfo] {
        let blobs = try folder(ContainerLayout.Directory.blobs)
        var page: [BlobInfo] = []
        var cached: (folder: String, handle: DirectoryHandle?)?
        // Names outside the grammar are skipped here (see `foreignEntries`),
        // and an entry deleted since the walk is simply gone.
        for rel in try walk(blobs, prefix: prefix, after: after?.rawValue, markers: false).sorted() {
            guard page.count < limit else { break }
            guard let name = try? ContainerName(rel) else { continue }
            let (folders, leaf) = Self.split(name)
            let folderPath = folders.joined(separator: "/")
            if cached?.folder != folderPath {
                cached = (folderPath, try blobs.directory(components: folders, create: false))
            }
            guard let status = try cached?.handle?.status(of: leaf) else { continue }
            let kind = EntryKind(mode: status.st_mode)
            page.append(BlobInfo(name: name, size: kind == .regularFile ? Int(status.st_size) : 0))
        }
        return page
    }

    public func listChildren(prefix: String) async throws -> [String] {
        let folders = try Self.folders(of: prefix)
        guard let folder = try folder(ContainerLayout.Directory.blobs).directory(components: folders, create: false) else { return [] }
        return try folder.entries().map(\.name).filter { ContainerName.isValid($0) }.sorted()
    }

    public func delete(_ name: ContainerName) async throws {
        let (folders, leaf) = Self.split(name)
        guard let folder = try folder(ContainerLayout.Directory.blobs).directory(components: folders, create: false) else { return }
        try folder.remove(leaf)
        try folder.sync()
    }

    /// Entries under `prefix` that are not Chronicle's (see ``ForeignEntry``),
    /// in path order: names outside the grammar anywhere in `blobs/` and
    /// `markers/` (a folder with such a name is reported once, not walked),
    /// every symbolic link, FIFO, socket and device, and folders at names
    /// where the layout keeps a file (a log, a baseline part or a marker).
    /// Marker lock files are Chronicle's. `prefix` is matched against the
    /// path below `blobs/` or `markers/`.
    public func foreignEntries(prefix: String) async throws -> [ForeignEntry] {
        var found: [ForeignEntry] = []
        func visit(_ folder: DirectoryHandle, _ relative: String, markers: Bool) throws(ChronicleError) {
            for entry in try folder.entries() {
                let rel = relative.isEmpty ? entry.name : relative + "/" + entry.name
                guard let kind = try folder.kind(of: entry) else { continue }
                let lockSuffix = ContainerLayout.Directory.lockSuffix
                let isLock = markers && kind == .regularFile && rel.hasSuffix(lockSuffix)
                let name = try? ContainerName(isLock ? String(rel.dropLast(lockSuffix.count)) : rel)
                let path = folder.pathOf(entry.name)
                guard let name else {
                    if rel.hasPrefix(prefix) { found.append(ForeignEntry(path: path, reason: .nameOutsideGrammar)) }
                    continue
                }
                switch kind {
                case .regularFile:
                    continue
                case .directory:
                    if ContainerLayout.namesAFile(name, marker: markers) {
                        if rel.hasPrefix(prefix) { found.append(ForeignEntry(path: path, reason: .folderAtAFileName)) }
                    } else if rel.hasPrefix(prefix) || prefix.hasPrefix(rel + "/"), let sub = try folder.directory(entry.name, create: false) {
                        try visit(sub, rel, markers: markers)
                    }
                default:
                    if rel.hasPrefix(prefix) { found.append(ForeignEntry(path: path, reason: .notARegularFile(kind))) }
                }
            }
        }
        if prefix.isEmpty, let rootFolder = try DirectoryHandle.openRoot(root.path, followSymbolicLink: rootMayBeSymlink) {
            let layout: Set<String> = [ContainerLayout.Directory.blobs, ContainerLayout.Directory.markers, ContainerLayout.Directory.temporary]
            for entry in try rootFolder.entries() where !layout.contains(entry.name) {
                found.append(ForeignEntry(path: entry.name, reason: .outsideTheLayout))
            }
        }
        try visit(folder(ContainerLayout.Directory.blobs), "", markers: false)
        try visit(folder(ContainerLayout.Directory.markers), "", markers: true)
        return found.sorted { $0.path < $1.path }
    }

    // MARK: Markers

    public func readMarker(_ name: ContainerName) async throws -> Marker? {
        let (folders, leaf) = try Self.splitMarker(name)
        guard let folder = try folder(ContainerLayout.Directory.markers).directory(components: folders, create: false) else { return nil }
        return try Self.readMarkerFile(folder, leaf, name: name)
    }

    public func createMarker(_ name: ContainerName, _ bytes: [UInt8]) async throws -> Marker {
        try Self.checkMarkerSize(bytes, name)
        let (folders, leaf) = try Self.splitMarker(name)
        let folder = try folder(ContainerLayout.Directory.markers).directory(components: folders, create: true)!
        let marker = Marker(bytes: bytes, version: 1)
        let tmp = try self.folder(ContainerLayout.Directory.temporary)
        let temp = try writeTemporary(Self.markerFileBytes(marker), in: tmp)
        defer { try? tmp.remove(temp) }
        let err = tmp.link(temp, as: leaf, in: folder)
        if err == EEXIST { throw ChronicleError(.markerConflict, "marker \(name) already exists") }
        guard err == 0 else { throw ChronicleError.system("create marker \(name)", errno: err) }
        try folder.sync()
        return marker
    }

    public func replaceMarker(_ name: ContainerName, _ bytes: [UInt8], expected: UInt64) async throws -> Marker {
        try Self.checkMarkerSize(bytes, name)
        let (folders, leaf) = try Self.splitMarker(name)
        let folder = try folder(ContainerLayout.Directory.markers).directory(components: folders, create: true)!
        let tmp = try self.folder(ContainerLayout.Directory.temporary)
        return try folder.withLock(leaf + ContainerLayout.Directory.lockSuffix) { () throws(ChronicleError) -> Marker in
            guard let current = try Self.readMarkerFile(folder, leaf, name: name) else {
                throw ChronicleError(.markerConflict, "marker \(name) does not exist (expected version \(expected))")
            }
            guard current.version == expected else {
                throw ChronicleError(.markerConflict, "marker \(name) is at version \(current.version), expected \(expected)")
            }
            let marker = Marker(bytes: bytes, version: expected == .max ? 1 : expected + 1)
            let temp = try writeTemporary(Self.markerFileBytes(marker), in: tmp)
            do throws(ChronicleError) {
                try tmp.rename(temp, as: leaf, in: folder)
            } catch {
                try? tmp.remove(temp)
                throw error
            }
            try folder.sync()
            return marker
        }
    }

    public func deleteMarker(_ name: ContainerName, expected: UInt64?) async throws {
        let (folders, leaf) = try Self.splitMarker(name)
        guard let folder = try folder(ContainerLayout.Directory.markers).directory(components: folders, create: false) else { return }
        try folder.withLock(leaf + ContainerLayout.Directory.lockSuffix) { () throws(ChronicleError) in
            let current: Marker?
            do throws(ChronicleError) {
                current = try Self.readMarkerFile(folder, leaf, name: name)
            } catch where expected == nil && (error.code == .malformedBody || error.code == .sizeOverCap) {
                // Unconditional: a marker too damaged to hold a version, or
                // too big to be one, goes too.
                try folder.remove(leaf)
                try folder.sync()
                return
            }
            guard let current else { return }
            if let expected, current.version != expected {
                throw ChronicleError(.markerConflict, "marker \(name) is at version \(current.version), expected \(expected)")
            }
            try folder.remove(leaf)
            try folder.sync()
        }
    }

    public func listMarkers(prefix: String) async throws -> [ContainerName] {
        try walk(folder(ContainerLayout.Directory.markers), prefix: prefix, after: nil, markers: true)
            .filter { !$0.hasSuffix(ContainerLayout.Directory.lockSuffix) }
            .compactMap { try? ContainerName($0) }.sorted()
    }

    /// Reads a file outside any container, as `chronicle dump --file` does:
    /// a link the caller names is followed, but anything other than a
    /// regular file (a FIFO, which would block, a device, a folder) is a
    /// ``ChronicleError/Code/foreignEntry``, and a file larger than
    /// `maxBytes` is ``ChronicleError/Code/sizeOverCap`` before anything is
    /// allocated. A missing file is ``ChronicleError/Code/notFound``.
    package static func readFile(atPath path: String, maxBytes: Int) throws(ChronicleError) -> [UInt8] {
        let file = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard file >= 0 else { throw ChronicleError.system("cannot read \(path)", errno: errno) }
        defer { close(file) }
        return try DirectoryHandle.readRegularFile(file, maxBytes: maxBytes, what: path)
    }

    // MARK: Temporary files

    /// Removes temporary files that writers which ended (killed, crashed)
    /// left in `tmp/`, examining at most `limit` entries; returns how many
    /// it removed. Runs when the container is opened.
    ///
    /// A temporary file lives only while its put runs, and its name says who
    /// wrote it (its machine, boot and process ID). It is removed when it was last
    /// modified at least ``staleTemporaryFileAge`` before `now` and its
    /// writer ran on this boot of this machine and has ended (its process ID
    /// is gone or belongs to a process started at another time), or, when
    /// the writer cannot be checked (another machine, an earlier boot, a name
    /// of an older version), at least ``abandonedTemporaryFileAge`` before
    /// `now`. Folders in `tmp/` are left alone; a link is removed, never
    /// followed.
    @discardableResult
    public func removeStaleTemporaryFiles(now: Date, limit: Int = 4096) throws(ChronicleError) -> Int {
        try Self.removeStaleTemporaryFiles(in: folder(ContainerLayout.Directory.temporary), now: now, limit: limit)
    }

    private static func removeStaleTemporaryFiles(in tmp: DirectoryHandle, now: Date, limit: Int) throws(ChronicleError) -> Int {
        var removed = 0
        for entry in try tmp.entries().prefix(limit) {
            guard let status = try tmp.status(of: entry.name), EntryKind(mode: status.st_mode) != .directory else { continue }
            #if canImport(Darwin)
            let modified = Double(status.st_mtimespec.tv_sec) + Double(status.st_mtimespec.tv_nsec) / 1e9
            #else
            let modified = Double(status.st_mtim.tv_sec) + Double(status.st_mtim.tv_nsec) / 1e9
            #endif
            let age = now.timeIntervalSince1970 - modified
            let writer = TemporaryFileName(parsing: entry.name)
            let stale = age >= seconds(staleTemporaryFileAge) && writer?.writerHasEnded == true
            guard stale || age >= seconds(abandonedTemporaryFileAge) else { continue }
            try tmp.remove(entry.name)
            removed += 1
        }
        return removed
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// Writes `bytes` to a new temporary file in `tmp`, fsynced, and returns its name.
    private func writeTemporary(_ bytes: [UInt8], in tmp: DirectoryHandle) throws(ChronicleError) -> String {
        let name = TemporaryFileName(counter: counter.next(), random: UInt64.random(in: 0...UInt64.max)).rawValue
        try tmp.writeNewFile(name, bytes)
        return name
    }

    // MARK: Folders and names

    /// Opens the container's `blobs`, `markers` or `tmp` folder, anew for
    /// each operation: a share that was unmounted and mounted again is
    /// found again, and one that is gone (an empty mount point) is a
    /// transient ``ChronicleError/Code/unavailable``, never a folder made anew.
    private func folder(_ top: String) throws(ChronicleError) -> DirectoryHandle {
        let path = root.path
        guard let rootFolder = try DirectoryHandle.openRoot(path, followSymbolicLink: rootMayBeSymlink),
              let folder = try rootFolder.directory(top, create: false)
        else {
            throw ChronicleError(.unavailable, "the container \(path) has no \(top)/ folder any more: is its share still mounted?")
        }
        return folder
    }

    /// A name's folders and last component.
    private static func split(_ name: ContainerName) -> (folders: [Substring], leaf: String) {
        let parts = name.rawValue.split(separator: "/")
        return (Array(parts.dropLast()), String(parts.last!))
    }

    /// A marker name's folders and last component; names ending in `.lock`
    /// are the lock files'.
    private static func splitMarker(_ name: ContainerName) throws(ChronicleError) -> (folders: [Substring], leaf: String) {
        guard !name.rawValue.hasSuffix(ContainerLayout.Directory.lockSuffix) else {
            throw ChronicleError(.invalidName, "marker name \(name): names ending in .lock are reserved for the directory container's lock files")
        }
        return split(name)
    }

    /// The folders of a listing prefix: what comes before its last `/`.
    private static func folders(of prefix: String) throws(ChronicleError) -> [Substring] {
        let slash = prefix.lastIndex(of: "/")
        let dirPart = slash.map { String(prefix[..<$0]) } ?? ""
        if !dirPart.isEmpty && !ContainerName.isValid(dirPart) {
            throw ChronicleError(.invalidName, "listing prefix \(String(reflecting: prefix)) is outside the name grammar")
        }
        return dirPart.split(separator: "/")
    }

    /// The relative paths under `base` that start with `prefix` and sort
    /// after `after`, unsorted; callers check the grammar. Descends only
    /// into folders that can hold such names, and, given `after`, skips
    /// folders whose every name sorts before it (so a paged listing reads
    /// only what is left). Reads folders with `readdir`: the file type comes
    /// from `d_type`, with no `stat` per file. Links are never followed;
    /// entries that are not folders are returned whatever their kind, and
    /// so are folders at a blob's name, so that reading them fails loudly.
    private func walk(_ base: DirectoryHandle, prefix: String, after: String?, markers: Bool) throws(ChronicleError) -> [String] {
        let folders = try Self.folders(of: prefix)
        guard let start = try base.directory(components: folders, create: false) else { return [] }
        var result: [String] = []
        func visit(_ folder: DirectoryHandle, _ relative: String) throws(ChronicleError) {
            for entry in try folder.entries() {
                let rel = relative.isEmpty ? entry.name : relative + "/" + entry.name
                guard let kind = try folder.kind(of: entry) else { continue }
                let blobFolder = !markers && kind == .directory
                    && (try? ContainerName(rel)).map { ContainerLayout.namesAFile($0, marker: false) } == true
                if kind == .directory && !blobFolder {
                    // Descend only where the prefix can still match, and names can still follow `after`.
                    let inside = rel + "/"
                    if let after, after > inside, !after.hasPrefix(inside) { continue }
                    if rel.hasPrefix(prefix) || prefix.hasPrefix(inside), let sub = try folder.directory(entry.name, create: false) {
                        try visit(sub, rel)
                    }
                } else if rel.hasPrefix(prefix), after.map({ rel > $0 }) ?? true {
                    result.append(rel)
                }
            }
        }
        try visit(start, folders.joined(separator: "/"))
        return result
    }

    // MARK: Marker files

    private static func readMarkerFile(_ folder: DirectoryHandle, _ leaf: String, name: ContainerName) throws(ChronicleError) -> Marker? {
        guard let bytes = try folder.readFile(leaf, maxBytes: 8 + Marker.maxBytes, what: "marker \(name)") else { return nil }
        guard bytes.count >= 8 else {
            throw ChronicleError(.malformedBody, "marker \(name) is \(bytes.count) bytes, shorter than its version")
        }
        let version = bytes[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return Marker(bytes: Array(bytes[8...]), version: version)
    }

    private static func markerFileBytes(_ marker: Marker) -> [UInt8] {
        withUnsafeBytes(of: marker.version.bigEndian) { Array($0) } + marker.bytes
    }
}

/// A process-wide counter for unique temporary names.
private final class Counter: Sendable {
    private let value = Atomic<UInt64>(0)
    func next() -> UInt64 { value.wrappingAdd(1, ordering: .relaxed).newValue }
}
