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
            Values use the JSON forms in docs/values.md. Prints the sequence and the IDs of inserted records.
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
            let (inserted, saved) = try await store.writeReporting { tx -> [RecordID] in
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
struct ParsedChange {
    var kind: ChangeKind
    var entity: String
    var id: RecordID?
    var values: [String: Value] = [:]

    init(line: String, number: Int, schema: Schema) throws {
        let at = "line \(number)"
        guard case .object(let o) = try (try? JSONDecoder().decode(JSONValue.self, from: Data(line.utf8))) ?? {
            throw ChronicleError(.malformedBody, "\(at): not a JSON object")
        }() else { throw ChronicleError(.malformedBody, "\(at): not a JSON object") }
        guard case .string(let op)? = o["op"], let kind = ["insert": ChangeKind.insert, "update": .update, "delete": .delete][op] else {
            throw ChronicleError(.malformedBody, "\(at): \"op\" must be \"insert\", \"update\" or \"delete\"")
        }
        guard case .string(let entityName)? = o["entity"], let entity = schema.entity(named: entityName) else {
            throw ChronicleError(.unknownEntity, "\(at): \"entity\" must name an entity of the schema")
        }
        self.kind = kind
        self.entity = entityName
        if case .string(let s)? = o["id"] {
            guard let id = RecordID(string: s) else { throw ChronicleError(.malformedBody, "\(at): \"id\" is not a UUID") }
            self.id = id
        } else if kind != .insert {
            throw ChronicleError(.malformedBody, "\(at): \(op) needs an \"id\"")
        }
        if case .object(let values)? = o["values"] {
            for (name, json) in values {
                guard let field = entity.field(named: name) else {
                    throw ChronicleError(.unknownAttribute, "\(at): \(entityName) has no field \(name)")
                }
                self.values[name] = try Value(json: json, for: field, path: "\(at): \(entityName).\(name)")
            }
        } else if o["values"] != nil {
            throw ChronicleError(.malformedBody, "\(at): \"values\" must be an object")
        }
    }
}
