import ArgumentParser
import Chronicle
import Foundation

struct Query: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a read-only SQL query on a device's snapshot.",
        discussion: """
            The snapshot has one table per entity (column `id` holds the record ID as 16 bytes; use hex(id)).
            Writes are refused: the connection is read-only.
            """)

    @Option(name: .customLong("device-dir"), help: "The device's directory.")
    var deviceDirectory: String

    @Argument(help: "The SQL query.")
    var sql: String

    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await reportingErrors(output) {
            let path = try DeviceFile.snapshotPath(in: URL(fileURLWithPath: deviceDirectory))
            var config = Configuration()
            config.readonly = true
            let queue: DatabaseQueue
            do {
                queue = try DatabaseQueue(path: path, configuration: config)
            } catch {
                throw ChronicleError.sqlite(error, .database, "cannot open \(path)")
            }
            let rows: [[String: JSONValue]]
            let columns: [String]
            do {
                (columns, rows) = try queue.read { db in
                    let statement = try db.makeStatement(sql: sql)
                    let names = statement.columnNames
                    let rows = try Row.fetchAll(statement).map { row in
                        Dictionary(uniqueKeysWithValues: names.enumerated().map { ($0.element, Query.json(row[$0.offset] as DatabaseValue)) })
                    }
                    return (names, rows)
                }
            } catch let error as DatabaseError {
                throw ChronicleError.sqlite(error, .database, "the query failed")
            }
            if output.json {
                print(JSONText.pretty(.array(rows.map { .object($0) })))
            } else {
                print(columns.joined(separator: "|"))
                for row in rows {
                    print(columns.map { c in Query.text(row[c] ?? .null) }.joined(separator: "|"))
                }
            }
        }
    }

    static func json(_ value: DatabaseValue) -> JSONValue {
        switch value.storage {
        case .null: return .null
        case .int64(let i): return .int(i)
        case .double(let d): return .double(d)
        case .string(let s): return .string(s)
        case .blob(let b): return b.count == 16 ? .string(b.withUnsafeBytes { RecordID(bytes: $0) }.description) : .string(b.base64EncodedString())
        }
    }

    static func text(_ value: JSONValue) -> String {
        switch value {
        case .null: return ""
        case .string(let s): return s
        case .int(let i): return String(i)
        case .double(let d): return String(d)
        case .bool(let b): return String(b)
        default: return JSONText.line(value)
        }
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
            let path = try DeviceFile.snapshotPath(in: URL(fileURLWithPath: deviceDirectory))
            let identity = try Snapshot.identity(at: path)
            let snapshot = try Snapshot(path: path, schema: identity.schema, storeID: identity.store, deviceID: identity.device)
            let hash = try snapshot.stateHash()
            let counts = try snapshot.recordCounts()
            try snapshot.close()
            output.print(.object(["stateHash": .string(hash), "store": .string(identity.store.description),
                                  "device": .string(identity.device.description),
                                  "records": .object(counts.mapValues { .int(Int64($0)) })]),
                         text: hash)
        }
    }
}
