import CSQLite
import ChronicleCore
import Foundation
import GRDB

/// Binds and steps GRDB's cached statements through the SQLite C API.
///
/// The merge engine runs a handful of statements per record; profiling the
/// replay benchmark showed GRDB's `StatementArguments` (an array of boxed
/// values, validated per call) costing more than SQLite's own insert. These
/// helpers bind straight from the values the engine already holds. They are
/// used only inside a GRDB write transaction, on statements no other code
/// path executes with GRDB arguments.
struct RawBinder {
    let statement: OpaquePointer
    private var index: Int32 = 1

    init(_ statement: OpaquePointer) { self.statement = statement }

    mutating func bind(_ value: Int64) {
        sqlite3_bind_int64(statement, index, value)
        index += 1
    }

    mutating func bind(_ value: Int) { bind(Int64(value)) }

    mutating func bind(_ id: RecordID) {
        // Big-endian high then low: the same 16 bytes as `RecordID.bytes`.
        _ = withUnsafeBytes(of: (id.high.bigEndian, id.low.bigEndian)) { sqlite3_bind_blob(statement, index, $0.baseAddress, 16, chronicle_sqlite_transient()) }
        index += 1
    }

    mutating func bind(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { sqlite3_bind_blob(statement, index, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32($0.count), chronicle_sqlite_transient()) }
        index += 1
    }

    /// Binds bytes without SQLite copying them (`SQLITE_STATIC`): they must
    /// stay unchanged until the step is done (`run` then clears the
    /// bindings).
    mutating func bindInPlace(_ bytes: UnsafeRawBufferPointer) {
        _ = sqlite3_bind_blob(statement, index, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(bytes.count), nil)
        index += 1
    }

    /// Binds a value as its column stores it (`Value.databaseValue`),
    /// without boxing the common kinds.
    mutating func bind(_ value: Value) {
        switch value {
        case .null: sqlite3_bind_null(statement, index)
        case .int(let i): sqlite3_bind_int64(statement, index, i)
        case .date(let t):
            guard let seconds = t.storedSeconds else { return bind(value.databaseValue) }
            sqlite3_bind_double(statement, index, seconds)
        case .bool(let b): sqlite3_bind_int64(statement, index, b ? 1 : 0)
        case .double(let d) where !d.isNaN && !(d == 0 && d.sign == .minus): sqlite3_bind_double(statement, index, d)
        case .string(let s): return bind(s)
        default: return bind(value.databaseValue)
        }
        index += 1
    }

    /// Binds text (SQLite copies it).
    mutating func bind(_ text: String) {
        var text = text
        _ = text.withUTF8 { sqlite3_bind_text(statement, index, UnsafeRawPointer($0.baseAddress ?? UnsafePointer(bitPattern: 1)!).assumingMemoryBound(to: CChar.self), Int32($0.count), chronicle_sqlite_transient()) }
        index += 1
    }

