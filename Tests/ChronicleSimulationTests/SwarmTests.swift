import Chronicle
import ChronicleContainer
import ChronicleCore
@testable import ChronicleSimulation
import ChronicleSnapshot
import GRDB
import Testing

@Suite struct SwarmTests {
    static let swarmed = SimulationOptions.Rate.allCases.filter { $0.swarmRange != nil }

    @Test func theSameSeedDrawsTheSameOptions() {
        #expect(SimulationOptions.swarm(seed: 11) == SimulationOptions.swarm(seed: 11))
        #expect(SimulationOptions.swarm(seed: 11) != SimulationOptions.swarm(seed: 12))
    }

    /// Across seeds every swarmed rate is sometimes off and sometimes on,
    /// within its range and to four decimals; devices and saves come from
    /// the base options.
    @Test func seedsExploreEachRateOnAndOff() throws {
        var base = SimulationOptions()
        base.devices = 7
        base.savesPerDevice = 9
        let drawn = (UInt64(1)...300).map { SimulationOptions.swarm(seed: $0, base: base) }
        for rate in Self.swarmed {
            let range = try #require(rate.swarmRange)
            let off = drawn.filter { $0[rate].isNever }.count
            #expect(off > 60 && off < 140, "\(rate): off in \(off) of 300 seeds")
            #expect(drawn.allSatisfy { range.contains($0[rate].value) || $0[rate].isNever }, "\(rate)")
            #expect(drawn.allSatisfy { ($0[rate].value * 10_000).rounded() / 10_000 == $0[rate].value }, "\(rate)")
        }
        #expect(drawn.allSatisfy { $0.devices == 7 && $0.savesPerDevice == 9 })
        // Every rate is swarmed, the device-folder faults included; the
        // corruption faults are kept as given (on with --corruption), so that
        // swarm runs without it stay as they were.
        #expect(Set(SimulationOptions.Rate.allCases).subtracting(Self.swarmed) == [.damagedView, .unrepairableLog])
        #expect(drawn.contains { $0.operationWeights["rename-folder"]! > 0 })
        #expect(drawn.contains { $0.operationWeights["update-note"] == 0 })
        #expect(drawn.allSatisfy { (try? $0.validate()) != nil })
        #expect(Set(drawn.map(\.container.maxVisibilityDelay)).count > 100)
    }

    /// `--swarm --seed N` reruns the same run: same drawn options, same summary.
    @Test func aSwarmSeedReproducesItsRun() async throws {
        var base = SimulationOptions()
        base.devices = 3
        base.savesPerDevice = 10
        for seed: UInt64 in [21, 22] {
            let a = try await Simulation(seed: seed, options: .swarm(seed: seed, base: base)).run()
            let b = try await Simulation(seed: seed, options: .swarm(seed: seed, base: base)).run()
            #expect(a == b)
            #expect(a.options == .swarm(seed: seed, base: base))
        }
    }

    @Test func overridesPinWhatTheSwarmDrew() throws {
        var options = SimulationOptions.swarm(seed: 4)
        try SimulationOverrides(rates: ["crash=0"]).apply(to: &options)
        #expect(options.crashProbability.isNever)
        #expect(options.outageProbability == SimulationOptions.swarm(seed: 4).outageProbability)
    }

    @Test func rateSummaryNamesEveryRateAndOperation() {
        let text = SimulationOptions.calm.rateSummary
        #expect(text.hasPrefix("sync 0.25, baseline 0.03, offline off, crash off"))
        #expect(text.contains("max delay 0 ms"))
        #expect(SimulationOptions.operationNames.allSatisfy { text.contains("\($0) ") })
    }
}
