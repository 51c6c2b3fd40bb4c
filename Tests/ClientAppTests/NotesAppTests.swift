// A notes app as a new user writes it: only `import Chronicle` (and GRDB
// for its own record types), a `@MainActor` view model, Codable records,
// three devices sharing one folder. It compiles in Swift 6 language mode
// with strict concurrency and no warnings.
import Chronicle
import Foundation
import GRDB
import Testing

struct Folder: ChronicleRecord, Equatable {
    static let entityName = "Folder"
    var id: RecordID
    var name: String
}

struct Note: ChronicleRecord, Equatable {
    static let entityName = "Note"
    var id: RecordID
    var title: String
    var body: String
    var pinned: Bool
    var words: Int64
    var rating: Double
    var price: Decimal
    var created: Date
    var attachment: Data
    var token: UUID
    var tags: [String]
    var due: Date?
    var folder: RecordID?
    /// Shown while editing; never stored.
    var isSelected = false

    enum CodingKeys: String, CodingKey {
        case id, title, body, pinned, words, rating, price, created, attachment, token, tags, due, folder
    }
}

/// The same rows read as a plain GRDB record, with GRDB's default decoding.
struct NoteRow: Decodable, FetchableRecord, TableRecord, Equatable {
    static let databaseTableName = "Note"
    var id: RecordID
    var title: String
    var body: String
    var pinned: Bool
    var words: Int64
    var rating: Double
    var price: Decimal
    var created: Date
    var attachment: Data
    var token: UUID
    var tags: TransformableValue
    var due: Date?
    var folder: RecordID?
}

let notesSchema = try! Schema(version: 1, entities: [
    Entity("Folder", attributes: [Attribute("name", .string)], unique: [["name"]]),
    Entity("Note", attributes: [
        Attribute("title", .string),
        Attribute("body", .string),
        Attribute("pinned", .bool),
        Attribute("words", .int64),
        Attribute("rating", .double),
        Attribute("price", .decimal),
        Attribute("created", .date),
        Attribute("attachment", .data),
        Attribute("token", .uuid),
        Attribute("tags", .transformable),
        Attribute("due", .date, optional: true),
    ], relationships: [.toOne("folder", to: "Folder")]),
])

@MainActor
final class NotesViewModel {
    private(set) var notes: [Note] = []
    private(set) var folders: [Folder] = []
    let store: Store

    init(store: Store) { self.store = store }

    static func open(device: URL, container: URL) async throws -> NotesViewModel {
        let store = try await Store.open(Store.Configuration(
            schema: notesSchema, directory: device,
            container: try DirectoryContainer(root: container, create: true)))
        return NotesViewModel(store: store)
    }

    func reload() async throws {
        notes = try await store.fetchAll(Note.self).sorted { $0.title < $1.title }
        folders = try await store.fetchAll(Folder.self)
    }

    @discardableResult
    func addFolder(_ name: String) async throws -> RecordID {
        let id = try await store.write { tx in
            let folder = Folder(id: tx.newRecordID(), name: name)
            try tx.insert(folder)
            return folder.id
        }
        try await reload()
        return id
    }

    @discardableResult
    func addNote(_ title: String, in folder: RecordID?, price: Decimal, tags: [String]) async throws -> Note {
        let note = try await store.write { tx in
            let note = Note(id: tx.newRecordID(), title: title, body: "About \(title)", pinned: false, words: 2,
                            rating: 4.5, price: price, created: Date(timeIntervalSince1970: 1_790_000_000.25),
                            attachment: Data([0, 1, 2, 255]), token: UUID(), tags: tags, due: nil, folder: folder)
            try tx.insert(note)
            return note
        }
        try await reload()
        return note
    }

    func moveOutOfFolder(_ note: Note) async throws {
        var changed = note
        changed.folder = nil
        try await store.write { [changed] tx in try tx.update(changed) }
        try await reload()
    }

    func delete(_ note: Note) async throws {
        try await store.write { tx in tx.delete(Note.self, id: note.id) }
        try await reload()
    }

    /// Values for a list view, straight from SQL (GRDB's `Row` stays inside the read).
    func titles() async throws -> [String] {
        try await store.read { db in
            try Row.fetchAll(db, sql: "SELECT title, price FROM Note ORDER BY title").map { $0["title"] as String }
        }
    }

    func noteRows() async throws -> [NoteRow] {
        try await store.read { db in try NoteRow.order(Column("title")).fetchAll(db) }
    }

    func sync() async throws -> Store.SyncReport { try await store.sync() }
}

