import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Logging
import Testing

/// Several devices save concurrently with conflicts and sync in seeded random
/// orders through one DirectoryContainer; all must end on the state an
/// independent last-writer-wins model computes from every acknowledged save.
@Suite struct ConvergenceTests {
    static let schema = try! Schema(version: 1, entities: [
        Entity("Note", attributes: [
            Attribute("title", .string), Attribute("body", .string, optional: true),
            Attribute("counter", .int64, default: 0), Attribute("pinned", .bool, default: false),
        ]),
    ])

    /// The oracle: per record and field, the value of the newest acknowledged write.
    struct Model {
        var fields: [RecordID: [String: (Value, Version)]] = [:]
        var inserted: Set<RecordID> = []
        var deletes: [RecordID: Version] = [:]

        mutating func record(_ kind: ChangeKind, _ id: RecordID, _ values: [String: Value], _ version: Version) {
            switch kind {
            case .insert:
                inserted.insert(id)
                for (k, v) in values where fields[id]?[k].map({ $0.1 < version }) ?? true { fields[id, default: [:]][k] = (v, version) }
            case .update:
                for (k, v) in values where fields[id]?[k].map({ $0.1 < version }) ?? true { fields[id, default: [:]][k] = (v, version) }
            case .delete:
                if deletes[id].map({ $0 < version }) ?? true { deletes[id] = version }
            }
        }

        /// What every device must show.
        func expected() -> [RecordID: [String: Value]] {
            var result: [RecordID: [String: Value]] = [:]
            for id in inserted {
                let f = fields[id] ?? [:]
                let newest = f.values.map(\.1).max()
                if let d = deletes[id], newest.map({ $0 <= d }) ?? true { continue }
                result[id] = f.mapValues(\.0)
            }
            return result
        }
    }

    static func makeDevices(_ count: Int, container: any Container, clock: ManualClock, root: URL) async throws -> [Store] {
        var stores: [Store] = []
        for i in 1...count {
            stores.append(try await Store.open(Store.Configuration(
                schema: schema, deviceID: DeviceID(index: UInt64(i)), directory: root.appendingPathComponent("device-\(i)"),
                container: container, clock: clock, seed: UInt64(i), logger: Logger(label: "test"), durability: .normal)))
        }
        return stores
    }

    static func run(seed: UInt64, devices deviceCount: Int, savesPerDevice: Int) async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-conv-\(seed)-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let container = try DirectoryContainer(root: root.appendingPathComponent("container"), create: true)
        let clock = ManualClock()
        let stores = try await makeDevices(deviceCount, container: container, clock: clock, root: root)
        var rng = SeededRandom(seed: seed)
        var model = Model()
        var saves = Array(repeating: 0, count: deviceCount)
        while saves.contains(where: { $0 < savesPerDevice }) {
            let d = Int(rng.next() % UInt64(deviceCount))
            // Clocks drift per device: sometimes the shared clock even steps back.
            clock.advance(byMilliseconds: Int64(rng.next() % 5) - 1)
            if rng.next() % 10 < 2 {
                try await stores[d].sync()
                continue
            }
            guard saves[d] < savesPerDevice else { continue }
            let visible = try await stores[d].read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Note") }
            let roll = rng.next() % 10
            var recorded: [(ChangeKind, RecordID, [String: Value])] = []
            if visible.isEmpty || roll < 3 {
                let values: [String: Value] = ["title": .string("note \(d)-\(saves[d])"), "body": rng.next() % 2 == 0 ? .null : "text",
                                               "counter": .int(Int64(rng.next() % 100)), "pinned": .bool(rng.next() % 2 == 0)]
                let id = try await stores[d].write { tx in tx.insert("Note", values) }
                recorded.append((.insert, id, values))
            } else if roll < 9 {
                let id = visible[Int(rng.next() % UInt64(visible.count))]
                var values: [String: Value] = [:]
                if rng.next() % 2 == 0 { values["title"] = .string("edit \(d)-\(saves[d])") }
                if rng.next() % 2 == 0 { values["counter"] = .int(Int64(rng.next() % 1000)) }
                if values.isEmpty { values["pinned"] = .bool(rng.next() % 2 == 0) }
                try await stores[d].write { [values] tx in tx.update("Note", id: id, values) }
                recorded.append((.update, id, values))
            } else {
                let id = visible[Int(rng.next() % UInt64(visible.count))]
                try await stores[d].write { tx in tx.delete("Note", id: id) }
                recorded.append((.delete, id, [:]))
            }
            // The save was acknowledged: record it with the version it got.
            let clockUsed = try await stores[d].read { db in
                try Int64.fetchOne(db, sql: "SELECT clock FROM _chronicle_vector WHERE device = ?", arguments: [DeviceID(index: UInt64(d + 1)).rawValue])!
            }
            let version = Version(clock: HybridTimestamp(rawValue: UInt64(bitPattern: clockUsed)), device: DeviceID(index: UInt64(d + 1)))
            for (kind, id, values) in recorded { model.record(kind, id, values, version) }
            saves[d] += 1
        }
        // Quiesce: two rounds so every device sees every log.
        for _ in 0..<2 {
            for s in stores { try await s.sync() }
        }
        let expected = model.expected()
        var hashes: Set<String> = []
        for s in stores {
            let actual = try await s.read { db in
                var actual: [RecordID: [String: Value]] = [:]
                let entity = schema.entity(named: "Note")!
                for row in try Row.fetchAll(db, sql: "SELECT * FROM Note") {
                    var values: [String: Value] = [:]
                    for f in entity.fields { values[f.name] = try Value(databaseValue: row[f.name] as DatabaseValue, field: f) }
                    actual[row["id"] as RecordID] = values
                }
                return actual
            }
            #expect(actual.count == expected.count, "seed \(seed): record count")
            for (id, values) in expected {
                for (k, v) in values {
                    #expect(actual[id]?[k] == v, "seed \(seed): \(id).\(k)")
                }
            }
            hashes.insert(try await s.stateHash())
        }
        #expect(hashes.count == 1, "seed \(seed): devices did not converge: \(hashes)")

        // Replaying every log from scratch into an empty snapshot gives the same state.
        let fresh = try await Store.open(Store.Configuration(
            schema: schema, deviceID: DeviceID(index: 99), directory: root.appendingPathComponent("fresh"),
            container: container, clock: clock, seed: 99, logger: Logger(label: "test"), durability: .normal))
        try await fresh.sync()
        #expect(try await fresh.stateHash() == hashes.first)
        for s in stores { try await s.close() }
        try await fresh.close()
    }

    @Test(arguments: [UInt64(1), 2, 3])
    func fiveDevicesConverge(seed: UInt64) async throws {
        try await Self.run(seed: seed, devices: 5, savesPerDevice: 60)
    }

    /// The acceptance run: 5 devices × 1,000 saves. Set CHRONICLE_LARGE=1.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["CHRONICLE_LARGE"] == "1"))
    func fiveDevicesThousandSavesEach() async throws {
        try await Self.run(seed: 42, devices: 5, savesPerDevice: 1_000)
    }
}
