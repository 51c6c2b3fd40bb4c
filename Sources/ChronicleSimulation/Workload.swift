import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import GRDB

/// What the simulated app saves: a table of operations, each a weight and a
/// body that adds changes to a save.
///
/// A step that saves draws one number to choose an operation by weight (in
/// table order), reads which folders, notes and readings the device sees,
/// then draws the values every operation may use (a folder name, a title,
/// a word count and two free numbers), so every save draws the same numbers
/// in the same order whatever runs. An operation whose records do not exist
/// yet runs its fallback instead; until a folder exists, every save inserts
/// one.
///
/// To add an operation, add one entry to ``operations`` with its default
/// weight (0 keeps existing seeds' runs as they were; `--swarm` and
/// `--weight` turn it on). Its body should use the drawn values: drawing
/// more from the run's generator would move every later draw of the seed.
enum Workload {
    /// The workload's schema: folders with a unique name (so devices create
    /// duplicates), notes that cascade with their folder, comments that
    /// nullify when their note goes, and readings, which refer to nothing and
    /// nothing refers to (an independent entity, whose first inserts keep
    /// their merge state compact in the row).
    static let schema = try! Schema(version: 1, entities: [
        Entity("Folder", attributes: [Attribute("name", .string)],
               relationships: [.toMany("notes", to: "Note", inverse: "folder")], unique: [["name"]]),
        Entity("Note", attributes: [Attribute("title", .string), Attribute("words", .int64, default: 0),
                                    Attribute("pinned", .bool, default: false), Attribute("score", .double, optional: true)],
               relationships: [.toOne("folder", to: "Folder", inverse: "notes", deleteRule: .cascade),
                               .toMany("comments", to: "Comment", inverse: "note")]),
        Entity("Comment", attributes: [Attribute("text", .string)],
               relationships: [.toOne("note", to: "Note", inverse: "comments", deleteRule: .nullify)]),
        Entity("Reading", attributes: [Attribute("label", .string), Attribute("value", .double, optional: true),
                                       Attribute("count", .int64, default: 0)]),
    ])

    static let folderNames = ["Inbox", "Work", "Home", "Ideas"]

    /// The workload's second schema version, which devices upgrade to in a
    /// run with ``SimulationOptions/upgrades``: notes gain an optional
    /// color, a reading's `label` is renamed `name`, and tags are new, with
    /// a unique label (devices that upgrade tag concurrently, and tags of
    /// one label are merged).
    static let upgraded = try! Schema(version: 2, entities: [
        Entity("Folder", attributes: [Attribute("name", .string)],
               relationships: [.toMany("notes", to: "Note", inverse: "folder")], unique: [["name"]]),
        Entity("Note", attributes: [Attribute("title", .string), Attribute("words", .int64, default: 0),
                                    Attribute("pinned", .bool, default: false), Attribute("score", .double, optional: true),
                                    Attribute("color", .string, optional: true)],
               relationships: [.toOne("folder", to: "Folder", inverse: "notes", deleteRule: .cascade),
                               .toMany("comments", to: "Comment", inverse: "note")]),
        Entity("Comment", attributes: [Attribute("text", .string)],
               relationships: [.toOne("note", to: "Note", inverse: "comments", deleteRule: .nullify)]),
        Entity("Reading", attributes: [Attribute("name", .string, renamedFrom: ["label"]), Attribute("value", .double, optional: true),
                                       Attribute("count", .int64, default: 0)]),
        Entity("Tag", attributes: [Attribute("label", .string)], unique: [["label"]]),
    ])

    /// The schema of `version` (1 or 2).
    static func schema(version: Int) -> Schema { version >= 2 ? upgraded : schema }

    /// The versions before `version`, which a device on it reads the logs of.
    static func earlierSchemas(before version: Int) -> [Schema] { version >= 2 ? [schema] : [] }

    /// The schema every device ends on: the upgraded one in a run with upgrades.
    static func finalSchema(upgrades: Bool) -> Schema { upgrades ? upgraded : schema }

    /// A decoder for the logs of a run, in the final schema's terms.
    static func decoder(upgrades: Bool) -> LogDecoder {
        upgrades ? LogDecoder(schema: upgraded, earlier: [try! SchemaMigration(from: schema, to: upgraded)]) : LogDecoder(schema: schema)
    }

