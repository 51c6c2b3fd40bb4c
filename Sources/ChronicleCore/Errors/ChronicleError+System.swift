import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension ChronicleError {
    /// An error for a system call that failed with `errno`: the message
    /// says what was being done and why in the system's words
    /// ("open /data/device.json: Permission denied"), and the underlying
    /// error is the `POSIXError`.
    ///
    /// The code follows the cause: ``Code/diskFull`` for `ENOSPC` and
    /// `EDQUOT`; ``Code/unavailable`` (transient) for failures that may pass
    /// (`EAGAIN`, `EBUSY`, `EINTR`, `EIO`, `ESTALE`, `ETIMEDOUT`: a busy or
    /// stale network share); ``Code/notFound`` for `ENOENT`; ``Code/io`` for
    /// the rest (`EACCES`, `EROFS`, …).
    ///
    /// - Parameter what: the operation and the path, as "open /data/device.json".
    package static func system(
        _ what: String, errno err: Int32, file: String = #fileID, line: UInt = #line
    ) -> ChronicleError {
        let code: Code
        switch err {
        case ENOSPC, EDQUOT: code = .diskFull
        case EAGAIN, EBUSY, EINTR, EIO, ESTALE, ETIMEDOUT: code = .unavailable
        case ENOENT: code = .notFound
        default: code = .io
        }
        return ChronicleError(code, "\(what): \(String(cString: strerror(err)))",
                              underlying: POSIXErrorCode(rawValue: err).map { POSIXError($0) }, file: file, line: line)
    }

    /// An error for a file operation that Foundation reported (`FileManager`,
    /// `Data(contentsOf:)`): like ``system(_:errno:file:line:)`` when the
    /// error has a POSIX cause (its code and its words), otherwise
    /// ``Code/io`` with Foundation's description. The underlying error is
    /// Foundation's, with the POSIX error under it.
    package static func file(
        _ what: String, _ error: any Error, file: String = #fileID, line: UInt = #line
    ) -> ChronicleError {
        if let error = error as? ChronicleError { return error }
        let posix = (error as? POSIXError) ?? ((error as? CocoaError)?.underlying as? POSIXError)
        if let posix {
            let system = Self.system(what, errno: posix.code.rawValue, file: file, line: line)
            return ChronicleError(system.code, system.message, underlying: error,
                                  file: file, line: line)
        }
        return ChronicleError(.io, "\(what): \((error as NSError).localizedDescription)",
                              underlying: error, file: file, line: line)
    }
}
