import Chronicle
import ChronicleCore
import ChronicleTestSupport
import Foundation
import GRDB
import Synchronization
import Testing

/// Bulk imports with upsert by a unique key, GeoJSON feeds, and
/// `chronicle import` as a user runs it.
@Suite(.timeLimit(.minutes(2))) struct BulkImportTests {
    static let schema = GeoJSONFeed.sampleSchema
    static var quake: Entity { schema.entity(named: "Quake")! }

    struct Quake: ChronicleRecord, Equatable {
        static let entityName = "Quake"
        var id: RecordID
        var code: String
        var mag: Double?
        var status: String?
        var longitude: Double
        var latitude: Double
        var depth: Double?
        var time: Date
    }

    struct Place {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-import-\(UUID().uuidString)")
        let container: DirectoryContainer
        init() throws { container = try DirectoryContainer(root: root.appendingPathComponent("shared"), create: true) }
        func open(_ name: String = "device", schema: Schema = BulkImportTests.schema) async throws -> Store {
            try await Store.open(Store.Configuration(schema: schema, directory: root.appendingPathComponent(name), container: container))
        }
        func remove() { try? FileManager.default.removeItem(at: root) }
    }

    static func count(_ store: Store) async throws -> Int {
        try await store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM Quake") ?? 0 }
    }

    @Test func aFeedIsInsertedThenUpdatedByItsKeyOneLogPerBatch() async throws {
        let place = try Place()
        defer { place.remove() }
        let store = try await place.open()
        let first = try GeoJSONFeed(data: GeoJSONFeed.sample(features: 500, seed: 7))
        #expect(first.count == 500)
        let reports = Mutex<[BulkImport.Progress]>([])
        let importer = store.newBackgroundContext()
        let summary = try await importer.importRecords(first.items(for: Self.quake), options: BulkImport(entity: "Quake", upsertKey: "code", batchSize: 100)) { step in
            reports.withLock { $0.append(step) }
        }
        #expect(summary.isComplete && summary.malformed.isEmpty)
        #expect(summary.progress.inserted == 500 && summary.progress.updated == 0 && summary.progress.batches == 5)
        #expect(reports.withLock { $0.map(\.processed) } == [100, 200, 300, 400, 500])
        #expect(reports.withLock { $0.allSatisfy { $0.total == 500 } })
        #expect(try await Self.count(store) == 500)
        // Another device gets every batch.
        try await store.sync()
        let other = try await place.open("other")
        try await other.sync()
        #expect(try await Self.count(other) == 500)

        // The next download: some revised, some new, the rest as they were.
        let second = try GeoJSONFeed(data: GeoJSONFeed.sample(features: 500, seed: 7, revision: 2))
        let again = try await importer.importRecords(second.items(for: Self.quake), options: BulkImport(entity: "Quake", upsertKey: "code", batchSize: 100))
        #expect(again.progress.inserted == 25)
        #expect(again.progress.updated > 0 && again.progress.updated < 500)
        #expect(again.progress.inserted + again.progress.updated + again.progress.unchanged == 525)
        #expect(try await Self.count(store) == 525)
        // What is stored is the feed's latest values.
        let items = second.items(for: Self.quake)
        let revised = try #require(items.first { $0.values["status"] == .string("reviewed") })
        let stored = try #require(try await store.fetchAll(Quake.self, where: "code = ?", arguments: [revised.values["code"]!.databaseValueForTests]).first)
        #expect(stored.mag.map(Value.double) == revised.values["mag"])
        #expect(stored.status == "reviewed")
        // A third run of the same feed changes nothing and writes no log.
        _ = try await store.upload()
        let third = try await importer.importRecords(items, options: BulkImport(entity: "Quake", upsertKey: "code", batchSize: 100))
        #expect(third.progress.unchanged == 525 && third.progress.batches == 0)
        #expect(try await store.upload() == 0)
    }

    @Test func malformedFeaturesAreReportedWithTheirPositionAndSkippedOrStopTheImport() async throws {
        let place = try Place()
        defer { place.remove() }
        let store = try await place.open()
        let feed = """
            {"type": "FeatureCollection", "features": [
              {"type": "Feature", "properties": {"code": "a1", "mag": 1.5, "time": 1767225600000}, "geometry": {"type": "Point", "coordinates": [10, 20, 3]}},
              {"type": "Feature", "properties": {"mag": 2.5, "time": 1767225600000}, "geometry": {"type": "Point", "coordinates": [10, 20, 3]}},
              {"type": "Feature", "properties": {"code": "a3", "mag": "strong", "time": 1767225600000}, "geometry": {"type": "Point", "coordinates": [10, 20]}},
              42,
              {"type": "Feature", "properties": {"code": "a5", "mag": 0.5, "time": 1767225600000}, "geometry": {"type": "Point", "coordinates": [1, 2]}},
              {"type": "Feature", "properties": {"code": "a6", "mag": 0.5}, "geometry": {"type": "Point", "coordinates": [1, 2]}}
            ]}
            """
        let items = try GeoJSONFeed(data: Data(feed.utf8)).items(for: Self.quake, requiring: "code")
        let importer = store.newBackgroundContext()
        let skipped = try await importer.importRecords(items, options: BulkImport(entity: "Quake", upsertKey: "code", batchSize: 10))
        #expect(skipped.isComplete)
        #expect(skipped.progress.inserted == 2 && skipped.progress.skipped == 4 && skipped.progress.processed == 6)
        // In feed order, each with its line and column, whichever step found it.
        #expect(skipped.malformed.map(\.position) == ["feature 2, line 3, column 3", "feature 3, line 4, column 3", "feature 4, line 5, column 3",
                                                      "feature 6, line 7, column 3"])
        #expect(skipped.malformed[3].reason == "time is required, and a new Quake needs it")
        #expect(skipped.malformed[0].reason.contains("code"))
        #expect(skipped.malformed[1].reason.contains("mag"))
        #expect(skipped.malformed[2].reason.contains("not a feature object"))
        let a1 = try #require(try await store.fetchAll(Quake.self, where: "code = 'a1'").first)
        #expect(a1.longitude == 10 && a1.latitude == 20 && a1.depth == 3)
        #expect(a1.time == Date(timeIntervalSince1970: 1_767_225_600))

        // Stopping: nothing from the malformed feature's batch on.
        let other = try await place.open("stopping")
        let stopped = try await other.newBackgroundContext().importRecords(
            items, options: BulkImport(entity: "Quake", upsertKey: "code", batchSize: 1, onMalformed: .stop))
        #expect(stopped.stoppedAt?.position == "feature 2, line 3, column 3")
        #expect(!stopped.isComplete)
        #expect(try await Self.count(other) == 1)
    }

    @Test func aCancelledImportLeavesWholeBatchesOnly() async throws {
        let place = try Place()
        defer { place.remove() }
        let store = try await place.open()
        let items = try GeoJSONFeed(data: GeoJSONFeed.sample(features: 1_000)).items(for: Self.quake)
        let importer = store.newBackgroundContext()
        let task = Task {
            try await importer.importRecords(items, options: BulkImport(entity: "Quake", upsertKey: "code", batchSize: 150)) { step in
                if step.batches == 2 { withUnsafeCurrentTask { $0?.cancel() } }
            }
        }
        let summary = try await task.value
        #expect(summary.cancelled && !summary.isComplete)
        #expect(summary.progress.inserted == 300)
        #expect(try await Self.count(store) == 300)
    }

    @Test func itemsWithTheSameKeyInOneBatchAreOneRecord() async throws {
        let place = try Place()
        defer { place.remove() }
        let store = try await place.open()
        let time = Value.date(Timestamp(microsecondsSinceEpoch: 0))
        let items: [BulkImport.Item] = [
            .record(["code": "x", "mag": .double(1), "time": time, "longitude": .double(0), "latitude": .double(0)], at: "item 1"),
            .record(["code": "x", "mag": .double(2)], at: "item 2"),
        ]
        let summary = try await store.newBackgroundContext().importRecords(items, options: BulkImport(entity: "Quake", upsertKey: "code"))
        #expect(summary.progress.inserted == 1 && summary.progress.updated == 0)
        // Every item is counted once: the second one folded into the first.
        #expect(summary.progress.folded == 1)
        let p = summary.progress
        #expect(p.inserted + p.updated + p.unchanged + p.skipped + p.folded == p.processed)
        #expect(try await store.fetchAll(Quake.self).map(\.mag) == [2])
    }

    @Test func eachNewRecordKeepsItsOwnValuesWhenABatchMixesNewStoredAndFoldedItems() async throws {
        let place = try Place()
        defer { place.remove() }
        let store = try await place.open()
        func quake(_ code: String, mag: Double, status: String? = nil, tsunami: Int64? = nil) -> [String: Value] {
            var values: [String: Value] = ["code": .string(code), "mag": .double(mag), "time": .date(Timestamp(microsecondsSinceEpoch: Int64(mag * 1_000_000))),
                                           "longitude": .double(mag), "latitude": .double(-mag), "place": .string("\(code) somewhere far from anywhere")]
            if let status { values["status"] = .string(status) }
            if let tsunami { values["tsunami"] = .int(tsunami) }
            return values
        }
        let importer = store.newBackgroundContext()
        let options = BulkImport(entity: "Quake", upsertKey: "code", batchSize: 10)
        _ = try await importer.importRecords([.record(quake("b", mag: 1), at: "first 1")], options: options)
        let items: [BulkImport.Item] = [
            .record(quake("a", mag: 2, tsunami: 1), at: "item 1"),
            .record(quake("b", mag: 3), at: "item 2"),
            .record(quake("c", mag: 4), at: "item 3"),
            .record(["code": "a", "mag": .double(5)], at: "item 4"),
            .record(quake("d", mag: 6, status: "reviewed"), at: "item 5"),
        ]
        let summary = try await importer.importRecords(items, options: options)
        #expect(summary.progress.inserted == 3 && summary.progress.updated == 1 && summary.progress.folded == 1, "\(summary.progress)")
        // A batch of new keys only, one of them twice.
        let fresh: [BulkImport.Item] = [
            .record(quake("e", mag: 7), at: "item 6"),
            .record(quake("f", mag: 8), at: "item 7"),
            .record(["code": "e", "mag": .double(9)], at: "item 8"),
            .record(quake("g", mag: 10, tsunami: 2), at: "item 9"),
        ]
        let second = try await importer.importRecords(fresh, options: options)
        #expect(second.progress.inserted == 3 && second.progress.folded == 1, "\(second.progress)")
        // Every new record's values are its own items', in their fields.
        let seen = try await store.read { db in
            try Row.fetchAll(db, sql: "SELECT code, mag, longitude, latitude, place, status, tsunami FROM Quake ORDER BY code").map { row -> String in
                let status: String? = row["status"]
                return "\(row["code"] as String) \(row["mag"] as Double) \(row["longitude"] as Double) \(row["latitude"] as Double) \(row["place"] as String) \(status ?? "-") \(row["tsunami"] as Int64)"
            }
        }
        #expect(seen == [
            "a 5.0 2.0 -2.0 a somewhere far from anywhere - 1",
            "b 3.0 3.0 -3.0 b somewhere far from anywhere - 0",
            "c 4.0 4.0 -4.0 c somewhere far from anywhere - 0",
            "d 6.0 6.0 -6.0 d somewhere far from anywhere reviewed 0",
            "e 9.0 7.0 -7.0 e somewhere far from anywhere - 0",
            "f 8.0 8.0 -8.0 f somewhere far from anywhere - 0",
            "g 10.0 10.0 -10.0 g somewhere far from anywhere - 2",
        ])
        // A device that replays the logs sees the same.
        try await store.sync()
        let other = try await place.open("other")
        try await other.sync()
        #expect(try await other.stateHash() == store.stateHash())
    }

    @Test(arguments: ["n", "at", "ratio"])
    func storedKeysOfEveryKindAreFoundAgain(key: String) async throws {
        let schema = try Schema(version: 1, entities: [
            Entity("Reading", attributes: [Attribute("n", .int64), Attribute("at", .date), Attribute("ratio", .double), Attribute("note", .string, optional: true)],
                   unique: [["n"], ["at"], ["ratio"]]),
        ])
        let place = try Place()
        defer { place.remove() }
        let store = try await place.open(schema: schema)
        func items(_ note: String) -> [BulkImport.Item] {
            (0..<30).map { (i: Int) -> BulkImport.Item in
                let n = Int64(i) - 15
                let at = Timestamp(microsecondsSinceEpoch: Int64(i) * 1_500_000 - 7_000_000)
                let ratio: Double = i == 0 ? -0.0 : Double(i) / 7
                let values: [String: Value] = ["n": .int(n), "at": .date(at), "ratio": .double(ratio), "note": .string(note)]
                return .record(values, at: "item \(i)")
            }
        }
        let importer = store.newBackgroundContext()
        let options = BulkImport(entity: "Reading", upsertKey: key, batchSize: 8)
        let first = try await importer.importRecords(items("first"), options: options)
        #expect(first.progress.inserted == 30)
        // The same keys again: every record is found and updated, none added.
        let second = try await importer.importRecords(items("second"), options: options)
        #expect(second.progress.updated == 30 && second.progress.inserted == 0, "\(second.progress)")
        let notes = try await store.read { db in try String.fetchAll(db, sql: "SELECT DISTINCT note FROM Reading") }
        #expect(notes == ["second"])
    }

    /// A unique value that an earlier item of a batch gives up is free for
    /// the items after it, as it is when each item is its own batch: the
    /// result does not depend on the batch size.
    @Test func aUniqueValueAnEarlierItemGivesUpIsFreeForTheItemsAfterIt() async throws {
        let schema = try Schema(version: 1, entities: [
            Entity("Member", attributes: [Attribute("code", .string), Attribute("email", .string, optional: true)], unique: [["code"], ["email"]]),
        ])
        func member(_ code: String, _ email: String, _ n: Int) -> BulkImport.Item {
            .record(["code": .string(code), "email": .string(email)], at: "item \(n)")
        }
        let first = [member("a", "e1", 1), member("b", "e2", 2)]
        let feeds: [[BulkImport.Item]] = [
            // b gives up e2, then a takes it.
            [member("b", "e3", 1), member("a", "e2", 2)],
            // a gives up e1, then a new member takes it.
            [member("a", "e9", 1), member("c", "e1", 2)],
            // a takes e3 before b gives it up: refused, whatever the batch.
            [member("a", "e3", 1), member("b", "e4", 2)],
        ]
        var outcomes: [Int: [String]] = [:]
        for batchSize in [1, 10] {
            let place = try Place()
            defer { place.remove() }
            let store = try await place.open(schema: schema)
            let importer = store.newBackgroundContext()
            let options = BulkImport(entity: "Member", upsertKey: "code", batchSize: batchSize)
            _ = try await importer.importRecords(first, options: options)
            var seen: [String] = []
            for feed in feeds {
                let summary = try await importer.importRecords(feed, options: options)
                seen.append("skipped \(summary.malformed.map(\.position))")
                seen.append(contentsOf: try await store.read { db in
                    try String.fetchAll(db, sql: "SELECT code || ':' || ifnull(email, '-') FROM Member ORDER BY code")
                })
            }
            outcomes[batchSize] = seen
        }
        #expect(outcomes[10] == outcomes[1])
        #expect(outcomes[10] == [
            "skipped []", "a:e2", "b:e3",
            "skipped []", "a:e9", "b:e3", "c:e1",
            "skipped [\"item 1\"]", "a:e9", "b:e4", "c:e1",
        ], "\(outcomes[10] ?? [])")
    }

    /// Text changed only in its Unicode spelling (a decomposed "é"
    /// written as the composed one) is a change, as SQLite and the unique
    /// keys see it: an import updates it, a save writes it, and every
    /// device ends with the new bytes.
    @Test func textChangedOnlyInItsSpellingIsSaved() async throws {
        let place = try Place()
        defer { place.remove() }
        let store = try await place.open()
        let decomposed = "cafe\u{301}", composed = "caf\u{E9}"
        #expect(decomposed == composed)
        func item(_ title: String) -> BulkImport.Item {
            .record(["code": "c", "title": .string(title), "time": .date(Timestamp(microsecondsSinceEpoch: 0)),
                     "longitude": .double(0), "latitude": .double(0)], at: "item 1")
        }
        func stored(_ store: Store) async throws -> [UInt8] {
            try await store.read { db in Array(try String.fetchOne(db, sql: "SELECT title FROM Quake")!.utf8) }
        }
        let importer = store.newBackgroundContext()
        let options = BulkImport(entity: "Quake", upsertKey: "code")
        _ = try await importer.importRecords([item(decomposed)], options: options)
        let again = try await importer.importRecords([item(composed)], options: options)
        #expect(again.progress.updated == 1 && again.progress.unchanged == 0, "\(again.progress)")
        #expect(try await stored(store) == Array(composed.utf8))
        // A save back to the other spelling, and a device that replays both.
        let id = try await store.read { db in try RecordID.fetchOne(db, sql: "SELECT id FROM Quake")! }
        try await store.write { tx in tx.update("Quake", id: id, ["title": .string(decomposed)]) }
        #expect(try await stored(store) == Array(decomposed.utf8))
        try await store.sync()
        let other = try await place.open("other")
        try await other.sync()
        #expect(try await stored(other) == Array(decomposed.utf8))
        #expect(try await other.stateHash() == store.stateHash())
    }

    /// A feed of many bad items: each is counted, the first ten thousand
    /// are listed, in feed order, and nothing is saved.
    @Test func aSummaryListsTheFirstTenThousandBadItemsAndCountsThemAll() async throws {
        let place = try Place()
        defer { place.remove() }
        let store = try await place.open()
        let text = #"{"type": "FeatureCollection", "features": ["# + Array(repeating: "0", count: 25_000).joined(separator: ",") + "]}"
        let items = try GeoJSONFeed(data: Data(text.utf8)).items(for: Self.quake, requiring: "code")
        #expect(items.count == 25_000)
        let summary = try await store.newBackgroundContext().importRecords(items, options: BulkImport(entity: "Quake", upsertKey: "code", batchSize: 100))
        #expect(summary.progress.skipped == 25_000 && summary.progress.processed == 25_000)
        #expect(summary.malformed.count == BulkImport.listedProblems)
        #expect(summary.malformed.first?.position.hasPrefix("feature 1,") == true)
        #expect(summary.malformed.last?.position.hasPrefix("feature 10000,") == true)
        #expect(try await Self.count(store) == 0)
    }

    @Test func keysAreComparedByteForByteAndEqualItemsWriteNothing() async throws {
        let place = try Place()
        defer { place.remove() }
        let store = try await place.open()
        let time = Value.date(Timestamp(microsecondsSinceEpoch: 0))
        let composed = "caf\u{E9}", decomposed = "cafe\u{301}"
        #expect(composed == decomposed)
        let items: [BulkImport.Item] = [
            .record(["code": .string(composed), "mag": .double(1), "time": time, "longitude": .double(0), "latitude": .double(0)], at: "item 1"),
            .record(["code": .string(decomposed), "mag": .double(2), "time": time, "longitude": .double(0), "latitude": .double(0)], at: "item 2"),
            .record(["code": "x", "mag": .double(1), "time": time, "longitude": .double(0), "latitude": .double(0)], at: "item 3"),
            .record(["code": "x", "mag": .double(2)], at: "item 4"),
        ]
        let importer = store.newBackgroundContext()
        for batchSize in [1, 10] {
            let first = try await importer.importRecords(items, options: BulkImport(entity: "Quake", upsertKey: "code", batchSize: batchSize))
            #expect(try await store.fetchAll(Quake.self).count == 3, "batches of \(batchSize)")
            if batchSize == 10 {
                // The same feed again, in one batch: nothing differs, nothing is saved.
                #expect(first.progress.unchanged == 3 && first.progress.batches == 0, "\(first.progress)")
            }
        }
        let mags = try await store.read { db in try Double.fetchAll(db, sql: "SELECT mag FROM Quake ORDER BY code, mag") }
        #expect(mags.sorted() == [1, 2, 2])
    }

    @Test func anImportBesideASyncOfTheSameKeysKeepsOneRecordPerKey() async throws {
        let place = try Place()
        defer { place.remove() }
        let phone = try await place.open("phone")
        let laptop = try await place.open("laptop")
        var codes: Set<String> = []
        for round in 0..<4 {
            let items = try GeoJSONFeed(data: GeoJSONFeed.sample(features: 400, seed: 7, revision: round + 1)).items(for: Self.quake, requiring: "code")
            for item in items { if case .string(let code)? = item.values["code"] { codes.insert(code) } }
            _ = try await phone.newBackgroundContext().importRecords(items, options: BulkImport(entity: "Quake", upsertKey: "code", batchSize: 20))
            try await phone.sync()
            // The laptop imports the same keys while its sync brings the phone's.
            let syncing = Task { try await laptop.sync() }
            let summary = try await laptop.newBackgroundContext().importRecords(items, options: BulkImport(entity: "Quake", upsertKey: "code", batchSize: 20))
            _ = try await syncing.value
            #expect(summary.isComplete)
            try await laptop.sync()
            try await phone.sync()
            try await laptop.sync()
            #expect(try await Self.count(laptop) == codes.count)
            #expect(try await laptop.stateHash() == phone.stateHash())
        }
    }

    @Test func importsAreRefusedWhereTheyCannotWork() async throws {
        let place = try Place()
        defer { place.remove() }
        let store = try await place.open()
        let context = store.newBackgroundContext()
        let items: [BulkImport.Item] = []
        func code(_ options: BulkImport, on context: StoreContext) async -> ChronicleError.Code? {
            do {
                _ = try await context.importRecords(items, options: options)
                return nil
            } catch {
                return (error as? ChronicleError)?.code
            }
        }
        #expect(await code(BulkImport(entity: "Quake", upsertKey: "net"), on: context) == .misuse)
        #expect(await code(BulkImport(entity: "Quake", upsertKey: "nope"), on: context) == .unknownAttribute)
        #expect(await code(BulkImport(entity: "Nope", upsertKey: "code"), on: context) == .unknownEntity)
        #expect(await code(BulkImport(entity: "Quake", upsertKey: "code", batchSize: 0), on: context) == .misuse)
        #expect(await code(BulkImport(entity: "Quake", upsertKey: "code"), on: store.mainContext.newChildContext()) == .misuse)
        store.mainContext.isReadOnly = true
        #expect(await code(BulkImport(entity: "Quake", upsertKey: "code"), on: store.mainContext) == .readOnlyContext)
        // A new record without a required attribute is malformed: skipped
        // with its position, or it stops the import before its batch.
        let time = Value.date(Timestamp(microsecondsSinceEpoch: 0))
        let bad: [BulkImport.Item] = [
            .record(["code": "ok", "time": time, "longitude": .double(0), "latitude": .double(0)], at: "item 1"),
            .record(["code": "no time", "longitude": .double(0), "latitude": .double(0)], at: "item 2"),
            .record(["code": "ok", "mag": .double(3)], at: "item 3"),
            .record(["code": "later", "time": time, "longitude": .double(1), "latitude": .double(1)], at: "item 4"),
        ]
        let stopped = try await context.importRecords(bad, options: BulkImport(entity: "Quake", upsertKey: "code", batchSize: 3, onMalformed: .stop))
        #expect(stopped.stoppedAt?.position == "item 2" && stopped.stoppedAt?.reason == "time is required, and a new Quake needs it")
        #expect(try await store.fetchAll(Quake.self).isEmpty)
        let skipped = try await context.importRecords(bad, options: BulkImport(entity: "Quake", upsertKey: "code", batchSize: 3))
        #expect(skipped.isComplete && skipped.malformed.map(\.position) == ["item 2"])
        #expect(skipped.progress.inserted == 2 && skipped.progress.skipped == 1 && skipped.progress.processed == 4)
        #expect(try await store.fetchAll(Quake.self).map(\.code).sorted() == ["later", "ok"])
        #expect(try await store.fetchAll(Quake.self, where: "code = 'ok'").first?.mag == 3)
        // A null for a required attribute is malformed on an update too.
        let nulls = try await context.importRecords([.record(["code": "ok", "time": .null], at: "item 9")],
                                                    options: BulkImport(entity: "Quake", upsertKey: "code"))
        #expect(nulls.malformed.map(\.reason) == ["time is required, and null here"])
        // A batch the store refuses names its items, and batches before it stay.
        do {
            _ = try await context.importRecords([.record(["code": "big", "time": time, "longitude": .double(0), "latitude": .double(0),
                                                          "title": .string(String(repeating: "x", count: 70 << 20))], at: "item 1")],
                                                options: BulkImport(entity: "Quake", upsertKey: "code"))
            Issue.record("a batch over the size cap was saved")
        } catch let error as ChronicleError {
            #expect(error.code == .sizeOverCap)
            #expect(error.message.contains("item 1") && error.message.contains("smaller batches"))
        }
        #expect(try await store.fetchAll(Quake.self).count == 2)
    }

    /// What a save would refuse for one item (a NUL in text, another unique
    /// key already taken, by a stored record or an earlier item) is that
    /// item's problem, reported at its position: the rest of its batch and
    /// the batches after it are saved.
    @Test func anItemTheSaveWouldRefuseIsSkippedWithItsPosition() async throws {
        let place = try Place()
        defer { place.remove() }
        // The title unique too: a second key besides the code.
        let schema = try Schema(version: 1, entities: [
            Entity("Quake", attributes: [Attribute("code", .string), Attribute("title", .string, optional: true), Attribute("time", .date),
                                         Attribute("longitude", .double), Attribute("latitude", .double)],
                   unique: [["code"], ["title"]]),
        ])
        let store = try await place.open(schema: schema)
        let time = Value.date(Timestamp(microsecondsSinceEpoch: 0))
        func item(_ code: String, _ title: String, _ n: Int) -> BulkImport.Item {
            .record(["code": .string(code), "title": .string(title), "time": time, "longitude": .double(0), "latitude": .double(0)], at: "item \(n)")
        }
        let context = store.newBackgroundContext()
        _ = try await context.importRecords([item("a", "Alpha", 1)], options: BulkImport(entity: "Quake", upsertKey: "code"))
        let items = [item("b", "Beta", 1), item("c", "Alpha", 2), item("d", "bad\u{0}title", 3), item("e", "Beta", 4), item("f", "Phi", 5),
                     item("a", "Alpha again", 6)]
        let summary = try await context.importRecords(items, options: BulkImport(entity: "Quake", upsertKey: "code", batchSize: 4))
        #expect(summary.isComplete)
        #expect(summary.malformed.map(\.position) == ["item 2", "item 3", "item 4"])
        #expect(summary.malformed[0].reason.contains("title \"Alpha\" is already Quake"))
        #expect(summary.malformed[1].reason.contains("U+0000"))
        #expect(summary.malformed[2].reason.contains("earlier feature's of the same batch"))
        #expect(summary.progress.inserted == 2 && summary.progress.updated == 1 && summary.progress.skipped == 3)
        let stored = try await store.read { db in try String.fetchAll(db, sql: "SELECT code || ':' || title FROM Quake ORDER BY code") }
        #expect(stored == ["a:Alpha again", "b:Beta", "f:Phi"])
        // Stopping at the first such item saves nothing of its batch.
        let stopped = try await context.importRecords([item("g", "Gamma", 1), item("h", "Phi", 2)],
                                                      options: BulkImport(entity: "Quake", upsertKey: "code", onMalformed: .stop))
        #expect(stopped.stoppedAt?.position == "item 2")
        #expect(try await store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM Quake WHERE code = 'g'") } == 0)
    }

    @Test func theMainContextIsRefreshedAndAnsweringWhileAnImportRuns() async throws {
        let place = try Place()
        defer { place.remove() }
        let store = try await place.open()
        let first = try GeoJSONFeed(data: GeoJSONFeed.sample(features: 300, seed: 3)).items(for: Self.quake)
        let importer = store.newBackgroundContext()
        _ = try await importer.importRecords(first, options: BulkImport(entity: "Quake", upsertKey: "code", batchSize: 100))
        let main = store.mainContext
        let held = try await main.fetchAll(Quake.self, orderedBy: [.ascending("code")])
        #expect(held.count == 300)
        let revised = try GeoJSONFeed(data: GeoJSONFeed.sample(features: 300, seed: 3, revision: 2)).items(for: Self.quake)
        let reads = Mutex(0)
        let reader = Task {
            while !Task.isCancelled {
                _ = try await main.fetchAll(Quake.self, where: "mag > ?", arguments: [3.0])
                reads.withLock { $0 += 1 }
            }
        }
        while reads.withLock({ $0 }) == 0 { try await Task.sleep(for: .milliseconds(1)) }
        let summary = try await importer.importRecords(revised, options: BulkImport(entity: "Quake", upsertKey: "code", batchSize: 50))
        #expect(summary.progress.updated > 0)
        reader.cancel()
        _ = try? await reader.value
        // Every record the main context holds shows what is stored now.
        for quake in try await store.fetchAll(Quake.self) where held.contains(where: { $0.id == quake.id }) {
            #expect(try await main.fetch(Quake.self, id: quake.id) == quake)
        }
    }

    @Test func aFeedThatIsNotGeoJSONIsRefusedWithItsPosition() throws {
        func code(_ text: String) -> (ChronicleError.Code?, String) {
            do {
                _ = try GeoJSONFeed(data: Data(text.utf8))
                return (nil, "")
            } catch {
                return ((error as? ChronicleError)?.code, (error as? ChronicleError)?.message ?? "")
            }
        }
        let notJSON = code("{\"type\": \"FeatureCollection\",\n \"features\": [,]}")
        #expect(notJSON.0 == .malformedFeed && notJSON.1.contains("line 2"))
        #expect(code("[1, 2]").0 == .malformedFeed)
        #expect(code("{\"type\": \"Feature\"}").0 == .malformedFeed)
        #expect(code("{\"type\": \"FeatureCollection\"}").0 == .malformedFeed)
        #expect(GeoJSONFeed.sample(features: 50, seed: 9, revision: 3) == GeoJSONFeed.sample(features: 50, seed: 9, revision: 3))
    }

    // MARK: The command line

    @Test(.enabled(if: CrashSafetyTests.binary != nil, "needs the chronicle binary: swift build --build-tests"))
    func chronicleImportReportsProgressAndWhatItDid() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-import-cli-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let feed = root.appendingPathComponent("quakes.geojson").path
        let schema = root.appendingPathComponent("quakes.schema.json").path
        let made = try CLIErrorTests.run(["sample-feed", "--features", "2000", "--output", feed, "--schema-out", schema])
        #expect(made.status == 0, "\(made.stderr)")
        #expect(try Schema(json: Data(contentsOf: URL(fileURLWithPath: schema))) == Self.schema)
        let shared = root.appendingPathComponent("shared").path
        #expect(try CLIErrorTests.run(["init", "--container", shared]).status == 0)
        let device = ["--device-dir", root.appendingPathComponent("dev").path, "--container", shared, "--schema", schema]
        // A key the entity does not keep unique is refused before the
        // device folder is made (or tied to the schema).
        for arguments in [["--upsert-key", "net"], ["--upsert-key", "net", "--entity", "Quake"]] {
            let misuse = try CLIErrorTests.run(["import"] + device + arguments + [feed])
            #expect(misuse.status == 1 && misuse.stderr.contains("not unique on its own"), "\(misuse.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("dev").path))
        // Piped progress: plain lines, never a carriage return.
        let run = try CLIErrorTests.run(["import"] + device + ["--upsert-key", "code", "--batch-size", "500", feed],
                                        environment: ["CHRONICLE_PROGRESS_SECONDS": "0"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(String(decoding: run.stdout, as: UTF8.self) == "imported 2000 features: 2000 inserted, 0 updated, 0 unchanged, 0 skipped, in 4 saved batches\n")
        #expect(run.stderr.contains("import: 500/2000 features") && !run.stderr.contains("\r"))
        #expect(run.stderr.contains("500 inserted, 0 updated, 0 unchanged"), "\(run.stderr)")
        // Again, as JSON: nothing to do.
        let again = try CLIErrorTests.run(["import"] + device + ["--upsert-key", "code", feed, "--json"])
        let json = try #require(try JSONSerialization.jsonObject(with: again.stdout) as? [String: Any])
        #expect(json["unchanged"] as? Int == 2000 && json["batches"] as? Int == 0)
        // The feed from standard input (-): the same features, unchanged.
        let piped = try CLIErrorTests.run(["import"] + device + ["--upsert-key", "code", "-", "--json"],
                                          inputBytes: try Data(contentsOf: URL(fileURLWithPath: feed)))
        #expect(piped.status == 0, "\(piped.stderr)")
        #expect((try JSONSerialization.jsonObject(with: piped.stdout) as? [String: Any])?["unchanged"] as? Int == 2000)
        // A malformed feature stops the import under --on-malformed stop (exit 1).
        let bad = root.appendingPathComponent("bad.geojson").path
        try Data(#"{"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {"mag": 1}}]}"#.utf8).write(to: URL(fileURLWithPath: bad))
        let stopped = try CLIErrorTests.run(["import"] + device + ["--upsert-key", "code", "--on-malformed", "stop", bad])
        #expect(stopped.status == 1)
        #expect(stopped.stderr.contains("chronicle: malformedFeed: stopped at feature 1, line 1, column 44: no code"), "\(stopped.stderr)")
        #expect(String(decoding: stopped.stdout, as: UTF8.self).hasPrefix("imported 0 features before the malformed one it stopped at: 0 inserted"))
        // Skipped instead: said on standard error, the counts on standard output.
        let skipped = try CLIErrorTests.run(["import"] + device + ["--upsert-key", "code", bad])
        #expect(skipped.status == 0)
        #expect(skipped.stderr.contains("import: skipped feature 1, line 1, column 44: no code"), "\(skipped.stderr)")
        #expect(String(decoding: skipped.stdout, as: UTF8.self) == "imported 1 feature: 0 inserted, 0 updated, 0 unchanged, 1 skipped, in 0 saved batches\n")
        // Bad usage and a feed that is not JSON: clear errors, nothing imported.
        #expect(try CLIErrorTests.run(["import"] + device + ["--upsert-key", "net", feed]).status == 1)
        try Data("not json".utf8).write(to: URL(fileURLWithPath: bad))
        let notJSON = try CLIErrorTests.run(["import"] + device + ["--upsert-key", "code", bad])
        #expect(notJSON.status == 1 && notJSON.stderr.contains("malformedFeed"))
        #expect(try CLIErrorTests.run(["import"] + device + ["--upsert-key", "code", "--batch-size", "0", feed]).status == 2)
    }
}

extension BulkImportTests {
    /// Ctrl-C during `chronicle import` stops it after the batch being
    /// saved: it says how far it got and exits 130, every batch it
    /// reported is saved, and running it again imports the rest.
    @Test(.enabled(if: CrashSafetyTests.binary != nil, "needs the chronicle binary: swift build --build-tests"))
    func chronicleImportStopsOnCtrlCAfterTheBatchBeingSaved() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-import-int-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let feed = root.appendingPathComponent("quakes.geojson").path, schema = root.appendingPathComponent("quakes.schema.json").path
        #expect(try CLIErrorTests.run(["sample-feed", "--features", "3000", "--output", feed, "--schema-out", schema]).status == 0)
        let shared = root.appendingPathComponent("shared").path
        #expect(try CLIErrorTests.run(["init", "--container", shared]).status == 0)
        // Batches of one: thousands of saves, time to stop it between two.
        let arguments = ["import", "--device-dir", root.appendingPathComponent("dev").path, "--container", shared, "--schema", schema,
                         "--upsert-key", "code", "--batch-size", "1", feed]
        let out = root.appendingPathComponent("out"), err = root.appendingPathComponent("err")
        for file in [out, err] { _ = FileManager.default.createFile(atPath: file.path, contents: nil) }
        let (stdout, stderr) = (try FileHandle(forWritingTo: out), try FileHandle(forWritingTo: err))
        let null = open("/dev/null", O_RDONLY | O_CLOEXEC)
        defer { close(null) }
        let process = try SpawnedProcess.spawn(CrashSafetyTests.binary!.path, arguments,
                                               environment: ProcessInfo.processInfo.environment.merging(["CHRONICLE_PROGRESS_SECONDS": "0"]) { $1 },
                                               stdin: null, stdout: stdout.fileDescriptor, stderr: stderr.fileDescriptor)
        // The first progress line: batches are being saved.
        let deadline = Date().addingTimeInterval(120)
        while !((try? String(contentsOf: err, encoding: .utf8))?.contains("import: ") ?? false), Date() < deadline, process.isRunning {
            usleep(10_000)
        }
        kill(process.pid, SIGINT)
        let ended = process.wait(killingAfter: 120)
        try stdout.close()
        try stderr.close()
        let text = try String(contentsOf: err, encoding: .utf8)
        #expect(!ended.signaled && ended.status == 130, "\(ended) \(text)")
        let stopped = try #require(text.split(separator: "\n").last { $0.hasPrefix("import: interrupted after ") }, "\(text)")
        let saved = try #require(Int(stopped.dropFirst("import: interrupted after ".count).prefix { $0.isNumber }))
        #expect(saved > 0 && saved < 3000, "\(stopped)")
        // Every batch it reported is there, nothing more: batches of one.
        let count = try CLIErrorTests.run(["query", "--device-dir", root.appendingPathComponent("dev").path, "--json", "SELECT count(*) AS n FROM Quake"])
        let rows = try #require(try JSONSerialization.jsonObject(with: count.stdout) as? [[String: Any]])
        #expect(rows.first?["n"] as? Int == saved, "\(rows)")
        // Again: the rest.
        let again = try CLIErrorTests.run(arguments + ["--json"])
        let json = try #require(try JSONSerialization.jsonObject(with: again.stdout) as? [String: Any])
        #expect(json["inserted"] as? Int == 3000 - saved && json["unchanged"] as? Int == saved, "\(json)")
    }
}

extension Value {
    /// The value as an SQL argument, for queries in tests.
    var databaseValueForTests: String {
        if case .string(let s) = self { return s }
        return "\(self)"
    }
}