@Suite struct NotesAppTests {
    let root: URL

    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("notes-app-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    }

    func device(_ name: String) -> URL { root.appendingPathComponent(name) }
    var container: URL { root.appendingPathComponent("shared") }

    @Test @MainActor func threeDevicesEditNotesFromTheMainActor() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let phone = try await NotesViewModel.open(device: device("phone"), container: container)
        let laptop = try await NotesViewModel.open(device: device("laptop"), container: container)
        let tablet = try await NotesViewModel.open(device: device("tablet"), container: container)

        let work = try await phone.addFolder("Work")
        let price = Decimal(string: "19.99")!
        let memo = try await phone.addNote("Memo", in: work, price: price, tags: ["a", "b"])
        var selected = memo
        selected.isSelected = true // in memory only: saving it must not fail
        try await phone.store.write { [selected] tx in try tx.update(selected) }
        _ = try await laptop.addNote("Groceries", in: nil, price: Decimal(string: "-0.000001")!, tags: [])
        for model in [phone, laptop, tablet, phone, laptop, tablet] { _ = try await model.sync() }

        for model in [phone, laptop, tablet] {
            try await model.reload()
            #expect(model.notes.map(\.title) == ["Groceries", "Memo"])
            let memoThere = try #require(model.notes.first { $0.title == "Memo" })
            #expect(memoThere.price == price, "Decimal is exact")
            #expect(memoThere.tags == ["a", "b"])
            #expect(memoThere.folder == work)
            #expect(memoThere.isSelected == false)
            #expect(memoThere.created == Date(timeIntervalSince1970: 1_790_000_000.25))
        }

        // The optional relationship gets cleared, and the clearing syncs.
        try await tablet.moveOutOfFolder(try #require(tablet.notes.first { $0.title == "Memo" }))
        for model in [tablet, phone, laptop] { _ = try await model.sync() }
        for model in [phone, laptop, tablet] {
            try await model.reload()
            #expect(model.notes.first { $0.title == "Memo" }?.folder == nil)
        }

        // Typed and GRDB-record queries of every attribute type agree.
        let rows = try await laptop.noteRows()
        let typed = laptop.notes
        #expect(rows.count == typed.count)
        for (row, note) in zip(rows, typed) {
            #expect(row.id == note.id && row.title == note.title && row.body == note.body)
            #expect(row.pinned == note.pinned && row.words == note.words && row.rating == note.rating)
            #expect(row.price == note.price && row.created == note.created && row.attachment == note.attachment)
            #expect(row.token == note.token && row.due == note.due && row.folder == note.folder)
            #expect(try row.tags.decoded(as: [String].self) == note.tags)
        }
        let titles = try await laptop.titles()
        #expect(titles == ["Groceries", "Memo"])
        let everyColumn = try await laptop.store.read { db in Array(try Row.fetchOne(db, sql: "SELECT * FROM Note")!.columnNames) }
        #expect(!everyColumn.contains { $0.hasPrefix("_") }, "internal columns stay out of SELECT *: \(Array(everyColumn))")

        // Insert then update, and insert then delete, in one transaction.
        try await phone.store.write { tx in
            var draft = Note(id: tx.newRecordID(), title: "Draft", body: "", pinned: false, words: 0, rating: 0, price: 0,
                             created: Date(timeIntervalSince1970: 0), attachment: Data(), token: UUID(), tags: [], due: nil, folder: nil)
            try tx.insert(draft)
            draft.pinned = true
            try tx.update(draft)
            let scratch = Note(id: tx.newRecordID(), title: "Scratch", body: "", pinned: false, words: 0, rating: 0, price: 0,
                               created: Date(timeIntervalSince1970: 0), attachment: Data(), token: UUID(), tags: [], due: nil, folder: nil)
            try tx.insert(scratch)
            tx.delete(Note.self, id: scratch.id)
        }
        try await phone.reload()
        #expect(phone.notes.map(\.title) == ["Draft", "Groceries", "Memo"])
        #expect(phone.notes.first { $0.title == "Draft" }?.pinned == true)
        try await phone.delete(try #require(phone.notes.first { $0.title == "Draft" }))
        #expect(phone.notes.map(\.title) == ["Groceries", "Memo"])

        // Close, then every call fails with a typed error; reopen and find it all.
        let stateBefore = try await phone.store.stateHash()
        try await phone.store.close()
        await #expect(throws: ChronicleError.self) { try await phone.store.fetchAll(Note.self) }
        await #expect(throws: ChronicleError.self) { try await phone.store.write { tx in tx.delete(Note.self, id: memo.id) } }
        let reopened = try await NotesViewModel.open(device: device("phone"), container: container)
        try await reopened.reload()
        #expect(reopened.notes.map(\.title) == ["Groceries", "Memo"])
        #expect(try await reopened.store.stateHash() == stateBefore)
        for model in [reopened, laptop, tablet] { try await model.store.close() }
    }

    @Test @MainActor func aUniqueKeyNamesTheValueAndTheExistingRecord() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let model = try await NotesViewModel.open(device: device("one"), container: container)
        let first = try await model.addFolder("Inbox")
        let error = await #expect(throws: ChronicleError.self) { try await model.addFolder("Inbox") }
        let message = "\(error.map { String(describing: $0) } ?? "")"
        #expect(message.contains("Inbox") && message.contains("\(first)"), "\(message)")
        try await model.store.close()
    }
}
