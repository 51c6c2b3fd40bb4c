import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Logging
import Testing

/// Baselines: a device publishes its state in parts; a new device starts
/// from the newest complete one, then imports only the logs after it, and
/// ends on the same state as devices that replayed every log.
@Suite struct BaselineTests {
    static let schema = try! Schema(version: 1, entities: [
        Entity("Author", attributes: [Attribute("name", .string), Attribute("bio", .string, optional: true)],
               relationships: [.toMany("books", to: "Book", inverse: "author")], unique: [["name"]]),
        Entity("Book", attributes: [Attribute("title", .string)],
               relationships: [.toOne("author", to: "Author", inverse: "books", deleteRule: .cascade)]),
        // Independent: most of its records keep compact states.
        Entity("Note", attributes: [Attribute("title", .string), Attribute("counter", .int64, default: 0),
                                    Attribute("price", .decimal, optional: true)]),
    ])

    /// Random saves on every device: notes inserted, updated, deleted;
    /// authors with clashing natural keys; books that cascade.
    static func randomSaves(_ d: TestDevices, _ rng: inout SeededRandom, rounds: Int) async throws {
        for _ in 0..<rounds {
            for store in d.stores {
                d.clock.advance(byMilliseconds: Int64(rng.next() % 3))
                let notes = try await store.read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Note") }
                let authors = try await store.read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Author") }
                // Choices drawn here: the write closure runs on the store's actor.
                let (op, a, b) = (rng.next() % 6, rng.next(), rng.next())
                let note = notes.isEmpty ? nil : notes[Int(a % UInt64(notes.count))]
                do {
                    try await store.write { tx in
                        switch op {
                        case 0, 1:
                            tx.insert("Note", ["title": .string("n\(a % 1000)"), "counter": .int(Int64(b % 100)),
                                               "price": b % 2 == 0 ? .null : .decimal(ChronicleDecimal(string: "1.5")!)])
                        case 2 where note != nil:
                            tx.update("Note", id: note!, ["counter": .int(Int64(b % 100))])
                        case 3 where note != nil:
                            tx.delete("Note", id: note!)
                        case 4:
                            let author = tx.insert("Author", ["name": .string("a\(a % 5)")])
                            tx.insert("Book", ["title": "b", "author": .reference(author)])
                        default:
                            if let first = authors.first, b % 3 == 0 { tx.delete("Author", id: first) }
                            else { tx.insert("Note", ["title": "plain"]) }
                        }
                    }
                } catch let error as ChronicleError where error.code == .uniqueViolation {
                    // The device already shows that author: a typed refusal, nothing written.
                }
            }
            if rng.next() % 3 == 0 { try await d.stores[Int(rng.next() % UInt64(d.stores.count))].sync() }
        }
    }