    /// Binds a value still in its log body's encoding as `bind(raw.value)`
    /// would, without building the value: strings and data are bound in
    /// place (`SQLITE_STATIC`: the body outlives the statement's step, and
    /// `run` clears the bindings after it).
    mutating func bind(_ raw: RawValue) {
        // The payload was verified when its log was: it is read here through
        // its pointer, without the checked reader of the decoder's module
        // (a call per value, not inlined across modules).
        let p = raw.payload
        switch raw.tag {
        case 0: sqlite3_bind_null(statement, index)
        case 1, 7:
            // A length varint, then the bytes: the bytes are what follows
            // the varint's last byte (high bit clear).
            guard let stop = p.firstIndex(where: { $0 < 0x80 }) else { return bind(raw.value) }
            let bytes = UnsafeRawBufferPointer(rebasing: p[(stop + 1)...])
            guard raw.tag == 1 else { return bindInPlace(bytes) }
            sqlite3_bind_text(statement, index, (bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!).assumingMemoryBound(to: CChar.self), Int32(bytes.count), nil)
        case 2:
            guard let i = Self.signedVarint(p) else { return bind(raw.value) }
            sqlite3_bind_int64(statement, index, i)
        case 6:
            // A date: seconds since 1970 (`Value.databaseValue`).
            guard let micros = Self.signedVarint(p),
                  let seconds = Timestamp(microsecondsSinceEpoch: micros).storedSeconds
            else { return bind(raw.value) }
            sqlite3_bind_double(statement, index, seconds)
        case 3:
            guard p.count == 8 else { return bind(raw.value) }
            let d = Double(bitPattern: UInt64(bigEndian: p.loadUnaligned(as: UInt64.self)))
            // NaN and -0.0 are stored as their bytes (`Value.databaseValue`).
            if d.isNaN || (d == 0 && d.sign == .minus) { return bind(raw.value) }
            sqlite3_bind_double(statement, index, d)
        case 4, 5: sqlite3_bind_int64(statement, index, raw.tag == 5 ? 1 : 0)
        case 11 where p.count == 16:
            // A reference: the 16 bytes of the record ID, as stored.
            return bindInPlace(p)
        default:
            // UUIDs and the kinds a compact state never holds.
            return bind(raw.value)
        }
        index += 1
    }

    /// A zigzag varint that is the whole of `bytes` (a verified payload),
    /// or nil if it is not one of at most ten bytes.
    @inline(__always)
    private static func signedVarint(_ bytes: UnsafeRawBufferPointer) -> Int64? {
        guard !bytes.isEmpty, bytes.count <= 10 else { return nil }
        var v: UInt64 = 0
        var shift: UInt64 = 0
        for (i, byte) in bytes.enumerated() {
            v |= UInt64(byte & 0x7F) << shift
            shift += 7
            if byte < 0x80 { return i == bytes.count - 1 ? Int64(bitPattern: (v >> 1) ^ (0 &- (v & 1))) : nil }
        }
        return nil
    }

    mutating func bind(_ value: DatabaseValue) {
        switch value.storage {
        case .null: sqlite3_bind_null(statement, index)
        case .int64(let i): sqlite3_bind_int64(statement, index, i)
        case .double(let d): sqlite3_bind_double(statement, index, d)
        case .string(let s): return bind(s)
        case .blob(let data):
            _ = data.withUnsafeBytes { sqlite3_bind_blob(statement, index, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32($0.count), chronicle_sqlite_transient()) }
        }
        index += 1
    }
}

extension Database {
    /// Runs a prepared statement that returns no rows.
    func run(_ statement: OpaquePointer, _ bind: (inout RawBinder) -> Void) throws {
        sqlite3_reset(statement)
        var binder = RawBinder(statement)
        bind(&binder)
        let code = sqlite3_step(statement)
        sqlite3_reset(statement)
        sqlite3_clear_bindings(statement)
        guard code == SQLITE_DONE else { throw rawError(code, statement) }
    }

    /// Runs a query and hands its first row, if any, to `read`.
    func first<T>(_ sql: String, _ bind: (inout RawBinder) -> Void, read: (OpaquePointer) throws -> T) throws -> T? {
        try first(cachedStatement(sql: sql).sqliteStatement, bind, read: read)
    }

    /// Runs a prepared query and hands its first row, if any, to `read`.
    func first<T>(_ statement: OpaquePointer, _ bind: (inout RawBinder) -> Void, read: (OpaquePointer) throws -> T) throws -> T? {
        sqlite3_reset(statement)
        var binder = RawBinder(statement)
        bind(&binder)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        switch sqlite3_step(statement) {
        case SQLITE_ROW: return try read(statement)
        case SQLITE_DONE: return nil
        case let code: throw rawError(code, statement)
        }
    }

    /// Runs a prepared query and hands each row to `read`.
    func all<T>(_ statement: OpaquePointer, _ bind: (inout RawBinder) -> Void, read: (OpaquePointer) throws -> T) throws -> [T] {
        sqlite3_reset(statement)
        var binder = RawBinder(statement)
        bind(&binder)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        var result: [T] = []
        while true {
            switch sqlite3_step(statement) {
            case SQLITE_ROW: result.append(try read(statement))
            case SQLITE_DONE: return result
            case let code: throw rawError(code, statement)
            }
        }
    }

