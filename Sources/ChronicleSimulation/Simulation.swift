import Chronicle
import Foundation
import Logging
import Synchronization

/// One seeded run of several devices sharing a simulated container.
///
/// Everything non-deterministic comes from the seed: the workload, the
/// virtual clock's steps, every fault. The same seed gives the same run and
/// the same summary, byte for byte (the summary holds virtual time only).
///
/// ```swift
/// let summary = try await Simulation(seed: 42, options: SimulationOptions()).run()
/// if !summary.passed { print(summary.violations) }
/// ```
public final class Simulation {
    /// The workload's schema: folders with a unique name (so devices create
    /// duplicates), notes that cascade with their folder, comments that
    /// nullify when their note goes, and readings, which refer to nothing and
    /// nothing refers to (an independent entity, whose first inserts keep
    /// their merge state compact in the row).
    public static let schema = try! Schema(version: 1, entities: [
        Entity("Folder", attributes: [Attribute("name", .string)],
               relationships: [.toMany("notes", to: "Note", inverse: "folder")], unique: [["name"]]),
        Entity("Note", attributes: [Attribute("title", .string), Attribute("words", .int64, default: 0),
                                    Attribute("pinned", .bool, default: false), Attribute("score", .double, optional: true)],
               relationships: [.toOne("folder", to: "Folder", inverse: "notes", deleteRule: .cascade),
                               .toMany("comments", to: "Comment", inverse: "note")]),
        Entity("Comment", attributes: [Attribute("text", .string)],
               relationships: [.toOne("note", to: "Note", inverse: "comments", deleteRule: .nullify)]),
        Entity("Reading", attributes: [Attribute("label", .string), Attribute("value", .double, optional: true),
                                       Attribute("count", .int64, default: 0)]),
    ])

    static let folderNames = ["Inbox", "Work", "Home", "Ideas"]

    /// An acknowledged change and the version it got.
    struct Acknowledged {
        var kind: ChangeKind
        var entity: String
        var id: RecordID
        var fields: [String]
        var version: Version
        var account: Int
    }

    final class Device {
        let index: Int
        let id: DeviceID
        let root: URL
        var store: Store?
        var online = true
        var account = 0
        var knownStore: [Int: StoreID] = [:]
        var syncs = 0

        init(index: Int, root: URL) {
            self.index = index
            self.id = DeviceID(index: UInt64(index + 1))
            self.root = root
        }
    }

    public let seed: UInt64
    public let options: SimulationOptions
    let clock = ManualClock(milliseconds: 1_700_000_000_000)
    var random: SeededRandom
    let crashes: CrashControl
    let root: URL
    var accounts: [SimulatedContainer] = []
    var devices: [Device] = []
    var acknowledged: [Acknowledged] = []
    var summary: SimulationSummary
    var timeline: [String] = []
    let verbose: Bool
    let logger = Logger(label: "chronicle.simulation") { _ in SwiftLogNoOpLogHandler() }

    /// Prepares a run; `workDirectory` holds the devices' snapshots (a
    /// temporary directory by default, removed afterwards).
    public init(seed: UInt64, options: SimulationOptions, verbose: Bool = false, workDirectory: URL? = nil) {
        self.seed = seed
        self.options = options
        self.verbose = verbose
        random = SeededRandom(seed: seed)
        baselineRandom = SeededRandom(seed: seed ^ 0xBA5E_11AE)
        crashes = CrashControl(seed: seed ^ 0xC4A5_4C4A_5443_4841, probability: options.crashProbability)
        summary = SimulationSummary(seed: seed, options: options)
        let base = workDirectory ?? URL(fileURLWithPath: FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory())
        root = base.appendingPathComponent("chronicle-sim-\(seed)-\(UUID().uuidString)")
    }

    /// The timeline of the last run (`--verbose`).
    public var events: [String] { timeline }

    func note(_ text: String) {
        if verbose { timeline.append("[\(String(format: "%8llu", clock.nowMilliseconds() - 1_700_000_000_000)) ms] \(text)") }
    }

    func chance(_ p: Double) -> Bool { Double(random.next() % 1_000_000) / 1_000_000 < p }
    /// Baseline choices: a stream of their own (see ``SimulationOptions/baselineProbability``).
    var baselineRandom: SeededRandom
    func baselineChance(_ p: Double) -> Bool { Double(baselineRandom.next() % 1_000_000) / 1_000_000 < p }
    func pick(_ n: Int) -> Int { Int(random.next() % UInt64(max(n, 1))) }

