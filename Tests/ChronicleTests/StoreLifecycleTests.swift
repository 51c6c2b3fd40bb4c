import Chronicle
import GRDB
import ChronicleSnapshot
import ChronicleContainer
import ChronicleCore
import Foundation
import Synchronization
import Testing

/// The store as a Swift 6 app uses it: from the main actor, reading beside
/// its actor, observing with GRDB, closing, cancelling, and consuming
/// events slower than they come.
@Suite struct StoreLifecycleTests {
    static let schema = try! Schema(version: 1, entities: [
        Entity("Author", attributes: [Attribute("name", .string)]),
        Entity("Book", attributes: [Attribute("title", .string)]),
    ])

    struct Author: ChronicleRecord, Equatable {
        static let entityName = "Author"
        var id: RecordID
        var name: String
    }

    /// Devices on one in-memory container and one manual clock.
    final class World: Sendable {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-lifecycle-\(UUID().uuidString)")
        let container = InMemoryContainer()
        let clock = ManualClock()

        func open(_ index: UInt64, clock: (any PhysicalClock)? = nil) async throws -> Store {
            try await Store.open(Store.Configuration(
                schema: StoreLifecycleTests.schema, deviceID: DeviceID(index: index),
                directory: root.appendingPathComponent("d\(index)"), container: container,
                clock: clock ?? self.clock, seed: index, durability: .normal))
        }
    }

    /// Regression: a device whose clock was set thousands of years ahead
    /// made the container's first store under an ID dated then (store IDs
    /// rank stores by age), and with a clock past 2^48 ms its saves passed,
    /// dated in the past. Neither happens; a device with a sane clock then
    /// makes the store.
    @Test(arguments: [UInt64(2_200), 9_000, 20_000])
    func aClockYearsAheadMakesNoStoreAndSavesNothing(years: UInt64) async throws {
        let world = World()
        defer { try? FileManager.default.removeItem(at: world.root) }
        let ahead = ManualClock(milliseconds: 1_700_000_000_000 + years * 365 * 86_400_000)
        await #expect(throws: ChronicleError.self) { _ = try await world.open(1, clock: ahead) }
        #expect(try await world.container.readMarker(ContainerLayout.activeStore) == nil, "no store was made")
        let store = try await world.open(2)
        try await store.write { tx in _ = tx.insert("Author", ["name": .string("kept")]) }
        try await store.close()
        // On the store that is there now, its saves are refused.
        let late = try await world.open(2, clock: ahead)
        await #expect(throws: ChronicleError.self) { try await late.write { tx in _ = tx.insert("Author", ["name": .string("dated far ahead")]) } }
        #expect(try await late.read { db in try String.fetchAll(db, sql: "SELECT name FROM Author") } == ["kept"])
        try await late.close()
    }

