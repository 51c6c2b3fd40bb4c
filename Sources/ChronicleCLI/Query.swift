import ArgumentParser
import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB

struct Query: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a read-only SQL query on a device's snapshot.",
        discussion: """
            The snapshot has one table per entity, with a column per attribute and to-one relationship \
            and `id`, the record ID (16 bytes; hex(id) in SQL). References hold record IDs too. `uuid('…')` turns \
            a UUID string, as `save` prints IDs, into one: `WHERE id = uuid('01a2…')` (NULL for text that is no UUID). \
            The query is exactly one statement that only reads: \
            several statements, a write (INSERT, UPDATE, DELETE, CREATE, a PRAGMA that sets, VACUUM) and ATTACH \
            are refused as bad usage (exit 2) before anything runs; the connection is read-only besides.

            A column taken straight from an entity's table prints by its schema type, in the forms \
            `save` reads (docs/values.md): record IDs and references as UUID strings, dates as ISO 8601 \
            in UTC, data as base64, doubles as numbers or "nan", "inf", "-inf", "-0.0", decimals and \
            UUIDs as strings, transformables as {"type", "mime", "base64"}. Any other column (an \
            expression such as count(*) or hex(id)) prints by its SQLite type, blobs as base64.

            Text output: a header line of column names, then one line per row, columns separated by \
            a tab. In names and values a backslash prints as \\\\, a tab as \\t, a line break as \\n, \
            a carriage return as \\r, and NULL as \\N (the text format of PostgreSQL's COPY).

            --json: an array with one object per row, keyed by column name (names must then differ: \
            rename one with AS).
            """)

    @Option(name: .customLong("device-dir"), help: "The device's directory.")
    var deviceDirectory: String

    @Argument(help: "The SQL query.")
    var sql: String

    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await reportingErrors(output) {
            let path = try StoreManager.snapshotPath(in: URL(fileURLWithPath: deviceDirectory))
            let schema = try Snapshot.identity(at: path).schema
            var config = Configuration()
            config.readonly = true
            config.prepareDatabase { db in db.add(function: Self.uuidFunction) }
            let queue: DatabaseQueue
            do {
                queue = try DatabaseQueue(path: path, configuration: config)
            } catch {
                throw ChronicleError.sqlite(error, .database, "cannot open \(path)")
            }
            let rows: [[JSONValue]]
            let columns: [String]
            do {
                (columns, rows) = try queue.read { db in
                    let statement = try Self.oneReadOnlyStatement(sql, in: db)
                    let kinds = statement.columnNames.indices.map { ColumnKind(statement, column: $0, schema: schema) }
                    var rows: [[JSONValue]] = []
                    var bytes = 0
                    let cursor = try Row.fetchCursor(statement)
                    while let row = try cursor.next() {
                        let values = kinds.indices.map { row[$0] as DatabaseValue }
                        bytes += values.reduce(64) { $0 + 48 + Self.size(of: $1) }
                        guard bytes <= Self.resultByteLimit else {
                            throw ChronicleError(.sizeOverCap, "the query's result is larger than \(Self.resultByteLimit >> 20) MiB (\(rows.count) rows so far): narrow it with WHERE or LIMIT")
                        }
                        rows.append(kinds.indices.map { kinds[$0].json(values[$0]) })
                    }
                    return (statement.columnNames, rows)
                }
            } catch let error as DatabaseError {
                throw ChronicleError.sqlite(error, .database, "the query failed")
            } catch let error as RefusedQuery {
                throw ValidationError(error.message)
            }
            if output.json {
                var seen: Set<String> = []
                if let twice = columns.first(where: { !seen.insert($0).inserted }) {
                    throw ValidationError("column \"\(twice)\" appears twice in the result; --json keys rows by column name: rename one with AS")
                }
                print(JSONText.pretty(.array(rows.map { .object(Dictionary(uniqueKeysWithValues: zip(columns, $0))) })))
            } else {
                print(columns.map(Query.escaped).joined(separator: "\t"))
                for row in rows {
                    print(row.map(Query.text).joined(separator: "\t"))
                }
            }
        }
    }

    /// A query `query` does not run, and why.
    struct RefusedQuery: Error {
        var message: String
    }

    /// The most bytes of values one query may return, so that a query
    /// without end (a recursive WITH) is refused instead of filling memory.
    static let resultByteLimit = 256 << 20

    /// Bytes of text and blob values, 8 for the others (a row counts 64
    /// more, and each value 48, for what holding it costs).
    static func size(of value: DatabaseValue) -> Int {
        switch value.storage {
        case .string(let s): return s.utf8.count
        case .blob(let b): return b.count
        default: return 8
        }
    }

    /// The statements `query` runs, by their first word.
    static let readingKeywords: Set<String> = ["select", "with", "values", "explain", "pragma"]

    /// `uuid(text)`: the 16 bytes of a record ID written as a UUID string
    /// (any case), as record IDs and references are stored; NULL for
    /// anything else.
    static let uuidFunction = DatabaseFunction("uuid", argumentCount: 1, pure: true) { values in
        guard let text = String.fromDatabaseValue(values[0]), let uuid = UUID(uuidString: text) else { return nil as Data? }
        return withUnsafeBytes(of: uuid.uuid) { Data($0) }
    }

    /// The one statement of `sql`, prepared, if it only reads: several
    /// statements, none, and any statement that writes, attaches a database
    /// or controls transactions are refused with a message that says so,
    /// before anything runs.
    static func oneReadOnlyStatement(_ sql: String, in db: Database) throws -> Statement {
        guard let keyword = firstWord(of: sql) else {
            throw RefusedQuery(message: "the query has no SQL statement: give one SELECT")
        }
        guard readingKeywords.contains(keyword) else {
            throw RefusedQuery(message: "the query is \(keyword.uppercased()): query runs one statement that only reads (SELECT, WITH, VALUES, EXPLAIN, or a PRAGMA that reads)")
        }
        // Belt and braces: no ATTACH, and no value larger than a result may be.
        UntrustedQuery.limit(db, maxValueBytes: resultByteLimit)
        let statements = try db.allStatements(sql: sql)
        guard let statement = try statements.next() else {
            throw RefusedQuery(message: "the query has no SQL statement: give one SELECT")
        }
        let more: Bool
        do { more = try statements.next() != nil } catch { more = true }
        guard !more else {
            throw RefusedQuery(message: "the query has several SQL statements: query runs exactly one, and only one that reads")
        }
        guard statement.isReadonly else {
            throw RefusedQuery(message: "the query writes: query runs one statement that only reads (a PRAGMA that sets, a WITH that writes are refused)")
        }
        return statement
    }

    /// The first word of `sql`, lowercased, after whitespace and comments;
    /// nil if there is none.
    static func firstWord(of sql: String) -> String? {
        var rest = Substring(sql)
        while true {
            rest = rest.drop(while: { $0.isWhitespace || $0 == ";" })
            if rest.hasPrefix("--") {
                rest = rest.drop(while: { $0 != "\n" })
            } else if rest.hasPrefix("/*") {
                guard let close = rest.range(of: "*/") else { return nil }
                rest = rest[close.upperBound...]
            } else {
                break
            }
        }
        let word = rest.prefix(while: { $0.isLetter })
        return word.isEmpty ? (rest.isEmpty ? nil : String(rest.prefix(1))) : word.lowercased()
    }

    /// What a result column holds, as far as the schema tells.
    enum ColumnKind {
        /// An entity's `id`.
        case recordID
        /// An entity's attribute or to-one relationship.
        case field(Field)
        /// An expression, or a column of Chronicle's own tables.
        case untyped

        /// The kind of column `index` of `statement`: SQLite names the table
        /// and column a result column comes straight from.
        init(_ statement: Statement, column index: Int, schema: Schema) {
            guard let (table, name) = UntrustedQuery.origin(of: statement, column: index),
                  // A column of an entity's view comes from its rows table.
                  let entity = SnapshotTables.entity(ofRowsTable: table).flatMap(schema.entity(named:))
            else { self = .untyped; return }
            if name == "id" {
                self = .recordID
            } else if let field = entity.field(named: name) {
                self = .field(field)
            } else {
                self = .untyped
            }
        }

        /// The value in its JSON form (the form `save` reads, for typed columns).
        func json(_ value: DatabaseValue) -> JSONValue {
            switch self {
            case .recordID:
                if let id = RecordID.fromDatabaseValue(value) { return .string(id.description) }
            case .field(let field):
                if let typed = try? Value(databaseValue: value, field: field) { return typed.json }
            case .untyped:
                break
            }
            switch value.storage {
            case .null: return .null
            case .int64(let i): return .int(i)
            case .double(let d): return Value.double(d).json
            case .string(let s): return .string(s)
            case .blob(let b): return .string(b.base64EncodedString())
            }
        }
    }

    /// A value in the text output.
    static func text(_ value: JSONValue) -> String {
        switch value {
        case .null: return "\\N"
        case .string(let s): return escaped(s)
        case .int(let i): return String(i)
        case .double(let d): return String(d)
        case .bool(let b): return String(b)
        default: return escaped(JSONText.line(value))
        }
    }

    /// `s` with backslashes, tabs, line breaks and carriage returns
    /// escaped, and every other character a terminal acts on (escape
    /// sequences, bidirectional overrides) as `\u{hex}`.
    static func escaped(_ s: String) -> String {
        guard s.unicodeScalars.contains(where: { $0 == "\\" || isTerminalControl($0) }) else { return s }
        var out = ""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\t": out += "\\t"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case _ where isTerminalControl(scalar): out += "\\u{\(String(scalar.value, radix: 16))}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}

