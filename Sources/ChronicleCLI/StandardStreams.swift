import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Writes to standard output and standard error that never stop the
/// command: a full disk behind a redirection or a pipe nobody reads any
/// more loses the text, not the work. (Foundation's `FileHandle.write(_:)`
/// traps on such errors, and a closed pipe's signal would end the process:
/// `ChronicleCommand.main` ignores SIGPIPE, so the write fails instead.)
enum StandardStreams {
    /// Writes `text` to standard error.
    static func error(_ text: String) {
        write(Data(text.utf8), to: STDERR_FILENO)
    }

    /// Writes `data` to standard output.
    static func output(_ data: Data) {
        write(data, to: STDOUT_FILENO)
    }

    private static func write(_ data: Data, to descriptor: Int32) {
        data.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0 && errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
    }
}
