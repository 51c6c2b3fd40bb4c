import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB

/// Rates, operation weights and a visibility delay given by hand, which
/// replace the defaults or, with `--swarm`, what the seed drew.
///
/// ```swift
/// let overrides = try SimulationOverrides(rates: ["crash=0.2,wipe=0"], weights: ["rename-folder=10"], maxDelay: "1s")
/// var options = SimulationOptions.swarm(seed: 7)
/// overrides.apply(to: &options)
/// ```
package struct SimulationOverrides: Sendable, Hashable {
    /// Rates to set.
    package var rates: [SimulationOptions.Rate: Probability] = [:]
    /// Operation weights to set, by operation name.
    package var weights: [String: Int] = [:]
    /// The visibility delay to set.
    package var maxVisibilityDelay: Duration?

    /// No overrides.
    package init() {}

    /// Parses overrides as the command line gives them: `kind=probability`
    /// items, `operation=weight` items (each string may hold several,
    /// separated by commas), and a delay such as `400ms`, `2s` or `0`.
    ///
    /// - Throws: ``ChronicleError/Code/invalidValue`` naming the item that is
    ///   not understood: an unknown kind or operation, a probability outside
    ///   0...1, a negative weight, a malformed delay.
    package init(rates: [String] = [], weights: [String] = [], maxDelay: String? = nil) throws(ChronicleError) {
        for (key, value) in try Self.items(rates, what: "rate") {
            guard let rate = SimulationOptions.Rate(rawValue: key) else {
                throw ChronicleError(.invalidValue, "no rate named \(key) (there are \(SimulationOptions.Rate.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            self.rates[rate] = try Probability(parsing: value)
        }
        for (key, value) in try Self.items(weights, what: "weight") {
            guard SimulationOptions.operationNames.contains(key) else {
                throw ChronicleError(.invalidValue, "no workload operation named \(key) (there are \(SimulationOptions.operationNames.joined(separator: ", ")))")
            }
            guard let weight = Int(value), weight >= 0, weight <= 1_000_000 else {
                throw ChronicleError(.invalidValue, "a weight is a whole number from 0 to 1000000, not \"\(value)\" for \(key)")
            }
            self.weights[key] = weight
        }
        maxVisibilityDelay = try maxDelay.map(Self.duration(parsing:))
    }

    /// Splits `key=value` items, several to a string when separated by commas.
    private static func items(_ texts: [String], what: String) throws(ChronicleError) -> [(String, String)] {
        var result: [(String, String)] = []
        for item in texts.flatMap({ $0.split(separator: ",") }) {
            let parts = item.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, !parts[0].isEmpty else {
                throw ChronicleError(.invalidValue, "a \(what) is given as name=value, not \"\(item)\"")
            }
            result.append((parts[0], parts[1]))
        }
        return result
    }

    /// Parses a duration: a whole number of milliseconds (`400ms`) or
    /// seconds (`2s`), or `0`.
    ///
    /// - Throws: ``ChronicleError/Code/invalidValue`` for anything else.
    package static func duration(parsing text: String) throws(ChronicleError) -> Duration {
        let text = text.trimmingCharacters(in: .whitespaces)
        if text == "0" { return .zero }
        if text.hasSuffix("ms"), let n = Int64(text.dropLast(2)), n >= 0 { return .milliseconds(n) }
        if text.hasSuffix("s"), let n = Int64(text.dropLast(1)), n >= 0 { return .seconds(n) }
        throw ChronicleError(.invalidValue, "a duration is a whole number of milliseconds or seconds such as 400ms or 2s, not \"\(text)\"")
    }

    /// Whether nothing is overridden.
    package var isEmpty: Bool { rates.isEmpty && weights.isEmpty && maxVisibilityDelay == nil }

    /// Sets what is overridden in `options`.
    package func apply(to options: inout SimulationOptions) {
        for (rate, probability) in rates { options[rate] = probability }
        for (name, weight) in weights { options.operationWeights[name] = weight }
        if let maxVisibilityDelay { options.container.maxVisibilityDelay = maxVisibilityDelay }
    }

    /// The command-line arguments that give these overrides back, in a fixed order.
    package var arguments: [String] {
        var result: [String] = []
        let rateItems = SimulationOptions.Rate.allCases.compactMap { rate in rates[rate].map { "\(rate.rawValue)=\($0)" } }
        if !rateItems.isEmpty { result += ["--rate", rateItems.joined(separator: ",")] }
        let weightItems = SimulationOptions.operationNames.compactMap { name in weights[name].map { "\(name)=\($0)" } }
        if !weightItems.isEmpty { result += ["--weight", weightItems.joined(separator: ",")] }
        if let maxVisibilityDelay { result += ["--max-delay", "\(maxVisibilityDelay.wholeMilliseconds)ms"] }
        return result
    }
}
