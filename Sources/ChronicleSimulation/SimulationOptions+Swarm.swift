import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import GRDB

extension SimulationOptions {
    /// Options whose rates, visibility delay and operation weights are drawn
    /// from `seed`, as swarm testing does: each seed explores its own corner
    /// (no outages and many updates, or a crash at every other point).
    ///
    /// Each fault kind with a ``Rate/swarmRange`` is switched off entirely
    /// with a chance of 1 in 3, and otherwise drawn in its range (to four
    /// decimals, so the rates print exactly); each operation is off with a
    /// chance of 1 in 4, and otherwise weighs 1 to 40. Devices, saves and
    /// the rates without a swarm range come from `base`. The draws come from
    /// a stream of their own: the same seed gives the same options, and the
    /// run's own draws are those of any run with that seed.
    ///
    /// ```swift
    /// let options = SimulationOptions.swarm(seed: 42)
    /// let summary = try await Simulation(seed: 42, options: options).run()
    /// ```
    package static func swarm(seed: UInt64, base: SimulationOptions = SimulationOptions()) -> SimulationOptions {
        var random = SeededRandom(seed: seed ^ 0x5357_4152_4D5F_4F50)
        var options = base
        // Two draws per rate, even for rates kept as given, so that giving a
        // rate a swarm range later leaves the other rates' draws alone.
        for rate in Rate.allCases where !rate.isLifecycle && rate != .compaction {
            let off = random.next() % 3 == 0
            let step = random.next()
            guard let range = rate.swarmRange else { continue }
            options[rate] = off ? .never : Probability(step, in: range)
        }
        let delayOff = random.next() % 3 == 0
        let delay = 1 + random.next() % 1_500
        options.container.maxVisibilityDelay = delayOff ? .zero : .milliseconds(delay)
        var weights: [String: Int] = [:]
        for name in operationNames {
            let off = random.next() % 4 == 0
            let weight = 1 + Int(random.next() % 40)
            weights[name] = off ? 0 : weight
        }
        if weights.values.contains(where: { $0 > 0 }) { options.operationWeights = weights }
        // The lifecycle's rates, from a stream of their own: adding them left
        // every earlier seed's options as they were.
        var lifecycle = SeededRandom(seed: seed ^ 0x4C49_4645_4359_434C)
        for rate in Rate.allCases where rate.isLifecycle {
            let off = lifecycle.next() % 3 == 0
            let step = lifecycle.next()
            guard let range = rate.swarmRange else { continue }
            options[rate] = off ? .never : Probability(step, in: range)
        }
        // Compaction's rate, from a stream of its own too.
        var compaction = SeededRandom(seed: seed ^ 0x434F_4D50_4143_5421)
        let off = compaction.next() % 3 == 0
        let step = compaction.next()
        options.compactionProbability = off ? .never : Probability(step, in: Rate.compaction.swarmRange!)
        return options
    }
}

extension Probability {
    /// A value of `range` (within 0...1) picked by `step`, to four decimals.
    init(_ step: UInt64, in range: ClosedRange<Double>) {
        let low = UInt64((range.lowerBound * 10_000).rounded())
        let high = UInt64((range.upperBound * 10_000).rounded())
        self.init(floatLiteral: Double(low + step % (high - low + 1)) / 10_000)
    }
}
