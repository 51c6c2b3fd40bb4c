import ArgumentParser
import Chronicle
import Foundation

struct Save: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply one transaction, given as JSON lines, on a device.",
        discussion: """
            Each input line is one change; all lines form one transaction, saved whole or not at all:
              {"op": "insert", "entity": "Book", "values": {"title": "Dune", "pages": 412}}
              {"op": "insert", "entity": "Book", "id": "<uuid>", "values": {...}}
              {"op": "update", "entity": "Book", "id": "<uuid>", "values": {"pages": 413}}
              {"op": "delete", "entity": "Book", "id": "<uuid>"}
            Values use the JSON forms in docs/values.md; dates are ISO 8601 with Z or an offset \
            (2026-01-31T14:00:00.5+02:00), or integer microseconds.
            A line that means nothing is refused, with its line and column, and nothing is saved (exit 1): \
            a key given twice, a key other than op, entity, id and values, values on a delete, \
            an update without values, an id that is not a UUID string.
            Prints the sequence the save committed as and the IDs of inserted records. \
            The save is durable when the command exits; run `chronicle sync` to upload it.
            """)

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    @Option(name: .shortAndLong, help: "Read changes from this file instead of standard input.")
    var input: String?

    func run() async throws {
        try await reportingErrors(output) {
            let text: String
            if let input {
                text = try String(contentsOfFile: input, encoding: .utf8)
            } else {
                text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
            }
            let store = try await device.open()
            let schema = store.configuration.schema
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
                .filter { !$0.element.trimmingCharacters(in: .whitespaces).isEmpty }
            guard !lines.isEmpty else { throw ChronicleError(.misuse, "no changes given: expected JSON lines on standard input") }
            var parsed: [ParsedChange] = []
            for (number, line) in lines {
                parsed.append(try ParsedChange(line: String(line), number: number + 1, schema: schema))
            }
            let (inserted, saved) = try await store.writeReporting { [parsed] tx -> [RecordID] in
                var ids: [RecordID] = []
                for change in parsed {
                    switch change.kind {
                    case .insert: ids.append(tx.insert(change.entity, change.values, id: change.id))
                    case .update: tx.update(change.entity, id: change.id!, change.values)
                    case .delete: tx.delete(change.entity, id: change.id!)
                    }
                }
                return ids
            }
            // The sequence this save committed as (nil: the input changed nothing).
            let sequence = saved?.sequence ?? 0
            try await store.close()
            output.print(.object(["sequence": .int(Int64(sequence)), "inserted": .array(inserted.map { .string($0.description) })]),
                         text: "saved sequence \(sequence)" + inserted.map { "\ninserted \($0)" }.joined())
        }
    }
}

/// One JSON line of `chronicle save`.
///
/// A line that could mean two things, or nothing, is refused rather than
/// guessed at: a key given twice, a key the line format does not have,
/// `values` on a delete, an update without values, an `id` that is not a
/// UUID string.
struct ParsedChange {
    var kind: ChangeKind
    var entity: String
    var id: RecordID?
    var values: [String: Value] = [:]

    static let keys: Set<String> = ["op", "entity", "id", "values"]

    init(line: String, number: Int, schema: Schema) throws {
        let at = "line \(number)"
        let json: JSONValue
        do {
            json = try JSONValue(parsing: Data(line.utf8))
        } catch {
            // The parser's own line is always 1: the input is one line.
            throw ChronicleError(.malformedBody, "\(at), " + error.message.replacingOccurrences(of: "line 1, ", with: "", options: .anchored))
        }
        guard case .object(let o) = json else { throw ChronicleError(.malformedBody, "\(at): not a JSON object but \(json.kindName)") }
        if let unknown = o.keys.sorted().first(where: { !Self.keys.contains($0) }) {
            throw ChronicleError(.malformedBody, "\(at): unknown key \"\(unknown)\" (a change has \"op\", \"entity\", \"id\" and \"values\")")
        }
        guard case .string(let op)? = o["op"], let kind = ["insert": ChangeKind.insert, "update": .update, "delete": .delete][op] else {
            throw ChronicleError(.malformedBody, "\(at): \"op\" must be \"insert\", \"update\" or \"delete\"")
        }
        guard case .string(let entityName)? = o["entity"], let entity = schema.entity(named: entityName) else {
            throw ChronicleError(.unknownEntity, "\(at): \"entity\" must name an entity of the schema")
        }
        self.kind = kind
        self.entity = entityName
        switch o["id"] {
        case .string(let s)?:
            guard let id = RecordID(string: s) else { throw ChronicleError(.malformedBody, "\(at): \"id\" is not a UUID") }
            self.id = id
        case nil:
            if kind != .insert { throw ChronicleError(.malformedBody, "\(at): \(op) needs an \"id\"") }
        case let other?:
            throw ChronicleError(.malformedBody, "\(at): \"id\" must be a UUID string, not \(other.kindName)")
        }
        switch o["values"] {
        case .object(let values)?:
            if kind == .delete {
                throw ChronicleError(.malformedBody, "\(at): a delete takes no \"values\" (it removes the whole record)")
            }
            if kind == .update && values.isEmpty {
                throw ChronicleError(.malformedBody, "\(at): an update needs \"values\" to change")
            }
            for (name, json) in values {
                guard let field = entity.field(named: name) else {
                    throw ChronicleError(.unknownAttribute, "\(at): \(entityName) has no field \(name)")
                }
                self.values[name] = try Value(json: json, for: field, path: "\(at): \(entityName).\(name)")
            }
        case nil:
            if kind == .update { throw ChronicleError(.malformedBody, "\(at): an update needs \"values\" to change") }
        case let other?:
            throw ChronicleError(.malformedBody, "\(at): \"values\" must be an object, not \(other.kindName)")
        }
    }
}