    @Test(arguments: [UInt64(1), 2, 3])
    func aNewDeviceStartsFromABaselineAndConverges(seed: UInt64) async throws {
        let d = try await TestDevices(3, schema: Self.schema)
        var rng = SeededRandom(seed: seed)
        try await Self.randomSaves(d, &rng, rounds: 30)
        try await d.syncAll()
        // Small parts: the baseline spans several.
        let published = try await d.stores[0].publishBaseline(partBytes: 1024)
        #expect(published.parts > 1)
        #expect(try await d.blobs(under: published.prefix).count == published.parts)
        // Saves after the baseline, some not uploaded yet.
        try await Self.randomSaves(d, &rng, rounds: 10)

        let newcomer = try await d.add()
        let first = try await newcomer.sync()
        let baseline = try #require(first.imported.baseline)
        #expect(baseline.parts == published.parts)
        #expect(baseline.records == published.records)
        #expect(first.imported.failures.isEmpty)
        // Only the logs after the baseline were applied.
        let logs = try await d.blobs(under: ContainerLayout.logsPrefix(store: newcomer.snapshot.storeID)).count
        let covered = baseline.vector.values.reduce(0, +)
        #expect(covered > 0)
        #expect(first.imported.appliedLogs < logs)
        for (device, sequence) in baseline.vector { #expect(try newcomer.snapshot.vector()[device] ?? 0 >= sequence) }
        try await d.syncAll()
        #expect(try await d.hashes().count == 1)
    }

    /// Regression: a device whose copy had not yet started from the store's
    /// baseline (one still arriving through a sync service) published a
    /// baseline of its own few saves. As the newest, it was the one devices
    /// that joined started from, without the store's past. Such a copy now
    /// refuses to publish until it has imported the store.
    @Test func aCopyThatHasNotImportedTheStoreCannotPublishABaseline() async throws {
        let d = try await TestDevices(1, schema: Self.schema)
        var rng = SeededRandom(seed: 7)
        try await Self.randomSaves(d, &rng, rounds: 10)
        try await d.syncAll()
        _ = try await d.stores[0].publishBaseline()
        let newcomer = try await d.add()
        // Saves before its first import: its copy holds only these.
        try await newcomer.write { tx in tx.insert("Note", ["title": "early"]) }
        let refused = await #expect(throws: ChronicleError.self) { try await newcomer.publishBaseline() }
        #expect(refused?.code == .unavailable)
        #expect(refused?.message.contains("has not imported the store's baseline yet") == true)
        // Once it has imported the store, it publishes; joining devices converge.
        try await d.syncAll()
        let published = try await newcomer.publishBaseline()
        #expect(published.records > 1)
        let joiner = try await d.add()
        let first = try await joiner.sync()
        #expect(first.imported.baseline != nil)
        try await d.syncAll()
        #expect(try await d.hashes().count == 1)
    }

    /// A record deleted before the baseline and edited later by a device the
    /// baseline does not cover: the edit is newer than the delete, so the
    /// record comes back with all its fields, on the newcomer too. A baseline
    /// of visible rows only would lose its other fields.
    /// A publish cut off before its final part (the process killed) leaves
    /// parts no reader uses. Publishing the same state again, split into
    /// other parts, replaces them instead of clashing with them.
    @Test func aPublishCutOffBeforeItsFinalPartDoesNotBlockTheNextOne() async throws {
        let d = try await TestDevices(1, schema: Self.schema)
        let store = d.stores[0]
        try await store.write { tx in
            for i in 0..<200 { tx.insert("Note", ["title": .string("note \(i) of a publish cut off")]) }
        }
        try await store.sync()
        let small = try await store.publishBaseline(partBytes: 1024)
        #expect(small.parts > 2)
        // The final part never arrived: the publish was cut off.
        let parts = try await d.container.listAll(prefix: small.prefix).map(\.name).sorted { $0.rawValue < $1.rawValue }
        try await d.container.delete(parts[parts.count - 1])
        let whole = try await store.publishBaseline()
        #expect(whole.prefix == small.prefix)
        #expect(try await d.container.listAll(prefix: whole.prefix).count == whole.parts)
        // A new device starts from it and agrees.
        let joining = try await d.add()
        let report = try await joining.sync()
        #expect(report.imported.baseline != nil && report.imported.failures.isEmpty)
        #expect(try await d.hashes().count == 1)
    }

    @Test func aBaselineKeepsDeletedRecordsStates() async throws {
        let d = try await TestDevices(3, schema: Self.schema)
        let id = try await d.stores[0].write { tx in tx.insert("Note", ["title": "kept", "counter": 7]) }
        try await d.syncAll()
        try await d.stores[1].write { tx in tx.delete("Note", id: id) }
        try await d.stores[1].sync()
        try await d.stores[0].sync()
        d.clock.advance(byMilliseconds: 10)
        // Device 3 edits later, offline.
        try await d.stores[2].write { tx in tx.update("Note", id: id, ["counter": 8]) }
        try await d.stores[0].publishBaseline()
        try await d.stores[2].sync()

        let newcomer = try await d.add()
        #expect(try await newcomer.sync().imported.baseline != nil)
        try await d.syncAll()
        #expect(try await d.hashes().count == 1)
        #expect(try await newcomer.values(of: "Note", id: id) == ["title": "kept", "counter": 8, "price": .null])
    }

    @Test func anIncompleteOrDamagedBaselineIsSkippedAndLogsAreReplayed() async throws {
        let d = try await TestDevices(2, schema: Self.schema)
        var rng = SeededRandom(seed: 9)
        try await Self.randomSaves(d, &rng, rounds: 20)
        try await d.syncAll()
        let older = try await d.stores[0].publishBaseline(partBytes: 1024)
        d.clock.advance(byMilliseconds: 5)
        try await d.stores[1].write { tx in tx.insert("Note", ["title": "newer"]) }
        try await d.syncAll()
        let newer = try await d.stores[1].publishBaseline(partBytes: 1024)
        #expect(newer.prefix > older.prefix)

        // The newer baseline lacks its final part (still arriving); the older
        // one has a damaged middle part.
        let newerParts = try await d.blobs(under: newer.prefix)
        try await d.container.delete(newerParts.last!)
        let olderParts = try await d.blobs(under: older.prefix)
        var bytes = try await d.container.get(olderParts[1])
        bytes[bytes.count / 2] ^= 0x40
        try await d.container.delete(olderParts[1])
        try await d.container.put(olderParts[1], bytes)

        // A newcomer first waits for the newer baseline to be complete (its
        // publisher may still be writing), then passes over it, meets the
        // damaged older one, and replays the logs.
        let newcomer = try await d.add()
        let waiting = try await newcomer.sync()
        #expect(waiting.status == .waiting)
        #expect(waiting.imported.waitingForBaseline == newerParts[0].rawValue)
        #expect(waiting.imported.appliedLogs == 0 && waiting.imported.failures.isEmpty)
        d.clock.advance(byMilliseconds: 61_000)
        let report = try await newcomer.sync().imported
        #expect(report.baseline == nil)
        #expect(report.passedOverBaselines == [newerParts[0].rawValue])
        #expect(Set(report.failures.map(\.error.code)) == [.bodyChecksumMismatch])
        try await d.syncAll()
        #expect(try await d.hashes().count == 1)

        // Once the final part arrives, a further newcomer uses that baseline.
        try await d.stores[1].publishBaseline(partBytes: 1024)  // puts the same parts again, and the missing one
        let later = try await d.add()
        #expect(try await later.sync().imported.baseline?.device == DeviceID(index: 2))
        try await d.syncAll()
        #expect(try await d.hashes().count == 1)
    }

    /// Applying a baseline to a snapshot that has everything in it already
    /// changes nothing (states are joined, not overwritten).
    @Test func applyingABaselineTwiceChangesNothing() async throws {
        let d = try await TestDevices(2, schema: Self.schema)
        var rng = SeededRandom(seed: 4)
        try await Self.randomSaves(d, &rng, rounds: 20)
        try await d.syncAll()
        let snapshot = d.stores[1].snapshot
        let before = try snapshot.stateHash()
        let vector = try snapshot.vector()
        let decoder = LogDecoder(schema: Self.schema)
        let export = try d.stores[0].snapshot.baselineExport(partBytes: 2048)
        var application = snapshot.baselineApplication()
        var parts = 0
        while let part = try export.nextPart() {
            _ = try application.apply(try decoder.open(part.bytes))
            parts += 1
        }
        #expect(parts > 1)
        #expect(application.summary?.parts == parts)
        #expect(try snapshot.stateHash() == before)
        #expect(try snapshot.vector() == vector)
    }

    @Test func partsOutOfOrderOrFromAnotherBaselineAreRefused() async throws {
        let d = try await TestDevices(2, schema: Self.schema)
        var rng = SeededRandom(seed: 5)
        try await Self.randomSaves(d, &rng, rounds: 20)
        try await d.syncAll()
        let decoder = LogDecoder(schema: Self.schema)
        func parts(_ store: Store) throws -> [VerifiedLog] {
            let export = try store.snapshot.baselineExport(partBytes: 1024)
            var result: [VerifiedLog] = []
            while let part = try export.nextPart() { result.append(try decoder.open(part.bytes)) }
            return result
        }
        let a = try parts(d.stores[0])
        let b = try parts(d.stores[1])
        #expect(a.count > 2 && b.count > 2)
        let fresh = try await d.add().snapshot
        var application = fresh.baselineApplication()
        #expect { _ = try application.apply(a[1]) } throws: { ($0 as? ChronicleError)?.code == .malformedBody }
        _ = try application.apply(a[0])
        #expect { _ = try application.apply(b[1]) } throws: { ($0 as? ChronicleError)?.code == .malformedBody }
        for part in a.dropFirst() { _ = try application.apply(part) }
        #expect(application.summary?.parts == a.count)
        // Parts after the final one come from the container's bytes: a typed error, never a trap.
        #expect { _ = try application.apply(a[0]) } throws: { ($0 as? ChronicleError)?.code == .malformedBody }
    }

    @Test func baselinePartNamesRoundTripAndHostileOnesAreNotParts() throws {
        let store = StoreID(RecordID(high: 0x0192_0000_0000_7000, low: 0x8000_0000_0000_0001))
        let device = DeviceID(index: 3)
        let clock = HybridTimestamp(milliseconds: 1_700_000_000_000, counter: 2)
        let vector = ContainerLayout.vectorDigest([device: 4, DeviceID(index: 1): 9])
        #expect(vector == ContainerLayout.vectorDigest([DeviceID(index: 1): 9, device: 4, DeviceID(index: 2): 0]))
        #expect(vector != ContainerLayout.vectorDigest([device: 5, DeviceID(index: 1): 9]))
        let name = ContainerLayout.baselinePart(store: store, clock: clock, device: device, vector: vector, part: 12)
        let parsed = try #require(ContainerLayout.parseBaselinePart(name))
        #expect(parsed.store == store && parsed.clock == clock && parsed.device == device && parsed.vector == vector && parsed.part == 12)
        let zeros = String(repeating: "0", count: 16)
        for hostile in ["\(store)/baselines/x/00000001.chbase",
                        "\(store)/baselines/\(zeros)-\(device)-\(zeros)/00000000.chbase",
                        "\(store)/baselines/\(zeros)-\(device)-\(zeros)/0000001.chbase",
                        "\(store)/baselines/\(zeros)-\(device)/00000001.chbase",
                        "\(store)/baselines/\(zeros)-\(device)-\(zeros)-\(zeros)/00000001.chbase",
                        "\(store)/logs/\(zeros)-\(device)-\(zeros)/00000001.chbase"] {
            #expect(ContainerLayout.parseBaselinePart(try ContainerName(hostile)) == nil, "\(hostile)")
        }
    }

    /// The CLI: `save` on one device, `baseline`, then `sync` on a new device
    /// starts from it; `inspect` lists it with its parts.
    @Test(.enabled(if: CrashSafetyTests.binary != nil, "needs the chronicle binary: swift build --build-tests"))
    func theCLIPublishesAndStartsFromABaseline() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-cli-baseline-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let schemaFile = root.appendingPathComponent("schema.json")
        try Data(try JSONEncoder().encode(Self.schema.jsonValue)).write(to: schemaFile)
        let changes = root.appendingPathComponent("changes.jsonl")
        try Data((1...40).map { "{\"op\": \"insert\", \"entity\": \"Note\", \"values\": {\"title\": \"n\($0)\"}}" }.joined(separator: "\n").utf8).write(to: changes)
        func chronicle(_ arguments: [String]) throws -> (status: Int32, json: [String: Any]) {
            let outcome = try CLIErrorTests.run(arguments)
            return (outcome.status, (try? JSONSerialization.jsonObject(with: outcome.stdout)) as? [String: Any] ?? [:])
        }
        let container = root.appendingPathComponent("container").path
        func device(_ name: String) -> [String] {
            ["--device-dir", root.appendingPathComponent(name).path, "--container", container, "--schema", schemaFile.path, "--json"]
        }
        #expect(try chronicle(["init", "--container", container, "--json"]).json["created"] as? Bool == true)
        #expect(try chronicle(["save", "--input", changes.path] + device("a")).status == 0)
        let published = try chronicle(["baseline", "--part-kib", "1"] + device("a"))
        #expect(published.status == 0)
        let parts = try #require(published.json["parts"] as? Int)
        #expect(parts > 1)
        #expect(published.json["records"] as? Int == 40)
        let synced = try chronicle(["sync"] + device("b"))
        #expect(synced.status == 0)
        let started = try #require(synced.json["startedFromBaseline"] as? [String: Any])
        #expect(started["parts"] as? Int == parts)
        #expect(synced.json["importedLogs"] as? Int == 0)
        let a = try chronicle(["state-hash", "--device-dir", root.appendingPathComponent("a").path, "--json"])
        #expect(a.json["stateHash"] as? String == synced.json["stateHash"] as? String)
        let inspected = try chronicle(["inspect", "--container", container, "--json"])
        let stores = try #require(inspected.json["stores"] as? [String: Any])
        let baselines = (stores.values.first as? [String: Any])?["baselines"] as? [String: Any]
        #expect((baselines?.values.first as? [String: Any])?["parts"] as? Int == parts)
    }
}
