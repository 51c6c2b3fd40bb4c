import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB

/// A store of account A that a device marked corrupted.
struct CorruptionEpisode: Hashable {
    /// The virtual time of its first mark.
    var start: UInt64
    /// When every device of account A was next healthy on one other store.
    var end: UInt64?
    /// Whether, while it lasted, a device of account A was away (offline,
    /// the cloud off, on another account) or crashed, or the container was
    /// down: the bound on its length assumes devices that sync.
    var disturbed = false
    /// The run's disturbance count when it started.
    var disturbancesAtStart = 0
    /// Whether a device was healthy on the store when it was marked (the
    /// bound assumes one that can rebuild at once).
    var healthyDeviceAtMark = false
}

/// What the health monitors did in a run with corruption faults.
package struct HealthCounts: Sendable, Hashable, Codable {
    /// Stores marked corrupted.
    package var corruptionEpisodes = 0
    /// Rebuilds by an elected device (maintenance rebuilds apart).
    package var rebuilds = 0
    /// Episodes that had not ended (every device healthy on one other store) when the run ended.
    package var openEpisodes = 0
    /// The longest virtual time from a store's first mark until every
    /// device was healthy on the store that replaced it.
    package var maxMarkToHealthyMilliseconds: UInt64 = 0
    /// Each ended episode's time from its first mark to every device
    /// healthy on the new store.
    package var markToHealthyMilliseconds: [UInt64] = []
    /// The same, for the episodes during which every device of account A
    /// stayed online, with the cloud on, and nothing crashed or went down
    /// (see ``CorruptionEpisode/disturbed``) and a device was healthy on
    /// the store when it was marked: the bound holds for these.
    package var undisturbedMarkToHealthyMilliseconds: [UInt64] = []
    /// The same, for undisturbed episodes in which no device was healthy
    /// on the store when it was marked (all still in their grace period,
    /// or all failing on the damaged log): the first one to be healthy, or
    /// after ``StoreManager/HealthConfiguration/unhealthyRebuildWait`` a
    /// device that marked it, rebuilds.
    package var noHealthyDeviceMarkToHealthyMilliseconds: [UInt64] = []
    /// Runs on a container without reliable exclusive create (the deterministic rule).
    package var unreliableCreateRuns = 0
    package var runs = 0

    package init() {}

    package static func + (a: HealthCounts, b: HealthCounts) -> HealthCounts {
        var c = HealthCounts()
        c.corruptionEpisodes = a.corruptionEpisodes + b.corruptionEpisodes
        c.rebuilds = a.rebuilds + b.rebuilds
        c.openEpisodes = a.openEpisodes + b.openEpisodes
        c.maxMarkToHealthyMilliseconds = max(a.maxMarkToHealthyMilliseconds, b.maxMarkToHealthyMilliseconds)
        c.markToHealthyMilliseconds = a.markToHealthyMilliseconds + b.markToHealthyMilliseconds
        c.undisturbedMarkToHealthyMilliseconds = a.undisturbedMarkToHealthyMilliseconds + b.undisturbedMarkToHealthyMilliseconds
        c.noHealthyDeviceMarkToHealthyMilliseconds = a.noHealthyDeviceMarkToHealthyMilliseconds + b.noHealthyDeviceMarkToHealthyMilliseconds
        c.unreliableCreateRuns = a.unreliableCreateRuns + b.unreliableCreateRuns
        c.runs = a.runs + b.runs
        return c
    }

    /// The bound the design aims at: grace period + election window + one
    /// sync interval (a second, the quiescence's rounds).
    package static var boundMilliseconds: UInt64 {
        Simulation.health.gracePeriod.wholeMilliseconds + Simulation.health.electionWindow.wholeMilliseconds + 1_000
    }

    /// One line naming every count.
    package var summary: String {
        let sorted = markToHealthyMilliseconds.sorted()
        let median = sorted.isEmpty ? 0 : sorted[sorted.count / 2]
        let within = sorted.filter { $0 <= Self.boundMilliseconds }.count
        return "\(corruptionEpisodes) corruption episodes, \(rebuilds) rebuilds by an elected device; from a mark to every device healthy "
            + "on the new store: median \(median) ms, longest \(maxMarkToHealthyMilliseconds) ms of virtual time, \(within) of \(sorted.count) "
            + "within grace + window + one sync (\(Self.boundMilliseconds) ms); "
            + "the \(undisturbedMarkToHealthyMilliseconds.count) during which every device stayed online with the cloud on and nothing crashed, "
            + "a device healthy at the mark: longest \(undisturbedMarkToHealthyMilliseconds.max() ?? 0) ms; "
            + "\(noHealthyDeviceMarkToHealthyMilliseconds.count) more with no device healthy at the mark: "
            + "longest \(noHealthyDeviceMarkToHealthyMilliseconds.max() ?? 0) ms"
            + (openEpisodes > 0 ? ", \(openEpisodes) episodes still open at the end" : "")
            + (runs > 1 ? " (\(runs - unreliableCreateRuns) runs with reliable exclusive create, \(unreliableCreateRuns) without)" : "")
    }
}