    /// Waits (up to 300 s of real time) for `condition`. The whole test
    /// target shares two cores, and the simulation suites running beside
    /// these tests can hold both of the concurrency pool's threads for a
    /// long while: an observation's value is then delivered late, though
    /// it was produced at once.
    static func eventually(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now.advanced(by: .seconds(300))
        while !condition() {
            guard ContinuousClock.now < deadline else {
                if condition() { return }
                Issue.record("timed out waiting for \(what)")
                return
            }
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    // MARK: Swift 6 callers

    @MainActor final class NotesModel {
        var names: [String] = []
        var rows: [[DatabaseValue]] = []
        let store: Store
        init(store: Store) { self.store = store }

        func add(_ name: String) async throws {
            try await store.write { tx in _ = tx.insert("Author", ["name": .string(name)]) }
        }

        func reload() async throws {
            names = try await store.read { db in try String.fetchAll(db, sql: "SELECT name FROM Author ORDER BY name") }
            // GRDB's Row is not Sendable: its values are.
            rows = try await store.read { db in try Row.fetchAll(db, sql: "SELECT * FROM Author").map { Array($0.databaseValues) } }
        }
    }

    @Test @MainActor func aMainActorModelSavesAndReadsWithSendableValues() async throws {
        let store = try await World().open(1)
        let model = NotesModel(store: store)
        try await model.add("Le Guin")
        try await model.add("Butler")
        try await model.reload()
        #expect(model.names == ["Butler", "Le Guin"])
        #expect(model.rows.count == 2)
        #expect(try await store.fetchAll(Author.self).map(\.name).sorted() == ["Butler", "Le Guin"])
        try await store.close()
    }

    /// Runs tasks on a thread of its own, outside the cooperative pool, so
    /// that a read waited for by a blocked thread of the pool can finish.
    final class ReadExecutor: TaskExecutor {
        private let queue = DispatchQueue(label: "chronicle.tests.reads")

        func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
        }
    }

    @Test func readsDoNotWaitForTheStoresActor() async throws {
        let b = try await World().open(2)
        try await b.write { tx in _ = tx.insert("Book", ["title": "Kindred"]) }
        // A save's closure holds b's actor until a read on b has finished.
        // The read runs on an executor of its own: if it needed b's actor,
        // it would wait out the timeout.
        let blocked = Atomic<Bool>(false)
        let readDone = DispatchSemaphore(value: 0)
        let waitedOut = Atomic<Bool>(false)
        let save = Task {
            try await b.write { tx in
                blocked.store(true, ordering: .relaxed)
                if readDone.wait(timeout: .now() + 30) == .timedOut { waitedOut.store(true, ordering: .relaxed) }
                _ = tx.insert("Book", ["title": "Dawn"])
            }
        }
        try await Self.eventually("the save to block") { blocked.load(ordering: .relaxed) }
        let read = Task(executorPreference: ReadExecutor()) {
            defer { readDone.signal() }
            return try await b.read { db in try String.fetchAll(db, sql: "SELECT title FROM Book") }
        }
        let titles = try await read.value
        try await save.value
        #expect(titles == ["Kindred"])
        let waited = waitedOut.load(ordering: .relaxed)
        #expect(!waited, "the read waited for the save to finish")
        try await b.close()
    }

    // MARK: GRDB observation

    /// Collects what an observation of the number of authors delivers,
    /// through `ValueObservation.values(in: store.reader)`.
    final class AuthorCounts: Sendable {
        private let values = Mutex<[Int]>([])
        private let error = Mutex<(any Error)?>(nil)
        private let finished = Atomic<Bool>(false)
        private let task = Mutex<Task<Void, Never>?>(nil)
        let trail = Trail()

        /// What the observation went through, for a failure's message.
        final class Trail: Sendable {
            private let events = Mutex<[String]>([])
            func add(_ event: String) { events.withLock { $0.append(event) } }
            var all: [String] { events.withLock { $0 } }
        }

        init(_ reader: StoreReader) {
            let trail = self.trail
            let observation = ValueObservation.tracking { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM Author") ?? 0 }
                .handleEvents(willStart: { trail.add("willStart") },
                              willFetch: { trail.add("willFetch") },
                              willTrackRegion: { _ in trail.add("willTrackRegion") },
                              databaseDidChange: { trail.add("databaseDidChange") },
                              didReceiveValue: { value in trail.add("didReceiveValue \(value)") },
                              didFail: { error in trail.add("didFail \(error)") },
                              didCancel: { trail.add("didCancel") })
            trail.add("task")
            task.withLock { $0 = Task { [self] in
                trail.add("iterating")
                do {
                    for try await count in observation.values(in: reader) {
                        trail.add("delivered \(count)")
                        values.withLock { $0.append(count) }
                    }
                } catch let thrown {
                    error.withLock { $0 = thrown }
                }
                finished.store(true, ordering: .releasing)
            } }
        }

        var seen: [Int] { values.withLock { $0 } }
        var last: Int? { seen.last }
        var isFinished: Bool { finished.load(ordering: .acquiring) }
        var failure: (any Error)? { error.withLock { $0 } }
        func cancel() { task.withLock { $0 }?.cancel() }

        /// Waits for the observation to deliver `value`; records what it
        /// delivered instead, or how it ended.
        func waitFor(_ value: Int, _ what: String) async throws {
            try await StoreLifecycleTests.eventually(what) { last == value || isFinished }
            #expect(last == value, "\(what): saw \(seen), ended with \(String(describing: failure)); events \(trail.all)")
        }
    }

    @Test func anObservationFiresAfterALocalSaveAndAfterAnImport() async throws {
        let world = World()
        let a = try await world.open(1)
        let b = try await world.open(2)
        let counts = AuthorCounts(b.reader)
        try await counts.waitFor(0, "the first value")
        try await b.write { tx in _ = tx.insert("Author", ["name": "Jemisin"]) }
        try await counts.waitFor(1, "a value after the local save")
        try await a.write { tx in _ = tx.insert("Author", ["name": "Wells"]) }
        try await a.upload()
        try await b.importLogs()
        try await counts.waitFor(2, "a value after the import")
        counts.cancel()
        for s in [a, b] { try await s.close() }
    }

    @Test func anObservationFollowsTheDeviceToItsNewIDAndKeepsFiring() async throws {
        let world = World()
        var a = try await world.open(1)
        try await a.write { tx in _ = tx.insert("Author", ["name": "Delany"]) }
        try await a.sync()
        try await a.close()
        try FileManager.default.copyItem(at: world.root.appendingPathComponent("d1"), to: world.root.appendingPathComponent("twin"))
        a = try await world.open(1)
        let twin = try await Store.open(Store.Configuration(
            schema: Self.schema, directory: world.root.appendingPathComponent("twin"), container: world.container,
            clock: world.clock, seed: 9, durability: .normal))
        world.clock.advance(byMilliseconds: 3)
        try await a.write { tx in _ = tx.insert("Author", ["name": "Russ"]) }
        try await a.sync()
        world.clock.advance(byMilliseconds: 3)
        try await twin.write { tx in _ = tx.insert("Author", ["name": "Tiptree"]) }
        let counts = AuthorCounts(twin.reader)
        try await counts.waitFor(2, "the first value")
        let moved = try await twin.sync().identityChange
        #expect(moved != nil, "the twin did not move to a new ID")
        // The new snapshot holds all three authors; the observation reads it.
        try await counts.waitFor(3, "a value from the new snapshot")
        world.clock.advance(byMilliseconds: 3)
        try await twin.write { tx in _ = tx.insert("Author", ["name": "Sturgeon"]) }
        try await counts.waitFor(4, "a value after a save on the new snapshot")
        #expect(counts.failure == nil)
        counts.cancel()
        for s in [a, twin] { try await s.close() }
    }

    @Test func nothingWritesThroughTheReader() async throws {
        let store = try await World().open(1)
        #expect(throws: DatabaseError.self) {
            try store.reader.unsafeReentrantRead { db in try db.execute(sql: "DELETE FROM _chronicle_rows_Author") }
        }
        try store.reader.close()  // the store's database stays open
        #expect(try await store.read { db in try Int.fetchOne(db, sql: "SELECT 1") } == 1)
        try await store.close()
    }

    // MARK: Closing

    @Test func everyCallAfterCloseThrowsTheClosedError() async throws {
        let store = try await World().open(1)
        let id = try await store.write { tx in tx.insert("Author", ["name": "Vinge"]) }
        let events = try store.changes()
        let counts = AuthorCounts(store.reader)
        try await counts.waitFor(1, "the first value")
        try await store.close()
        try await store.close()  // a second close is fine
        func expectClosed(_ what: String, _ body: () async throws -> Void) async {
            do {
                try await body()
                Issue.record("\(what) after close did not throw")
            } catch {
                #expect((error as? ChronicleError)?.code == .closed, "\(what): \(error)")
            }
        }
        await expectClosed("read") { _ = try await store.read { db in try Int.fetchOne(db, sql: "SELECT 1") } }
        await expectClosed("write") { try await store.write { tx in _ = tx.insert("Author", ["name": "x"]) } }
        await expectClosed("fetchAll") { _ = try await store.fetchAll(Author.self) }
        await expectClosed("fetch") { _ = try await store.fetch(Author.self, id: id) }
        await expectClosed("values") { _ = try await store.values(of: "Author", id: id) }
        await expectClosed("sync") { _ = try await store.sync() }
        await expectClosed("upload") { _ = try await store.upload() }
        await expectClosed("importLogs") { _ = try await store.importLogs() }
        await expectClosed("startAutomaticSync") { try await store.startAutomaticSync(every: .seconds(1)) }
        await expectClosed("changes") { _ = try store.changes() }
        await expectClosed("stateHash") { _ = try await store.stateHash() }
        await expectClosed("reader") { _ = try await store.reader.read { db in try Int.fetchOne(db, sql: "SELECT 1") } }
        // The stream that was open ends, after what it held.
        var seen = 0
        for await _ in events { seen += 1 }
        #expect(seen == 0)
        // The observation ends with the store's error.
        try await Self.eventually("the observation to end") { counts.isFinished }
        #expect((counts.failure as? ChronicleError)?.code == .closed, "\(String(describing: counts.failure))")
        // One started after close ends at once with an error, without a value.
        let late = AuthorCounts(store.reader)
        try await Self.eventually("the late observation to end") { late.isFinished }
        #expect(late.failure != nil)
        #expect(late.seen.isEmpty)
    }

    @Test func closeWaitsForASyncUnderWay() async throws {
        let world = World()
        let a = try await world.open(1)
        for i in 0..<20 {
            try await a.write { tx in _ = tx.insert("Author", ["name": .string("a\(i)")]) }
            try await a.upload()
        }
        let b = try await world.open(2)
        let started = Atomic<Bool>(false)
        let sync = Task { try await b.sync(progress: { _ in started.store(true, ordering: .relaxed) }) }
        try await Self.eventually("the sync to start") { started.load(ordering: .relaxed) }
        try await b.close()
        // The sync finished whole before the database closed.
        let report = try await sync.value
        #expect(report.imported.appliedLogs == 20)
        #expect(report.imported.failures.isEmpty)
        let reopened = try await world.open(2)
        #expect(try await reopened.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM Author") } == 20)
        for s in [a, reopened] { try await s.close() }
    }

    // MARK: Cancellation

    @Test func aCancelledSyncStopsBetweenLogsAndTheNextOneGoesOn() async throws {
        let world = World()
        let a = try await world.open(1)
        let logs = 300
        for i in 0..<logs {
            try await a.write { tx in _ = tx.insert("Author", ["name": .string("a\(i)")]) }
            try await a.upload()
        }
        let b = try await world.open(2)
        // Cancelled as soon as the first batch of logs is applied.
        let sync = Task {
            try await b.sync(progress: { progress in
                if progress.phase == .importing { withUnsafeCurrentTask { $0?.cancel() } }
            })
        }
        await #expect(throws: CancellationError.self) { _ = try await sync.value }
        let applied = try b.snapshot.vector()[a.deviceID] ?? 0
        #expect(applied > 0 && applied < UInt64(logs), "applied \(applied) of \(logs)")
        #expect(try await b.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM Author") } == Int(applied))
        let report = try await b.sync()
        #expect(report.imported.appliedLogs == logs - Int(applied))
        #expect(try await b.stateHash() == a.stateHash())
        for s in [a, b] { try await s.close() }
    }

    // MARK: Events

    /// Saves `count` authors and books on a new device 1 and uploads each
    /// as its own log; returns their IDs by entity.
    static func uploadRecords(_ world: World, _ count: Int) async throws -> (Store, [String: Set<RecordID>]) {
        let a = try await world.open(1)
        var ids: [String: Set<RecordID>] = [:]
        for i in 0..<count {
            let entity = i % 3 == 0 ? "Book" : "Author"
            let id = try await a.write { tx in
                entity == "Book" ? tx.insert("Book", ["title": .string("b\(i)")]) : tx.insert("Author", ["name": .string("a\(i)")])
            }
            ids[entity, default: []].insert(id)
            try await a.upload()
        }
        return (a, ids)
    }

    /// Reads a finished stream to its end.
    static func drain(_ events: AsyncStream<StoreEvent>) async -> (records: [RecordEvent], refetched: Set<String>, refetches: Int) {
        var records: [RecordEvent] = []
        var refetched: Set<String> = []
        var refetches = 0
        for await event in events {
            switch event {
            case .record(let record): records.append(record)
            case .refetch(let entities): refetched.formUnion(entities); refetches += 1
            case .synced, .syncFailed: break
            }
        }
        return (records, refetched, refetches)
    }

    @Test func aConsumerThatFallsBehindGetsARefetchForWhatDidNotFit() async throws {
        let world = World()
        let (a, ids) = try await Self.uploadRecords(world, 60)
        let b = try await world.open(2)
        let slow = try b.changes(bufferLimit: 5)
        let keepingUp = try b.changes()
        try await b.importLogs()
        try await b.close()
        let behind = await Self.drain(slow)
        #expect(behind.records.count == 5)
        #expect(behind.refetches == 1)
        // Every insert is either delivered or covered by the refetch.
        let delivered = Set(behind.records.map(\.recordID))
        for (entity, records) in ids {
            for id in records where !delivered.contains(id) {
                #expect(behind.refetched.contains(entity), "\(entity) \(id) was dropped without a refetch")
            }
        }
        let all = await Self.drain(keepingUp)
        #expect(all.refetches == 0)
        #expect(Set(all.records.map(\.recordID)) == ids.values.reduce(into: Set()) { $0.formUnion($1) })
        try await a.close()
    }

    @Test func aRefetchComesAfterTheBufferedEventsAndTheStreamGoesOnAfterIt() async throws {
        let world = World()
        let b = try await world.open(2)
        let events = try b.changes(bufferLimit: 2)
        for i in 0..<4 { try await b.write { tx in _ = tx.insert("Author", ["name": .string("n\(i)")]) } }
        var iterator = events.makeAsyncIterator()
        #expect(await iterator.next()?.record != nil)
        #expect(await iterator.next()?.record != nil)
        guard case .refetch(let entities) = await iterator.next() else {
            Issue.record("no refetch after the buffered events")
            return
        }
        #expect(entities == ["Author"])
        try await b.write { tx in _ = tx.insert("Book", ["title": "later"]) }
        #expect(await iterator.next()?.record?.entity == "Book")
        try await b.close()
        #expect(await iterator.next() == nil)
    }

    // MARK: Automatic sync

    @Test func automaticSyncRunsOncePerIntervalOnTheInjectedClock() async throws {
        let world = World()
        let a = try await world.open(1)
        let b = try await world.open(2)
        let events = try b.changes()
        var iterator = events.makeAsyncIterator()
        try await b.startAutomaticSync(every: .seconds(30))
        guard case .synced(let first) = await iterator.next() else {
            Issue.record("the first automatic sync published no report")
            return
        }
        #expect(first.status == .upToDate)
        await world.clock.waitForSleepers(1)
        #expect(b.syncStatus.automaticSyncs == 1)
        #expect(b.syncStatus.isAutomatic)
        try await a.write { tx in _ = tx.insert("Author", ["name": "Heinlein"]) }
        try await a.upload()
        world.clock.advance(byMilliseconds: 29_999)
        try await Task.sleep(for: .milliseconds(50))
        #expect(b.syncStatus.automaticSyncs == 1, "a sync ran before the interval passed")
        world.clock.advance(byMilliseconds: 1)
        var imported: Store.SyncReport?
        while imported == nil, let event = await iterator.next() {
            if case .synced(let report) = event { imported = report }
        }
        #expect(imported?.imported.appliedLogs == 1)
        await world.clock.waitForSleepers(1)
        #expect(b.syncStatus.automaticSyncs == 2)
        #expect(b.syncStatus.lastReport?.imported.appliedLogs == 1)
        #expect(b.syncStatus.lastError == nil)
        try await b.close()
        #expect(world.clock.sleeperCount == 0, "close left the sync loop sleeping")
        try await a.close()
    }

    /// A container that stops answering when told to.
    final class Unplugged: Container {
        let base: any Container
        let down = Atomic<Bool>(false)
        init(_ base: any Container) { self.base = base }
        private func check() throws {
            if down.load(ordering: .relaxed) { throw ChronicleError(.unavailable, "the container is unplugged") }
        }
        var capabilities: ContainerCapabilities { base.capabilities }
        func put(_ name: ContainerName, _ bytes: [UInt8]) async throws { try check(); try await base.put(name, bytes) }
        func get(_ name: ContainerName, maxBytes: Int) async throws -> [UInt8] { try check(); return try await base.get(name, maxBytes: maxBytes) }
        func list(prefix: String, after: ContainerName?, limit: Int) async throws -> [BlobInfo] {
            try check(); return try await base.list(prefix: prefix, after: after, limit: limit)
        }
        func listChildren(prefix: String) async throws -> [String] { try check(); return try await base.listChildren(prefix: prefix) }
        func delete(_ name: ContainerName) async throws { try check(); try await base.delete(name) }
        func readMarker(_ name: ContainerName) async throws -> Marker? { try check(); return try await base.readMarker(name) }
        func createMarker(_ name: ContainerName, _ bytes: [UInt8]) async throws -> Marker { try check(); return try await base.createMarker(name, bytes) }
        func replaceMarker(_ name: ContainerName, _ bytes: [UInt8], expected: UInt64) async throws -> Marker {
            try check(); return try await base.replaceMarker(name, bytes, expected: expected)
        }
        func deleteMarker(_ name: ContainerName, expected: UInt64?) async throws { try check(); try await base.deleteMarker(name, expected: expected) }
        func listMarkers(prefix: String) async throws -> [ContainerName] { try check(); return try await base.listMarkers(prefix: prefix) }
        func foreignEntries(prefix: String) async throws -> [ForeignEntry] { try check(); return try await base.foreignEntries(prefix: prefix) }
    }

    @Test func aFailedAutomaticSyncIsPublishedAndKept() async throws {
        let world = World()
        let container = Unplugged(world.container)
        let b = try await Store.open(Store.Configuration(
            schema: Self.schema, deviceID: DeviceID(index: 2), directory: world.root.appendingPathComponent("d2"),
            container: container, clock: world.clock, seed: 2, durability: .normal))
        try await b.write { tx in _ = tx.insert("Author", ["name": "Asimov"]) }
        let events = try b.changes()
        container.down.store(true, ordering: .relaxed)
        try await b.startAutomaticSync(every: .seconds(30))
        var iterator = events.makeAsyncIterator()
        guard case .syncFailed(let error) = await iterator.next() else {
            Issue.record("the failed automatic sync published nothing")
            return
        }
        #expect(error.code == .unavailable)
        await world.clock.waitForSleepers(1)
        #expect(b.syncStatus.lastError?.code == .unavailable)
        #expect(b.syncStatus.automaticSyncs == 1)
        // Back online: the next tick succeeds and clears the error.
        container.down.store(false, ordering: .relaxed)
        world.clock.advance(byMilliseconds: 30_000)
        guard case .synced(let report) = await iterator.next() else {
            Issue.record("the next automatic sync published no report")
            return
        }
        #expect(report.uploadedLogs == 1)
        #expect(b.syncStatus.lastError == nil)
        try await b.close()
    }

    // MARK: Crash points

    @Test func aLayerAboveDeclaresItsOwnCrashPoint() throws {
        let custom = CrashPoint("monitorBeforeReport")
        let injector = CrashInjector { $0 == custom }
        try injector.check(.saveBeforeCommit)
        let error = #expect(throws: ChronicleError.self) { try injector.check(CrashPoint("monitorBeforeReport")) }
        #expect(error?.code == .simulatedCrash)
        #expect(error?.message.contains("monitorBeforeReport") == true)
        #expect(CrashPoint.chroniclePoints.contains(.importBeforeCommit))
    }
}