    /// The ID of the row of `table` whose `column` holds each of `values`
    /// (compared as SQLite compares the value stored for it), nil where no
    /// row does: one lookup per value through one prepared statement, for
    /// a column with a unique index. Runs inside a transaction of the
    /// caller's.
    package func rowIDs(in table: String, where column: String, equals values: [Value]) throws -> [RecordID?] {
        let statement = try cachedStatement(sql: "SELECT id FROM \(table.quotedDatabaseIdentifier) WHERE \(column.quotedDatabaseIdentifier) = ?").sqliteStatement
        var ids: [RecordID?] = []
        ids.reserveCapacity(values.count)
        for value in values {
            ids.append(try first(statement, { $0.bind(value) }, read: { statement -> RecordID? in
                guard sqlite3_column_bytes(statement, 0) == 16, let bytes = sqlite3_column_blob(statement, 0) else { return nil }
                return RecordID(bytes: UnsafeRawBufferPointer(start: bytes, count: 16))
            }) ?? nil)
        }
        return ids
    }

    /// The error of a failed step of `statement`, as GRDB would report it.
    func rawError(_ code: Int32, _ statement: OpaquePointer) -> DatabaseError {
        DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(sqliteConnection)),
                      sql: sqlite3_sql(statement).map { String(cString: $0) })
    }
}

/// Statements resolved once per merge engine, by slot number. GRDB's
/// statement cache is keyed by the SQL text, and hashing that text for every
/// statement of every record showed in the replay profile.
final class StatementSlots {
    private var slots: [Statement?]
    /// Bytes a statement binds in place (`RawBinder.bindInPlace`): alive as
    /// long as the statements, rewritten only between steps.
    let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 8)

    init(count: Int) { slots = Array(repeating: nil, count: count) }

    deinit { scratch.deallocate() }

    func get(_ slot: Int, _ db: Database, _ sql: @autoclosure () -> String) throws -> OpaquePointer {
        if let statement = slots[slot] { return statement.sqliteStatement }
        let statement = try db.cachedStatement(sql: sql())
        slots[slot] = statement
        return statement.sqliteStatement
    }
}

/// Reads column `index` of the current row as bytes.
func columnBytes(_ statement: OpaquePointer, _ index: Int32) -> [UInt8] {
    let count = Int(sqlite3_column_bytes(statement, index))
    guard count > 0, let base = sqlite3_column_blob(statement, index) else { return [] }
    return Array(UnsafeRawBufferPointer(start: base, count: count))
}

/// Reads column `index` of the current row as a record ID (a 16-byte blob).
func columnRecordID(_ statement: OpaquePointer, _ index: Int32) throws -> RecordID {
    guard sqlite3_column_bytes(statement, index) == 16, let base = sqlite3_column_blob(statement, index) else {
        throw ChronicleError(.databaseCorrupt, "a record ID column holds \(sqlite3_column_bytes(statement, index)) bytes, not 16")
    }
    return RecordID(bytes: UnsafeRawBufferPointer(start: base, count: 16))
}

/// Reads column `index` of the current row as a snapshot value.
func columnValue(_ statement: OpaquePointer, _ index: Int32) -> DatabaseValue {
    switch sqlite3_column_type(statement, index) {
    case SQLITE_INTEGER: return sqlite3_column_int64(statement, index).databaseValue
    case SQLITE_FLOAT: return sqlite3_column_double(statement, index).databaseValue
    case SQLITE_TEXT:
        let count = Int(sqlite3_column_bytes(statement, index))
        guard let base = sqlite3_column_text(statement, index) else { return "".databaseValue }
        return String(decoding: UnsafeBufferPointer(start: base, count: count), as: UTF8.self).databaseValue
    case SQLITE_BLOB: return Data(columnBytes(statement, index)).databaseValue
    default: return .null
    }
}
