import Chronicle
import ChronicleContainer
import ChronicleCore
import ChroniclePostgres
import ChronicleTestSupport
import Foundation
import Logging

/// The PostgreSQL container on a throw-away server, against its baselines:
/// save-to-visible latency through LISTEN/NOTIFY against polling, devices
/// through PostgreSQL against a folder, replication into PostgreSQL
/// against COPY.
package struct PostgresScenarios: Sendable {
    /// Saves measured with LISTEN/NOTIFY.
    package var saves = 1_000
    /// Saves measured with polling every second.
    package var pollingSaves = 100
    /// Devices in the devices scenario.
    package var devices = 8
    /// Saves per device in the devices scenario.
    package var deviceSaves = 1_000
    /// Records of the replicated store.
    package var records = 1_000_000
    /// The scenarios to run; empty for all.
    package var only: [String] = []

    package init() {}

    /// The scenario names.
    package static let scenarios = ["latency", "devices", "replication"]
    static let schema = try! Schema(json: Data(#"{"version": 1, "entities": [{"name": "Note", "attributes": [{"name": "title", "type": "string"}]}]}"#.utf8))

    /// Runs the chosen scenarios; `say` receives a line per step. Returns
    /// the results as JSON and as text, one line per scenario.
    package func run(logger: Logger, say: @escaping @Sendable (String) -> Void) async throws -> (json: JSONValue, text: String) {
        let server = try ThrowAwayPostgres(fsync: true)
        defer { server.remove() }
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-pgbench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        var results: [String: JSONValue] = [:]
        var lines: [String] = []
        var schemaNumber = 0
        func container() async throws -> PostgresContainer {
            schemaNumber += 1
            var configuration = try PostgresContainer.Configuration(url: server.url)
            configuration.schema = "bench_\(schemaNumber)"
            return try await PostgresContainer.connect(configuration, create: true, logger: logger)
        }
        let chosen = only.isEmpty ? Self.scenarios : only
        if chosen.contains("latency") {
            say("latency: \(saves) saves woken by LISTEN/NOTIFY")
            let notified = try await Self.latency(on: try await container(), polling: false, saves: saves, root: root.appendingPathComponent("notify"))
            say("latency: \(pollingSaves) saves with polling every second")
            let polled = pollingSaves == 0 ? [] : try await Self.latency(on: try await container(), polling: true, saves: pollingSaves,
                                                                           root: root.appendingPathComponent("poll"))
            func summary(_ sample: [Duration]) -> JSONValue {
                .object(["saves": .int(Int64(sample.count)), "p50Milliseconds": .double(Self.percentile(sample, 0.5)),
                         "p99Milliseconds": .double(Self.percentile(sample, 0.99))])
            }
            results["latency"] = .object(["notify": summary(notified), "polling": summary(polled)])
            lines.append(String(format: "save-to-visible, LISTEN/NOTIFY: p50 %.1f ms, p99 %.1f ms over %d saves; polling every second: p50 %.1f ms, p99 %.1f ms over %d saves",
                                Self.percentile(notified, 0.5), Self.percentile(notified, 0.99), notified.count,
                                Self.percentile(polled, 0.5), Self.percentile(polled, 0.99), polled.count))
        }
        if chosen.contains("devices") {
            say("devices: \(devices) × \(deviceSaves) saves through PostgreSQL")
            let pg = try await Self.devices(on: try await container(), count: devices, saves: deviceSaves, root: root.appendingPathComponent("pg"))
            say("devices: \(devices) × \(deviceSaves) saves through a folder")
            let folder = try DirectoryContainer(root: root.appendingPathComponent("folder-container"), create: true)
            let dir = try await Self.devices(on: folder, count: devices, saves: deviceSaves, root: root.appendingPathComponent("dir"))
            results["devices"] = .object([
                "devices": .int(Int64(devices)), "savesPerDevice": .int(Int64(deviceSaves)),
                "postgres": .object(["savesSeconds": .double(pg.saves.seconds), "convergenceSeconds": .double(pg.convergence.seconds)]),
                "folder": .object(["savesSeconds": .double(dir.saves.seconds), "convergenceSeconds": .double(dir.convergence.seconds)]),
            ])
            lines.append(String(format: "%d devices × %d saves: PostgreSQL %.2f s saving, %.2f s to converge; folder %.2f s saving, %.2f s to converge",
                                devices, deviceSaves, pg.saves.seconds, pg.convergence.seconds, dir.saves.seconds, dir.convergence.seconds))
        }
        if chosen.contains("replication") {
            say("replication: building a store of \(records) records in a folder")
            let r = try await Self.replication(records: records, into: try await container(), server: server, root: root.appendingPathComponent("replication"))
            results["replication"] = .object([
                "records": .int(Int64(records)), "blobs": .int(Int64(r.blobs)), "bytes": .int(Int64(r.bytes)),
                "replicateSeconds": .double(r.replicate.seconds), "copySeconds": .double(r.copy.seconds),
                "recordsPerSecond": .double(Double(records) / r.replicate.seconds), "ratioToCopy": .double(r.copy.seconds / r.replicate.seconds),
            ])
            lines.append(String(format: "replication of %d records (%d blobs, %.1f MB) folder → PostgreSQL: %.2f s, %.0f records/s; COPY of the same bytes %.2f s (%.2f of COPY's speed)",
                                records, r.blobs, Double(r.bytes) / 1e6, r.replicate.seconds, Double(records) / r.replicate.seconds,
                                r.copy.seconds, r.copy.seconds / r.replicate.seconds))
        }
        return (.object(results), lines.joined(separator: "\n"))
    }

    /// Device A saves and uploads one record at a time; each sample is
    /// the time until device B's snapshot has it.
    static func latency(on container: PostgresContainer, polling: Bool, saves: Int, root: URL) async throws -> [Duration] {
        let writerContainer: any Container = container
        let readerContainer: any Container = polling ? PollingOnly(base: container) : container
        let a = try await Store.open(Store.Configuration(schema: schema, directory: root.appendingPathComponent("a"), container: writerContainer))
        let b = try await Store.open(Store.Configuration(schema: schema, directory: root.appendingPathComponent("b"), container: readerContainer))
        _ = try await a.sync()
        _ = try await b.sync()
        let events = try b.changes()
        var iterator = events.makeAsyncIterator()
        try await b.startAutomaticSync(every: polling ? .seconds(1) : .seconds(3600))
        let clock = ContinuousClock()
        var samples: [Duration] = []
        var random = SystemRandomNumberGenerator()
        for i in 0..<saves {
            // Saves at random moments of B's polling cycle, not just after
            // one of its ticks (which would wait a whole interval each).
            if polling { try await Task.sleep(for: .milliseconds(Int.random(in: 0..<1_000, using: &random))) }
            let start = clock.now
            let id = try await a.write { tx in tx.insert("Note", ["title": Value.string("note \(i)")]) }
            _ = try await a.upload()
            seen: while let event = await iterator.next() {
                switch event {
                case .record(let change) where change.recordID == id: break seen
                case .refetch:
                    if try await b.read({ db in try Bool.fetchOne(db, sql: "SELECT 1 FROM Note WHERE id = ?", arguments: [id]) }) == true { break seen }
                default: continue
                }
            }
            samples.append(clock.now - start)
        }
        await b.stopAutomaticSync()
        try await a.close()
        try await b.close()
        await container.shutdown()
        return samples
    }

    /// `count` devices saving at once, each syncing every 100 saves; then
    /// syncing until all hold every save.
    static func devices(on container: any Container, count: Int, saves: Int, root: URL) async throws -> (saves: Duration, convergence: Duration) {
        var stores: [Store] = []
        for i in 0..<count {
            stores.append(try await Store.open(Store.Configuration(schema: schema, directory: root.appendingPathComponent("d\(i)"), container: container)))
        }
        let clock = ContinuousClock()
        let start = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (i, store) in stores.enumerated() {
                group.addTask {
                    for n in 0..<saves {
                        _ = try await store.write { tx in tx.insert("Note", ["title": Value.string("d\(i) n\(n)")]) }
                        if n % 100 == 99 { _ = try? await store.sync() }
                    }
                }
            }
            try await group.waitForAll()
        }
        let saved = clock.now
        let total = count * saves
        var converged = false
        while !converged {
            converged = true
            for store in stores {
                _ = try await store.sync()
                let held = try await store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM Note") ?? 0 }
                if held != total { converged = false }
            }
        }
        let end = clock.now
        for store in stores { try await store.close() }
        await container.shutdown()
        return (saved - start, end - saved)
    }

    /// A store of `records` records, written in logs of 10,000, in a
    /// folder; then replicated into `container`, and its blobs copied with
    /// psql's COPY into a plain table.
    static func replication(records: Int, into container: PostgresContainer, server: ThrowAwayPostgres, root: URL) async throws
        -> (blobs: Int, bytes: Int, replicate: Duration, copy: Duration) {
        let folder = try DirectoryContainer(root: root.appendingPathComponent("container"), create: true)
        let writer = try await Store.open(Store.Configuration(schema: schema, directory: root.appendingPathComponent("writer"), container: folder))
        var written = 0
        while written < records {
            let batch = min(10_000, records - written)
            let first = written
            _ = try await writer.write { tx in
                for n in first..<(first + batch) { _ = tx.insert("Note", ["title": Value.string("record \(n) of the replicated store")]) }
            }
            written += batch
        }
        _ = try await writer.sync()
        try await writer.close()
        let clock = ContinuousClock()
        let start = clock.now
        _ = try await ContainerReplication(from: folder, to: container).run()
        let replicate = clock.now - start
        await container.shutdown()

        // The same bytes, by COPY: one line per blob, bytea in hex.
        let blobs = try await folder.listAll(prefix: "")
        let file = root.appendingPathComponent("copy.txt")
        _ = FileManager.default.createFile(atPath: file.path, contents: nil)
        let handle = try FileHandle(forWritingTo: file)
        var bytes = 0
        for blob in blobs {
            let data = try await folder.get(blob.name, maxBytes: .max)
            bytes += data.count
            var line = blob.name.rawValue + "\t\\\\x"
            line.reserveCapacity(line.count + data.count * 2 + 1)
            for byte in data { line += String(byte >> 4, radix: 16) + String(byte & 15, radix: 16) }
            try handle.write(contentsOf: Data((line + "\n").utf8))
        }
        try handle.close()
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file.path)
        let sql = "CREATE TABLE copy_bench (name text PRIMARY KEY, bytes bytea NOT NULL)"
        _ = try server.psql(sql)
        let copyStart = clock.now
        _ = try server.psql("\\copy copy_bench (name, bytes) FROM '\(file.path)'")
        let copy = clock.now - copyStart
        return (blobs.count, bytes, replicate, copy)
    }

    static func percentile(_ sample: [Duration], _ p: Double) -> Double {
        guard !sample.isEmpty else { return 0 }
        let sorted = sample.sorted()
        let index = min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)
        return sorted[max(0, index)].milliseconds
    }
}

