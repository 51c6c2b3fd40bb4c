import ArgumentParser
import ChronicleBench
import ChronicleCore
import Foundation

struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure Chronicle against its baselines, side by side in one run (build with -c release).",
        subcommands: [ScenarioBench.self, CodecBench.self, FetchBench.self, PostgresBench.self, ReplayChild.self],
        defaultSubcommand: ScenarioBench.self)
}

/// The large-store scenario's replay, run in a process of its own so that
/// its peak memory is the replay's alone; not for use by hand.
struct ReplayChild: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay-child",
        abstract: "Replay a realistic benchmark container in this process and print a JSON report (run by `bench scenarios --only large`).",
        shouldDisplay: false)

    @Option(help: "The container folder.")
    var container: String

    @Option(help: "The folder the device's folder goes in.")
    var dir: String

    @Option(help: "The device's number.")
    var device: UInt64

    func run() async throws {
        try await reportingErrors(nil) {
            let report = try await MacroBench.replayHere(container: URL(fileURLWithPath: container), dir: URL(fileURLWithPath: dir), device: device)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: try encoder.encode(report), as: UTF8.self))
        }
    }
}

/// The macro scenarios, each against its baseline, with the targets.
struct ScenarioBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scenarios",
        abstract: "Save, replay, cold start, bytes, scaling, convergence, memory and bulk import, against plain SQLite and the targets.",
        discussion: "Exit status 0 whether targets are met or not; each is reported as met or missed with its ratio.")

    @Option(help: "Scale every scenario's size (1 = the sizes docs/benchmarks.md reports; more than 0, at most 100).")
    var scale: Double = 1

    @Option(help: "Run only these scenarios: save, replay (with the cold start from a baseline and memory), realistic (replay of notes, folders and comments with unique keys, references and cascades), bytes, scaling, history (unique-key inserts and save+upload after a long history), convergence, import (a bulk import with a UI reading beside it), compaction (container bytes over a long run with baselines and compactions), large (the realistic replay at ten million records, and a sync into a snapshot that holds them: takes about ten minutes at scale 1).")
    var only: [String] = []

    @Option(help: "Write the results into this markdown file, between its scenario markers.")
    var writeDocs: String?

    @OptionGroup var output: OutputOptions

    static let scenarios = MacroBench.scenarios

    /// The text of the markdown file at `path` (empty if there is none yet):
    /// a file that cannot be read, or is not UTF-8, is refused rather than
    /// overwritten with the results alone.
    static func markdown(at path: String) throws(ChronicleError) -> String {
        let bytes: [UInt8]
        do {
            bytes = try InputFile.regularFileBytes(at: path, what: "markdown file", limit: InputFile.schemaByteLimit)
        } catch where error.code == .notFound {
            return ""
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ChronicleError(.malformedBody, "markdown file \(path) is not UTF-8 text: refusing to rewrite it")
        }
        return text
    }

    func validate() throws {
        guard scale.isFinite, scale > 0, scale <= 100 else { throw ValidationError("--scale takes a number more than 0 and at most 100, not \(scale)") }
        if let unknown = only.first(where: { !Self.scenarios.contains($0) }) {
            throw ValidationError("unknown scenario \(unknown) (--only takes \(Self.scenarios.joined(separator: ", ")))")
        }
    }

    func run() async throws {
        try await reportingErrors(output) {
            // Read first: a file that cannot be rewritten stops the run before it starts.
            let existingDoc = try writeDocs.map { path throws(ChronicleError) in try Self.markdown(at: path) }
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-bench-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            let quiet = output.json
            let bench = MacroBench(scale: scale, directory: directory, progress: { ProgressLine($0, unit: $1, total: $2) }) { line in
                if !quiet { StandardStreams.error(line + "\n") }
            }
            let clock = ContinuousClock()
            let start = clock.now
            var targets: [MacroBench.Target] = []
            for name in only.isEmpty ? Self.scenarios : only {
                targets += try await bench.run(name)
            }
            let report = BenchReport(targets: targets, scale: scale, seconds: (clock.now - start) / .seconds(1))
            if let writeDocs {
                try report.written(into: existingDoc ?? "").write(to: URL(fileURLWithPath: writeDocs), atomically: true, encoding: .utf8)
            }
            output.print(report.json, text: report.table + String(format: "\n(%.0f s in all)", report.seconds))
        }
    }
}

/// The log codec against LZ4 alone on the very same bodies.
struct CodecBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "codec",
        abstract: "Encode+compress and decompress+verify+decode throughput, with LZ4 alone as the baseline.")

    @Option(help: "Changes per transaction (1 to 100000).")
    var changes: [Int] = [1, 10, 100]

    @Option(help: "Seconds to spend on each measurement, over all rounds (more than 0, at most 3600).")
    var seconds: Double = 1.0

    @Option(help: "Rounds: the measurements of one size take turns this many times and each reports its best round, so a burst of load from elsewhere on the machine does not decide a ratio (1 to 1000).")
    var rounds: Int = 5

    @Option(help: "Profile one path only, in a loop: encode, walk or decode.")
    var only: String?

    @Option(help: "Bodies to measure: notes (text-heavy: a title and a sentence per record), items (the records the macro benchmarks save and replay: a short name, three numbers, a note on one in three), or both.")
    var workload: [CodecWorkload] = [.notes, .items]

    @OptionGroup var output: OutputOptions

    func validate() throws {
        if let bad = changes.first(where: { !(1...100_000).contains($0) }) { throw ValidationError("--changes takes 1 to 100000, not \(bad)") }
        guard seconds.isFinite, seconds > 0, seconds <= 3600 else { throw ValidationError("--seconds takes a number more than 0 and at most 3600, not \(seconds)") }
        guard (1...1000).contains(rounds) else { throw ValidationError("--rounds takes 1 to 1000, not \(rounds)") }
        if let only, !CodecScenario.paths.contains(only) { throw ValidationError("--only takes encode, walk or decode") }
    }

    func run() async throws {
        try await reportingErrors(output) {
            let scenario = CodecScenario(changes: changes, seconds: seconds, rounds: rounds, workloads: workload)
            if let only {
                let r = try scenario.profile(only)
                output.print(.object(["path": .string(only), "workload": .string(r.workload.rawValue), "changes": .int(Int64(r.changes)),
                                      "MBps": .double(r.bytesPerSecond / 1e6)]),
                             text: String(format: "%@: %.0f MB/s", only, r.bytesPerSecond / 1e6))
            } else {
                let (text, rows) = try scenario.measure()
                output.print(.array(rows), text: text)
            }
        }
    }
}

extension CodecWorkload: ExpressibleByArgument {}

extension ProgressLine: BenchProgress {
    func advance(to done: Int) { update(done) }
}