    /// Runs the workload, quiesces, checks every invariant.
    public func run() async throws -> SimulationSummary {
        defer { try? FileManager.default.removeItem(at: root) }
        for account in 0..<2 {
            accounts.append(SimulatedContainer(clock: clock, faults: options.container, seed: seed &+ UInt64(account) &* 7919))
        }
        for i in 0..<options.devices {
            devices.append(Device(index: i, root: root.appendingPathComponent("device-\(i + 1)")))
        }
        for d in devices { try await open(d) }
        var saves = Array(repeating: 0, count: devices.count)
        while saves.contains(where: { $0 < options.savesPerDevice }) {
            clock.advance(byMilliseconds: Int64(1 + random.next() % 40))
            try await injectFaults()
            if baselineChance(options.baselineProbability) {
                await publishBaseline(devices[Int(baselineRandom.next() % UInt64(devices.count))])
            }
            let d = devices[pick(devices.count)]
            if chance(0.25) {
                await sync(d)
            } else if saves[d.index] < options.savesPerDevice {
                saves[d.index] += 1
                try await save(d)
            }
        }
        summary.virtualMilliseconds = clock.nowMilliseconds() - 1_700_000_000_000
        try await quiesce()
        try await check()
        summary.faults = accounts[0].counts
        let b = accounts[1].counts
        summary.faults.crashes = crashes.count.load(ordering: .relaxed)
        summary.faults.offlinePeriods = summary.faults.offlinePeriods
        summary.faults.accountSwitches = summaryAccountSwitches
        summary.faults.lostUploads += b.lostUploads
        summary.faults.tornBlobs += b.tornBlobs
        summary.faults.delayedBlobs += b.delayedBlobs
        summary.faults.offlinePeriods = offlinePeriods
        for d in devices { try? await d.store?.close() }
        return summary
    }

    var offlinePeriods = 0
    var summaryAccountSwitches = 0

    // MARK: Devices

    func open(_ d: Device) async throws {
        let injector = CrashInjector { [crashes] _ in crashes.decide() }
        let store = try await Store.open(Store.Configuration(
            schema: Self.schema, deviceID: d.id, directory: d.root.appendingPathComponent("account-\(d.account)"),
            container: accounts[d.account].view(for: d.id), clock: clock, seed: seed &+ UInt64(d.index) &* 31 &+ UInt64(d.syncs),
            logger: logger, durability: .normal, knownStore: d.knownStore[d.account], crashInjector: injector)
            .waitingForBaselines(.seconds(5)))
        d.knownStore[d.account] = store.storeID
        d.store = store
    }

    /// A crash: the process dies; its files stay. Restart from them.
    func restart(_ d: Device, _ why: String) async throws {
        note("device \(d.index + 1) crashed (\(why)) and restarts")
        try? await d.store?.close()
        d.store = nil
        try await open(d)
    }

