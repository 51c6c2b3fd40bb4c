import Chronicle
import ChronicleCore
import Foundation
import GRDB
import Synchronization
import Testing

/// Observed queries and typed, filtered, ordered fetches.
@Suite struct ObservationTests {
    static let schema = try! Schema(version: 1, entities: [
        Entity("Note", attributes: [Attribute("title", .string), Attribute("words", .int64, default: 0), Attribute("pinned", .bool, default: false)]),
    ])

    struct Note: ChronicleRecord, Equatable {
        static let entityName = "Note"
        var id: RecordID
        var title: String
        var words: Int64
        var pinned: Bool
    }

    struct Place {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-observation-\(UUID().uuidString)")
        let container: DirectoryContainer
        init() throws { container = try DirectoryContainer(root: root.appendingPathComponent("shared"), create: true) }
        func open(_ name: String) async throws -> Store {
            try await Store.open(Store.Configuration(schema: ObservationTests.schema, directory: root.appendingPathComponent(name), container: container))
        }
        func remove() { try? FileManager.default.removeItem(at: root) }
    }

    /// Each of the writer's saves inserts one more record than the last and
    /// is uploaded as a log of its own; the reader imports them in bursts
    /// while it observes the count. Every value it sees is the count after
    /// a whole number of saves, and the last is the final count.
    @Test(.timeLimit(.minutes(1))) func anObservedQueryNeverSeesPartOfALogAndEndsOnTheFinalState() async throws {
        let place = try Place()
        defer { place.remove() }
        let writer = try await place.open("writer")
        let reader = try await place.open("reader")
        let saves = 24
        var boundaries: Set<Int> = [0]
        var total = 0
        for i in 1...saves {
            try await writer.write { tx in
                for j in 0..<i { _ = tx.insert("Note", ["title": .string("s\(i)-\(j)")]) }
            }
            try await writer.sync()
            total += i
            boundaries.insert(total)
        }
        let seen = Mutex<[Int]>([])
        let final = total
        let observer = Task {
            for try await count in reader.observe({ db in try Int.fetchOne(db, sql: "SELECT count(*) FROM Note") ?? 0 }) {
                seen.withLock { $0.append(count) }
                if count == final { return }
            }
        }
        // Bursts: a few logs per import pass.
        var pass = 0
        while try await reader.read({ db in try Int.fetchOne(db, sql: "SELECT count(*) FROM Note") ?? 0 }) < total, pass < 100 {
            _ = try await reader.importLogs()
            pass += 1
        }
        try await observer.value
        let values = seen.withLock { $0 }
        #expect(values.first == 0 || boundaries.contains(values.first ?? -1), "the first value comes at once, from what is committed")
        #expect(values.allSatisfy(boundaries.contains), "a value holding part of a log: \(values.filter { !boundaries.contains($0) })")
        #expect(values.last == total)
        #expect(values.count >= 2, "values came as the imports went: \(values)")
        #expect(values == values.sorted(), "counts only grow: \(values)")
        try await writer.close()
        try await reader.close()
    }

    @Test(.timeLimit(.minutes(1))) func typedRecordsAreFetchedAndObservedFilteredAndOrdered() async throws {
        let place = try Place()
        defer { place.remove() }
        let store = try await place.open("device")
        try await store.write { tx in
            _ = tx.insert("Note", ["title": "b", "words": 30, "pinned": true])
            _ = tx.insert("Note", ["title": "a", "words": 10, "pinned": true])
            _ = tx.insert("Note", ["title": "c", "words": 20, "pinned": false])
        }
        let pinned = try await store.fetchAll(Note.self, where: "pinned", orderedBy: [.descending("words")])
        #expect(pinned.map(\.title) == ["b", "a"])
        let few = try await store.fetchAll(Note.self, where: "words < ?", arguments: [25], orderedBy: [.ascending("title")])
        #expect(few.map(\.title) == ["a", "c"])
        let unknown = await #expect(throws: ChronicleError.self) { try await store.fetchAll(Note.self, where: nil, orderedBy: [.ascending("nope")]) }
        #expect(unknown?.code == .unknownAttribute)

        // The observation's first value at once, then one after the save.
        var titles: [[String]] = []
        for try await notes in try store.observeAll(Note.self, where: "pinned", orderedBy: [.ascending("title")]) {
            titles.append(notes.map(\.title))
            if titles.count == 1 {
                try await store.write { tx in _ = tx.insert("Note", ["title": "d", "pinned": true]) }
            } else {
                break
            }
        }
        #expect(titles == [["a", "b"], ["a", "b", "d"]])
        var plain: [[String]] = []
        for try await t in store.observe({ db in try String.fetchAll(db, sql: "SELECT title FROM Note WHERE pinned ORDER BY title") }) {
            plain.append(t)
            if plain.count == 1 { try await store.write { tx in _ = tx.insert("Note", ["title": "e", "pinned": true]) } } else { break }
        }
        #expect(plain == [["a", "b", "d"], ["a", "b", "d", "e"]])
        try await store.close()
    }

    /// Observations that drop equal values end with `closed` too: closing
    /// makes them fetch a value equal to the last one, which they would
    /// not deliver.
    @Test(.timeLimit(.minutes(1))) func observationsThatDropEqualValuesEndWhenTheStoreCloses() async throws {
        let place = try Place()
        defer { place.remove() }
        let store = try await place.open("device")
        try await store.write { tx in _ = tx.insert("Note", ["title": "a"]) }
        func ending<S: AsyncSequence & Sendable>(_ values: S) -> Task<ChronicleError.Code?, Never> where S.Element: Sendable {
            Task {
                do {
                    for try await _ in values {}
                    return nil
                } catch {
                    return (error as? ChronicleError)?.code
                }
            }
        }
        let count = ending(store.observe { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM Note") ?? 0 })
        let notes = ending(try store.observeAll(Note.self))
        let inContext = ending(store.mainContext.observe { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM Note") ?? 0 })
        // Each has read its first value.
        try await Task.sleep(for: .milliseconds(200))
        try await store.close()
        #expect(await count.value == .closed)
        #expect(await notes.value == .closed)
        #expect(await inContext.value == .closed)
        #expect(throws: ChronicleError.self) { _ = try store.observeAll(Note.self) }
        // One started after close fails with the store's error too.
        let late = ending(store.observe { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM Note") ?? 0 })
        #expect(await late.value == .closed)
    }
}
