import Chronicle
import ChronicleContainer
import ChronicleCore
@testable import ChronicleSimulation
import ChronicleSnapshot
import GRDB
import Testing

/// The device-folder faults inject and count, and runs with them pass:
/// stores notice files that went back in time and move to a new device ID.
@Suite struct DeviceFolderFaultTests {
    static func options(_ rate: SimulationOptions.Rate, _ probability: Probability) -> SimulationOptions {
        var options = SimulationOptions.calm
        options.devices = 3
        options.savesPerDevice = 12
        options[rate] = probability
        return options
    }

    @Test func restoresCopyAndPutBackFolders() async throws {
        let simulation = Simulation(seed: 2, options: Self.options(.folderRestore, 0.2), verbose: true)
        let summary = try await simulation.run()
        #expect(summary.faults.folderRestores > 0)
        #expect(summary.passed, "\(summary.violations)")
        #expect(simulation.events.contains { $0.hasSuffix("'s folder copied (a backup)") })
        #expect(simulation.events.filter { $0.hasSuffix("'s folder restored from its older copy") }.count == summary.faults.folderRestores)
    }

    @Test func twinsJoinTheRunAndSave() async throws {
        let simulation = Simulation(seed: 2, options: Self.options(.folderTwin, 0.1), verbose: true)
        var twins: [Int] = []
        var twinSaves = 0
        simulation.beforeChecks = { sim in
            twins = sim.devices.filter { $0.twinOf != nil }.map(\.index)
            twinSaves = sim.ledger.entries.count
        }
        let summary = try await simulation.run()
        #expect(summary.faults.folderTwins == FolderTwinFault.maxTwins)
        #expect(summary.passed, "\(summary.violations)")
        #expect(twins == [3, 4])
        // Twins save too: their saves are in the ledger like any other's.
        #expect(simulation.events.contains { $0.hasPrefix("[") && $0.contains("device 4 saved") })
        #expect(twinSaves > 0)
    }

    @Test func lostWALsPutTheSnapshotBackToItsCheckpoint() async throws {
        let simulation = Simulation(seed: 2, options: Self.options(.lostWAL, 0.1), verbose: true)
        let summary = try await simulation.run()
        #expect(summary.faults.lostWALs > 0)
        #expect(summary.passed, "\(summary.violations)")
        let lost = simulation.events.filter { $0.contains("lost its snapshot's -wal") }
        #expect(lost.count == summary.faults.lostWALs)
        // The -wal held saves: something went back in time.
        #expect(lost.contains { !$0.hasSuffix("(0 bytes)") })
    }

    /// The device-folder faults draw from a stream of their own: with them
    /// on, a seed's runs are still the same, and with them off the rest of
    /// the run's draws do not move.
    @Test func folderFaultRunsAreReproducible() async throws {
        var options = Self.options(.folderRestore, 0.1)
        options.folderTwinProbability = 0.05
        options.lostWALProbability = 0.05
        let a = try await Simulation(seed: 8, options: options).run()
        let b = try await Simulation(seed: 8, options: options).run()
        #expect(a == b)
        #expect(a.faults.folderRestores + a.faults.folderTwins + a.faults.lostWALs > 0)
        #expect(a.passed, "\(a.violations)")
    }
}
