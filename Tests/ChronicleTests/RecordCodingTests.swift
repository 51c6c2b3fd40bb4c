import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Testing

/// Codable records through Chronicle's own encoder and decoder, and the
/// changes of one record within one transaction.
@Suite struct RecordCodingTests {
    static let schema = try! Schema(version: 1, entities: [
        Entity("Folder", attributes: [Attribute("name", .string)]),
        Entity("Item", attributes: [
            Attribute("title", .string),
            Attribute("price", .decimal, optional: true),
            Attribute("tags", .transformable, optional: true),
            Attribute("size", .transformable, optional: true),
            Attribute("note", .string, optional: true),
            Attribute("priority", .int64, optional: true, default: 3),
            Attribute("created", .date, optional: true),
            Attribute("kind", .string, optional: true),
        ], relationships: [.toOne("folder", to: "Folder")]),
    ])

    struct Size: Codable, Equatable {
        var width: Double
        var height: Double
        var unit: String
    }

    enum Kind: String, Codable {
        case book, tool
    }

    struct Item: ChronicleRecord, Equatable {
        static let entityName = "Item"
        var id: RecordID
        var title: String
        var price: Decimal?
        var tags: [String]?
        var size: Size?
        var note: String?
        var priority: Int64?
        var created: Date?
        var kind: Kind?
        var folder: RecordID?
    }

    /// A type that maps only some of Item's fields.
    struct ItemTitle: ChronicleRecord {
        static let entityName = "Item"
        var id: RecordID
        var title: String
    }

    /// Keeps `isEditing` in memory only, by leaving it out of its CodingKeys.
    struct EditableItem: ChronicleRecord {
        static let entityName = "Item"
        var id: RecordID
        var title: String
        var isEditing = false
        enum CodingKeys: String, CodingKey { case id, title }
    }

    /// Keeps `draft` in memory: an optional the schema does not have.
    struct DraftItem: ChronicleRecord {
        static let entityName = "Item"
        var id: RecordID
        var title: String
        var draft: String?
    }

    /// Requires a key the schema does not have: it could never be read back.
    struct MisnamedItem: ChronicleRecord {
        static let entityName = "Item"
        var id: RecordID
        var title: String
        var cost: Int
    }

    static func store() async throws -> Store { try await TestDevices(1, schema: schema).stores[0] }

    static func item(_ id: RecordID) -> Item {
        Item(id: id, title: "Saw", price: Decimal(string: "19.99")!, tags: ["tools", "wood"],
             size: Size(width: 1.5, height: 0.25, unit: "m"), note: "sharp", priority: 7,
             created: Date(timeIntervalSince1970: 1_790_000_000.123456), kind: .tool, folder: nil)
    }