    func save(_ d: Device) async throws {
        guard let store = d.store else { return }
        summary.savesAttempted += 1
        let choice = random.next() % 100
        let folders = try await store.read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Folder ORDER BY id") }
        let notes = try await store.read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Note ORDER BY id") }
        let readings = try await store.read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Reading ORDER BY id") }
        let name = Self.folderNames[pick(Self.folderNames.count)]
        let title = "n\(d.index + 1)-\(random.next() % 1000)"
        let words = Int64(random.next() % 5000)
        let r1 = random.next()
        let r2 = random.next()
        var recorded: [(ChangeKind, String, RecordID, [String])] = []
        do {
            let (_, result) = try await store.writeReporting { tx in
                if choice < 12 || folders.isEmpty {
                    let id = tx.insert("Folder", ["name": .string(name)])
                    recorded.append((.insert, "Folder", id, ["name"]))
                } else if choice >= 80 && (choice < 88 || readings.isEmpty) {
                    let id = tx.insert("Reading", ["label": .string(title), "value": r2 % 4 == 0 ? .null : .double(r2 % 11 == 0 ? -0.0 : Double(words) / 7)])
                    recorded.append((.insert, "Reading", id, ["label", "value", "count"]))
                } else if choice >= 88 && choice < 96 {
                    let id = readings[Int(r1 % UInt64(readings.count))]
                    var values: [String: Value] = ["count": .int(words)]
                    if r2 % 3 == 0 { values["label"] = .string(title) }
                    tx.update("Reading", id: id, values)
                    recorded.append((.update, "Reading", id, values.keys.sorted()))
                } else if choice >= 96 {
                    let id = readings[Int(r1 % UInt64(readings.count))]
                    tx.delete("Reading", id: id)
                    recorded.append((.delete, "Reading", id, []))
                } else if choice < 40 || notes.isEmpty {
                    let folder = folders[Int(r1 % UInt64(folders.count))]
                    let id = tx.insert("Note", ["title": .string(title), "words": .int(words), "folder": .reference(folder)])
                    recorded.append((.insert, "Note", id, ["title", "words", "pinned", "score", "folder"]))
                    if r2 % 3 == 0 {
                        let c = tx.insert("Comment", ["text": "first!", "note": .reference(id)])
                        recorded.append((.insert, "Comment", c, ["text", "note"]))
                    }
                } else if choice < 65 {
                    let id = notes[Int(r1 % UInt64(notes.count))]
                    var values: [String: Value] = ["words": .int(words)]
                    if r2 % 2 == 0 { values["title"] = .string(title) }
                    if r2 % 5 == 0 { values["score"] = .double(r2 % 7 == 0 ? .nan : Double(r2 % 100) / 3) }
                    tx.update("Note", id: id, values)
                    recorded.append((.update, "Note", id, values.keys.sorted()))
                } else if choice < 75 {
                    let id = notes[Int(r1 % UInt64(notes.count))]
                    tx.delete("Note", id: id)
                    recorded.append((.delete, "Note", id, []))
                } else {
                    let id = folders[Int(r1 % UInt64(folders.count))]
                    tx.delete("Folder", id: id)
                    recorded.append((.delete, "Folder", id, []))
                }
            }
            guard let result else { return }
            summary.savesAcknowledged += 1
            let version = Version(clock: result.clock, device: d.id)
            for (kind, entity, id, fields) in recorded {
                acknowledged.append(Acknowledged(kind: kind, entity: entity, id: id, fields: fields, version: version, account: d.account))
            }
            note("device \(d.index + 1) saved \(recorded.map { "\($0.0) \($0.1)" }.joined(separator: ", ")) as sequence \(result.sequence)")
            // A crash right after the commit, before any upload.
            if chance(options.crashProbability) {
                crashes.count.wrappingAdd(1, ordering: .relaxed)
                try await restart(d, "after commit, before upload")
            }
        } catch let error as ChronicleError where error.code == .simulatedCrash {
            try await restart(d, "before the save's commit")
        } catch let error as ChronicleError {
            summary.savesRefused += 1
            note("device \(d.index + 1) save refused: \(error.code)")
        }
    }

    func sync(_ d: Device) async {
        guard d.online, let store = d.store else { return }
        summary.syncs += 1
        d.syncs += 1
        do {
            if options.devicesRepairTheirLogs && d.syncs % 4 == 0 { try await store.repairOwnLogs() }
            let report = try await store.sync()
            if let change = report.identityChange { note("device \(d.index + 1) moved to a new ID: \(change.reason); carried \(change.carriedOver.count)") }
            note("device \(d.index + 1) synced: up \(report.uploadedLogs), in \(report.imported.appliedLogs)"
                 + (report.imported.failures.isEmpty ? "" : ", \(report.imported.failures.count) failed (\(report.imported.failures.map(\.error.code.name).joined(separator: ",")))"))
        } catch let error as ChronicleError where error.code == .simulatedCrash {
            try? await restart(d, "during sync")
        } catch {
            note("device \(d.index + 1) sync failed: \(error)")
        }
    }

    /// A device writes its state as a baseline, in parts small enough that
    /// faults (torn or delayed blobs, outages, bit flips, crashes) hit some.
    func publishBaseline(_ d: Device) async {
        guard d.online, let store = d.store else { return }
        do {
            let published = try await store.publishBaseline(partBytes: 2048)
            summary.baselinesPublished += 1
            note("device \(d.index + 1) published a baseline: \(published.parts) parts, \(published.records) records")
        } catch let error as ChronicleError where error.code == .simulatedCrash {
            try? await restart(d, "publishing a baseline")
        } catch {
            note("device \(d.index + 1) baseline failed: \(error)")
        }
    }

    // MARK: Faults