extension Simulation {
    /// The health monitor's timings in runs with corruption faults, in the
    /// virtual time of a run that lasts seconds.
    package static let health = StoreManager.HealthConfiguration(
        gracePeriod: .seconds(2), repairWait: .seconds(3), gapTimeout: .seconds(8), electionWindow: .seconds(1), leaseDuration: .seconds(6),
        unhealthyRebuildWait: .seconds(6))

    /// A log of account A's active store, drawn from the corruption
    /// stream, and the device ID that wrote it.
    func activeStoreLog() async throws -> (name: ContainerName, owner: DeviceID)? {
        let container = accounts[0].everything
        guard let store = try await container.readMarker(ContainerLayout.activeStore, as: ActiveStorePointer.self)?.payload.store else { return nil }
        let logs = try await container.listAll(prefix: ContainerLayout.logsPrefix(store: store))
        guard !logs.isEmpty else { return nil }
        let name = logs[Int(corruptionRandom.next() % UInt64(logs.count))].name
        guard let parsed = ContainerLayout.parseLog(name) else { return nil }
        return (name, parsed.device)
    }

    /// Whether a device of account A, with its files not behind the
    /// container, has applied (or made) every save of the log.
    func someDeviceHolds(_ log: (name: ContainerName, owner: DeviceID), besides other: SimulatedDevice? = nil) async throws -> Bool {
        guard let parsed = ContainerLayout.parseLog(log.name) else { return false }
        for d in devices where d.account == 0 && !d.wentBackInTime && d.loadedKind == .cloud && d !== other {
            guard let store = d.store, store.storeID == parsed.store else { continue }
            if try store.snapshot.vector()[log.owner] ?? 0 >= parsed.last { return true }
        }
        return false
    }

    /// Whether `d` is the only device of account A that holds the saves of
    /// a log the container lost for good: its files going back in time
    /// would destroy the last copy, which no store can survive.
    func holdsTheOnlyCopy(_ d: SimulatedDevice) async throws -> Bool {
        guard d.account == 0, let store = d.store else { return false }
        let vector = try store.snapshot.vector()
        for name in accounts[0].lostForGood {
            guard let parsed = ContainerLayout.parseLog(name), parsed.store == store.storeID,
                  vector[parsed.device] ?? 0 >= parsed.last else { continue }
            if try await !someDeviceHolds((name, parsed.device), besides: d) { return true }
        }
        return false
    }

    /// Whether `d` writes, or wrote, under `device` in the container.
    func owns(_ d: SimulatedDevice, _ device: DeviceID) -> Bool {
        d.cloudDeviceID == device || d.initialID == device || d.retiredIDs.contains(device)
    }

