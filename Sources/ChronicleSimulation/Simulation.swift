import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Logging

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
///
/// A run is three parts, each in its own files: the workload
/// (``Workload``, a table of weighted operations), the fault injectors
/// (`Faults/`, one per fault kind, each with its own probability) and, after
/// quiescence, the invariant checkers (`Checkers/`, one per invariant).
package final class Simulation {
    /// The workload's first schema (see `Workload.schema`).
    package static var schema: Schema { Workload.schema }

    /// The schema every device ends on.
    var finalSchema: Schema { Workload.finalSchema(upgrades: options.upgrades) }

    package let seed: UInt64
    package let options: SimulationOptions
    static let epochMilliseconds: UInt64 = 1_700_000_000_000
    let clock = ManualClock(milliseconds: Simulation.epochMilliseconds)
    /// The workload's stream: steps, saves, and most faults.
    var random: SeededRandom
    /// Baseline choices: a stream of their own (see ``SimulationOptions/baselineProbability``).
    var baselineRandom: SeededRandom
    /// The device-folder faults' stream, so that turning them on leaves the
    /// other draws of a seed where they were.
    var folderRandom: SeededRandom
    /// The lifecycle's stream (toggles, deletions, maintenance, the first enables).
    var lifecycleRandom: SeededRandom
    /// The corruption faults' stream.
    var corruptionRandom: SeededRandom
    /// The upgrades' stream (``SimulationOptions/upgrades``).
    var upgradeRandom: SeededRandom
    /// Compactions: when, by whom, and the run's retention period.
    var compactionRandom: SeededRandom
    let compactionRetention: Duration
    /// Half the runs compact by themselves too, after a few dozen saves
    /// (``Store/Configuration/automaticCompaction``); the others only when
    /// the workload says so.
    let automaticCompaction: Store.AutomaticCompaction?
    /// Devices that upgraded their app during the workload.
    var upgradesDone = 0
    /// Each store of account A some device marked corrupted: when it was
    /// first marked, and when every device was next healthy on one other store.
    var episodes: [StoreID: CorruptionEpisode] = [:]
    /// Crashes so far, and the container's outages last seen (see
    /// ``CorruptionEpisode/disturbed``).
    var disturbances = 0
    var outagesSeen = 0
    var lifecycleCounts = LifecycleCounts()
    var firstEnableStep: Int?
    var firstEnableCount = 0
    var firstEnablesDuringOutage = false
    var steps = 0
    /// For each store deleted on purpose, the logs the container held when it was.
    var deletedStoreLogs: [StoreID: Set<LogKey>] = [:]
    /// For each store deleted on purpose, the changes its logs held when it
    /// was, by record and clock (a save a move or merge carried is logged
    /// again under another device, with its clock).
    var deletedStoreSaves: [StoreID: [RecordID: Set<HybridTimestamp>]] = [:]
    /// Records a store deleted on purpose held (on the deleting device), and when.
    var deletedWithStore: [RecordID: UInt64] = [:]
    /// What each store deleted on purpose held of each record on the
    /// deleting device: the versions of its fields, insert and delete.
    var deletedStoreVersions: [StoreID: [RecordID: Snapshot.RecordVersions]] = [:]
    /// Deletions a crash stopped before the tombstone, with what the store
    /// held then: the device's next load finishes them.
    var pendingDeletions: [StoreID: DeletionCapture] = [:]
    /// When each store deleted on purpose was deleted (its tombstone's time).
    var deletedAt: [StoreID: UInt64] = [:]
    /// The records each device's local store held when it turned the cloud
    /// on at the first enables (and the enable went through).
    var firstEnableRecords: [Int: [(entity: String, id: RecordID)]] = [:]
    /// What became of account A's stores (see ``recordFates()``).
    var fates: [StoreID: StoreFate] = [:]
    /// Stores a rebuild started from a baseline of the store they replaced.
    var rebuiltFromBaseline: Set<StoreID> = []
    /// Twins (by index) that may still write under their original's device
    /// ID, or did since a wipe last looked (see ``WipeFault``).
    var twinsSharingAnID: Set<Int> = []
    /// Records hidden in a copy of a store a rebuild or a move then replaced (see ``hiddenRecords(_:)``).
    var hiddenBeforeMoves: Set<RecordID> = []
    /// The same, noted by the managers as they carry saves out of a store.
    let hiddenWhenCarried = SharedRecordSet()
    let crashes: CrashControl
    let root: URL
    var accounts: [SimulatedContainer] = []
    var devices: [SimulatedDevice] = []
    var ledger = AcknowledgementLedger()
    var summary: SimulationSummary
    /// Faults the run injects itself (the containers count theirs).
    var deviceFaults = FaultCounts()
    var timeline: [String] = []
    let verbose: Bool
    let logger = Logger(label: "chronicle.simulation") { label in
        if let level = ProcessInfo.processInfo.environment["CHRONICLE_SIMULATION_LOG"].flatMap(Logger.Level.init(rawValue:)) {
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        return SwiftLogNoOpLogHandler()
    }
    let injectors: [any FaultInjector]
    let checkers: [any InvariantChecker]
    /// Runs after quiescence, before the checks: tests break the state here
    /// to see that the checkers notice.
    var beforeChecks: ((Simulation) async throws -> Void)?

    /// Prepares a run; `workDirectory` holds the devices' snapshots (a
    /// temporary directory by default, removed afterwards).
    package init(seed: UInt64, options: SimulationOptions, verbose: Bool = false, workDirectory: URL? = nil) {
        self.seed = seed
        self.options = options
        self.verbose = verbose
        random = SeededRandom(seed: seed)
        baselineRandom = SeededRandom(seed: seed ^ 0xBA5E_11AE)
        folderRandom = SeededRandom(seed: seed ^ 0xF01D_E2F0_1DE2)
        lifecycleRandom = SeededRandom(seed: seed ^ 0x11FE_C7C1_E000)
        corruptionRandom = SeededRandom(seed: seed ^ 0xC022_0B7E_D000)
        upgradeRandom = SeededRandom(seed: seed ^ 0x0069_AD3D_0000)
        var compactionRandom = SeededRandom(seed: seed ^ 0xC0AC_7100_0000)
        compactionRetention = options.compactionRetention ?? .milliseconds(400 + Int64(compactionRandom.next() % 3_601))
        self.compactionRandom = compactionRandom
        var automaticRandom = SeededRandom(seed: seed ^ 0xA070_C0AC_7100)
        automaticCompaction = options.automaticCompaction && automaticRandom.next() % 2 == 0
            ? Store.AutomaticCompaction(saves: 12 + Int(automaticRandom.next() % 40), retention: compactionRetention) : nil
        crashes = CrashControl(seed: seed ^ 0xC4A5_4C4A_5443_4841, probability: options.crashProbability)
        summary = SimulationSummary(seed: seed, options: options)
        injectors = FaultInjectors.standard(options)
        checkers = InvariantCheckers.standard
        let base = workDirectory ?? URL(fileURLWithPath: FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory())
        root = base.appendingPathComponent("chronicle-sim-\(seed)-\(UUID().uuidString)")
    }

    /// The timeline of the last run (`--verbose`).
    package var events: [String] { timeline }

    func note(_ text: String) {
        if verbose { timeline.append("[\(String(format: "%8llu", clock.nowMilliseconds() - Self.epochMilliseconds)) ms] \(text)") }
    }

    /// One of `n` choices, from the workload's stream.
    func pick(_ n: Int) -> Int { Int(random.next() % UInt64(max(n, 1))) }

    /// A device a device-folder fault strikes, from that stream.
    func pickForFolderFault() -> SimulatedDevice { devices[Int(folderRandom.next() % UInt64(devices.count))] }

    /// Runs the workload, quiesces, checks every invariant.
    ///
    /// - Throws: ``ChronicleError/Code/invalidValue`` for options that make
    ///   no sense (see ``SimulationOptions/validate()``); an error a device
    ///   cannot recover from (a store that does not reopen).
    package func run() async throws -> SimulationSummary {
        try options.validate()
        defer {
            if ProcessInfo.processInfo.environment["CHRONICLE_SIMULATION_KEEP"] == nil {
                try? FileManager.default.removeItem(at: root)
            } else {
                FileHandle.standardError.write(Data("the devices' folders are kept in \(root.path)\n".utf8))
            }
        }
        for account in 0..<2 {
            var faults = options.container
            // Without repair, what is lost stays lost: every sync would otherwise put it back.
            faults.lostUploadsStayLost = !options.devicesRepairTheirLogs
            faults.reliableExclusiveCreate = faults.reliableExclusiveCreate && options.exclusiveCreate.isReliable(seed: seed, lifecycle: options.lifecycle)
            accounts.append(SimulatedContainer(clock: clock, faults: faults, seed: seed &+ UInt64(account) &* 7919))
        }
        for i in 0..<options.devices {
            let d = SimulatedDevice(index: i, initialID: DeviceID(index: UInt64(i + 1)),
                                    root: root.appendingPathComponent("device-\(i + 1)"))
            d.lifecycle = options.lifecycle
            // A quarter start on the upgraded app (new installs); the first
            // device always on the first version.
            if options.upgrades, i > 0, upgradeRandom.next() % 4 == 0 { d.schemaVersion = 2 }
            devices.append(d)
        }
        if options.lifecycle { planFirstEnables() }
        for d in devices { try await open(d) }
        while devices.contains(where: { $0.saves < options.savesPerDevice }) {
            try await step()
        }
        summary.virtualMilliseconds = clock.nowMilliseconds() - Self.epochMilliseconds
        try await quiesce()
        if options.lifecycle { try await collectLifecycleEvents() }
        if let beforeChecks { try await beforeChecks(self) }
        try await check()
        summary.faults = faultCounts()
        if !accounts[0].faults.reliableExclusiveCreate { lifecycleCounts.unreliableCreateSeeds = 1 }
        summary.lifecycle = options.lifecycle ? lifecycleCounts : nil
        summary.upgrades = options.upgrades ? upgradesDone : nil
        for d in devices {
            if d.manager != nil { try? await closeManager(d) } else { try? await d.store?.close() }
        }
        return summary
    }

    /// One step: time passes, faults strike, maybe a baseline, then one
    /// device syncs or saves.
    func step() async throws {
        steps += 1
        if steps == firstEnableStep { try await firstEnables() }
        clock.advance(byMilliseconds: Int64(1 + random.next() % 40))
        if options.upgrades, upgradeRandom.next() % 200 == 0 {
            let waiting = devices.filter { $0.schemaVersion < 2 }
            if !waiting.isEmpty { try await upgrade(waiting[Int(upgradeRandom.next() % UInt64(waiting.count))]) }
        }
        for injector in injectors { try await injector.step(self) }
        if options.baselineProbability.draw(&baselineRandom) {
            await publishBaseline(devices[Int(baselineRandom.next() % UInt64(devices.count))])
        }
        if !options.lifecycle, options.compactionProbability.draw(&compactionRandom) {
            await compact(devices[Int(compactionRandom.next() % UInt64(devices.count))])
        }
        let d = devices[pick(devices.count)]
        if options.syncProbability.draw(&random) {
            await sync(d)
        } else if d.saves < options.savesPerDevice {
            d.saves += 1
            try await save(d)
        }
    }

    /// Every fault counted, by the containers and by the run.
    func faultCounts() -> FaultCounts {
        var faults = accounts[0].counts
        let b = accounts[1].counts
        faults.lostUploads += b.lostUploads
        faults.tornBlobs += b.tornBlobs
        faults.delayedBlobs += b.delayedBlobs
        faults.crashes = crashes.count.load(ordering: .relaxed)
        faults.offlinePeriods = deviceFaults.offlinePeriods
        faults.accountSwitches = deviceFaults.accountSwitches
        faults.folderRestores = deviceFaults.folderRestores
        faults.folderTwins = deviceFaults.folderTwins
        faults.lostWALs = deviceFaults.lostWALs
        return faults
    }

    // MARK: Devices

    func open(_ d: SimulatedDevice) async throws {
        if options.lifecycle { return try await openManager(d) }
        var opened: Store?
        while opened == nil {
            do {
                opened = try await Store.open(storeConfiguration(d))
            } catch let error as ChronicleError where error.code == .simulatedCrash {
                // A crash while it opens (migrating its snapshot to a new
                // schema version): the app is launched again.
                disturbances += 1
                note("device \(d.number) crashed while opening, and is launched again")
            }
        }
        let store = opened!
        d.knownStore[d.account] = store.storeID
        d.identityChangesSeen = 0
        d.store = store
    }

    /// A crash: the process dies; its files stay. Restart from them.
    func restart(_ d: SimulatedDevice, _ why: String) async throws {
        disturbances += 1
        note("device \(d.number) crashed (\(why)) and restarts")
        try await reopen(d) {}
    }

    /// Records the moves to a new device ID the device's store made since
    /// the last look: the saves it carried over are expected at their new
    /// version from now on.
    func absorbIdentityChanges(_ d: SimulatedDevice) async {
        guard let store = d.store else { return }
        let changes = await store.identityChanges
        for change in changes.dropFirst(d.identityChangesSeen) {
            ledger.resubmitted(old: change.previous, new: change.current,
                               sequences: change.carriedOver.map { ($0.old, $0.new) },
                               clocks: Dictionary(change.carriedOver.map { ($0.old, $0.clock) }, uniquingKeysWith: { a, _ in a }),
                               in: store.storeID)
            summary.identityChanges += 1
            d.retiredIDs.append(change.previous)
            note("device \(d.number) moved from ID \(change.previous) to \(change.current) (\(change.reason)), carrying \(change.carriedOver.count) save(s)")
        }
        d.identityChangesSeen = changes.count
    }

    /// The device's app moves to the workload's upgraded schema version:
    /// it closes, and opens again on the new version (its snapshot migrates).
    func upgrade(_ d: SimulatedDevice, duringWork: Bool = true) async throws {
        if duringWork { upgradesDone += 1 }
        note("device \(d.number) upgrades its app to schema version 2")
        try await reopen(d) { d.schemaVersion = 2 }
    }

    /// Closes the device's store, does `body` to its files, opens it again.
    func reopen(_ d: SimulatedDevice, after body: () throws -> Void) async throws {
        if d.manager != nil {
            try await closeManager(d)
        } else {
            await absorbIdentityChanges(d)
            try? await d.store?.close()
            d.store = nil
        }
        try body()
        try await open(d)
    }

    func save(_ d: SimulatedDevice) async throws {
        try await ensureLoaded(d)
        guard let store = d.store else { return }
        let place = d.place
        summary.savesAttempted += 1
        let total = options.operationWeights.values.reduce(0, +)
        let chosen = Workload.chosen(random.next() % UInt64(total), weights: options.operationWeights)
        let version = store.snapshot.schema.version
        let input = Workload.Input(
            folders: try await store.read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Folder ORDER BY id") },
            notes: try await store.read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Note ORDER BY id") },
            readings: try await store.read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Reading ORDER BY id") },
            folderName: Workload.folderNames[pick(Workload.folderNames.count)],
            title: "n\(d.number)-\(random.next() % 1000)", words: Int64(random.next() % 5000),
            r1: random.next(), r2: random.next(), version: version,
            tags: version >= 2 ? try await store.read { db in try String.fetchAll(db, sql: "SELECT label FROM Tag") } : [])
        let operation = Workload.resolve(chosen, input)
        do {
            let (made, result) = try await store.writeReporting { tx in operation.body(input, &tx) }
            guard let result else { return }
            let written = Workload.canonical(made, version: version, upgrades: options.upgrades)
            if options.lifecycle {
                for id in try await removed(by: written, in: store) { ledger.removed[id] = max(ledger.removed[id] ?? result.clock, result.clock) }
            }
            summary.savesAcknowledged += 1
            ledger.acknowledged(written, clock: result.clock, device: SimulatedDevice.deviceID(of: store), sequence: result.sequence,
                                account: d.account, store: store.storeID, place: place, deviceIndex: d.index)
            note("device \(d.number) saved \(written.map { "\($0.kind) \($0.entity)" }.joined(separator: ", ")) as sequence \(result.sequence)")
            if crashes.decideAfterCommit(&random) {
                try await restart(d, "after commit, before upload")
            }
        } catch let error as ChronicleError where error.code == .simulatedCrash {
            try await restart(d, "before the save's commit")
        } catch let error as ChronicleError {
            summary.savesRefused += 1
            note("device \(d.number) save refused: \(error.code)")
        }
    }

    /// Syncs the device if it is online; returns whether the sync went through.
    @discardableResult
    func sync(_ d: SimulatedDevice) async -> Bool {
        guard d.online else { return false }
        if d.manager != nil {
            summary.syncs += 1
            d.syncs += 1
            do {
                let report = try await managerSync(d)
                await watchHealth()
                // Only the cloud store meets the container.
                if report != nil, d.loadedKind == .cloud { d.behindOn.remove(d.account) }
                note("device \(d.number) synced its \(d.loadedKind?.rawValue ?? "unloaded") store" + (report.map { ": up \($0.uploadedLogs), in \($0.imported.appliedLogs)" } ?? ""))
                return d.loadedKind == .cloud
            } catch let error as ChronicleError where error.code == .simulatedCrash {
                await refresh(d)
                try? await restart(d, "during sync")
            } catch {
                await refresh(d)
                await watchHealth()
                note("device \(d.number) sync failed: \(error)")
            }
            return false
        }
        guard let store = d.store else { return false }
        summary.syncs += 1
        d.syncs += 1
        do {
            if options.devicesRepairTheirLogs && d.syncs % 4 == 0 { try await store.repairOwnLogs() }
            let report = try await store.sync()
            d.behindOn.remove(d.account)
            await absorbIdentityChanges(d)
            note("device \(d.number) synced: up \(report.uploadedLogs), in \(report.imported.appliedLogs)"
                 + (report.imported.failures.isEmpty ? "" : ", \(report.imported.failures.count) failed (\(report.imported.failures.map(\.error.code.name).joined(separator: ",")))")
                 + (report.compaction.map { ", compacted by itself: \($0.removedLogs) logs, \($0.removedBaselines) baselines removed" } ?? ""))
            if let compaction = report.compaction, compaction.removedLogs + compaction.removedBaselines > 0 {
                summary.compactions += 1
                summary.compactedLogs += compaction.removedLogs
            }
            return true
        } catch let error as ChronicleError where error.code == .simulatedCrash {
            try? await restart(d, "during sync")
        } catch {
            note("device \(d.number) sync failed: \(error)")
        }
        return false
    }

    /// A device writes its state as a baseline, in parts small enough that
    /// faults (torn or delayed blobs, outages, bit flips, crashes) hit some.
    func publishBaseline(_ d: SimulatedDevice) async {
        guard d.online, let store = d.store, d.manager == nil || d.loadedKind == .cloud else { return }
        do {
            let published = try await store.publishBaseline(partBytes: 2048)
            await absorbIdentityChanges(d)
            summary.baselinesPublished += 1
            note("device \(d.number) published a baseline: \(published.parts) parts, \(published.records) records")
        } catch let error as ChronicleError where error.code == .simulatedCrash {
            try? await restart(d, "publishing a baseline")
        } catch {
            note("device \(d.number) baseline failed: \(error)")
        }
    }

    /// A device compacts the store: the logs its newest baseline covers
    /// leave the container once every device that synced within the run's
    /// retention period has applied them.
    func compact(_ d: SimulatedDevice) async {
        guard d.online, let store = d.store, d.manager == nil else { return }
        do {
            let report = try await store.compact(retention: compactionRetention)
            await absorbIdentityChanges(d)
            if report.removedLogs + report.removedBaselines > 0 {
                summary.compactions += 1
                summary.compactedLogs += report.removedLogs
            }
            note("device \(d.number) compacted: \(report.removedLogs) logs, \(report.removedBaselines) baselines removed"
                 + (report.waitingFor.isEmpty ? "" : "; waiting for \(report.waitingFor.count) devices")
                 + (report.passedOverDevices.isEmpty ? "" : "; passed over \(report.passedOverDevices.count)"))
        } catch let error as ChronicleError where error.code == .simulatedCrash {
            try? await restart(d, "compacting")
        } catch {
            note("device \(d.number) compaction failed: \(error)")
        }
    }

    /// Syncs the device, then tells whether it has nothing left to upload and
    /// the container holds, intact, every save it made: only then may its
    /// files go back in time without destroying a save.
    func uploadedEverything(_ d: SimulatedDevice) async throws -> Bool {
        guard await sync(d), let store = d.store, d.manager == nil || d.loadedKind == .cloud,
              try store.snapshot.pendingUploadCount() == 0 else { return false }
        let device = d.currentID
        let last = try store.snapshot.vector()[device] ?? 0
        let logs = try await StoreLogs.read(accounts[d.account].everything, store: store.storeID, device: device, upgrades: options.upgrades)
        // What a compaction removed is in the baseline that stands for it.
        let compacted = try await accounts[d.account].everything.readMarker(ContainerLayout.compaction(store: store.storeID), as: CompactionHorizon.self)?
            .payload.vector[device] ?? 0
        return logs.conflicts.isEmpty && compacted <= last && logs.contiguous(device, from: compacted + 1).count >= Int(last - compacted)
    }

    // MARK: Quiescence and checks

    /// Every device back on account A and online, crashes off, the container
    /// settled after two rounds; then rounds of "repair own logs, sync" until
    /// all devices agree and have everything.
    func quiesce() async throws {
        crashes.enabled.store(false, ordering: .relaxed)
        let start = clock.nowMilliseconds()
        // Convergence is checked after the last upgrade.
        for d in devices where d.schemaVersion < 2 && options.upgrades { try await upgrade(d, duringWork: false) }
        if options.lifecycle { try await quiesceLifecycle() }
        for d in devices where d.account != 0 || !d.online {
            if d.account != 0 {
                try await reopen(d) { d.account = 0 }
            }
            d.online = true
        }
        // Health needs a grace period after the last rebuild: more rounds.
        for round in 0..<(options.corruption ? 30 : 12) {
            clock.advance(byMilliseconds: 1_000)
            if round >= 2 { accounts[0].settle() }
            for d in devices {
                if options.devicesRepairTheirLogs { _ = try? await d.store?.repairOwnLogs() }
                if let manager = d.manager {
                    do {
                        if let report = try await manager.sync(), report.status != .upToDate, round >= 8 {
                            note("device \(d.number) quiescing: \(report.status), gaps \(report.imported.gaps.map { "\($0.device) \($0.expected)→\($0.found)" }), failures \(report.imported.failures.map { "\($0.name) \($0.error.code)" })")
                        }
                    } catch {
                        if round >= 8 { note("device \(d.number) quiescing: sync failed: \(error)") }
                    }
                    await refresh(d)
                    await watchHealth()
                    // A deletion it learns of now sends it to its local store.
                    // (A device waiting for a rebuild of a store it marked
                    // corrupted has nothing loaded, and waits.)
                    if d.loadedKind != .cloud, await d.manager?.healthStatus?.status != .corrupted { await bringToCloud(d) }
                } else {
                    do {
                        if let report = try await d.store?.sync(), report.status != .upToDate, round >= 8 {
                            note("device \(d.number) quiescing: \(report.status), gaps \(report.imported.gaps.map { "\($0.device) \($0.expected)→\($0.found)" }), failures \(report.imported.failures.map { "\($0.name) \($0.error.code): \($0.error.message)" })")
                        }
                    } catch {
                        if round >= 8 { note("device \(d.number) quiescing: sync failed: \(error)") }
                    }
                }
                await absorbIdentityChanges(d)
            }
            var hashes = Set<String>()
            var failures = 0
            for d in devices {
                guard let store = d.store else {
                    hashes.insert("unloaded")
                    failures += 1
                    continue
                }
                hashes.insert((try? await store.stateHash()) ?? "?")
                failures += (try? store.snapshot.pendingUploadCount()) ?? 1
            }
            // With corruption faults, also until the active store's logs are
            // whole: a device that joins must be able to build it.
            if options.corruption, await healthySettled() == nil || episodes.values.contains(where: { $0.end == nil }) { continue }
            if options.corruption {
                guard try await activeStoreIntact() else { continue }
                guard try await joinerAgrees() else { continue }
            }
            if round >= 2, hashes.count == 1, failures == 0, try await quiescedState.fullyApplied() { break }
        }
        summary.convergenceMilliseconds = clock.nowMilliseconds() - start
    }

    /// What the checkers see.
    var quiescedState: QuiescedState {
        QuiescedState(devices: devices, accounts: accounts, ledger: ledger, clock: clock, workDirectory: root, logger: logger,
                      fates: fates, deletedStoreLogs: deletedStoreLogs, deletedStoreSaves: deletedStoreSaves, duplicates: options.lifecycle ? duplicates : [:],
                      hiddenBeforeMoves: hiddenBeforeMoves.union(hiddenWhenCarried.ids.withLock { $0 }), deletedWithStore: deletedWithStore, deletedStoreVersions: deletedStoreVersions, deletedAt: deletedAt,
                      firstEnableRecords: firstEnableRecords, corruption: options.corruption, upgrades: options.upgrades)
    }

    func check() async throws {
        if options.lifecycle {
            try await recordFates()
            // Every record a store deleted on purpose held: on the deleting
            // device (recorded then), and in its logs (saves carried into it
            // by moving devices, seeded records).
            for (store, at) in deletedAt {
                let logs = try await StoreLogs.read(accounts[0].everything, store: store, upgrades: options.upgrades)
                for device in logs.devices {
                    for t in logs.transactions[device]!.values {
                        for change in t.changes { deletedWithStore[change.recordID] = max(deletedWithStore[change.recordID] ?? at, at) }
                    }
                }
                // And in its baselines: a rebuilt store's past is only there.
                for id in try await recordsInBaselines(of: store) { deletedWithStore[id] = max(deletedWithStore[id] ?? at, at) }
            }
        }
        let state = quiescedState
        var report = CheckReport()
        let unloaded = devices.filter { $0.store == nil || (options.lifecycle && $0.loadedKind != .cloud) }
        guard unloaded.isEmpty else {
            // Nothing to compare: that is the violation.
            for d in unloaded {
                report.violation("device \(d.number) has no cloud store loaded after quiescence (\(d.loadedKind?.rawValue ?? "nothing") loaded): \(await d.manager?.loadError.map { "\($0)" } ?? "unknown")")
            }
            summary.violations = report.violations
            return
        }
        for checker in checkers where options.lifecycle || !(checker is LocalDataReachesCloudChecker) {
            summary.invariantsChecked.append(checker.invariant)
            try await checker.check(state, &report)
        }
        if options.corruption {
            summary.invariantsChecked.append("every corruption episode ends with every device healthy on one store, after one rebuild where exclusive create is reliable")
            try await checkHealth(&report)
        }
        if options.upgrades {
            summary.invariantsChecked.append("no corruption mark, rebuild or election caused by schema versions")
            checkNoVersionCorruption(&report)
        }
        summary.violations = report.violations
        summary.stateHash = report.stateHash
        summary.records = report.records
        summary.newDeviceStartedFromBaseline = report.newDeviceStartedFromBaseline
        summary.logs = try await accounts[0].everything.listAll(prefix: "").filter { $0.name.rawValue.hasSuffix(ContainerLayout.logExtension) }.count
    }
}

extension Simulation {
    /// Schema versions are never a corruption: no device marked a store,
    /// rebuilt its copy or stood for election over a log or a baseline of
    /// another version (a held log, or one read through a migration).
    func checkNoVersionCorruption(_ report: inout CheckReport) {
        func aboutVersions(_ reason: String) -> Bool {
            reason.localizedCaseInsensitiveContains("schema")
        }
        for d in devices {
            for event in d.events {
                switch event {
                case .cloudContentCorrupted(let mark, _) where aboutVersions(mark.reason):
                    report.violation("device \(d.number) saw store \(mark.store) marked corrupted over schema versions: \(mark.reason)")
                case .rebuildingLocalCopy(let store, let reason) where aboutVersions(reason):
                    report.violation("device \(d.number) rebuilt its copy of store \(store) over schema versions: \(reason)")
                default:
                    break
                }
            }
        }
    }
}
