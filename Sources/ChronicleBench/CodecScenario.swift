import CLZ4
import ChronicleCore
import Foundation

/// The bodies the codec scenario measures.
package enum CodecWorkload: String, CaseIterable, Sendable {
    /// Text-heavy notes: a title and a sentence per record.
    case notes
    /// The records the macro scenarios save and replay: a short name, three numbers, a note on one in three.
    case items

    package var schema: Schema { self == .notes ? CodecScenario.schema : MacroBench.schema }

    package func transaction(changes: Int) -> Transaction {
        switch self {
        case .notes: return CodecScenario.transaction(changes: changes)
        case .items:
            return MacroBench.transaction(MacroBench.rows(changes, seed: 1), device: DeviceID(index: 1), sequence: 1,
                                          milliseconds: 1_700_000_000_000)
        }
    }
}

/// The log codec against LZ4 alone on the very same bodies: encode and
/// compress, verify and walk, decode, each in bytes of body per second.
package struct CodecScenario: Sendable {
    /// Changes per transaction, one measurement each.
    package var changes: [Int]
    /// Seconds to spend on each measurement, over all rounds.
    package var seconds: Double
    /// The measurements of one size take turns this many times; each reports its best round.
    package var rounds: Int
    /// The bodies to measure.
    package var workloads: [CodecWorkload]

    package init(changes: [Int], seconds: Double, rounds: Int, workloads: [CodecWorkload]) {
        self.changes = changes
        self.seconds = seconds
        self.rounds = rounds
        self.workloads = workloads
    }

    /// The paths `profile` can run alone.
    package static let paths = ["encode", "walk", "decode"]

    package static let schema = try! Schema(version: 1, entities: [
        Entity("Note", attributes: [
            Attribute("title", .string), Attribute("body", .string), Attribute("views", .int64),
            Attribute("score", .double), Attribute("created", .date), Attribute("pinned", .bool),
        ]),
    ])

    package static let words = ["sync", "store", "device", "log", "replay", "snapshot", "merge", "clock", "container", "baseline",
                        "the", "a", "of", "and", "to", "in", "is", "for", "on", "with"]

    /// Text-like notes: a title, a sentence of 8 to 23 words, counters, a date, a flag.
    package static func transaction(changes count: Int) -> Transaction {
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
    package func rate(bytes: Int, seconds: Double, _ body: () throws -> Void) rethrows -> Double {
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
    package func bestRates(bytes: Int, _ bodies: [() throws -> Void]) throws -> [Double] {
        var best = [Double](repeating: 0, count: bodies.count)
        let rounds = max(1, self.rounds)
        for _ in 0..<rounds {
            for (i, body) in bodies.enumerated() {
                best[i] = max(best[i], try rate(bytes: bytes, seconds: seconds / Double(rounds), body))
            }
        }
        return best
    }

    /// Runs one path alone in a loop (for a profiler) and returns its rate
    /// in bytes of body per second.
    package func profile(_ path: String) throws -> (workload: CodecWorkload, changes: Int, bytesPerSecond: Double) {
        let encoder = LogEncoder(storeID: StoreID(RecordID(high: 1, low: 1)))
        let workload = workloads.first ?? .notes
        let count = changes.last ?? 100
        let decoder = LogDecoder(schema: workload.schema)
        let t = workload.transaction(changes: count)
        let log = try encoder.encode([t])
        let body = LogEncoder.body(of: t).count
        switch path {
        case "encode": return (workload, count, try rate(bytes: body, seconds: seconds) { _ = try encoder.encode([t]) })
        case "walk": return (workload, count, try rate(bytes: body, seconds: seconds) { _ = try decoder.open(log) })
        case "decode": return (workload, count, try rate(bytes: body, seconds: seconds) { _ = try decoder.decode(log) })
        default: throw ChronicleError(.invalidValue, "the codec paths are \(Self.paths.joined(separator: ", ")), not \(path)")
        }
    }

    /// Measures every workload at every size: the table as text, and its rows as JSON.
    package func measure() throws -> (text: String, rows: [JSONValue]) {
        let store = StoreID(RecordID(high: 1, low: 1))
        let encoder = LogEncoder(storeID: store)
        var rows: [JSONValue] = []
        var text = "workload  changes  body B  ratio | encode MB/s  LZ4 comp MB/s  (x) | verify+walk MB/s  decode MB/s  LZ4 decomp MB/s  (walk x, decode x)\n"
        for (workload, n) in workloads.flatMap({ w in changes.map { (w, $0) } }) {
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
        return (text, rows)
    }
}
