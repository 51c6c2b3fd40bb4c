import ArgumentParser
import CLZ4
import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB

struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure Chronicle against its baselines, side by side in one run (build with -c release).",
        subcommands: [ScenarioBench.self, CodecBench.self, FetchBench.self, PostgresBench.self],
        defaultSubcommand: ScenarioBench.self)
}

/// The macro scenarios, each against its baseline, with the targets.
struct ScenarioBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scenarios",
        abstract: "Save, replay, cold start, bytes, scaling, convergence, memory and bulk import, against plain SQLite and the targets.",
        discussion: "Exit status 0 whether targets are met or not; each is reported as met or missed with its ratio.")

    @Option(help: "Scale every scenario's size (1 = the sizes of the benchmark issue; more than 0, at most 100).")
    var scale: Double = 1

    @Option(help: "Run only these scenarios: save, replay (with the cold start from a baseline and memory), realistic (replay of notes, folders and comments with unique keys, references and cascades), bytes, scaling, history (unique-key inserts and save+upload after a long history), convergence, import (a bulk import with a UI reading beside it).")
    var only: [String] = []

    @Option(help: "Write the results into this markdown file, between its scenario markers.")
    var writeDocs: String?

    @OptionGroup var output: OutputOptions

    static let scenarios = ["save", "replay", "realistic", "bytes", "scaling", "history", "convergence", "import"]

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
            let bench = MacroBench(scale: scale, directory: directory) { line in
                if !quiet { FileHandle.standardError.write(Data((line + "\n").utf8)) }
            }
            let clock = ContinuousClock()
            let start = clock.now
            let chosen = only.isEmpty ? Self.scenarios : only
            var targets: [MacroBench.Target] = []
            for name in chosen {
                switch name {
                case "save": targets += try await bench.save()
                case "replay": targets += try await bench.replay()
                case "realistic": targets += try await bench.realisticReplay()
                case "history": targets += try await bench.history()
                case "bytes": targets += try bench.bytes()
                case "scaling": targets += try await bench.scaling()
                case "convergence": targets += try await bench.convergence()
                case "import": targets += try await bench.importFeed()
                default: throw ValidationError("unknown scenario \(name)")
                }
            }
            let seconds = (clock.now - start) / .seconds(1)
            func verdict(_ t: MacroBench.Target) -> String {
                t.measured.isNaN ? "not measured" : t.limit.isInfinite ? "info" : t.met ? "met" : "MISSED"
            }
            var table = "| target | measured | limit | verdict |\n|---|---|---|---|\n"
            for t in targets {
                let measured = t.measured.isNaN ? "—" : String(format: "%.3g", t.measured)
                let limit = t.limit.isInfinite ? "—" : (t.lowerIsBetter ? "≤ " : "≥ ") + String(format: "%.3g", t.limit)
                table += "| \(t.name) | \(measured) | \(limit) | \(verdict(t)) |\n"
            }
            let details = targets.map { "- \($0.name): \($0.detail)" }.joined(separator: "\n")
            if let writeDocs {
                let path = URL(fileURLWithPath: writeDocs)
                var doc = existingDoc ?? ""
                let begin = "<!-- scenarios:begin -->", end = "<!-- scenarios:end -->"
                let machine = "\(ProcessInfo.processInfo.activeProcessorCount) cores, \(ProcessInfo.processInfo.physicalMemory >> 30) GiB"
                let block = "\(begin)\nCommand: `chronicle bench --scale \(scale)` (release build), \(machine), run of \(ISO8601DateFormatter().string(from: Date())), \(String(format: "%.0f", seconds)) s.\n\n\(table)\n\(details)\n\(end)"
                if let r1 = doc.range(of: begin), let r2 = doc.range(of: end) {
                    doc.replaceSubrange(r1.lowerBound..<r2.upperBound, with: block)
                } else {
                    doc += "\n" + block + "\n"
                }
                try doc.write(to: path, atomically: true, encoding: .utf8)
            }
            output.print(.array(targets.map { t in
                .object(["target": .string(t.name), "measured": t.measured.isNaN ? .null : .double(t.measured),
                         "limit": t.limit.isInfinite ? .null : .double(t.limit), "verdict": .string(verdict(t)), "detail": .string(t.detail)])
            }), text: table + String(format: "\n(%.0f s in all)", seconds))
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
    var workload: [Workload] = [.notes, .items]

    enum Workload: String, ExpressibleByArgument, CaseIterable {
        case notes, items

        var schema: Schema { self == .notes ? CodecBench.schema : MacroBench.schema }

        func transaction(changes: Int) -> Transaction {
            switch self {
            case .notes: return CodecBench.transaction(changes: changes)
            case .items:
                return MacroBench.transaction(MacroBench.rows(changes, seed: 1), device: DeviceID(index: 1), sequence: 1,
                                              milliseconds: 1_700_000_000_000)
            }
        }
    }

    @OptionGroup var output: OutputOptions

    func validate() throws {
        if let bad = changes.first(where: { !(1...100_000).contains($0) }) { throw ValidationError("--changes takes 1 to 100000, not \(bad)") }
        guard seconds.isFinite, seconds > 0, seconds <= 3600 else { throw ValidationError("--seconds takes a number more than 0 and at most 3600, not \(seconds)") }
        guard (1...1000).contains(rounds) else { throw ValidationError("--rounds takes 1 to 1000, not \(rounds)") }
        if let only, !["encode", "walk", "decode"].contains(only) { throw ValidationError("--only takes encode, walk or decode") }
    }

    static let schema = try! Schema(version: 1, entities: [
        Entity("Note", attributes: [
            Attribute("title", .string), Attribute("body", .string), Attribute("views", .int64),
            Attribute("score", .double), Attribute("created", .date), Attribute("pinned", .bool),
        ]),
    ])

    static let words = ["sync", "store", "device", "log", "replay", "snapshot", "merge", "clock", "container", "baseline",
                        "the", "a", "of", "and", "to", "in", "is", "for", "on", "with"]

    /// Text-like notes: a title, a sentence of 8 to 23 words, counters, a date, a flag.
    static func transaction(changes count: Int) -> Transaction {
        var rng = SeededRandom(seed: 1)
        var ids = RecordIDGenerator(seed: 1)
        let changes = (0..<count).map { i -> Change in
            let body = (0..<(8 + Int(rng.next() % 16))).map { _ in words[Int(rng.next() % UInt64(words.count))] }.joined(separator: " ")
            return Change(.insert, entity: "Note", recordID: ids.next(milliseconds: 1_700_000_000_000 + UInt64(i)), values: [
                FieldValue("title", .string("Note \(i) about \(words[i % words.count])")), FieldValue("body", .string(body)),
                FieldValue("views", .int(Int64(rng.next() % 10_000))), FieldValue("score", .double(Double(rng.next() % 1000) / 10)),
                FieldValue("created", .date(Timestamp(microsecondsSinceEpoch: 1_700_000_000_000_000 + Int64(i) * 1_000_003))),
                FieldValue("pinned", .bool(rng.next() & 1 == 0)),
            ])
        }
        return Transaction(deviceID: DeviceID(index: 1), sequence: 1, clock: HybridTimestamp(milliseconds: 1_700_000_000_000, counter: 0),
                           schemaHash: schema.hash, changes: changes)
    }

    /// Runs `body` repeatedly for about `seconds`; returns bytes per second of `bytes` per call.
    func rate(bytes: Int, seconds: Double, _ body: () throws -> Void) rethrows -> Double {
        var iterations = 0
        let clock = ContinuousClock()
        let start = clock.now
        var elapsed = 0.0
        repeat {
            for _ in 0..<64 { try body() }
            iterations += 64
            elapsed = (clock.now - start) / .seconds(1)
        } while elapsed < seconds
        return Double(bytes * iterations) / elapsed
    }

    /// Measures every body in turn, `rounds` times, and returns each one's
    /// best rate (bytes per second of `bytes` per call).
    func bestRates(bytes: Int, _ bodies: [() throws -> Void]) throws -> [Double] {
        var best = [Double](repeating: 0, count: bodies.count)
        let rounds = max(1, self.rounds)
        for _ in 0..<rounds {
            for (i, body) in bodies.enumerated() {
                best[i] = max(best[i], try rate(bytes: bytes, seconds: seconds / Double(rounds), body))
            }
        }
        return best
    }

    func run() async throws {
        try await reportingErrors(output) { try measure() }
    }

    func measure() throws {
        let store = StoreID(RecordID(high: 1, low: 1))
        let encoder = LogEncoder(storeID: store)
        if let only {
            let workload = workload.first ?? .notes
            let decoder = LogDecoder(schema: workload.schema)
            let t = workload.transaction(changes: changes.last ?? 100)
            let log = try encoder.encode([t])
            let body = LogEncoder.body(of: t).count
            let r: Double
            switch only {
            case "encode": r = try rate(bytes: body, seconds: seconds) { _ = try encoder.encode([t]) }
            case "walk": r = try rate(bytes: body, seconds: seconds) { _ = try decoder.open(log) }
            case "decode": r = try rate(bytes: body, seconds: seconds) { _ = try decoder.decode(log) }
            default: throw ValidationError("--only takes encode, walk or decode")
            }
            output.print(.object(["path": .string(only), "workload": .string(workload.rawValue), "changes": .int(Int64(changes.last ?? 100)),
                                  "MBps": .double(r / 1e6)]),
                         text: String(format: "%@: %.0f MB/s", only, r / 1e6))
            return
        }
        var rows: [JSONValue] = []
        var text = "workload  changes  body B  ratio | encode MB/s  LZ4 comp MB/s  (x) | verify+walk MB/s  decode MB/s  LZ4 decomp MB/s  (walk x, decode x)\n"
        for (workload, n) in workload.flatMap({ w in changes.map { (w, $0) } }) {
            let decoder = LogDecoder(schema: workload.schema)
            let t = workload.transaction(changes: n)
            let body = LogEncoder.body(of: t)
            let log = try encoder.encode([t])
            let bound = Int(LZ4_compressBound(Int32(body.count)))
            var scratch = [UInt8](repeating: 0, count: max(bound, body.count))
            let compressed = body.withUnsafeBytes { s in scratch.withUnsafeMutableBytes { d in
                let n = LZ4_compress_default(s.baseAddress!.assumingMemoryBound(to: CChar.self), d.baseAddress!.assumingMemoryBound(to: CChar.self),
                                             Int32(body.count), Int32(bound))
                return Array(UnsafeRawBufferPointer(rebasing: d[0..<Int(n)]))
            } }
            let rates = try bestRates(bytes: body.count, [
                {
                    _ = body.withUnsafeBytes { s in scratch.withUnsafeMutableBytes { d in
                        LZ4_compress_default(s.baseAddress!.assumingMemoryBound(to: CChar.self), d.baseAddress!.assumingMemoryBound(to: CChar.self),
                                             Int32(body.count), Int32(bound)) } }
                },
                {
                    _ = compressed.withUnsafeBytes { s in scratch.withUnsafeMutableBytes { d in
                        LZ4_decompress_safe(s.baseAddress!.assumingMemoryBound(to: CChar.self), d.baseAddress!.assumingMemoryBound(to: CChar.self),
                                            Int32(s.count), Int32(body.count)) } }
                },
                { _ = try encoder.encode([t]) },
                { _ = try decoder.open(log) },
                { _ = try decoder.decode(log) },
            ])
            let (lz4Compress, lz4Decompress, encode, walk, decode) = (rates[0], rates[1], rates[2], rates[3], rates[4])
            let ratio = Double(body.count) / Double(log.count - LogHeader.size)
            func mb(_ v: Double) -> String { String(format: "%.0f", v / 1e6) }
            text += String(format: "%8@  %7d  %6d  %5.2f | %11@  %13@  (%.2f) | %16@  %11@  %15@  (%.2f, %.2f)\n",
                           workload.rawValue, n, body.count, ratio, mb(encode), mb(lz4Compress), encode / lz4Compress,
                           mb(walk), mb(decode), mb(lz4Decompress), walk / lz4Decompress, decode / lz4Decompress)
            rows.append(.object([
                "workload": .string(workload.rawValue), "changes": .int(Int64(n)), "bodyBytes": .int(Int64(body.count)), "compressionRatio": .double(ratio),
                "encodeMBps": .double(encode / 1e6), "lz4CompressMBps": .double(lz4Compress / 1e6),
                "verifyWalkMBps": .double(walk / 1e6), "decodeMBps": .double(decode / 1e6),
                "lz4DecompressMBps": .double(lz4Decompress / 1e6),
            ]))
        }
        output.print(.array(rows), text: text)
    }
}
