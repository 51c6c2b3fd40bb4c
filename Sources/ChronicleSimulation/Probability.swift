import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB

/// A chance from 0 (never) to 1 (always), checked when it is made.
///
/// ```swift
/// var options = SimulationOptions()
/// options.crashProbability = 0.1                          // a literal (outside 0...1 traps)
/// options.wipeProbability = try Probability(rate / 100)   // a value, checked: throws outside 0...1
/// ```
///
/// Encodes as a bare number; decoding a number outside 0...1 fails.
package struct Probability: Sendable, Hashable, Comparable, Codable, CustomStringConvertible,
    ExpressibleByFloatLiteral, ExpressibleByIntegerLiteral
{
    /// The chance, from 0 to 1.
    package let value: Double

    /// A probability of `value`.
    ///
    /// - Throws: ``ChronicleError/Code/invalidValue`` unless `value` is in 0...1.
    package init(_ value: Double) throws(ChronicleError) {
        guard value.isFinite, value >= 0, value <= 1 else {
            throw ChronicleError(.invalidValue, "a probability is a number from 0 to 1, not \(value)")
        }
        self.value = value
    }

    /// Parses a decimal number from 0 to 1 ("0.03", "1", "0").
    ///
    /// - Throws: ``ChronicleError/Code/invalidValue`` for anything else.
    package init(parsing text: String) throws(ChronicleError) {
        guard let value = Double(text.trimmingCharacters(in: .whitespaces)) else {
            throw ChronicleError(.invalidValue, "a probability is a number from 0 to 1, not \"\(text)\"")
        }
        try self.init(value)
    }

    /// A literal probability; a literal outside 0...1 is a programming error.
    package init(floatLiteral value: Double) {
        precondition(value >= 0 && value <= 1, "a probability is a number from 0 to 1, not \(value)")
        self.value = value
    }

    /// 0 or 1.
    package init(integerLiteral value: Int) {
        precondition(value == 0 || value == 1, "a probability is a number from 0 to 1, not \(value)")
        self.value = Double(value)
    }

    /// The event never happens.
    package static let never: Probability = 0
    /// The event always happens.
    package static let always: Probability = 1

    /// Whether the event can happen at all.
    package var isNever: Bool { value == 0 }

    /// Whether the event happens this time. Draws exactly one number from
    /// `random` whatever the probability, so that a run's later draws stay
    /// where they were when a probability changes.
    package func draw(_ random: inout SeededRandom) -> Bool {
        Double(random.next() % 1_000_000) / 1_000_000 < value
    }

    package static func < (a: Probability, b: Probability) -> Bool { a.value < b.value }

    package var description: String { value == 0 ? "0" : value == 1 ? "1" : "\(value)" }

    package init(from decoder: any Decoder) throws {
        let value = try decoder.singleValueContainer().decode(Double.self)
        do {
            try self.init(value)
        } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.message, underlyingError: error))
        }
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(value)
    }
}