    /// What `written` (in the terms of `version`) wrote, in the final
    /// schema's terms: the acknowledgement ledger keeps one name per field.
    static func canonical(_ written: [Written], version: Int, upgrades: Bool) -> [Written] {
        guard upgrades, version < 2 else { return written }
        return written.map { w in
            var w = w
            if w.entity == "Reading" { w.fields = w.fields.map { $0 == "label" ? "name" : $0 } }
            return w
        }
    }

    static let colors = ["red", "green", "blue"]

    /// With the upgraded version, a tag of a label this device has no tag
    /// of yet (another device may tag it at the same time: one of the two
    /// is merged into the other).
    static func tag(_ input: Input, _ tx: inout WriteTransaction) -> [Written] {
        guard input.version >= 2,
              let label = (0..<colors.count).lazy.map({ colors[(Int(input.r1 % 3) + $0) % colors.count] }).first(where: { !input.tags.contains($0) })
        else { return [] }
        let tag = tx.insert("Tag", ["label": .string(label)])
        return [Written(kind: .insert, entity: "Tag", id: tag, fields: ["label"])]
    }

    /// The records a device sees when it saves, and the values drawn for the save.
    struct Input {
        var folders: [RecordID]
        var notes: [RecordID]
        var readings: [RecordID]
        /// One of ``folderNames``.
        var folderName: String
        /// A title unique enough to tell saves apart ("n3-512").
        var title: String
        var words: Int64
        /// Free numbers: which record to pick, which optional fields to set.
        var r1: UInt64
        var r2: UInt64
        /// The schema version the device runs (see ``upgraded``), and the
        /// tags it sees there.
        var version = 1
        var tags: [String] = []

        /// A reading's name field in the device's version.
        var readingName: String { version >= 2 ? "name" : "label" }

        func pick(_ ids: [RecordID]) -> RecordID { ids[Int(r1 % UInt64(ids.count))] }
    }

    /// One change a save made, as the acknowledgement ledger keeps it.
    struct Written: Sendable {
        var kind: ChangeKind
        var entity: String
        var id: RecordID
        /// The fields the change wrote (an insert writes every field, defaults included).
        var fields: [String]
    }

    /// What an operation needs to exist before it can run.
    enum Needs: Sendable {
        case nothing, note, reading
    }

    /// One kind of save.
    struct Operation: Sendable {
        /// The name `--weight` and ``SimulationOptions/operationWeights`` use.
        var name: String
        /// How often it is chosen by default, against the others' weights.
        var weight: Int
        var needs: Needs = .nothing
        /// The operation that runs instead when what it needs does not exist.
        var fallback: String? = nil
        var body: @Sendable (Input, inout WriteTransaction) -> [Written]
    }

