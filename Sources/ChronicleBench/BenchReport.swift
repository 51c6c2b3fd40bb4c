import ChronicleCore
import Foundation

/// The results of a scenario run: the target table as markdown and JSON,
/// and the block `--write-docs` keeps in a markdown file.
package struct BenchReport: Sendable {
    /// The rows, in the order the scenarios ran.
    package var targets: [MacroBench.Target]
    /// The run's scale.
    package var scale: Double
    /// The run's length, in seconds.
    package var seconds: Double

    package init(targets: [MacroBench.Target], scale: Double, seconds: Double) {
        self.targets = targets
        self.scale = scale
        self.seconds = seconds
    }

    /// The target table, in markdown.
    package var table: String {
        var table = "| target | measured | limit | verdict |\n|---|---|---|---|\n"
        for t in targets {
            let measured = t.measured.isNaN ? "—" : String(format: "%.3g", t.measured)
            let limit = t.limit.isInfinite ? "—" : (t.lowerIsBetter ? "≤ " : "≥ ") + String(format: "%.3g", t.limit)
            table += "| \(t.name) | \(measured) | \(limit) | \(t.verdict) |\n"
        }
        return table
    }

    /// Every row's figures, one markdown list item each.
    package var details: String { targets.map { "- \($0.name): \($0.detail)" }.joined(separator: "\n") }

    /// The rows as JSON: target, measured (null when not measured), limit
    /// (null for a row that only informs), verdict and detail.
    package var json: JSONValue {
        .array(targets.map { t in
            .object(["target": .string(t.name), "measured": t.measured.isNaN ? .null : .double(t.measured),
                     "limit": t.limit.isInfinite ? .null : .double(t.limit), "verdict": .string(t.verdict), "detail": .string(t.detail)])
        })
    }

    static let begin = "<!-- scenarios:begin -->", end = "<!-- scenarios:end -->"

    /// `document` with the block between its scenario markers replaced by
    /// this run's (or, with no markers, the block added at its end).
    package func written(into document: String, date: Date = Date()) -> String {
        var doc = document
        let machine = "\(ProcessInfo.processInfo.activeProcessorCount) cores, \(ProcessInfo.processInfo.physicalMemory >> 30) GiB"
        let block = "\(Self.begin)\nCommand: `chronicle bench --scale \(scale)` (release build), \(machine), run of \(ISO8601DateFormatter().string(from: date)), \(String(format: "%.0f", seconds)) s.\n\n\(table)\n\(details)\n\(Self.end)"
        if let r1 = doc.range(of: Self.begin), let r2 = doc.range(of: Self.end), r1.upperBound <= r2.lowerBound {
            doc.replaceSubrange(r1.lowerBound..<r2.upperBound, with: block)
        } else {
            doc += "\n" + block + "\n"
        }
        return doc
    }
}
