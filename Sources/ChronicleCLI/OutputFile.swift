import Chronicle
import ChronicleCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Every file a command writes its output to with `--output`: an export,
/// a sample feed. A regular file (or none) is replaced whole: the bytes
/// go to a file beside it, synced, then renamed over it, so a reader or a
/// crash never sees half of it, and the file keeps its permissions. Any
/// other file is written through as a shell redirection would, never
/// replaced: a device (`/dev/stdout`, `/dev/null`), a FIFO, a symbolic link
/// (its target is written, the link stays).
enum OutputFile {
    /// A JSON document to `path`, or (nil) to standard output with a line
    /// break after it.
    static func write(_ data: Data, to path: String?) throws(ChronicleError) {
        guard let path else {
            StandardStreams.output(data + Data("\n".utf8))
            return
        }
        try write(data, to: path)
    }

    static func write(_ data: Data, to path: String) throws(ChronicleError) {
        var status = stat()
        let exists = lstat(path, &status) == 0
        if exists && (status.st_mode & S_IFMT) != S_IFREG {
            let fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC)
            guard fd >= 0 else { throw ChronicleError.system("open \(path)", errno: errno) }
            defer { close(fd) }
            try writeAll(fd, data, path)
            return
        }
        let url = URL(fileURLWithPath: path)
        let folder = url.deletingLastPathComponent().path
        let temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(getpid()).tmp").path
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o666)
        guard fd >= 0 else { throw ChronicleError.system("create \(temporary)", errno: errno) }
        do throws(ChronicleError) {
            if exists { fchmod(fd, status.st_mode & 0o7777) }
            try writeAll(fd, data, path)
            guard fsync(fd) == 0 else { throw ChronicleError.system("sync \(temporary)", errno: errno) }
            close(fd)
            guard rename(temporary, path) == 0 else { throw ChronicleError.system("rename \(temporary) to \(path)", errno: errno) }
        } catch {
            close(fd)
            unlink(temporary)
            throw error
        }
        let directory = open(folder.isEmpty ? "." : folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directory >= 0 {
            _ = fsync(directory)
            close(directory)
        }
    }

    private static func writeAll(_ fd: Int32, _ data: Data, _ path: String) throws(ChronicleError) {
        let failure: Int32? = data.withUnsafeBytes { raw -> Int32? in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                offset += n
            }
            return nil
        }
        if let failure { throw ChronicleError.system("write \(path)", errno: failure) }
    }
}
