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
    /// Whether the workers also turn the cloud off and on (merging their
    /// local data) and the first one deletes the cloud store everywhere
    /// once, half-way through its saves.
    package var lifecycle = false

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
        /// With the lifecycle: cloud stores deleted on purpose, and the
        /// acknowledged saves that went with them (not looked for).
        package var deletedStores = 0
        package var savesDeletedWithTheirStore = 0
        /// With the lifecycle: times a worker turned the cloud off or on.
        package var toggles = 0

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
            ] + (lifecycle ? ["--lifecycle"] + (i == 0 ? ["--deleter"] : []) : [])
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
        var managers: [StoreManager] = []
        var stores: [Store] = []
        for i in 0..<processes {
            let directory = root.appendingPathComponent("device-\(i)")
            if lifecycle {
                // Every device ends with the cloud on, its local data merged in.
                let manager = try await StoreManager.open(StoreManager.Configuration(
                    store: Store.Configuration(schema: schema, directory: directory, container: shared), cloudEnabledByDefault: true))
                _ = try await manager.setCloudEnabled(true)
                managers.append(manager)
            } else {
                stores.append(try await Self.openDevice(directory, schema: schema, container: shared))
            }
        }
        for _ in 0..<3 {
            for m in managers {
                try await m.store.repairOwnLogs()
                try await m.sync()
                if await m.loadedKind != .cloud { _ = try await m.setCloudEnabled(true) }
            }
            for s in stores { try await s.repairOwnLogs(); try await s.sync() }
        }
        for m in managers { stores.append(try await m.store) }
        var hashes = Set<String>()
        for s in stores { hashes.insert(try await s.stateHash()) }
        if hashes.count != 1 { result.violations.append("convergence: \(hashes.count) different states") }
        result.stateHash = hashes.sorted().first ?? ""
        let journals = (0..<processes).map { i in
            Journal(lines: (try? String(contentsOfFile: root.appendingPathComponent("journal-\(i).txt").path, encoding: .utf8)) ?? "")
        }
        let deleted = Set(journals.flatMap(\.deleting))
        result.deletedStores = deleted.count
        result.toggles = journals.map(\.toggles).reduce(0, +)
        for (i, journal) in journals.enumerated() {
            result.acknowledged += journal.saves.count
            for (d, s) in stores.enumerated() {
                let present = Set(try await s.read { db in try String.fetchAll(db, sql: "SELECT title FROM Note") })
                for save in journal.saves where !present.contains(save.title) {
                    // Saved in a cloud store deleted on purpose: it went with the store.
                    if save.cloud, let store = save.store, deleted.contains(store) {
                        if d == 0 { result.savesDeletedWithTheirStore += 1 }
                        continue
                    }
                    result.violations.append("lost: device \(d + 1) lacks acknowledged save \(save.title) of device \(i + 1)")
                }
            }
        }
        let decoder = LogDecoder(schema: schema)
        for blob in try await shared.listAll(prefix: "") where blob.name.rawValue.hasSuffix(ContainerLayout.logExtension) {
            do { _ = try decoder.open(try await shared.get(blob.name)) } catch {
                result.violations.append("verify: \(blob.name): \(error)")
            }
        }
        for m in managers { try await m.close() }
        if managers.isEmpty { for s in stores { try await s.close() } }
    }

    /// A worker's journal: one line per acknowledged save (its title, and
    /// with the lifecycle the store it went to and whether that was the
    /// cloud store), and `#deleting <store>` before a deletion everywhere.
    struct Journal {
        struct Save {
            var title: String
            var store: StoreID?
            var cloud: Bool
        }
        var saves: [Save] = []
        var deleting: [StoreID] = []
        /// Cloud toggles (turned off or on).
        var toggles = 0

        init(lines text: String) {
            for line in text.split(separator: "\n") {
                let fields = line.split(separator: "\t").map(String.init)
                if fields == ["#toggle"] {
                    toggles += 1
                } else if fields.count == 2, fields[0] == "#deleting", let store = StoreID(string: fields[1]) {
                    deleting.append(store)
                } else if let title = fields.first, !title.hasPrefix("#") {
                    saves.append(Save(title: title, store: fields.count > 1 ? StoreID(string: fields[1]) : nil,
                                      cloud: fields.count > 2 && fields[2] == "cloud"))
                }
            }
        }
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
        try await runWorker(manager: nil, store: store, journal: journal, saves: saves, seed: seed, deleter: false)
    }

    /// The same through the device's store manager, with the lifecycle: one
    /// step in forty turns the cloud off or on (merging the local data), and
    /// the deleter deletes the cloud store everywhere once, half-way
    /// through its saves (turning the cloud on first if it is off;
    /// journaled first, so that a kill right after the
    /// deletion still tells the check which store went). Saves go to
    /// whichever store is loaded; the worker ends with the cloud on.
    package static func runWorker(manager: StoreManager, journal: URL, saves: Int, seed: UInt64, deleter: Bool) async throws {
        try await runWorker(manager: manager, store: try await manager.store, journal: journal, saves: saves, seed: seed, deleter: deleter)
    }

    private static func runWorker(manager: StoreManager?, store first: Store, journal: URL, saves: Int, seed: UInt64, deleter: Bool) async throws {
        let previous = Journal(lines: (try? String(contentsOf: journal, encoding: .utf8)) ?? "")
        let existing = previous.saves.count
        var deleted = !previous.deleting.isEmpty
        var random = SeededRandom(seed: seed &+ UInt64(existing) &* 1_000_003 &+ UInt64(getpid()))
        if !FileManager.default.fileExists(atPath: journal.path) { _ = FileManager.default.createFile(atPath: journal.path, contents: nil) }
        let handle = try FileHandle(forWritingTo: journal)
        try handle.seekToEnd()
        var done = existing
        var attempt = 0
        var store = first
        while done < saves {
            attempt += 1
            if let manager {
                let draw = random.next() % 40
                if draw == 0 {
                    try handle.write(contentsOf: Data("#toggle\n".utf8))
                    _ = try? await manager.setCloudEnabled(!(await manager.cloudEnabled))
                    if let loaded = try? await manager.store { store = loaded }
                    continue
                }
                if deleter, !deleted, done >= saves / 2 {
                    if await manager.loadedKind != .cloud {
                        try handle.write(contentsOf: Data("#toggle\n".utf8))
                        _ = try? await manager.setCloudEnabled(true)
                        if let loaded = try? await manager.store { store = loaded }
                        continue
                    }
                    try handle.write(contentsOf: Data("#deleting\t\(store.storeID)\n".utf8))
                    try handle.synchronize()
                    deleted = true
                    _ = try? await manager.deleteCloudStore(localOnly: false)
                    if let loaded = try? await manager.store { store = loaded }
                    continue
                }
            }
            if random.next() % 4 == 0 {
                if let manager {
                    _ = try? await manager.sync()
                    if let loaded = try? await manager.store { store = loaded }
                } else {
                    _ = try? await store.sync()
                }
                continue
            }
            if let manager {
                // The manager may have moved to another store (a deletion, a move).
                do { store = try await manager.store } catch { _ = try? await manager.reload(); continue }
            }
            let title = "d\(SimulatedDevice.deviceID(of: store).description.prefix(8))-\(done)-\(getpid())-\(attempt)"
            let words = Int64(random.next() % 10_000)
            let update: Bool
            do {
                let notes = try await store.read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Note ORDER BY id") }
                update = !notes.isEmpty && random.next() % 3 == 0
                let target = notes.isEmpty ? nil : notes[Int(random.next() % UInt64(notes.count))]
                try await store.write { tx in
                    if update, let target {
                        tx.update("Note", id: target, ["words": .int(words)])
                    } else {
                        tx.insert("Note", ["title": .string(title), "words": .int(words)])
                    }
                }
            } catch let error as ChronicleError where manager != nil && [.closed, .storeNotLoaded].contains(error.code) {
                // Not saved: the store was switched under it. Try again.
                continue
            }
            if !update {
                // Acknowledged: only now does the journal record it.
                let place = manager == nil ? "" : "\t\(store.storeID)\t\(await manager?.loadedKind == .cloud ? "cloud" : "local")"
                try handle.write(contentsOf: Data((title + place + "\n").utf8))
                try handle.synchronize()
            }
            done += 1
        }
        if let manager {
            let enabled = await manager.cloudEnabled
            let kind = await manager.loadedKind
            if !enabled || kind != .cloud { _ = try await manager.setCloudEnabled(true) }
            try await manager.sync()
            try await manager.close()
        } else {
            try await store.sync()
            try await store.close()
        }
    }
}