    /// Every operation, in the order weights are laid out. The default
    /// weights add up to 100.
    static let operations: [Operation] = [
        Operation(name: "insert-folder", weight: 12) { input, tx in
            let id = tx.insert("Folder", ["name": .string(input.folderName)])
            return [Written(kind: .insert, entity: "Folder", id: id, fields: ["name"])]
        },
        Operation(name: "insert-note", weight: 28) { input, tx in
            var values: [String: Value] = ["title": .string(input.title), "words": .int(input.words), "folder": .reference(input.pick(input.folders))]
            if input.version >= 2, input.r2 % 4 == 1 { values["color"] = .string(colors[Int(input.r1 % 3)]) }
            let id = tx.insert("Note", values)
            var written = [Written(kind: .insert, entity: "Note", id: id,
                                   fields: ["title", "words", "pinned", "score", "folder"] + (input.version >= 2 ? ["color"] : []))]
            if input.r2 % 3 == 0 {
                let comment = tx.insert("Comment", ["text": "first!", "note": .reference(id)])
                written.append(Written(kind: .insert, entity: "Comment", id: comment, fields: ["text", "note"]))
            }
            if input.r2 % 7 == 3 { written += tag(input, &tx) }
            return written
        },
        Operation(name: "update-note", weight: 19, needs: .note, fallback: "insert-note") { input, tx in
            let id = input.pick(input.notes)
            var values: [String: Value] = ["words": .int(input.words)]
            if input.r2 % 2 == 0 { values["title"] = .string(input.title) }
            if input.r2 % 5 == 0 { values["score"] = .double(input.r2 % 7 == 0 ? .nan : Double(input.r2 % 100) / 3) }
            if input.version >= 2, input.r2 % 3 == 1 { values["color"] = .string(colors[Int(input.r2 % 3)]) }
            tx.update("Note", id: id, values)
            return [Written(kind: .update, entity: "Note", id: id, fields: values.keys.sorted())]
        },
        Operation(name: "delete-note", weight: 10, needs: .note, fallback: "insert-note") { input, tx in
            let id = input.pick(input.notes)
            tx.delete("Note", id: id)
            return [Written(kind: .delete, entity: "Note", id: id, fields: [])]
        },
        // Deleting a folder cascades to its notes: it waits until there are some.
        Operation(name: "delete-folder", weight: 5, needs: .note, fallback: "insert-note") { input, tx in
            let id = input.pick(input.folders)
            tx.delete("Folder", id: id)
            return [Written(kind: .delete, entity: "Folder", id: id, fields: [])]
        },
        Operation(name: "insert-reading", weight: 8) { input, tx in
            let value: Value = input.r2 % 4 == 0 ? .null : .double(input.r2 % 11 == 0 ? -0.0 : Double(input.words) / 7)
            let id = tx.insert("Reading", [input.readingName: .string(input.title), "value": value])
            var written = [Written(kind: .insert, entity: "Reading", id: id, fields: [input.readingName, "value", "count"])]
            if input.r2 % 5 == 2 { written += tag(input, &tx) }
            return written
        },
        Operation(name: "update-reading", weight: 8, needs: .reading, fallback: "insert-reading") { input, tx in
            let id = input.pick(input.readings)
            var values: [String: Value] = ["count": .int(input.words)]
            if input.r2 % 3 == 0 { values[input.readingName] = .string(input.title) }
            tx.update("Reading", id: id, values)
            return [Written(kind: .update, entity: "Reading", id: id, fields: values.keys.sorted())]
        },
        Operation(name: "delete-reading", weight: 4, needs: .reading, fallback: "insert-reading") { input, tx in
            let id = input.pick(input.readings)
            tx.delete("Reading", id: id)
            return [Written(kind: .delete, entity: "Reading", id: id, fields: [])]
        },
        // A rename can clash with another folder's name: refused locally,
        // de-duplicated when the clash is between devices.
        Operation(name: "rename-folder", weight: 6) { input, tx in
            let id = input.pick(input.folders)
            tx.update("Folder", id: id, ["name": .string(input.folderName)])
            return [Written(kind: .update, entity: "Folder", id: id, fields: ["name"])]
        },
    ]

    static let standardWeights = Dictionary(uniqueKeysWithValues: operations.map { ($0.name, $0.weight) })

    static func operation(named name: String) -> Operation {
        guard let operation = operations.first(where: { $0.name == name }) else { preconditionFailure("no operation \(name)") }
        return operation
    }

    /// The operation `choice` lands on, given the weights (`choice` is below their sum).
    static func chosen(_ choice: UInt64, weights: [String: Int]) -> Operation {
        var rest = choice
        for operation in operations {
            let weight = UInt64(weights[operation.name] ?? 0)
            if rest < weight { return operation }
            rest -= weight
        }
        preconditionFailure("choice \(choice) is beyond the weights' sum")
    }

    /// What runs when `operation` was chosen and the device sees `input`.
    static func resolve(_ operation: Operation, _ input: Input) -> Operation {
        // Notes need a folder, and nothing else is worth doing without one.
        if input.folders.isEmpty { return Self.operation(named: "insert-folder") }
        var operation = operation
        while let fallback = operation.fallback, !has(operation.needs, input) {
            operation = Self.operation(named: fallback)
        }
        return operation
    }

    private static func has(_ needs: Needs, _ input: Input) -> Bool {
        switch needs {
        case .nothing: true
        case .note: !input.notes.isEmpty
        case .reading: !input.readings.isEmpty
        }
    }
}