package extension Duration {
    /// The duration in seconds.
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
    /// The duration in milliseconds.
    var milliseconds: Double { seconds * 1_000 }
}

/// A container that never says another handle wrote: a device on it polls.
struct PollingOnly: Container {
    let base: any Container
    var capabilities: ContainerCapabilities { base.capabilities }
    func put(_ name: ContainerName, _ bytes: [UInt8]) async throws { try await base.put(name, bytes) }
    func get(_ name: ContainerName, maxBytes: Int) async throws -> [UInt8] { try await base.get(name, maxBytes: maxBytes) }
    func list(prefix: String, after: ContainerName?, limit: Int) async throws -> [BlobInfo] { try await base.list(prefix: prefix, after: after, limit: limit) }
    func listChildren(prefix: String) async throws -> [String] { try await base.listChildren(prefix: prefix) }
    func delete(_ name: ContainerName) async throws { try await base.delete(name) }
    func readMarker(_ name: ContainerName) async throws -> Marker? { try await base.readMarker(name) }
    func createMarker(_ name: ContainerName, _ bytes: [UInt8]) async throws -> Marker { try await base.createMarker(name, bytes) }
    func replaceMarker(_ name: ContainerName, _ bytes: [UInt8], expected: UInt64) async throws -> Marker {
        try await base.replaceMarker(name, bytes, expected: expected)
    }
    func deleteMarker(_ name: ContainerName, expected: UInt64?) async throws { try await base.deleteMarker(name, expected: expected) }
    func listMarkers(prefix: String) async throws -> [ContainerName] { try await base.listMarkers(prefix: prefix) }
    func listMarkers(prefix: String, after: ContainerName?, limit: Int) async throws -> [ContainerName] {
        try await base.listMarkers(prefix: prefix, after: after, limit: limit)
    }
    func foreignEntries(prefix: String) async throws -> [ForeignEntry] { try await base.foreignEntries(prefix: prefix) }
    func shutdown() async {}
    func changes() async -> AsyncStream<Void>? { nil }
}