    func injectFaults() async throws {
        if chance(options.offlineProbability) {
            let d = devices[pick(devices.count)]
            d.online.toggle()
            if !d.online { offlinePeriods += 1 }
            note("device \(d.index + 1) goes \(d.online ? "online" : "offline")")
        }
        if chance(options.bitFlipProbability), let name = try await accounts[0].flipRandomBit() {
            note("bit flip in \(name.lastComponent)")
        }
        if baselineChance(options.bitFlipProbability), let name = try await accounts[0].flipRandomBit(suffix: ".chbase") {
            note("bit flip in baseline part \(name)")
        }
        if chance(options.outageProbability) {
            let ms = 50 + random.next() % 500
            accounts[0].beUnavailable(forMilliseconds: ms)
            note("container unavailable for \(ms) ms")
        }
        if chance(options.wipeProbability) {
            try await accounts[0].wipe()
            note("container wiped")
        }
        if chance(options.accountSwitchProbability) {
            let d = devices[pick(devices.count)]
            try? await d.store?.close()
            d.account = 1 - d.account
            if d.account == 1 { summaryAccountSwitches += 1 }
            try await open(d)
            note("device \(d.index + 1) switches to account \(d.account == 0 ? "A" : "B")")
        }
    }

    // MARK: Quiescence and checks

    func quiesce() async throws {
        crashes.enabled.store(false, ordering: .relaxed)
        let start = clock.nowMilliseconds()
        for d in devices where d.account != 0 || !d.online {
            if d.account != 0 {
                try? await d.store?.close()
                d.account = 0
                try await open(d)
            }
            d.online = true
        }
        for round in 0..<12 {
            clock.advance(byMilliseconds: 1_000)
            if round >= 2 { accounts[0].settle() }
            for d in devices {
                if options.devicesRepairTheirLogs { _ = try? await d.store?.repairOwnLogs() }
                do { _ = try await d.store?.sync() } catch { note("device \(d.index + 1) quiescing sync failed: \(error)") }
            }
            var hashes = Set<String>()
            var failures = 0
            for d in devices {
                hashes.insert((try? await d.store!.stateHash()) ?? "?")
                failures += (try? d.store!.snapshot.pendingUploadCount()) ?? 1
            }
            if round >= 2, hashes.count == 1, failures == 0, try await fullyApplied() { break }
        }
        summary.convergenceMilliseconds = clock.nowMilliseconds() - start
    }

    /// Whether every device applied every other device's every save.
    func fullyApplied() async throws -> Bool {
        var latest: [DeviceID: UInt64] = [:]
        for d in devices { latest[d.id] = try d.store!.snapshot.vector()[d.id] ?? 0 }
        for d in devices {
            let vector = try d.store!.snapshot.vector()
            for (device, sequence) in latest where (vector[device] ?? 0) != sequence { return false }
        }
        return true
    }

    func violation(_ text: String) {
        if summary.violations.count < 20 { summary.violations.append(text) }
    }

