import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import ChronicleTestSupport
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
    /// Whether the run damages a log of the active store over and over (a
    /// sync service that keeps damaging the file, so that not even its
    /// owner can put it back), once every device has saved a little, and
    /// SIGKILLs the device holding the election lease while it rebuilds.
    /// The workers run their health monitors on short real-time timings
    /// (``workerHealth``), and the check waits until every device is
    /// healthy on one store.
    package var corruption = false
    /// The devices' container: nil for a folder of the run's own; else its
    /// location (a `postgres://` URL), which the workers get as
    /// `--container` and ``openContainer`` opens for the final check.
    package var containerLocation: String?
    /// Opens ``containerLocation`` for the final check.
    package var openContainer: (@Sendable (String) async throws -> any Container)?
    /// The container's server, when the run may crash it: it is killed
    /// (SIGKILL) ``serverKills`` times at random moments while the
    /// workers save and sync, and started again a moment later.
    package var server: ServerControl?
    /// How many times the run kills ``server``.
    package var serverKills = 3

    /// Kills and starts the server behind a container.
    package struct ServerControl: Sendable {
        /// Kills it with SIGKILL; returns once it is gone.
        package var kill: @Sendable () throws -> Void
        /// Starts it again.
        package var start: @Sendable () throws -> Void

        package init(kill: @escaping @Sendable () throws -> Void, start: @escaping @Sendable () throws -> Void) {
            self.kill = kill
            self.start = start
        }
    }

    /// The health monitor's timings of the workers with ``corruption``.
    package static let workerHealth = StoreManager.HealthConfiguration(
        gracePeriod: .milliseconds(500), repairWait: .seconds(1), gapTimeout: .seconds(20), electionWindow: .milliseconds(500), leaseDuration: .seconds(3),
        unhealthyRebuildWait: .seconds(3))

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
        /// With corruption: logs damaged for good, rebuilds after a
        /// corruption (supersession markers that say so), and kills of a
        /// device that held the election lease.
        package var damagedLogs = 0
        package var corruptionRebuilds = 0
        package var killsDuringElection = 0
        /// With a server behind the container: times it was killed with
        /// SIGKILL and started again, and the real time it was down in all.
        package var serverKills = 0
        package var serverDownMilliseconds = 0

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
        guard !corruption || containerLocation == nil else {
            throw ChronicleError(.invalidValue, "corruption faults damage the files of a folder container: a run with corruption cannot use \(containerLocation ?? "")")
        }
        guard (containerLocation == nil) == (openContainer == nil) else {
            throw ChronicleError(.invalidValue, "a container location needs the function that opens it for the check")
        }
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
        let location: String
        let shared: any Container
        if let containerLocation, let openContainer {
            location = containerLocation
            shared = try await openContainer(containerLocation)
        } else {
            // Made once, as `chronicle init` would: workers only open it.
            location = container.path
            shared = try DirectoryContainer(root: container, create: true)
        }
        func launch(_ i: Int) throws -> SpawnedProcess {
            // What a worker prints (its errors) goes to its log, for a violation to quote.
            let log = open(Self.workerLog(i, in: root).path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
            guard log >= 0 else { throw ChronicleError(.io, "cannot open \(Self.workerLog(i, in: root).path)") }
            defer { close(log) }
            let null = open("/dev/null", O_RDONLY | O_CLOEXEC)
            defer { close(null) }
            return try SpawnedProcess.spawn(executable.path, workerCommand + [
                "--device-dir", root.appendingPathComponent("device-\(i)").path, "--container", location,
                "--schema", schemaURL.path, "--journal", root.appendingPathComponent("journal-\(i).txt").path,
                "--saves", String(saves), "--seed", String(seed &+ UInt64(i)),
            ] + (lifecycle ? ["--lifecycle"] + (i == 0 ? ["--deleter"] : []) : []) + (corruption ? ["--corruption"] : []),
            environment: ProcessInfo.processInfo.environment, stdin: null, stdout: log, stderr: log)
        }
        var result = Result(seed: seed, processes: processes)
        var damage = corruption ? Damage(container: container, root: root) : nil
        do {
            try killAndRestart(try (0..<processes).map(launch), launch: launch, damage: &damage, into: &result, root: root)
            try await check(root: root, schema: Schema(contentsOf: schemaURL), container: shared, into: &result)
        } catch {
            await shared.shutdown()
            throw error
        }
        await shared.shutdown()
        return result
    }

    /// Where worker `i` writes what it prints.
    static func workerLog(_ i: Int, in root: URL) -> URL { root.appendingPathComponent("worker-\(i).log") }

    /// Kills and restarts workers at random moments until all have finished.
    private func killAndRestart(_ started: [SpawnedProcess], launch: (Int) throws -> SpawnedProcess, damage: inout Damage?, into result: inout Result,
                                root: URL) throws {
        var workers = started
        var random = SeededRandom(seed: seed)
        let deadline = ContinuousClock.now + timeLimit
        while workers.contains(where: { $0.isRunning }) {
            guard ContinuousClock.now < deadline else {
                workers.forEach { $0.kill() }
                throw ChronicleError(.unavailable, "workers did not finish within \(timeLimit)")
            }
            usleep(UInt32(10_000 + random.next() % 70_000))
            if var d = damage {
                if let event = d.step(&random) { result.events.append(event) }
                result.damagedLogs = d.damaged.count
                if let holder = d.leaseHolderToKill(), workers[holder].isRunning {
                    workers[holder].kill()
                    workers[holder].waitUntilExit()
                    result.kills += 1
                    result.killsDuringElection += 1
                    result.events.append("killed device \(holder + 1), which held the election lease, while it rebuilt; restarting")
                    workers[holder] = try launch(holder)
                }
                damage = d
            }
            if let server, result.serverKills < serverKills, result.kills >= 2 + 4 * result.serverKills {
                // The server dies mid-sync: the workers keep saving, their
                // syncs fail until it is back.
                try server.kill()
                let down = 100_000 + random.next() % 900_000
                usleep(UInt32(down))
                try server.start()
                result.serverKills += 1
                result.serverDownMilliseconds += Int(down / 1_000)
                result.events.append("killed the server (SIGKILL), started it again \(down / 1_000) ms later")
            }
            let i = Int(random.next() % UInt64(processes))
            if result.kills < processes * killsPerProcess && workers[i].isRunning {
                workers[i].kill()
                workers[i].waitUntilExit()
                result.kills += 1
                result.events.append("killed device \(i + 1) (pid \(workers[i].pid)), restarting")
                workers[i] = try launch(i)
            }
            for j in 0..<processes {
                // A worker that failed (not killed) is a finding: restart it once more, and record it.
                guard let ended = workers[j].poll(), !ended.signaled, ended.status != 0 else { continue }
                let said = (try? String(contentsOf: Self.workerLog(j, in: root), encoding: .utf8))?
                    .split(separator: "\n").suffix(3).joined(separator: " | ") ?? ""
                result.violations.append("device \(j + 1) exited with status \(ended.status)" + (said.isEmpty ? "" : ": \(said)"))
                workers[j] = try launch(j)
            }
        }
    }

    /// Quiesces (every device repairs and syncs) and checks the invariants.
    private func check(root: URL, schema: Schema, container shared: any Container, into result: inout Result) async throws {
        var managers: [StoreManager] = []
        var stores: [Store] = []
        for i in 0..<processes {
            let directory = root.appendingPathComponent("device-\(i)")
            // Through a manager, as the workers opened them: a worker that
            // started while the server was down saved into its fallback
            // store, which the manager merges into the cloud store.
            if lifecycle || containerLocation != nil {
                // Every device ends with the cloud on, its local data merged in.
                let manager = try await StoreManager.open(StoreManager.Configuration(
                    store: Store.Configuration(schema: schema, directory: directory, container: shared), cloudEnabledByDefault: true,
                    health: corruption ? Self.workerHealth : StoreManager.HealthConfiguration()))
                _ = try? await manager.setCloudEnabled(true)
                managers.append(manager)
            } else {
                stores.append(try await Self.openDevice(directory, schema: schema, container: shared))
            }
        }
        for _ in 0..<3 {
            for m in managers {
                if corruption {
                    _ = try? await m.sync()
                    continue
                }
                try await m.store.repairOwnLogs()
                try await m.sync()
                if await m.loadedKind != .cloud { _ = try await m.setCloudEnabled(true) }
            }
            for s in stores { try await s.repairOwnLogs(); try await s.sync() }
        }
        if corruption {
            // Until every device is healthy on one store (real time: the
            // grace period, an election, a rebuild, the moves).
            let until = ContinuousClock.now + .seconds(60)
            while ContinuousClock.now < until {
                var healthy = Set<StoreID>()
                var all = true
                for m in managers {
                    _ = try? await m.sync()
                    if let h = await m.healthStatus, h.status == .healthy { healthy.insert(h.store) } else { all = false }
                }
                if all, healthy.count == 1 { break }
                usleep(200_000)
            }
            for (i, m) in managers.enumerated() {
                let h = await m.healthStatus
                if h?.status != .healthy { result.violations.append("health: device \(i + 1) ends \(h.map { "\($0.status.rawValue)" } ?? "without a health record")") }
            }
            result.corruptionRebuilds = try await Self.corruptionRebuilds(in: shared)
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
        let replaced = try await Self.replacedStores(in: shared)
        for blob in try await shared.listAll(prefix: "") where blob.name.rawValue.hasSuffix(ContainerLayout.logExtension) {
            // The logs damaged on purpose are in stores rebuilt since.
            if corruption, let store = blob.name.rawValue.split(separator: "/").first.flatMap({ StoreID(string: String($0)) }), replaced.contains(store) { continue }
            do { _ = try await decoder.open(try await shared.get(blob.name), name: blob.name, fetchingFrom: shared) } catch {
                result.violations.append("verify: \(blob.name): \(error)")
            }
        }
        for m in managers { try await m.close() }
        if managers.isEmpty { for s in stores { try await s.close() } }
    }

    /// The stores rebuilt as another (their supersession markers).
    static func replacedStores(in container: any Container) async throws -> Set<StoreID> {
        var replaced = Set<StoreID>()
        for store in try await container.listChildren(prefix: "").compactMap(StoreID.init(string:)) {
            if try await container.readMarker(ContainerLayout.supersession(store: store)) != nil { replaced.insert(store) }
        }
        return replaced
    }

    /// Rebuilds whose supersession marker says a corruption caused them.
    static func corruptionRebuilds(in container: any Container) async throws -> Int {
        var count = 0
        for store in try await replacedStores(in: container) {
            if let s = try await container.readMarker(ContainerLayout.supersession(store: store), as: StoreSupersession.self),
               s.payload.reason?.hasPrefix("corruption") == true { count += 1 }
        }
        return count
    }

    /// The coordinator's corruption: once the active store has logs of
    /// several devices, one log is damaged on disk, and damaged again each
    /// time its owner puts it back, until the store is rebuilt.
    struct Damage {
        let container: URL
        let root: URL
        /// The logs damaged, by store.
        var damaged: [StoreID: String] = [:]
        /// Stores whose lease holder was killed already.
        var killedFor: Set<StoreID> = []

        init(container: URL, root: URL) {
            self.container = container
            self.root = root
        }

        var activeStore: StoreID? {
            guard let bytes = Self.marker(container.appendingPathComponent("markers/active-store")),
                  let pointer = try? ActiveStorePointer(markerBytes: bytes) else { return nil }
            return pointer.store
        }

        /// A directory container's marker file's payload (after its 8-byte version).
        static func marker(_ url: URL) -> [UInt8]? {
            guard let data = FileManager.default.contents(atPath: url.path), data.count > 8 else { return nil }
            return Array(data.dropFirst(8))
        }

        /// Damages a log of the active store (once per store), or damages
        /// again the one its owner put back. Returns what it did, if anything new.
        mutating func step(_ random: inout SeededRandom) -> String? {
            guard let store = activeStore else { return nil }
            if let name = damaged[store] {
                flip(container.appendingPathComponent("blobs").appendingPathComponent(name))
                return nil
            }
            // At most two stores per run.
            guard damaged.count < 2, random.next() % 50 == 0 else { return nil }
            let logs = container.appendingPathComponent("blobs/\(store)/logs")
            guard let walker = FileManager.default.enumerator(at: logs, includingPropertiesForKeys: nil) else { return nil }
            let names = walker.compactMap { ($0 as? URL)?.path }.filter { $0.hasSuffix(ContainerLayout.logExtension) }.sorted()
            guard names.count >= 3 else { return nil }
            let path = names[Int(random.next() % UInt64(names.count))]
            let name = String(path.dropFirst(container.appendingPathComponent("blobs").path.count + 1))
            damaged[store] = name
            flip(URL(fileURLWithPath: path))
            return "damaged \(name) for good"
        }

        /// Flips a byte in the middle of the file, unless it is damaged already.
        private func flip(_ url: URL) {
            guard var bytes = FileManager.default.contents(atPath: url.path), bytes.count > 16,
                  (try? LogDecoder(schema: try! Schema(json: Data(MultiProcessSimulation.schemaJSON.utf8))).open(Array(bytes))) != nil
            else { return }
            bytes[bytes.count / 2] ^= 0x20
            // In place, as bit rot would: the owner's next put replaces the file.
            try? bytes.write(to: url)
        }

        /// The worker holding the lease of an election of the active store,
        /// once per store: the coordinator kills it while it rebuilds.
        mutating func leaseHolderToKill() -> Int? {
            guard let store = activeStore, damaged[store] != nil, !killedFor.contains(store),
                  let bytes = Self.marker(container.appendingPathComponent("markers/\(store)/election")),
                  let lease = try? ElectionLease(markerBytes: bytes) else { return nil }
            for i in 0..<64 {
                let identity = root.appendingPathComponent("device-\(i)").appendingPathComponent("device.json")
                guard let data = FileManager.default.contents(atPath: identity.path) else { if i > 32 { break }; continue }
                if String(decoding: data, as: UTF8.self).contains(lease.device.description) {
                    killedFor.insert(store)
                    return i
                }
            }
            return nil
        }
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
    package static func runWorker(manager: StoreManager, journal: URL, saves: Int, seed: UInt64, deleter: Bool, toggles: Bool = true) async throws {
        // A device waiting for the rebuild of a store it marked corrupted syncs until it has a store.
        while await manager.healthStatus?.status == .corrupted, (try? await manager.store) == nil {
            _ = try? await manager.sync()
            try await Task.sleep(for: .milliseconds(50))
        }
        try await runWorker(manager: manager, store: try await manager.store, journal: journal, saves: saves, seed: seed, deleter: deleter,
                            toggles: toggles)
    }

    private static func runWorker(manager: StoreManager?, store first: Store, journal: URL, saves: Int, seed: UInt64, deleter: Bool,
                                  toggles: Bool = true) async throws {
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
                if draw == 0, toggles {
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
                do {
                    store = try await manager.store
                } catch {
                    if await manager.healthStatus?.status == .corrupted {
                        // Waiting for the rebuild: its syncs follow it.
                        _ = try? await manager.sync()
                        try? await Task.sleep(for: .milliseconds(50))
                    } else {
                        _ = try? await manager.reload()
                    }
                    continue
                }
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
        // The last sync waits out a container that does not answer for a
        // while (a server restarting).
        func finalSync(_ sync: () async throws -> Void) async throws {
            for attempt in 1... {
                do {
                    return try await sync()
                } catch let error as ChronicleError where error.code.isTransient && attempt < 100 {
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
        }
        if let manager {
            try await finalSync {
                // On the cloud store, whatever it was on (its fallback store
                // while the container did not answer, or nothing).
                let enabled = await manager.cloudEnabled
                let kind = await manager.loadedKind
                if !enabled || kind == nil { _ = try await manager.setCloudEnabled(true) }
                _ = try await manager.sync()
                guard await manager.loadedKind == .cloud else {
                    throw ChronicleError(.unavailable, "the cloud store is not loaded yet")
                }
            }
            try await manager.close()
        } else {
            try await finalSync { _ = try await store.sync() }
            try await store.close()
        }
    }
}
