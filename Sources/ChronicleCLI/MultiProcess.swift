import ArgumentParser
import Chronicle
import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// The schema the multi-process simulation's devices share.
enum MultiProcessSchema {
    static let json = #"""
        {"version": 1, "entities": [
          {"name": "Note", "attributes": [{"name": "title", "type": "string"}, {"name": "words", "type": "int64", "default": 0}],
           "unique": [["title"]]}
        ]}
        """#
}

/// `chronicle simulate --processes N`: real OS processes as devices on one
/// DirectoryContainer, killed with SIGKILL at random moments and restarted.
struct MultiProcessRun {
    let processes: Int
    let saves: Int
    let seed: UInt64
    let binary: String
    let verbose: Bool

    struct Result {
        var kills = 0
        var acknowledged = 0
        var violations: [String] = []
        var hash = ""
    }

    func run() async throws -> Result {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-mp-\(seed)-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let schemaPath = root.appendingPathComponent("schema.json").path
        try Data(MultiProcessSchema.json.utf8).write(to: URL(fileURLWithPath: schemaPath))
        let container = root.appendingPathComponent("container").path
        // The workers open the container as `chronicle sync` does, which refuses a missing one.
        let shared = try DirectoryContainer(root: URL(fileURLWithPath: container), create: true)
        func arguments(_ i: Int) -> [String] {
            ["simulate-worker", "--device-dir", root.appendingPathComponent("device-\(i)").path, "--container", container,
             "--schema", schemaPath, "--journal", root.appendingPathComponent("journal-\(i).txt").path,
             "--saves", String(saves), "--seed", String(seed &+ UInt64(i))]
        }
        func launch(_ i: Int) throws -> Process {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: binary)
            p.arguments = arguments(i)
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.run()
            return p
        }
        var workers = try (0..<processes).map(launch)
        var random = SeededRandom(seed: seed)
        var result = Result()
        let maxKills = processes * 4
        // Kill and restart workers at random moments until all have finished.
        let deadline = Date().addingTimeInterval(600)
        while workers.contains(where: { $0.isRunning }) {
            guard Date() < deadline else {
                workers.forEach { kill($0.processIdentifier, SIGKILL) }
                throw ChronicleError(.unavailable, "workers did not finish within 10 minutes")
            }
            usleep(UInt32(10_000 + random.next() % 70_000))
            let i = Int(random.next() % UInt64(processes))
            if result.kills < maxKills && workers[i].isRunning {
                kill(workers[i].processIdentifier, SIGKILL)
                workers[i].waitUntilExit()
                result.kills += 1
                if verbose { print("killed device \(i + 1) (pid \(workers[i].processIdentifier)), restarting") }
                workers[i] = try launch(i)
            }
            for j in 0..<processes where !workers[j].isRunning && workers[j].terminationReason == .exit && workers[j].terminationStatus != 0 {
                // A worker that failed (not killed) is a finding: restart it once more, and record it.
                result.violations.append("device \(j + 1) exited with status \(workers[j].terminationStatus)")
                workers[j] = try launch(j)
            }
        }
        // Quiesce: every device syncs until all have everything.
        let schema = try Schema(contentsOf: URL(fileURLWithPath: schemaPath))
        var stores: [Store] = []
        for i in 0..<processes {
            let dir = root.appendingPathComponent("device-\(i)")
            let identity = try DeviceFile.load(in: dir)
            stores.append(try await Store.open(Store.Configuration(
                schema: schema, deviceID: identity.device, directory: dir, container: shared,
                logger: Logger(label: "mp") { _ in SwiftLogNoOpLogHandler() }, knownStore: identity.store)))
        }
        for _ in 0..<3 { for s in stores { try await s.repairOwnLogs(); try await s.sync() } }
        var hashes = Set<String>()
        for s in stores { hashes.insert(try await s.stateHash()) }
        if hashes.count != 1 { result.violations.append("convergence: \(hashes.count) different states") }
        result.hash = hashes.first ?? ""
        for i in 0..<processes {
            let journal = (try? String(contentsOfFile: root.appendingPathComponent("journal-\(i).txt").path, encoding: .utf8)) ?? ""
            let titles = journal.split(separator: "\n").map(String.init)
            result.acknowledged += titles.count
            for (d, s) in stores.enumerated() {
                let present = Set(try await s.read { db in try String.fetchAll(db, sql: "SELECT title FROM Note") })
                for t in titles where !present.contains(t) {
                    result.violations.append("lost: device \(d + 1) lacks acknowledged save \(t) of device \(i + 1)")
                }
            }
        }
        let decoder = LogDecoder(schema: schema)
        for blob in try await shared.listAll(prefix: "") where blob.name.rawValue.hasSuffix(".chlog") {
            do { _ = try decoder.open(try await shared.get(blob.name, maxBytes: decoder.limits.maxLogBytes)) } catch {
                result.violations.append("verify: \(blob.name): \(error)")
            }
        }
        for s in stores { try await s.close() }
        return result
    }
}

/// One device of the multi-process simulation (hidden: started by `simulate --processes`).
struct SimulateWorker: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate-worker", abstract: "A device process of `chronicle simulate --processes`.", shouldDisplay: false)

    @OptionGroup var device: DeviceOptions
    @Option var journal: String
    @Option var saves: Int
    @Option var seed: UInt64

    func run() async throws {
        let store = try await device.open()
        let existing = (try? String(contentsOfFile: journal, encoding: .utf8))?.split(separator: "\n").count ?? 0
        var random = SeededRandom(seed: seed &+ UInt64(existing) &* 1_000_003 &+ UInt64(getpid()))
        let handle: FileHandle
        if !FileManager.default.fileExists(atPath: journal) { _ = FileManager.default.createFile(atPath: journal, contents: nil) }
        handle = try FileHandle(forWritingTo: URL(fileURLWithPath: journal))
        try handle.seekToEnd()
        var done = existing
        var attempt = 0
        while done < saves {
            attempt += 1
            if random.next() % 4 == 0 {
                _ = try? await store.sync()
                continue
            }
            let notes = try await store.read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Note ORDER BY id") }
            let title = "d\(store.configuration.deviceID.description.prefix(8))-\(done)-\(getpid())-\(attempt)"
            let words = Int64(random.next() % 10_000)
            let update = !notes.isEmpty && random.next() % 3 == 0
            let target = notes.isEmpty ? nil : notes[Int(random.next() % UInt64(notes.count))]
            try await store.write { tx in
                if update, let target {
                    tx.update("Note", id: target, ["words": .int(words)])
                } else {
                    tx.insert("Note", ["title": .string(title), "words": .int(words)])
                }
            }
            if !update {
                // Acknowledged: only now does the journal record it.
                try handle.write(contentsOf: Data((title + "\n").utf8))
                try handle.synchronize()
            }
            done += 1
        }
        try await store.sync()
        try await store.close()
    }
}