    func check() async throws {
        let stores = devices.map { $0.store! }
        // 1. Convergence.
        summary.invariantsChecked.append("convergence")
        var hashes: [String] = []
        for s in stores { hashes.append(try await s.stateHash()) }
        if Set(hashes).count != 1 { violation("convergence: devices hold \(Set(hashes).count) different states: \(hashes.joined(separator: " "))") }
        summary.stateHash = hashes[0]
        summary.records = try stores[0].snapshot.recordCounts()

        // 2. Order independence: a fresh device replaying every committed save in one go agrees.
        summary.invariantsChecked.append("order independence (fresh replay)")
        let reference = try await referenceHash(stores)
        if reference != hashes[0] { violation("order independence: a fresh replay gives \(reference), devices \(hashes[0])") }

        // 3. No acknowledged save lost: each is applied on every device, or superseded.
        summary.invariantsChecked.append("no acknowledged save lost")
        for ack in acknowledged where ack.account == 0 {
            for (i, s) in stores.enumerated() {
                guard let v = try s.snapshot.recordVersions(entity: ack.entity, id: ack.id) else {
                    violation("lost: device \(i + 1) knows nothing of \(ack.entity) \(ack.id) (\(ack.kind) at \(ack.version))")
                    continue
                }
                switch ack.kind {
                case .insert, .update:
                    if ack.kind == .insert && !v.inserted { violation("lost: device \(i + 1) never applied the insert of \(ack.entity) \(ack.id)") }
                    for f in ack.fields where (v.fields[f] ?? Version(clock: .zero, device: DeviceID(index: 0))) < ack.version {
                        violation("lost: device \(i + 1) holds \(ack.entity) \(ack.id).\(f) older than acknowledged \(ack.version)")
                    }
                case .delete:
                    if (v.deleteVersion ?? Version(clock: .zero, device: DeviceID(index: 0))) < ack.version {
                        violation("lost: device \(i + 1) missed the delete of \(ack.entity) \(ack.id) at \(ack.version)")
                    }
                }
            }
        }
        // 4. All-or-nothing imports: every device applied every log whole, none is left failing.
        summary.invariantsChecked.append("all-or-nothing imports")
        if try await !fullyApplied() { violation("imports: some device did not apply every sequence of every device") }
        for (i, s) in stores.enumerated() {
            let pending = try s.snapshot.pendingUploadCount()
            if pending > 0 { violation("imports: device \(i + 1) still has \(pending) saves not uploaded") }
        }
        // 5. Accounts stay apart: nothing saved under account B shows in account A.
        summary.invariantsChecked.append("accounts stay apart")
        for ack in acknowledged where ack.account == 1 {
            if try stores[0].snapshot.recordVersions(entity: ack.entity, id: ack.id) != nil {
                violation("accounts: \(ack.entity) \(ack.id) saved under account B appears in account A")
            }
        }
        // 7. A new device starts from the newest intact baseline (if any)
        // plus the logs after it, and agrees.
        summary.invariantsChecked.append("a new device from a baseline agrees")
        let joiner = try await Store.open(Store.Configuration(
            schema: Self.schema, deviceID: DeviceID(index: 998), directory: root.appendingPathComponent("joiner"),
            container: accounts[0].everything, clock: clock, seed: 2, logger: logger, durability: .normal,
            knownStore: stores[0].storeID).waitingForBaselines(.zero))
        let joined = try await joiner.importLogs()
        summary.newDeviceStartedFromBaseline = joined.baseline != nil
        let joinerHash = try await joiner.stateHash()
        try await joiner.close()
        if joinerHash != hashes[0] {
            violation("baseline: a new device reaches \(joinerHash) (baseline: \(joined.baseline.map { "\($0.parts) parts by \($0.device)" } ?? "none")), devices \(hashes[0])")
        }

        // 6. Bounded memory.
        summary.invariantsChecked.append("bounded memory")
        let rss = Self.residentBytes()
        if rss > 1 << 30 { violation("memory: resident size \(rss >> 20) MiB exceeds 1 GiB") }
        summary.logs = try await accounts[0].everything.listAll(prefix: "").filter { $0.name.rawValue.hasSuffix(".chlog") }.count
    }

    /// The state a fresh device reaches from every committed save, each
    /// device's outbox put into a pristine container as one log.
    func referenceHash(_ stores: [Store]) async throws -> String {
        let pristine = InMemoryContainer()
        let storeID = stores[0].storeID
        _ = try await pristine.createMarker(ContainerLayout.activeStore, Array("{\"store\":\"\(storeID)\"}".utf8))
        for s in stores {
            let device = s.deviceID
            guard let last = try s.snapshot.vector()[device], last > 0,
                  let transactions = try s.snapshot.outboxTransactions(first: 1, last: last) else { continue }
            let bytes = try LogEncoder(storeID: storeID).encode(bodies: transactions, device: device, schemaHash: Self.schema.hash)
            try await pristine.put(ContainerLayout.log(store: storeID, device: device, first: 1, last: last), bytes)
            _ = try await pristine.createMarker(ContainerLayout.deviceRegistration(store: storeID, device: device), [])
        }
        let fresh = try await Store.open(Store.Configuration(
            schema: Self.schema, deviceID: DeviceID(index: 999), directory: root.appendingPathComponent("reference"),
            container: pristine, clock: clock, seed: 1, logger: logger, durability: .normal))
        try await fresh.importLogs()
        let hash = try await fresh.stateHash()
        try await fresh.close()
        return hash
    }

    static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

/// The crash decisions of one run, shared with the devices' injectors.
final class CrashControl: Sendable {
    // Mutex and atomics make the decisions safe to share across tasks.
    let random: Mutex<SeededRandom>
    let enabled = Atomic<Bool>(true)
    let count = Atomic<Int>(0)
    let probability: Double

    init(seed: UInt64, probability: Double) {
        random = Mutex(SeededRandom(seed: seed))
        self.probability = probability
    }

    func decide() -> Bool {
        guard enabled.load(ordering: .relaxed) else { return false }
        let crash = random.withLock { Double($0.next() % 1_000_000) / 1_000_000 < probability }
        if crash { count.wrappingAdd(1, ordering: .relaxed) }
        return crash
    }
}
