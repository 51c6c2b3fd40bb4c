import ChronicleCore
import GRDB

extension ChronicleError {
    /// Wraps an error that came up through SQLite (GRDB) while doing `what`,
    /// keeping it as the underlying error. A `ChronicleError` passes
    /// unchanged. The code follows SQLite's result code where it says more
    /// than `code`: ``Code/diskFull`` for `SQLITE_FULL`,
    /// ``Code/databaseCorrupt`` for `SQLITE_CORRUPT` and `SQLITE_NOTADB`,
    /// ``Code/unavailable`` for `SQLITE_BUSY` and `SQLITE_LOCKED`,
    /// ``Code/io`` for `SQLITE_IOERR`, `SQLITE_CANTOPEN` and
    /// `SQLITE_READONLY`; anything else keeps `code`. The message ends with
    /// SQLite's own words ("database or disk is full").
    package static func sqlite(
        _ error: any Error, _ code: Code, _ what: String, file: String = #fileID, line: UInt = #line
    ) -> ChronicleError {
        if let error = error as? ChronicleError { return error }
        guard let db = error as? DatabaseError else {
            return ChronicleError(code, "\(what): \(error)", underlying: error, file: file, line: line)
        }
        let specific: Code
        switch db.resultCode {
        case .SQLITE_FULL: specific = .diskFull
        case .SQLITE_CORRUPT, .SQLITE_NOTADB: specific = .databaseCorrupt
        case .SQLITE_BUSY, .SQLITE_LOCKED: specific = .unavailable
        case .SQLITE_IOERR, .SQLITE_CANTOPEN, .SQLITE_READONLY: specific = .io
        default: specific = code
        }
        let reason = db.message ?? "SQLite error \(db.extendedResultCode.rawValue)"
        return ChronicleError(specific, "\(what): \(reason)", underlying: db, file: file, line: line)
    }
}