    /// After a sync: a new corruption mark starts an episode; an episode
    /// ends once every device is healthy on one store that is not its own.
    func watchHealth() async {
        guard options.corruption else { return }
        let container = accounts[0].everything
        for name in (try? await container.listMarkers(prefix: "")) ?? [] {
            if name.rawValue.contains("/corruption/") {
                guard let mark = try? await container.readMarker(name, as: CorruptionMark.self)?.payload else { continue }
                if episodes[mark.store] == nil {
                    episodes[mark.store] = CorruptionEpisode(start: mark.milliseconds, disturbancesAtStart: disturbances,
                                                             healthyDeviceAtMark: await someDeviceHealthy(on: mark.store))
                    note("device \(mark.device) marked store \(mark.store) corrupted: \(mark.blob): \(mark.reason)")
                }
            } else if name.rawValue.hasSuffix("/superseded"), let store = StoreID(string: String(name.rawValue.prefix { $0 != "/" })),
                      episodes[store] == nil,
                      let supersession = try? await container.readMarker(name, as: StoreSupersession.self)?.payload,
                      supersession.reason?.hasPrefix("corruption") == true {
                // Marked and rebuilt in one sync (a healthy device that
                // found the damage and won the election at once).
                episodes[store] = CorruptionEpisode(start: supersession.milliseconds, disturbancesAtStart: disturbances, healthyDeviceAtMark: true)
                note("store \(store) was marked corrupted and rebuilt in one sync: \(supersession.reason ?? "")")
            }
        }
        guard episodes.values.contains(where: { $0.end == nil }) else { return }
        let away = devices.contains { $0.account != 0 || !$0.online || $0.loadedKind != .cloud && $0.loadedKind != nil }
        let outages = accounts[0].counts.outages
        for (marked, episode) in episodes where episode.end == nil && (away || disturbances != episode.disturbancesAtStart || outages != outagesSeen) {
            episodes[marked]?.disturbed = true
        }
        outagesSeen = outages
        guard let store = await healthySettled() else { return }
        for (marked, episode) in episodes where episode.end == nil && marked != store {
            episodes[marked]?.end = clock.nowMilliseconds()
            note("every device is healthy on store \(store), \(clock.nowMilliseconds() &- episode.start) ms after store \(marked) was marked corrupted"
                 + (episode.disturbed ? "" : " (no device away, no crash, no outage meanwhile)"))
        }
    }

    /// Whether a device of account A is healthy on `store`.
    func someDeviceHealthy(on store: StoreID) async -> Bool {
        for d in devices where d.account == 0 {
            if let status = await d.manager?.healthStatus, status.status == .healthy, status.store == store { return true }
        }
        return false
    }

    /// The store every device of account A is healthy on, if there is one.
    func healthySettled() async -> StoreID? {
        var stores = Set<StoreID>()
        for d in devices {
            guard d.account == 0, let status = await d.manager?.healthStatus, status.status == .healthy else { return nil }
            stores.insert(status.store)
        }
        return stores.count == 1 ? stores.first : nil
    }

    /// Whether every log of account A's active store verifies and each
    /// device's logs run without a gap.
    func activeStoreIntact() async throws -> Bool {
        let container = accounts[0].everything
        guard let store = try await container.readMarker(ContainerLayout.activeStore, as: ActiveStorePointer.self)?.payload.store else { return true }
        let logs = try await StoreLogs.read(container, store: store, upgrades: options.upgrades)
        return logs.damaged.isEmpty && logs.devices.allSatisfy { logs.runs($0).count <= 1 }
    }

    /// Whether a device that joins now, replaying the container, reaches
    /// the devices' state (the order-independence checker's replay).
    func joinerAgrees() async throws -> Bool {
        guard let store = devices.first?.store else { return false }
        try await recordFates()
        let logs = try await StoreLogs.read(accounts[0].everything, store: store.storeID, upgrades: options.upgrades)
        let reference = try await OrderIndependenceChecker.reference(logs, store: store.storeID, state: quiescedState)
        return reference.hash == (try await store.stateHash())
    }

    /// The records the newest intact baseline of `store` (account A) holds.
    func recordsInBaselines(of store: StoreID) async throws -> Set<RecordID> {
        let path = root.appendingPathComponent("baseline-\(store).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let snapshot = try Snapshot(path: path, schema: finalSchema, storeID: store, deviceID: DeviceID(index: 998), durability: .normal,
                                    earlierSchemas: Workload.earlierSchemas(before: finalSchema.version))
        defer { try? snapshot.close() }
        var replayer = Replayer(snapshot: snapshot, container: accounts[0].everything, logger: logger)
        replayer.baselineWait = Duration.zero
        let report = try await replayer.importOnce()
        guard report.baseline != nil else { return [] }
        return try await snapshot.databasePool.read { db in
            var all = Set(try RecordID.fetchAll(db, sql: "SELECT id FROM _chronicle_records"))
            for entity in snapshot.schema.entities {
                all.formUnion(try RecordID.fetchAll(db, sql: "SELECT id FROM \(entity.name.quotedDatabaseIdentifier)"))
            }
            return all
        }
    }