struct StateHash: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "state-hash",
        abstract: "Print the canonical hash of everything a device's snapshot shows.",
        discussion: "Devices that hold the same visible state print the same hash, whatever order they imported logs in.")

    @Option(name: .customLong("device-dir"), help: "The device's directory.")
    var deviceDirectory: String

    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await reportingErrors(output) {
            let path = try StoreManager.snapshotPath(in: URL(fileURLWithPath: deviceDirectory))
            let identity = try Snapshot.identity(at: path)
            // Read-only, as `query`: printing a hash changes nothing in the
            // folder (a snapshot of an earlier format stays as it is).
            var config = Configuration()
            config.readonly = true
            let (hash, counts): (String, [String: Int])
            do {
                let queue = try DatabaseQueue(path: path, configuration: config)
                (hash, counts) = try queue.read { db in
                    (try Snapshot.stateHash(db, schema: identity.schema), try Snapshot.recordCounts(db, schema: identity.schema))
                }
                try queue.close()
            } catch {
                throw ChronicleError.sqlite(error, .database, "cannot read \(path)")
            }
            output.print(.object(["stateHash": .string(hash), "store": .string(identity.store.description),
                                  "device": .string(identity.device.description),
                                  "records": .object(counts.mapValues { .int(Int64($0)) })]),
                         text: hash)
        }
    }
}
