import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Real OS processes as devices on one ``DirectoryContainer``, killed with
/// SIGKILL at random moments and restarted (`chronicle simulate --processes N`).
///
/// Each worker is the `chronicle` executable running its hidden
/// `simulate-worker` command, which opens its device folder and calls
/// ``runWorker(store:journal:saves:seed:)``: it saves and syncs in a loop,
/// appending a save's title to its fsynced journal only after the save
/// returned. When all have finished, every device repairs and syncs, and the
/// run checks that the state hashes are equal, that every journaled save is
/// on every device, and that every log in the container verifies. Kills land
/// where the OS scheduler puts them, so unlike ``Simulation`` a run is not
/// exactly reproducible.
///
/// ```swift
/// let result = try await MultiProcessSimulation(processes: 5, saves: 200, seed: 1, executable: chronicleBinary).run()
/// ```
package struct MultiProcessSimulation: Sendable {
    /// Worker processes (devices).
    package var processes: Int
    /// Saves each worker journals before it finishes.
    package var saves: Int
    /// Seeds the kill schedule and the workers' choices.
    package var seed: UInt64
    /// The `chronicle` executable the workers run.
    package var executable: URL
    /// The arguments before the worker's own (its subcommand).
    package var workerCommand = ["simulate-worker"]
    /// The longest a run may take, in real time.
    package var timeLimit: Duration = .seconds(600)
    /// At most this many kills per process.
    package var killsPerProcess = 4

    /// What a run did and found.
    package struct Result: Sendable, Hashable, Codable {
        /// The run's seed and number of processes.
        package var seed: UInt64
        package var processes: Int
        /// SIGKILLs sent.
        package var kills = 0
        /// Journaled (acknowledged) saves, each checked on every device.
        package var acknowledged = 0
        /// What broke an invariant (or a worker that failed on its own).
        package var violations: [String] = []
        /// The devices' state hash (one of them, if they differ).
        package var stateHash = ""
        /// Kills and restarts, in order.
        package var events: [String] = []

        /// Whether every invariant held.
        package var passed: Bool { violations.isEmpty }
    }

    /// The schema the workers share: notes with a unique title.
    package static let schemaJSON = #"""
        {"version": 1, "entities": [
          {"name": "Note", "attributes": [{"name": "title", "type": "string"}, {"name": "words", "type": "int64", "default": 0}],
           "unique": [["title"]]}
        ]}
        """#

    /// Describes a run; ``validate()`` checks it.
    package init(processes: Int, saves: Int, seed: UInt64, executable: URL) {
        self.processes = processes
        self.saves = saves
        self.seed = seed
        self.executable = executable
    }

    /// - Throws: ``ChronicleError/Code/invalidValue`` unless there are 1 to
    ///   32 processes and saves are not negative.
    package func validate() throws(ChronicleError) {
        guard (1...32).contains(processes) else { throw ChronicleError(.invalidValue, "processes takes 1 to 32, not \(processes)") }
        guard saves >= 0 else { throw ChronicleError(.invalidValue, "saves cannot be negative (\(saves))") }
    }

    /// Starts the workers, kills and restarts them until all have finished,
    /// then checks the devices.
    package func run() async throws -> Result {
        try validate()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-mp-\(seed)-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let schemaURL = root.appendingPathComponent("schema.json")
        try Data(Self.schemaJSON.utf8).write(to: schemaURL)
        let container = root.appendingPathComponent("container")
        // Made once, as `chronicle init` would: workers only open it.
        _ = try DirectoryContainer(root: container, create: true)
        func launch(_ i: Int) throws -> Process {
            let p = Process()
            p.executableURL = executable
            p.arguments = workerCommand + [
                "--device-dir", root.appendingPathComponent("device-\(i)").path, "--container", container.path,
                "--schema", schemaURL.path, "--journal", root.appendingPathComponent("journal-\(i).txt").path,
                "--saves", String(saves), "--seed", String(seed &+ UInt64(i)),
            ]
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.run()
            return p
        }
        var result = Result(seed: seed, processes: processes)
        try killAndRestart(try (0..<processes).map(launch), launch: launch, into: &result)
        try await check(root: root, schema: Schema(contentsOf: schemaURL), container: container, into: &result)
        return result
    }

    /// Kills and restarts workers at random moments until all have finished.
    private func killAndRestart(_ started: [Process], launch: (Int) throws -> Process, into result: inout Result) throws {
        var workers = started
        var random = SeededRandom(seed: seed)
        let deadline = ContinuousClock.now + timeLimit
        while workers.contains(where: { $0.isRunning }) {
            guard ContinuousClock.now < deadline else {
                workers.forEach { kill($0.processIdentifier, SIGKILL) }
                throw ChronicleError(.unavailable, "workers did not finish within \(timeLimit)")
            }
            usleep(UInt32(10_000 + random.next() % 70_000))
            let i = Int(random.next() % UInt64(processes))
            if result.kills < processes * killsPerProcess && workers[i].isRunning {
                kill(workers[i].processIdentifier, SIGKILL)
                workers[i].waitUntilExit()
                result.kills += 1
                result.events.append("killed device \(i + 1) (pid \(workers[i].processIdentifier)), restarting")
                workers[i] = try launch(i)
            }
            for j in 0..<processes where !workers[j].isRunning && workers[j].terminationReason == .exit && workers[j].terminationStatus != 0 {
                // A worker that failed (not killed) is a finding: restart it once more, and record it.
                result.violations.append("device \(j + 1) exited with status \(workers[j].terminationStatus)")
                workers[j] = try launch(j)
            }
        }
    }

    /// Quiesces (every device repairs and syncs) and checks the invariants.
    private func check(root: URL, schema: Schema, container: URL, into result: inout Result) async throws {
        let shared = try DirectoryContainer(root: container)
        var stores: [Store] = []
        for i in 0..<processes {
            stores.append(try await Self.openDevice(root.appendingPathComponent("device-\(i)"), schema: schema, container: shared))
        }
        for _ in 0..<3 { for s in stores { try await s.repairOwnLogs(); try await s.sync() } }
        var hashes = Set<String>()
        for s in stores { hashes.insert(try await s.stateHash()) }
        if hashes.count != 1 { result.violations.append("convergence: \(hashes.count) different states") }
        result.stateHash = hashes.sorted().first ?? ""
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
        for blob in try await shared.listAll(prefix: "") where blob.name.rawValue.hasSuffix(ContainerLayout.logExtension) {
            do { _ = try decoder.open(try await shared.get(blob.name)) } catch {
                result.violations.append("verify: \(blob.name): \(error)")
            }
        }
        for s in stores { try await s.close() }
    }

    /// Opens the snapshot a worker left in `directory` (its identity is in the file).
    static func openDevice(_ directory: URL, schema: Schema, container: any Container) async throws -> Store {
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".sqlite") }
        guard files.count == 1 else {
            throw ChronicleError(.notFound, "\(directory.path) holds \(files.count) snapshots, not one")
        }
        let identity = try Snapshot.identity(at: directory.appendingPathComponent(files[0]).path)
        var configuration = Store.Configuration(schema: schema, deviceID: identity.device, directory: directory, container: container)
        configuration.knownStore = identity.store
        return try await Store.open(configuration)
    }

    /// A worker's loop: syncs (one time in four) or saves (an insert of a
    /// new title, or an update of a random note's words) until `saves` saves
    /// are journaled, then syncs and closes. A save's title is appended to
    /// the fsynced journal only after the save returned; a restarted worker
    /// carries on from the saves its journal holds.
    package static func runWorker(store: Store, journal: URL, saves: Int, seed: UInt64) async throws {
        let existing = (try? String(contentsOf: journal, encoding: .utf8))?.split(separator: "\n").count ?? 0
        var random = SeededRandom(seed: seed &+ UInt64(existing) &* 1_000_003 &+ UInt64(getpid()))
        if !FileManager.default.fileExists(atPath: journal.path) { _ = FileManager.default.createFile(atPath: journal.path, contents: nil) }
        let handle = try FileHandle(forWritingTo: journal)
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
            let title = "d\(SimulatedDevice.deviceID(of: store).description.prefix(8))-\(done)-\(getpid())-\(attempt)"
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