    /// The rebuilds each store had by an elected device, from the events
    /// the devices published.
    func electedRebuilds() -> [StoreID: Int] {
        var rebuilds: [StoreID: Int] = [:]
        for d in devices {
            var elected: StoreID?
            for event in d.events {
                switch event {
                case .electedToRebuild(let store): elected = store
                case .rebuiltCloudStore(_, let from):
                    if elected == from { rebuilds[from, default: 0] += 1 }
                    elected = nil
                default: break
                }
            }
        }
        return rebuilds
    }

    /// Checks the health invariants after quiescence and fills the counts.
    func checkHealth(_ report: inout CheckReport) async throws {
        guard options.corruption else { return }
        let reliable = accounts[0].faults.reliableExclusiveCreate
        var counts = HealthCounts()
        counts.runs = 1
        counts.unreliableCreateRuns = reliable ? 0 : 1
        let rebuilds = electedRebuilds()
        counts.corruptionEpisodes = episodes.count
        counts.rebuilds = rebuilds.values.reduce(0, +)
        let active = try await accounts[0].everything.readMarker(ContainerLayout.activeStore, as: ActiveStorePointer.self)?.payload.store
        for d in devices {
            let status = await d.manager?.healthStatus
            if status?.status != .healthy || status?.store != active {
                report.violation("device \(d.number) ends \(status.map { "\($0.status.rawValue) on store \($0.store)" } ?? "with no health record"), not healthy on the active store \(active.map { "\($0)" } ?? "(none)")")
            }
        }
        for (store, episode) in episodes.sorted(by: { $0.value.start < $1.value.start }) {
            let count = rebuilds[store] ?? 0
            if reliable, count > 1 {
                report.violation("store \(store) was rebuilt \(count) times in one corruption episode, with reliable exclusive create")
            }
            if count == 0, fates[store] == nil {
                report.violation("store \(store) was marked corrupted and neither rebuilt, deleted nor merged into another")
            }
            if let end = episode.end {
                counts.maxMarkToHealthyMilliseconds = max(counts.maxMarkToHealthyMilliseconds, end &- episode.start)
                counts.markToHealthyMilliseconds.append(end &- episode.start)
                if !episode.disturbed {
                    if episode.healthyDeviceAtMark {
                        counts.undisturbedMarkToHealthyMilliseconds.append(end &- episode.start)
                    } else {
                        counts.noHealthyDeviceMarkToHealthyMilliseconds.append(end &- episode.start)
                    }
                }
            } else {
                counts.openEpisodes += 1
            }
        }
        summary.health = counts
    }
}

/// Some devices (not the log's owner) see a log of the active store
/// damaged, for good: their copy of the synced folder has a bit flipped.
struct DamagedViewFault: FaultInjector {
    let probability: Probability

    func step(_ run: Simulation) async throws {
        guard probability.draw(&run.corruptionRandom), let log = try await run.activeStoreLog() else { return }
        var seeing: [SimulatedDevice] = []
        for d in run.devices where !run.owns(d, log.owner) && run.corruptionRandom.next() % 2 == 0 { seeing.append(d) }
        if seeing.isEmpty, let any = run.devices.first(where: { !run.owns($0, log.owner) }) { seeing.append(any) }
        guard !seeing.isEmpty else { return }
        run.accounts[0].damageView(of: log.name, for: Set(seeing.map(\.initialID)))
        run.note("devices \(seeing.map { String($0.number) }.joined(separator: ", ")) see \(log.name.lastComponent) damaged, for good")
    }
}

/// A log of the active store is damaged in the container, and every later
/// upload of it is lost: not even its owner can put it back.
struct UnrepairableLogFault: FaultInjector {
    let probability: Probability

    func step(_ run: Simulation) async throws {
        guard probability.draw(&run.corruptionRandom), let log = try await run.activeStoreLog() else { return }
        // Only a log some device holds: damaging the last copy of a save
        // (its owner's files went back in time) loses it on any system.
        guard try await run.someDeviceHolds(log) else { return }
        try await run.accounts[0].damageForGood(log.name)
        run.note("\(log.name.lastComponent) of device \(log.owner) damaged; its owner cannot put it back")
    }
}
