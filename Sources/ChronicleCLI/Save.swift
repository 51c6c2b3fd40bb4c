import ArgumentParser
import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Synchronization

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
            The input is UTF-8 (at most 64 MiB, the most one save's log holds); lines may end in CRLF, blank lines are skipped. \
            --input takes any file open(2) reads: a pipe, /dev/stdin, process substitution.
            A line that means nothing is refused, with its line and column, and nothing is saved (exit 1): \
            a key given twice, a key other than op, entity, id and values, values on a delete, \
            an update without values, an id that is not a UUID string.
            An insert without an id gets a new time-ordered UUID (version 7). Give your own id to refer \
            to a record that the same input inserts (a note in a folder made on an earlier line); make it \
            time-ordered too (the inserted IDs an earlier save printed show the form): when two devices \
            make records with the same unique key apart, the one with the smallest ID stays and the \
            others merge into it (docs/merge.md), so a random UUID can win over an older record.
            Prints the sequence the save committed as and the IDs of inserted records. \
            The save is durable when the command exits; run `chronicle sync` to upload it. \
            A save that takes more than a moment reports its progress on standard error (reading the lines, \
            applying the changes): a line rewritten in place on a terminal, plain lines every 2 s otherwise.
            """)

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    @Option(name: .shortAndLong, help: "Read changes from this file (or pipe) instead of standard input.")
    var input: String?

    func run() async throws {
        try await reportingErrors(output) {
            let schema = try device.loadSchema()
            let bytes = try InputFile.bytes(of: input, what: "input", limit: InputFile.changesByteLimit)
            // Parsed before the store opens: bad input leaves no device folder behind.
            let lines = ChangeLines.split(bytes)
            let reading = ProgressLine("save: reading", unit: "lines", total: lines.count)
            let parsed = try { () throws -> [ParsedChange] in
                defer { reading.finish() }
                var parsed: [ParsedChange] = []
                parsed.reserveCapacity(lines.count)
                for line in lines {
                    if parsed.count % 4_096 == 0 { reading.update(parsed.count) }
                    parsed.append(try ParsedChange(line: line.bytes, number: line.number, schema: schema))
                }
                reading.update(parsed.count)
                return parsed
            }()
            guard !parsed.isEmpty else {
                throw ChronicleError(.misuse, "no changes given: \(input ?? "standard input") holds no JSON lines (one change per line)")
            }
            let opened = try await device.open(schema: schema)
            let store = opened.store
            if let unreachable = opened.unreachable {
                // The save is made, as an app's would be offline; a mistyped
                // --container must not pass unnoticed, though.
                StandardStreams.error("chronicle: warning: the container \(unreachable.location) cannot be reached: \(unreachable.why); this save stays on this device until a sync reaches the container\n")
            }
            let generated = GeneratedIDs()
            let total = parsed.count
            let applying = ProgressLine("save", unit: "changes", total: total)
            defer { applying.finish() }
            let (inserted, saved) = try await ParsedChange.locatingErrors(parsed, generated) { try await store.writeReporting({ tx -> [RecordID] in
                var ids: [RecordID] = []
                for change in parsed {
                    switch change.kind {
                    case .insert:
                        let id = change.id ?? tx.newRecordID()
                        generated.record(id, line: change.number)
                        ids.append(tx.insert(change.entity, change.values, id: id))
                    case .update: tx.update(change.entity, id: change.id!, change.values)
                    case .delete: tx.delete(change.entity, id: change.id!)
                    }
                }
                return ids
            }, progress: { applied, _ in
                // The commit that follows the last change is a phase of its
                // own: said when it starts, not at the next report.
                if applied == total { applying.update(applied, note: "committing", now: true) } else { applying.update(applied) }
            }) }
            applying.finish()
            // The sequence this save committed as (nil: the input changed nothing).
            let sequence = saved?.sequence ?? 0
            try await opened.close()
            output.print(.object(["sequence": .int(Int64(sequence)), "inserted": .array(inserted.map { .string($0.description) })]),
                         text: "saved sequence \(sequence)" + inserted.map { "\ninserted \($0)" }.joined())
        }
    }
}

/// The IDs `save` gave the records it inserts, by line, to name the line
/// of an error about one of them.
final class GeneratedIDs: Sendable {
    private let lines = Mutex<[RecordID: Int]>([:])

    func record(_ id: RecordID, line: Int) {
        lines.withLock { $0[id] = line }
    }

    func line(of id: RecordID) -> Int? {
        lines.withLock { $0[id] }
    }
}

/// The lines of `save`'s input: split at line feeds, a carriage return
/// before one dropped (CRLF files read like LF ones), blank lines skipped.
/// Each keeps its line number in the input, for messages.
/// Only the lines that hold something are kept: input of blank lines
/// alone costs no memory per line.
enum ChangeLines {
    static func split(_ bytes: [UInt8]) -> [(number: Int, bytes: ArraySlice<UInt8>)] {
        var lines: [(number: Int, bytes: ArraySlice<UInt8>)] = []
        var number = 1
        var start = 0
        var blank = true
        for i in bytes.indices {
            let b = bytes[i]
            if b == 0x0A {
                if !blank { lines.append((number, trimmed(bytes[start..<i]))) }
                number += 1
                start = i + 1
                blank = true
            } else if b != 0x20 && b != 0x09 && b != 0x0D {
                blank = false
            }
        }
        if !blank { lines.append((number, trimmed(bytes[start...]))) }
        return lines
    }

    /// The line without the carriage return of a CRLF end.
    private static func trimmed(_ line: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        line.last == 0x0D ? line.dropLast() : line
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
    /// The line as given (a slice of the input, not a copy), to find
    /// record IDs in it again from the save's errors.
    var line: ArraySlice<UInt8> = []
    /// Its line number in the input.
    var number: Int

    static let keys: Set<String> = ["op", "entity", "id", "values"]

    /// Reads the change on line `number` of the input.
    ///
    /// - Throws: a ``ChronicleError`` whose message starts with the line and
    ///   column of the fault: ``ChronicleError/Code/malformedBody`` for text
    ///   that is not JSON (or not UTF-8) or a change that means nothing,
    ///   ``ChronicleError/Code/unknownEntity`` and
    ///   ``ChronicleError/Code/unknownAttribute`` for names the schema lacks,
    ///   ``ChronicleError/Code/typeMismatch`` (and the other value codes)
    ///   for a value its field cannot take.
    init(line: ArraySlice<UInt8>, number: Int, schema: Schema) throws(ChronicleError) {
        let (json, positions) = try JSONValue.parseWithPositions(Data(line), code: .malformedBody, firstLine: number)
        /// "line 2, column 14" for the value at `path`, or the line's own.
        func at(_ path: String) -> String {
            (positions[path] ?? positions["(root)"])?.description ?? "line \(number), column 1"
        }
        guard case .object(let o) = json else { throw ChronicleError(.malformedBody, "\(at("(root)")): not a JSON object but \(json.kindName)") }
        if let unknown = o.keys.sorted().first(where: { !Self.keys.contains($0) }) {
            throw ChronicleError(.malformedBody, "\(at(unknown)): unknown key \(Self.quoted(unknown)) (a change has \"op\", \"entity\", \"id\" and \"values\")")
        }
        guard case .string(let op)? = o["op"], let kind = ["insert": ChangeKind.insert, "update": .update, "delete": .delete][op] else {
            throw ChronicleError(.malformedBody, "\(at("op")): \"op\" must be \"insert\", \"update\" or \"delete\"")
        }
        guard case .string(let entityName)? = o["entity"] else {
            throw ChronicleError(.malformedBody, "\(at("entity")): \"entity\" must be the name of an entity of the schema")
        }
        guard let entity = schema.entity(named: entityName) else {
            throw ChronicleError(.unknownEntity, "\(at("entity")): the schema has no entity \(Self.quoted(entityName))")
        }
        self.kind = kind
        self.entity = entityName
        self.number = number
        switch o["id"] {
        case .string(let s)?:
            guard let id = RecordID(string: s) else { throw ChronicleError(.malformedBody, "\(at("id")): \"id\" is not a UUID") }
            self.id = id
        case nil:
            if kind != .insert { throw ChronicleError(.malformedBody, "\(at("(root)")): \(op) needs an \"id\"") }
        case let other?:
            throw ChronicleError(.malformedBody, "\(at("id")): \"id\" must be a UUID string, not \(other.kindName)")
        }
        switch o["values"] {
        case .object(let values)?:
            if kind == .delete {
                throw ChronicleError(.malformedBody, "\(at("values")): a delete takes no \"values\" (it removes the whole record)")
            }
            if kind == .update && values.isEmpty {
                throw ChronicleError(.malformedBody, "\(at("values")): an update needs \"values\" to change")
            }
            for (name, json) in values.sorted(by: { $0.key < $1.key }) {
                let path = "values.\(name)"
                guard let field = entity.field(named: name) else {
                    if let toMany = entity.relationships.first(where: { $0.isToMany && $0.name == name }) {
                        throw ChronicleError(.unknownAttribute, "\(at(path)): \(entityName).\(name) is a to-many relationship, which a record does not hold: "
                                             + "set \(toMany.destination).\(toMany.inverse ?? "its inverse") on each \(toMany.destination) instead")
                    }
                    throw ChronicleError(.unknownAttribute, "\(at(path)): \(entityName) has no field \(Self.quoted(name))")
                }
                let value = try Value(json: json, for: field, path: "\(at(path)): \(entityName).\(name)")
                try Self.check(value, of: field, "\(at(path)): \(entityName).\(Self.quotedIfOdd(name))")
                self.values[name] = value
            }
        case nil:
            if kind == .update { throw ChronicleError(.malformedBody, "\(at("(root)")): an update needs \"values\" to change") }
        case let other?:
            throw ChronicleError(.malformedBody, "\(at("values")): \"values\" must be an object, not \(other.kindName)")
        }
        if kind == .insert, let missing = entity.fields.first(where: { !$0.isOptional && $0.defaultValue == nil && values[$0.name] == nil }) {
            throw ChronicleError(.missingValue, "\(at(o["values"] == nil ? "(root)" : "values")): \(entityName).\(missing.name) is required")
        }
        self.line = line
    }

    /// Refuses, before the save, what the save would refuse of a value
    /// alone, so that the message can name its line and column: null for a
    /// required field, text holding U+0000.
    private static func check(_ value: Value, of field: Field, _ at: String) throws(ChronicleError) {
        if value.isNull && !field.isOptional {
            throw ChronicleError(.missingValue, "\(at) is required: it cannot be null")
        }
        if case .string(let text) = value, text.utf8.contains(0) {
            throw ChronicleError(.invalidValue, "\(at) holds the character U+0000, which text read back from SQLite stops at; keep such bytes in a data attribute")
        }
    }

    /// `name` as it is when it is a plain name, quoted as JSON otherwise.
    static func quotedIfOdd(_ name: String) -> String {
        name.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x5F } && !name.isEmpty
            ? name : quoted(name)
    }

    /// Runs `save`; an error it throws about a record (one the input names
    /// by ID: updated, deleted or referred to) gets the line and column
    /// where the input first names that record.
    static func locatingErrors<T>(_ changes: [ParsedChange], _ generated: GeneratedIDs, _ save: () async throws -> T) async throws -> T {
        do {
            return try await save()
        } catch let error as ChronicleError {
            // A unique violation names the record that has the key first and
            // the one that cannot have it last: the change at fault is the latter's.
            guard let place = (error.code == .recordExists ? secondInsert(in: changes, of: error.message) : nil)
                    ?? firstMention(in: changes, generated, of: error.message, lastIDFirst: error.code == .uniqueViolation) else { throw error }
            var message = error.message
            if error.code == .uniqueViolation {
                // The record that has the key may be one this input
                // inserts too: say where, since it is no record yet.
                let ids = recordIDs(in: message)
                var named: Set<RecordID> = []
                for id in ids.dropLast() where named.insert(id).inserted {
                    if let line = insertLine(of: id, in: changes, generated) { message += " (\(id) is inserted by line \(line) of this input)" }
                }
            }
            throw ChronicleError(error.code, "\(place): \(message)", underlying: error)
        }
    }

    /// The record IDs `message` names, in order.
    static func recordIDs(in message: String) -> [RecordID] {
        message.split(whereSeparator: { !$0.isHexDigit && $0 != "-" }).compactMap { RecordID(string: String($0)) }
    }

    /// The line of the input that inserts `id`, if one does.
    static func insertLine(of id: RecordID, in changes: [ParsedChange], _ generated: GeneratedIDs) -> Int? {
        generated.line(of: id) ?? changes.first { $0.kind == .insert && $0.id == id }?.number
    }

    /// "line 3, column 40" where a record ID in `message` first appears in
    /// the input ("line 3, column 1" for the ID an insert got), or nil.
    static func firstMention(in changes: [ParsedChange], _ generated: GeneratedIDs, of message: String, lastIDFirst: Bool = false) -> String? {
        let ids = recordIDs(in: message)
        if lastIDFirst, let last = ids.last, let place = firstMention(in: changes, generated, of: [last]) { return place }
        return firstMention(in: changes, generated, of: ids)
    }

    /// For a record the save inserts twice, where the second insert names
    /// it (the one at fault); nil if it inserts it once (the record was
    /// there before the save: the first mention is at fault).
    static func secondInsert(in changes: [ParsedChange], of message: String) -> String? {
        let ids = Set(recordIDs(in: message))
        var seen: Set<RecordID> = []
        for change in changes where change.kind == .insert {
            guard let id = change.id, ids.contains(id) else { continue }
            if !seen.insert(id).inserted {
                let text = String(decoding: change.line, as: UTF8.self)
                let column = text.range(of: id.description, options: .caseInsensitive).map { text.unicodeScalars.distance(from: text.startIndex, to: $0.lowerBound) + 1 } ?? 1
                return "line \(change.number), column \(column)"
            }
        }
        return nil
    }

    /// Where the input first names one of `ids`, or gave it to an insert.
    private static func firstMention(in changes: [ParsedChange], _ generated: GeneratedIDs, of ids: [RecordID]) -> String? {
        for change in changes {
            for id in ids {
                let text = String(decoding: change.line, as: UTF8.self)
                if let range = text.range(of: id.description, options: .caseInsensitive) {
                    return "line \(change.number), column \(text.unicodeScalars.distance(from: text.startIndex, to: range.lowerBound) + 1)"
                }
                if generated.line(of: id) == change.number {
                    return "line \(change.number), column 1"
                }
            }
        }
        return nil
    }

    /// A name from the input as a JSON string, so that quotes, control
    /// characters and line breaks in it cannot pass for the message's own.
    /// Cut after 40 characters, so a huge name does not flood the message.
    static func quoted(_ name: String) -> String {
        name.count > 40 ? JSONText.line(.string(String(name.prefix(40)))) + "…" : JSONText.line(.string(name))
    }
}