    @Test func everyPropertyRoundTrips() async throws {
        let store = try await Self.store()
        let folder = try await store.write { tx in tx.insert("Folder", ["name": "Workshop"]) }
        var item = Self.item(RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0001))
        item.folder = folder
        try await store.write { [item] tx in try tx.insert(item) }
        #expect(try await store.fetch(Item.self, id: item.id) == item)
        #expect(try await store.fetchAll(Item.self) == [item])
    }

    @Test func decimalsAreExact() async throws {
        let store = try await Self.store()
        var item = Self.item(RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0002))
        // More digits than a Double holds.
        item.price = Decimal(string: "12345678901234567890.123456789")!
        try await store.write { [item] tx in try tx.insert(item) }
        #expect(try await store.fetch(Item.self, id: item.id)?.price == item.price)
        let stored = try await store.read { db in try String.fetchOne(db, sql: "SELECT price FROM Item") }
        #expect(stored == "12345678901234567890.123456789")
    }

    @Test func settingAnOptionalToNilClearsItsField() async throws {
        let store = try await Self.store()
        let folder = try await store.write { tx in tx.insert("Folder", ["name": "Workshop"]) }
        var item = Self.item(RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0003))
        item.folder = folder
        try await store.write { [item] tx in try tx.insert(item) }
        item.folder = nil
        item.note = nil
        item.tags = nil
        item.price = nil
        try await store.write { [item] tx in try tx.update(item) }
        let fetched = try #require(try await store.fetch(Item.self, id: item.id))
        #expect(fetched.folder == nil)
        #expect(fetched.note == nil)
        #expect(fetched.tags == nil)
        #expect(fetched.price == nil)
        #expect(fetched == item)
    }

    @Test func aNilOptionalIsStoredAsNullNotAsTheDefault() async throws {
        let store = try await Self.store()
        var item = Self.item(RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0004))
        item.priority = nil
        try await store.write { [item] tx in try tx.insert(item) }
        #expect(try await store.fetch(Item.self, id: item.id)?.priority == nil)
    }

    @Test func fieldsTheTypeDoesNotDeclareAreLeftAlone() async throws {
        let store = try await Self.store()
        let item = Self.item(RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0005))
        try await store.write { [item] tx in try tx.insert(item) }
        var title = try #require(try await store.fetch(ItemTitle.self, id: item.id))
        title.title = "Hand saw"
        try await store.write { [title] tx in try tx.update(title) }
        var expected = item
        expected.title = "Hand saw"
        #expect(try await store.fetch(Item.self, id: item.id) == expected)
    }

    @Test func propertiesKeptInMemoryAreNotStored() async throws {
        let store = try await Self.store()
        var editable = EditableItem(id: RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0006), title: "Plane")
        editable.isEditing = true
        try await store.write { [editable] tx in try tx.insert(editable) }
        editable.title = "Block plane"
        try await store.write { [editable] tx in try tx.update(editable) }
        let fetched = try #require(try await store.fetch(EditableItem.self, id: editable.id))
        #expect(fetched.title == "Block plane")
        #expect(!fetched.isEditing)

        let draft = DraftItem(id: RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0007), title: "Chisel", draft: "unsent")
        try await store.write { tx in try tx.insert(draft) }
        #expect(try await store.fetch(DraftItem.self, id: draft.id)?.draft == nil)
        #expect(try await store.fetch(DraftItem.self, id: draft.id)?.title == "Chisel")
    }

    @Test func aRequiredPropertyTheEntityLacksIsRefused() async throws {
        let store = try await Self.store()
        let misnamed = MisnamedItem(id: RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0008), title: "Rasp", cost: 4)
        let error = await #expect(throws: ChronicleError.self) { try await store.write { tx in try tx.insert(misnamed) } }
        #expect(error?.code == .unknownAttribute)
        #expect(error?.message.contains("Item.cost") == true)
    }

    @Test func aValueOfTheWrongTypeNamesTheSchemaType() async throws {
        struct Wrong: ChronicleRecord {
            static let entityName = "Item"
            var id: RecordID
            var title: Int
        }
        let store = try await Self.store()
        let error = await #expect(throws: ChronicleError.self) {
            try await store.write { tx in try tx.insert(Wrong(id: RecordID(high: 1, low: 9), title: 5)) }
        }
        #expect(error?.code == .typeMismatch)
        #expect(error?.message == "Item.title is a string attribute; got 5")
    }

    @Test func aDynamicValueOfTheWrongTypeNamesTheSchemaType() async throws {
        let store = try await Self.store()
        let error = await #expect(throws: ChronicleError.self) {
            try await store.write { tx in tx.insert("Item", ["title": 5]) }
        }
        #expect(error?.code == .typeMismatch)
        #expect(error?.message == "Item.title is a string attribute; got 5")
        let other = await #expect(throws: ChronicleError.self) {
            try await store.write { tx in tx.insert("Item", ["title": "t", "priority": "high", "folder": "x"]) }
        }
        #expect(other?.message == "Item.folder is a to-one relationship to Folder; got \"x\"")
        let int = await #expect(throws: ChronicleError.self) {
            try await store.write { tx in tx.insert("Item", ["title": "t", "priority": "high"]) }
        }
        #expect(int?.message == "Item.priority is an int64 attribute; got \"high\"")
    }

    @Test func insertThenUpdateInOneTransaction() async throws {
        let store = try await Self.store()
        var item = Self.item(RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_000A))
        item = try await store.write { [item] tx in
            var item = item
            try tx.insert(item)
            item.title = "Coping saw"
            item.note = nil
            try tx.update(item)
            return item
        }
        #expect(try await store.fetch(Item.self, id: item.id) == item)
    }

    @Test func dynamicUpdatesOfOneRecordKeepTheLastValue() async throws {
        let store = try await Self.store()
        let id = try await store.write { tx in
            let id = tx.insert("Item", ["title": "first"])
            tx.update("Item", id: id, ["title": "second", "note": "n"])
            tx.update("Item", id: id, ["title": "third"])
            return id
        }
        try await store.write { tx in
            tx.update("Item", id: id, ["title": "fourth"])
            tx.update("Item", id: id, ["title": "fifth"])
        }
        #expect(try await store.values(of: "Item", id: id)?["title"] == "fifth")
        #expect(try await store.values(of: "Item", id: id)?["note"] == "n")
    }

    @Test func insertThenDeleteInOneTransaction() async throws {
        let store = try await Self.store()
        let item = Self.item(RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_000B))
        try await store.write { tx in
            try tx.insert(item)
            tx.delete(item)
        }
        #expect(try await store.fetch(Item.self, id: item.id) == nil)
        let other = Self.item(RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_000C))
        try await store.write { tx in
            try tx.insert(other)
            var changed = other
            changed.title = "Rip saw"
            try tx.update(changed)
            tx.delete(Item.self, id: other.id)
        }
        #expect(try await store.fetchAll(Item.self).isEmpty)
    }

    @Test func anUpdateMayReferToARecordInsertedLaterInTheTransaction() async throws {
        let store = try await Self.store()
        let item = Self.item(RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_000D))
        let folder = try await store.write { tx in
            try tx.insert(item)
            let folder = tx.insert("Folder", ["name": "Saws"])
            var moved = item
            moved.folder = folder
            try tx.update(moved)
            return folder
        }
        #expect(try await store.fetch(Item.self, id: item.id)?.folder == folder)
    }

    @Test func aReferenceToARecordTheSaveDeletesIsRefused() async throws {
        let store = try await Self.store()
        let error = await #expect(throws: ChronicleError.self) {
            try await store.write { tx in
                let folder = tx.insert("Folder", ["name": "Gone"])
                tx.delete("Folder", id: folder)
                tx.insert("Item", ["title": "Orphan", "folder": .reference(folder)])
            }
        }
        #expect(error?.code == .recordNotFound)
        #expect(try await store.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM Item") } == 0)
    }

    @Test func deleteByTypeAndID() async throws {
        let store = try await Self.store()
        let item = Self.item(RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_000E))
        try await store.write { [item] tx in try tx.insert(item) }
        try await store.write { [item] tx in tx.delete(Item.self, id: item.id) }
        #expect(try await store.fetch(Item.self, id: item.id) == nil)
    }

    @Test func dynamicValuesTakePlainSwiftValues() async throws {
        let store = try await Self.store()
        let created = Date(timeIntervalSince1970: 1_790_000_000.5)
        let folder: RecordID? = nil
        let price: Decimal = Decimal(string: "4.05")!
        let id = try await store.write { tx in
            tx.insert("Item", ["title": "Awl", "price": price, "priority": 2, "created": created, "folder": folder,
                               "note": nil, "kind": Kind.tool.rawValue])
        }
        let values = try #require(try await store.values(of: "Item", id: id))
        #expect(values["title"] == .string("Awl"))
        #expect(values["price"] == .decimal(ChronicleDecimal(string: "4.05")!))
        #expect(values["priority"] == .int(2))
        #expect(values["created"] == .date(Timestamp(created)))
        #expect(values["folder"] == .null)
        #expect(values["note"] == .null)
        try await store.write { tx in tx.update("Item", id: id, ["title": "Bradawl", "tags": TransformableValue(typeName: "t", data: Data([1]))]) }
        #expect(try await store.values(of: "Item", id: id)?["title"] == "Bradawl")
    }

    /// An array in a dynamic write is stored as a Codable record's array
    /// property is, so the record type reads it back.
    @Test func dynamicValuesTakeArraysAsARecordStoresThem() async throws {
        let store = try await Self.store()
        let id = try await store.write { tx in tx.insert("Item", ["title": "Awl", "tags": ["sharp", "small"]]) }
        let item = try #require(try await store.fetch(Item.self, id: id))
        #expect(item.tags == ["sharp", "small"])
        try await store.write { tx in tx.update("Item", id: id, ["tags": [String]()]) }
        #expect(try await store.fetch(Item.self, id: id)?.tags == [])
        let error = await #expect(throws: ChronicleError.self) {
            try await store.write { tx in tx.update("Item", id: id, ["tags": [Double.nan]]) }
        }
        #expect(error?.code == .invalidValue)
    }

    @Test func aValueWithoutAChronicleValueFailsTheSave() async throws {
        let store = try await Self.store()
        let error = await #expect(throws: ChronicleError.self) {
            try await store.write { tx in tx.insert("Item", ["title": "x", "priority": UInt64.max]) }
        }
        #expect(error?.code == .invalidValue)
        #expect(try await store.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM Item") } == 0)
    }

    /// Only strings and a relationship: nothing the old JSON coding refused.
    struct Basic: ChronicleRecord, Equatable {
        static let entityName = "Item"
        var id: RecordID
        var title: String
        var note: String?
        var folder: RecordID?
    }

    @Test func basicClearingAnOptional() async throws {
        let store = try await Self.store()
        let folder = try await store.write { tx in tx.insert("Folder", ["name": "Workshop"]) }
        var basic = Basic(id: RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0101), title: "File", note: "flat", folder: folder)
        try await store.write { [basic] tx in try tx.insert(basic) }
        basic.folder = nil
        basic.note = nil
        try await store.write { [basic] tx in try tx.update(basic) }
        #expect(try await store.fetch(Basic.self, id: basic.id) == basic)
    }

    @Test func basicInsertThenUpdate() async throws {
        let store = try await Self.store()
        var basic = Basic(id: RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0102), title: "File", note: "flat")
        basic = try await store.write { [basic] tx in
            var basic = basic
            try tx.insert(basic)
            basic.title = "Rasp"
            try tx.update(basic)
            return basic
        }
        #expect(try await store.fetch(Basic.self, id: basic.id) == basic)
    }

    @Test func basicInsertThenDelete() async throws {
        let store = try await Self.store()
        let basic = Basic(id: RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0103), title: "File")
        try await store.write { tx in
            try tx.insert(basic)
            var renamed = basic
            renamed.title = "Rasp"
            try tx.update(renamed)
            tx.delete(renamed)
        }
        #expect(try await store.fetch(Basic.self, id: basic.id) == nil)
    }
}
