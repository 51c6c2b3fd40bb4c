import ArgumentParser
import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Logging
import Synchronization

struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a short, readable multi-device sync on a temporary DirectoryContainer.",
        discussion: """
            Five devices save notes with conflicting edits; one stays offline for a while; one log is
            damaged in the container, detected by everyone, and repaired by its owner; one device turns
            the cloud off and on. Every device's state hash shows they converged. Then a corruption
            episode on a second container: a damaged log whose owner is gone, the device that cannot
            import it marks the store, a healthy device is elected and rebuilds it under a new store ID,
            and every device moves there with every save. The same --seed gives the same run.
            Exits 1 if the devices did not converge. --json prints the run as one object instead (docs/cli.md).
            """)

    @Option(help: "The seed for every random choice (0 to 9223372036854775807, so that --json prints it as it was given).")
    var seed: UInt64 = 7

    @Option(help: "Saves per device (0 to 10000).")
    var saves: Int = 30

    func validate() throws {
        guard (0...10_000).contains(saves) else { throw ValidationError("--saves takes 0 to 10000, not \(saves)") }
        guard seed <= UInt64(Int64.max) else { throw ValidationError("--seed takes 0 to \(Int64.max), not \(seed)") }
    }

    @Flag(help: "Keep the temporary directory and print its path.")
    var keep = false

    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await reportingErrors(output) {
            let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-demo-\(UUID().uuidString)")
            defer { if !keep { try? FileManager.default.removeItem(at: root) } }
            let demo = DemoRun(root: root, seed: seed, saves: saves, narrate: !output.json)
            let result = try await demo.run()
            if output.json {
                print(JSONText.pretty(.object([
                    "seed": .int(Int64(seed)), "store": .string(result.store.description),
                    "converged": .bool(result.converged), "steps": .array(demo.steps.lines.map(JSONValue.string)),
                    "devices": .array(result.devices.map { d in
                        .object(["name": .string(d.name), "device": .string(d.device.description), "stateHash": .string(d.stateHash),
                                 "records": .object(d.records.mapValues { .int(Int64($0)) })])
                    }),
                    "kept": keep ? .string(root.path) : .null,
                ])))
            } else if keep {
                print("\nfiles kept in \(root.path)")
            }
            if !result.converged { throw ExitCode.failure }
        }
    }
}

struct DemoRun {
    let root: URL
    let seed: UInt64
    let saves: Int
    /// Print each step as it happens (else only keep it in ``steps``).
    let narrate: Bool
    let names = ["laptop", "phone", "tablet", "desktop", "watch"]
    let steps = Steps()

    /// The narration, line by line.
    final class Steps: Sendable {
        private let all = Mutex<[String]>([])
        var lines: [String] { all.withLock { $0 } }
        func append(_ line: String) { all.withLock { $0.append(line) } }
    }

    /// How the run ended.
    struct Result {
        struct Device {
            var name: String
            var device: DeviceID
            var stateHash: String
            var records: [String: Int]
        }

        var store: StoreID
        var devices: [Device]
        var converged: Bool
    }

    static let schema = try! Schema(version: 1, entities: [
        Entity("Folder", attributes: [Attribute("name", .string)],
               relationships: [.toMany("notes", to: "Note", inverse: "folder")], unique: [["name"]]),
        Entity("Note", attributes: [Attribute("title", .string), Attribute("words", .int64, default: 0),
                                    Attribute("pinned", .bool, default: false)],
               relationships: [.toOne("folder", to: "Folder", inverse: "notes", deleteRule: .cascade)]),
    ])

    func say(_ text: String) {
        steps.append(text)
        if narrate { print(text) }
    }

