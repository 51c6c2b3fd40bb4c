@testable import ChronicleSimulation
import Chronicle
import ChronicleCore
import Foundation
import Testing

/// The simulation with corruption faults (`--corruption`): health monitors
/// mark, elect, rebuild; every device ends healthy on one store.
@Suite struct HealthSimulationTests {
    static func options(_ create: ExclusiveCreate = .drawn) -> SimulationOptions {
        var options = SimulationOptions()
        options.enableCorruption()
        options.exclusiveCreate = create
        return options
    }

    /// Seeds a corruption sweep failed on, pinned
    /// (`chronicle simulate --corruption --seed N`).
    static let regressionSeeds: [(seed: UInt64, what: String)] = [
        (0x3, "a log its owner could not put back showed as a gap that outlasted quiescence: the gap timeout was longer than the run"),
        (0x19, "an owner's damaged log that every device had applied stayed damaged: a device joining could not build the store"),
        (0x22, "quiescence ended in the round a rebuild happened: devices were left on the replaced store"),
        (0x80, "the checker did not count the records a deleted store held only in its baseline among those that went with it"),
        (0x1bc, "an owner whose -wal was lost had its log damaged for good: the saves were nowhere (the fault now spares the last copy of a save); on the way, an owner that rebuilt its own copy over its damaged log left that log's saves to an import that failed"),
        (0x108, "a device leaving a deleted store did not carry a save whose log stayed damaged: the deleted store never held it"),
        (0x28b, "the checker's fresh replay ignored the baseline that covers a log damaged after every device applied it"),
        (0x7c, "the checker missed that a fallback save the container held when its store was deleted went with it, once the log was lost afterwards"),
        (0x89, "a device switching back to its account while the container was down opened its copy of the other account's store offline: its saves went there"),
        (0x27e3, "a device whose copy was built again under a new ID no longer knew it held the baseline a rebuilt store started from: elected, it refused to rebuild, and every device stayed on the corrupted store"),
        (0x337f, "a device leaving a deleted store did not carry its delete of a note its local store held hidden (its folder deleted there): only the records the local store showed were deleted"),
        (0xc4e, "the harness let the seeding device lose its -wal after the seed's log was damaged for good: its copy was the last one of a merged folder (a double fault no store survives)"),
        (0x282b, "the same, with the mark made by a healthy device: the elected device's rebuild kept waiting for a baseline it had applied"),
        (0x55735, "the only log of the cloud store's first saves was damaged for good and then gone; a device that had not imported it saw no later log, so no gap, and ended without those saves while every other device had them"),
    ]

    /// Seeds that failed with the health monitor alone, the lifecycle's
    /// operations off (`chronicle simulate --corruption --exclusive-create
    /// reliable --rate cloud-toggle=0,cloud-deletion=0,maintenance=0 --seed N`).
    static let healthOnlySeeds: [(seed: UInt64, what: String)] = [
        (0x96, "after a wipe took the active-store pointer, every device but the elected one waited for the rebuild, and the rebuild refused to start without the pointer"),
        (0x1e7, "the checker took a save carried into a rebuilt store under a later ID of its device, with its clock, for an older version"),
    ]

    @Test(arguments: healthOnlySeeds.map(\.seed))
    func pinnedHealthOnlySeeds(seed: UInt64) async throws {
        var options = Self.options(.reliable)
        options.cloudToggleProbability = .never
        options.cloudDeletionProbability = .never
        options.maintenanceProbability = .never
        let summary = try await Simulation(seed: seed, options: options).run()
        #expect(summary.passed, "seed \(seed): \(summary.violations)")
    }

    /// Pinned: the same with unreliable exclusive create. A seeding
    /// device's only log, damaged for good, vanished as its keeper deleted
    /// it to put it back and the upload was lost; the seed's baseline was
    /// damaged too. Devices that had not imported it stayed apart from
    /// those that had, all healthy: the scrub looked only for gaps between
    /// logs (`chronicle simulate --corruption --exclusive-create unreliable
    /// --rate cloud-toggle=0,cloud-deletion=0,maintenance=0 --seed 0x3a3`).
    @Test func aVanishedOnlyLogIsFoundAndTheStoreRebuilt() async throws {
        var options = Self.options(.unreliable)
        options.cloudToggleProbability = .never
        options.cloudDeletionProbability = .never
        options.maintenanceProbability = .never
        let summary = try await Simulation(seed: 0x3a3, options: options).run()
        #expect(summary.passed, "\(summary.violations)")
        #expect((summary.health?.rebuilds ?? 0) >= 1)
    }

