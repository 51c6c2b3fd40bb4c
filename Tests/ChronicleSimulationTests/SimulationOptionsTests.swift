import Chronicle
import ChronicleContainer
import ChronicleCore
@testable import ChronicleSimulation
import ChronicleSnapshot
import Foundation
import GRDB
import Testing

@Suite struct SimulationOptionsTests {
    @Test(arguments: [-0.1, 1.0001, .nan, .infinity, -.infinity])
    func probabilitiesOutsideZeroToOneAreRefused(value: Double) {
        #expect(throws: ChronicleError.self) { try Probability(value) }
        do { _ = try Probability(value) } catch { #expect(error.code == .invalidValue) }
    }

    @Test func probabilitiesParseAndEncodeAsNumbers() throws {
        let zero = 0.0, one = 1.0
        #expect(try Probability(zero).isNever)
        #expect(try Probability(one) == .always)
        #expect(try Probability(parsing: " 0.25 ").value == 0.25)
        #expect(throws: ChronicleError.self) { try Probability(parsing: "a lot") }
        #expect(throws: ChronicleError.self) { try Probability(parsing: "") }
        let json = String(decoding: try JSONEncoder().encode([Probability(0.03)]), as: UTF8.self)
        #expect(json == "[0.03]")
        #expect(try JSONDecoder().decode([Probability].self, from: Data("[0.5]".utf8)) == [0.5])
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([Probability].self, from: Data("[1.5]".utf8)) }
    }

    /// A probability draws one number whatever its value, so later draws stay put.
    @Test func drawingTakesOneNumberWhateverTheProbability() {
        for p: Probability in [0, 0.5, 1] {
            var a = SeededRandom(seed: 3)
            var b = SeededRandom(seed: 3)
            _ = p.draw(&a)
            _ = b.next()
            #expect(a.next() == b.next())
        }
        var random = SeededRandom(seed: 3)
        #expect((0..<100).allSatisfy { _ in !Probability.never.draw(&random) && Probability.always.draw(&random) })
    }

    @Test func optionsRoundTripThroughJSON() throws {
        var options = SimulationOptions.swarm(seed: 5)
        options.container.maxVisibilityDelay = .milliseconds(250)
        let decoded = try JSONDecoder().decode(SimulationOptions.self, from: try JSONEncoder().encode(options))
        #expect(decoded == options)
    }

    @Test func calmTurnsEveryFaultOffAndKeepsTheWorkload() {
        let calm = SimulationOptions.calm
        #expect(SimulationOptions.Rate.allCases.filter(\.isFault).allSatisfy { calm[$0].isNever })
        #expect(calm.syncProbability == 0.25 && calm.baselineProbability == 0.03)
        #expect(calm.container.maxVisibilityDelay == .zero)
    }

    @Test func overridesParseRatesWeightsAndDelay() throws {
        let overrides = try SimulationOverrides(rates: ["crash=0.2, wipe=0", "lost-wal=1"], weights: ["rename-folder=10"], maxDelay: "2s")
        #expect(overrides.rates == [.crash: 0.2, .wipe: 0, .lostWAL: 1])
        #expect(overrides.weights == ["rename-folder": 10])
        #expect(overrides.maxVisibilityDelay == .seconds(2))
        var options = SimulationOptions()
        overrides.apply(to: &options)
        #expect(options.crashProbability == 0.2 && options.wipeProbability == .never && options.lostWALProbability == .always)
        #expect(options.operationWeights["rename-folder"] == 10 && options.operationWeights["insert-note"] == 28)
        #expect(options.container.maxVisibilityDelay == .seconds(2))
        // The arguments a reproducing command prints give the same overrides back.
        #expect(overrides.arguments == ["--rate", "crash=0.2,wipe=0,lost-wal=1", "--weight", "rename-folder=10", "--max-delay", "2000ms"])
        let again = try SimulationOverrides(rates: [overrides.arguments[1]], weights: [overrides.arguments[3]], maxDelay: overrides.arguments[5])
        #expect(again == overrides)
    }

    @Test(arguments: [
        (["nope=0.1"], [String](), nil as String?, "no rate named nope"),
        (["crash"], [], nil, "a rate is given as name=value"),
        (["=0.1"], [], nil, "a rate is given as name=value"),
        (["crash=1.5"], [], nil, "a probability is a number from 0 to 1"),
        ([], ["insert-nothing=3"], nil, "no workload operation named insert-nothing"),
        ([], ["insert-note=-1"], nil, "a weight is a whole number"),
        ([], ["insert-note=many"], nil, "a weight is a whole number"),
        ([], [], "5", "a duration is a whole number"),
        ([], [], "-5ms", "a duration is a whole number"),
        ([], [], "1.5s", "a duration is a whole number"),
    ])
    func badOverridesAreRefusedWithTheirReason(rates: [String], weights: [String], delay: String?, reason: String) {
        do {
            _ = try SimulationOverrides(rates: rates, weights: weights, maxDelay: delay)
            Issue.record("accepted \(rates) \(weights) \(delay ?? "")")
        } catch {
            #expect(error.code == .invalidValue)
            #expect(error.message.hasPrefix(reason), "\(error.message)")
        }
    }

    @Test func durationsParse() throws {
        #expect(try SimulationOverrides.duration(parsing: "0") == .zero)
        #expect(try SimulationOverrides.duration(parsing: "400ms") == .milliseconds(400))
        #expect(try SimulationOverrides.duration(parsing: "3s") == .seconds(3))
    }

    @Test func validationNamesWhatIsWrong() throws {
        try SimulationOptions().validate()
        var options = SimulationOptions()
        options.devices = 0
        #expect(throws: ChronicleError.self) { try options.validate() }
        options.devices = 65
        #expect(throws: ChronicleError.self) { try options.validate() }
        options = SimulationOptions()
        options.savesPerDevice = -1
        #expect(throws: ChronicleError.self) { try options.validate() }
        options = SimulationOptions()
        options.operationWeights = options.operationWeights.mapValues { _ in 0 }
        #expect(throws: ChronicleError.self) { try options.validate() }
        options = SimulationOptions()
        options.operationWeights["teleport"] = 1
        #expect(throws: ChronicleError.self) { try options.validate() }
        options = SimulationOptions()
        options.container.maxVisibilityDelay = .milliseconds(-1)
        #expect(throws: ChronicleError.self) { try options.validate() }
    }

    @Test func aRunWithInvalidOptionsThrowsBeforeItStarts() async {
        var options = SimulationOptions()
        options.devices = 0
        await #expect(throws: ChronicleError.self) { try await Simulation(seed: 1, options: options).run() }
    }
}