    func run() async throws -> Result {
        let container = try DirectoryContainer(root: root.appendingPathComponent("container"), create: true)
        let clock = ManualClock()
        var devices: [Store] = []
        for (i, _) in names.enumerated() {
            devices.append(try await Store.open(Store.Configuration(
                schema: Self.schema, deviceID: DeviceID(index: UInt64(i + 1)),
                directory: root.appendingPathComponent(names[i]), container: container, clock: clock,
                seed: seed &+ UInt64(i), logger: Logger(label: "demo") { _ in SwiftLogNoOpLogHandler() }, durability: .normal)))
        }
        var rng = SeededRandom(seed: seed)
        say("Chronicle demo: \(names.count) devices share one DirectoryContainer (seed \(seed))")
        say("store \(devices[0].storeID)\n")

        // 1. Everyone files a "Work" folder at once: a natural-key conflict.
        for d in devices.indices { _ = try await devices[d].write { tx in tx.insert("Folder", ["name": "Work"]) } }
        say("1. all \(names.count) devices created a folder named \"Work\" while apart")

        // 2. Concurrent saves; the watch stays offline.
        var total = 0
        for round in 0..<saves {
            for d in devices.indices {
                clock.advance(byMilliseconds: Int64(rng.next() % 3))
                let folder = try await devices[d].read { db in try RecordID.fetchOne(db, sql: "SELECT id FROM Folder LIMIT 1") }!
                let notes = try await devices[d].read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Note") }
                // Drawn before the save, in the order the save uses them.
                let insert = notes.isEmpty || rng.next() % 3 == 0
                let target = insert ? nil : notes[Int(rng.next() % UInt64(notes.count))]
                let words = insert ? 0 : Int64(rng.next() % 500)
                let name = names[d]
                try await devices[d].write { tx in
                    if let target {
                        tx.update("Note", id: target, ["words": .int(words), "title": .string("edited on \(name)")])
                    } else {
                        tx.insert("Note", ["title": .string("\(name) note \(round)"), "folder": .reference(folder)])
                    }
                }
                total += 1
                if d != 4 && rng.next() % 4 == 0 { try await devices[d].sync() }
            }
        }
        say("2. \(total) saves with conflicting edits; the \(names[4]) stayed offline the whole time")

        // 3. Bit rot: the phone's newest log is damaged in the container before anyone reads it.
        try await devices[1].write { tx in tx.insert("Note", ["title": "written just before the damage"]) }
        try await devices[1].upload()
        let phoneLogs = try await container.listAll(prefix: ContainerLayout.logPrefix(store: devices[1].storeID, device: DeviceID(index: 2)))
        let victim = phoneLogs[phoneLogs.count - 1].name
        let path = container.root.appendingPathComponent(ContainerLayout.Directory.blobPath(victim))
        var bytes = try Data(contentsOf: path)
        bytes[bytes.count / 2] ^= 0x10
        try bytes.write(to: path)
        say("3. flipped one bit of \(victim.lastComponent) (one of the \(names[1])'s logs)")
        for d in [0, 2, 3] {
            let report = try await devices[d].sync()
            for f in report.imported.failures {
                say("   \(names[d]) refused it: \(f.error.code) — \(f.error.message); other logs still imported")
            }
        }

        // 4. The owner notices and repairs it from its outbox; the watch comes online.
        let repaired = try await devices[1].repairOwnLogs()
        say("4. the \(names[1]) re-uploaded \(repaired.count) damaged log(s) from its outbox; the \(names[4]) came online")
        for _ in 0..<2 { for d in devices { try await d.sync() } }

        // 5. The tablet turns the cloud off, works alone, and turns it on again.
        let tablet = root.appendingPathComponent(names[2])
        try await devices[2].close()
        let manager = try await StoreManager.open(StoreManager.Configuration(store: Store.Configuration(
            schema: Self.schema, directory: tablet, container: container, clock: clock, seed: seed &+ 2,
            logger: Logger(label: "demo") { _ in SwiftLogNoOpLogHandler() }, durability: .normal)))
        try await manager.setCloudEnabled(false)
        try await manager.store.write { tx in
            let work = tx.insert("Folder", ["name": "Work"])
            for n in 1...2 { _ = tx.insert("Note", ["title": .string("written with the cloud off \(n)"), "folder": .reference(work)]) }
        }
        say("5. the \(names[2]) turned the cloud off and saved 2 notes in its local store, in a \"Work\" folder of its own")
        let merged = try await manager.setCloudEnabled(true)
        devices[2] = try await manager.store
        say("   cloud on again: \(merged?.copied ?? 0) local record(s) saved into the cloud store; its \"Work\" is the cloud's (\(merged?.deduplicated ?? 0) merged by unique name)")
        for _ in 0..<2 { for d in devices { try await d.sync() } }

        // 6. Converged?
        say("6. after syncing, every device shows:")
        var hashes: Set<String> = []
        var shown: [Result.Device] = []
        for (d, store) in devices.enumerated() {
            let hash = try await store.stateHash()
            let counts = try store.snapshot.recordCounts()
            hashes.insert(hash)
            shown.append(Result.Device(name: names[d], device: store.deviceID, stateHash: hash, records: counts))
            say("   \(names[d].padding(toLength: 8, withPad: " ", startingAt: 0)) state \(hash)  \(counts["Folder"] ?? 0) folder, \(counts["Note"] ?? 0) notes")
        }
        let store = devices[0].storeID
        for (d, device) in devices.enumerated() where d != 2 { try await device.close() }
        try await manager.close()
        if hashes.count == 1 {
            say("\nconverged: one state hash on all \(names.count) devices; the five \"Work\" folders were merged into one,")
            say("and every note points at it. Inspect a run with: chronicle demo --keep, then chronicle inspect --container <dir>/container")
        } else {
            say("\nNOT converged: \(hashes.count) different states (seed \(seed))")
        }
        let healed = try await corruptionEpisode()
        return Result(store: store, devices: shown, converged: hashes.count == 1 && healed)
    }