    /// Seeds that failed in a swarm sweep (`chronicle simulate --corruption --swarm --seed N`).
    static let swarmSeeds: [(seed: UInt64, what: String)] = [
        (0x75, "a device leaving a store deleted everywhere put back its log the container had lost, crashed before carrying, and on the next load carried nothing: the log was back and its save uploaded before the deletion"),
    ]

    @Test(arguments: swarmSeeds.map(\.seed))
    func pinnedSwarmSeeds(seed: UInt64) async throws {
        let summary = try await Simulation(seed: seed, options: SimulationOptions.swarm(seed: seed, base: Self.options())).run()
        #expect(summary.passed, "seed \(seed): \(summary.violations)")
    }

    /// Seeds whose undisturbed episodes, with a device healthy at the mark,
    /// took longer than grace + window + one sync on a synced folder
    /// (`chronicle simulate --corruption --exclusive-create unreliable --seed N`).
    static let timeBoundSeeds: [(seed: UInt64, what: String)] = [
        // Every device had become healthy in the run's last second, and
        // candidates stood only at the mark, deciding a window later (once
        // seed 21, which no longer makes that episode now that imports go
        // in clock order; the rule is also pinned by HealthMonitorTests'
        // aCandidateThatStoodAWindowBeforeTheMarkIsChosenAtOnceWhateverTheDevicesClock).
        (3, "an undisturbed episode with a device healthy at the mark, decided within grace + window + one sync"),
        (25, "the one healthy device had marked the store itself, staying healthy: it was not a candidate chosen beforehand"),
        // Once also seed 320 (a device had moved to a new ID and kept
        // standing under its old one: the rule picked a device that no
        // longer synced), which no longer makes that episode now that a
        // device that started from a damaged baseline publishes one in
        // its place; the fix (a candidacy under an ID the device left is
        // withdrawn) stays in StoreManager.stand(for:_:healthy:marks:).
    ]

    @Test(arguments: timeBoundSeeds.map(\.seed))
    func pinnedTimeBoundSeeds(seed: UInt64) async throws {
        let summary = try await Simulation(seed: seed, options: Self.options(.unreliable)).run()
        #expect(summary.passed, "seed \(seed): \(summary.violations)")
        let health = try #require(summary.health)
        #expect(!health.undisturbedMarkToHealthyMilliseconds.isEmpty, "seed \(seed) no longer makes an undisturbed episode: \(health.summary)")
        #expect(health.undisturbedMarkToHealthyMilliseconds.allSatisfy { $0 <= HealthCounts.boundMilliseconds }, "\(health.summary)")
    }

    @Test(arguments: regressionSeeds.map(\.seed))
    func pinnedCorruptionSeeds(seed: UInt64) async throws {
        let summary = try await Simulation(seed: seed, options: Self.options()).run()
        #expect(summary.passed, "seed \(seed): \(summary.violations)")
        #expect(summary.health != nil)
    }

    /// On both kinds of container the faults make episodes, the monitors
    /// end them with rebuilds, and every run passes.
    @Test(arguments: [ExclusiveCreate.reliable, .unreliable])
    func episodesEndInOneStoreOnBothContainerKinds(create: ExclusiveCreate) async throws {
        var counts = HealthCounts()
        for seed: UInt64 in 1...8 {
            let summary = try await Simulation(seed: seed, options: Self.options(create)).run()
            #expect(summary.passed, "seed \(seed) (\(create)): \(summary.violations)")
            counts = counts + (summary.health ?? HealthCounts())
        }
        #expect(counts.corruptionEpisodes > 0, "the faults made no corruption episode: \(counts.summary)")
        #expect(counts.rebuilds >= counts.corruptionEpisodes - counts.openEpisodes)
        #expect(counts.openEpisodes == 0)
        #expect(counts.unreliableCreateRuns == (create == .unreliable ? 8 : 0))
    }

    /// The checkers see a device that does not end healthy on the active store.
    @Test func theHealthCheckReportsADeviceLeftMarked() async throws {
        let simulation = Simulation(seed: 3, options: Self.options(.reliable))
        simulation.beforeChecks = { run in
            // As if its monitor had marked the store and nobody rebuilt it.
            run.episodes[StoreID(string: "018bcfe5-6800-7000-8000-000000000001")!] = CorruptionEpisode(start: 0)
        }
        let summary = try await simulation.run()
        #expect(summary.violations.contains { $0.contains("was marked corrupted and neither rebuilt, deleted nor merged") }, "\(summary.violations)")
    }
}
