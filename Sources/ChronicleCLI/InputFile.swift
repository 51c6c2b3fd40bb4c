import Chronicle
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Every file the CLI reads its input from: `save`'s changes, schema
/// files, a device folder's `device.json`, `bench --write-docs`. Files are read with plain POSIX `read` calls until the end, never
/// mapped and never sized by `stat` first, so pipes, process substitution
/// (`--input <(…)`) and `/dev/stdin` work like files; and every read has a
/// limit, so an input that never ends is refused instead of filling memory.
enum InputFile {
    /// The most bytes `save` reads (its changes, from a file or standard
    /// input): as much as one log holds, which is as much as one save may
    /// write (the JSON of a save is rarely smaller than its log).
    static let changesByteLimit = DecodingLimits.defaultMaxBodyBytes
    /// The most bytes of a schema file.
    static let schemaByteLimit = Schema.maxFileBytes

    /// The schema in the JSON file at `path`, a regular file (see
    /// ``regularFileBytes(at:what:limit:)``). Its errors start with the
    /// file's name, then the line and column.
    static func schema(at path: String) throws(ChronicleError) -> Schema {
        let bytes = try regularFileBytes(at: path, what: "schema file", limit: schemaByteLimit)
        do {
            return try Schema(json: Data(bytes))
        } catch {
            throw ChronicleError(error.code, "\(URL(fileURLWithPath: path).lastPathComponent): \(error.message)", underlying: error)
        }
    }

    /// ``schema(at:)`` for an `--earlier-schema` file: its errors name the option.
    static func earlierSchema(at path: String) throws(ChronicleError) -> Schema {
        do {
            return try schema(at: path)
        } catch {
            throw ChronicleError(error.code, "--earlier-schema: \(error.message)", underlying: error)
        }
    }

    /// The bytes of `path`, or of standard input when `path` is nil; `path`
    /// may be anything `open` reads (a file, a pipe, `/dev/stdin`).
    ///
    /// - Throws: ``ChronicleError/Code/notFound`` or ``ChronicleError/Code/io``
    ///   when it cannot be opened or read (a folder is refused here);
    ///   ``ChronicleError/Code/sizeOverCap`` past `limit` bytes.
    static func bytes(of path: String?, what: String, limit: Int) throws(ChronicleError) -> [UInt8] {
        guard let path else { return try readToEnd(STDIN_FILENO, name: "standard input", what: what, limit: limit) }
        let fd = try open(path, what: what)
        defer { close(fd) }
        var st = stat()
        if fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR {
            throw ChronicleError(.io, "\(what) \(path) is a folder, not a file")
        }
        return try readToEnd(fd, name: path, what: what, limit: limit)
    }

    /// The bytes of the regular file at `path` (symbolic links followed).
    /// A folder, a pipe or a device (`/dev/zero`, a FIFO no one writes
    /// to) is refused at once, without waiting on it.
    ///
    /// - Throws: ``ChronicleError/Code/io`` for anything but a regular file
    ///   (and for a loop of symbolic links); ``ChronicleError/Code/notFound``
    ///   for a missing file; ``ChronicleError/Code/sizeOverCap`` past `limit`.
    static func regularFileBytes(at path: String, what: String, limit: Int) throws(ChronicleError) -> [UInt8] {
        // Non-blocking: opening a FIFO would otherwise wait for a writer.
        let fd = try open(path, what: what, flags: O_NONBLOCK)
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw ChronicleError.system("stat \(what) \(path)", errno: errno) }
        let kind = st.st_mode & S_IFMT
        guard kind == S_IFREG else {
            let name = [S_IFDIR: "a folder", S_IFIFO: "a pipe", S_IFCHR: "a device", S_IFBLK: "a device", S_IFSOCK: "a socket"][kind] ?? "not a file"
            throw ChronicleError(.io, "\(what) \(path) is \(name), not a regular file")
        }
        return try readToEnd(fd, name: path, what: what, limit: limit)
    }

    private static func open(_ path: String, what: String, flags: Int32 = 0) throws(ChronicleError) -> Int32 {
        var fd: Int32
        repeat { fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | flags) } while fd < 0 && errno == EINTR
        guard fd >= 0 else {
            let err = errno
            if err == ELOOP { throw ChronicleError(.io, "\(what) \(path) is a loop of symbolic links") }
            throw ChronicleError.system("cannot open \(what) \(path)", errno: err)
        }
        return fd
    }

    private static func readToEnd(_ fd: Int32, name: String, what: String, limit: Int) throws(ChronicleError) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                let err = errno
                if err == EISDIR { throw ChronicleError(.io, "\(what) \(name) is a folder, not a file") }
                throw ChronicleError.system("cannot read \(what) \(name)", errno: err)
            }
            if n == 0 { return bytes }
            guard bytes.count + n <= limit else {
                throw ChronicleError(.sizeOverCap, "\(what) \(name) is longer than \(limit >> 20) MiB")
            }
            bytes.append(contentsOf: chunk[0..<n])
        }
    }
}