    /// A corruption episode on a container of its own: a log nobody can
    /// repair, a device that marks the store, one elected rebuilder, every
    /// device on the new store with every save. Returns whether they converged.
    func corruptionEpisode() async throws -> Bool {
        say("\n7. a corruption episode, on a second container shared by the laptop, phone and watch:")
        let container = try DirectoryContainer(root: root.appendingPathComponent("container-2"), create: true)
        let clock = ManualClock()
        let health = StoreManager.HealthConfiguration(gracePeriod: .seconds(5), repairWait: .seconds(10), electionWindow: .seconds(2), leaseDuration: .seconds(30))
        func open(_ name: String, _ i: UInt64) async throws -> StoreManager {
            try await StoreManager.open(StoreManager.Configuration(store: Store.Configuration(
                schema: Self.schema, directory: root.appendingPathComponent("episode").appendingPathComponent(name), container: container,
                clock: clock, seed: seed &+ 100 &+ i, logger: Logger(label: "demo") { _ in SwiftLogNoOpLogHandler() }, durability: .normal),
                cloudEnabledByDefault: true, health: health))
        }
        let laptop = try await open("laptop", 1)
        let watch = try await open("watch", 3)
        for m in [laptop, watch] { try await m.sync() }
        let phone = try await open("phone", 2)
        let old = try await laptop.store.storeID
        for (m, name) in [(laptop, "laptop"), (phone, "phone")] {
            try await m.store.write { tx in _ = tx.insert("Note", ["title": .string("\(name)'s note")]) }
            try await m.sync()
        }
        try await laptop.sync()
        // The phone's log is damaged, and the phone is gone: nobody can put it back.
        let phoneID = try await phone.store.deviceID
        try await phone.close()
        for blob in try await container.listAll(prefix: ContainerLayout.logPrefix(store: old, device: phoneID)) {
            let path = container.root.appendingPathComponent(ContainerLayout.Directory.blobPath(blob.name))
            var bytes = try Data(contentsOf: path)
            bytes[bytes.count / 2] ^= 0x10
            try bytes.write(to: path)
        }
        say("   the laptop imported the phone's note; then the phone's log was damaged and the phone retired: nobody can put it back")
        try await watch.store.write { tx in _ = tx.insert("Note", ["title": "the watch's note, saved as it found the damage"]) }
        let watchEvents = HealthEventLines(watch)
        let laptopEvents = HealthEventLines(laptop)
        clock.advance(byMilliseconds: 6_000)
        try await laptop.sync()
        let report = try await watch.sync()
        for failure in report?.imported.permanentFailures ?? [] {
            say("   watch: import failed: \(failure.error.code) in \(failure.name.split(separator: "/").last ?? "")")
        }
        clock.advance(byMilliseconds: 11_000)
        _ = try? await watch.sync()
        if let mark = try await watch.health().marks.first {
            say("   watch: still failing after the repair wait and a rebuild of its own copy: marked store \(old) corrupted, unloaded it")
            say("          (mark: \(mark.reason.prefix(60))…)")
        }
        try await laptop.sync()
        let new = try await laptop.store.storeID
        say("   laptop: healthy, saw the mark, took the election lease, rebuilt the store as \(new)")
        try await watch.sync()
        say("   watch: moved to \(try await watch.store.storeID), carrying its saves")
        clock.advance(byMilliseconds: 6_000)
        for _ in 0..<2 { for m in [laptop, watch] { try await m.sync() } }
        var hashes: Set<String> = []
        for (m, name) in [(laptop, "laptop"), (watch, "watch")] {
            let store = try await m.store
            let titles = try await store.read { db in try String.fetchAll(db, sql: "SELECT title FROM Note ORDER BY title") }
            let hash = try await store.stateHash()
            hashes.insert(hash)
            say("   \(name.padding(toLength: 7, withPad: " ", startingAt: 0)) \(try await m.health().status?.rawValue ?? "?") on \(store.storeID), state \(hash): \(titles.joined(separator: "; "))")
        }
        let rebuilds = try await laptop.health().history.count
        for m in [laptop, watch] { try await m.close() }
        _ = (await watchEvents.lines, await laptopEvents.lines)
        say(hashes.count == 1 && rebuilds == 1
            ? "   one rebuild, both devices healthy on the new store with every note, the phone's included"
            : "   NOT healed: \(hashes.count) states, \(rebuilds) rebuilds")
        return hashes.count == 1 && rebuilds == 1
    }
}
