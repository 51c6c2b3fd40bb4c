// XXH64 from the system's libxxhash (what ChronicleCore uses) against the
// hand-written Swift implementation Chronicle carried before, on the same
// bytes, side by side: each round hashes the same blocks with both, in
// turns, and each side keeps its best round. Every block's two hashes are
// compared: a difference stops the run.
//
//   swift build -c release --package-path Benchmarks --product xxh64-comparison
//   Benchmarks/.build/release/xxh64-comparison [block bytes] [total MiB] [rounds]
import ChronicleCore
import Foundation

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
let blockBytes = arguments.count > 0 ? arguments[0] : 64 * 1024
let totalMiB = arguments.count > 1 ? arguments[1] : 256
let rounds = arguments.count > 2 ? arguments[2] : 5

// 4 MiB of varied bytes, hashed block by block from an offset that moves on,
// so blocks are not all aligned alike and stay in cache as a log would.
var generator = SeededRandom(seed: 42)
let pool = (0..<(4 << 20) / 8).flatMap { _ in withUnsafeBytes(of: generator.next()) { Array($0) } }
let blocks = max(1, (totalMiB << 20) / blockBytes)

func run(_ hash: (UnsafeRawBufferPointer) -> UInt64) -> (seconds: Double, digest: UInt64) {
    var digest: UInt64 = 0
    let start = ContinuousClock.now
    pool.withUnsafeBytes { raw in
        var offset = 0
        for _ in 0..<blocks {
            if offset + blockBytes > raw.count { offset = (offset + 13) % 61 }
            digest ^= hash(UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + blockBytes)]))
            offset += blockBytes + 1
        }
    }
    let elapsed = ContinuousClock.now - start
    return (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18, digest)
}

// Same hashes on every length up to two stripes past a block, every start.
for length in 0..<(min(blockBytes, 4096) + 64) {
    pool.withUnsafeBytes { raw in
        let slice = UnsafeRawBufferPointer(rebasing: raw[(length % 8)..<(length % 8 + length)])
        precondition(XXH64.hash(slice) == HandWrittenXXH64.hash(slice), "hashes differ at length \(length)")
        precondition(XXH64.hash(slice, seed: 0x9E37_79B9) == HandWrittenXXH64.hash(slice, seed: 0x9E37_79B9))
    }
}

var best = (library: Double.infinity, handWritten: Double.infinity)
for _ in 0..<rounds {
    let library = run { XXH64.hash($0) }
    let handWritten = run { HandWrittenXXH64.hash($0) }
    precondition(library.digest == handWritten.digest, "the two implementations disagree")
    best = (min(best.library, library.seconds), min(best.handWritten, handWritten.seconds))
}
let mib = Double(blocks * blockBytes) / Double(1 << 20)
func rate(_ seconds: Double) -> String { String(format: "%.0f", mib / seconds) }
print("XXH64 of \(blocks) blocks of \(blockBytes) bytes (\(Int(mib)) MiB), best of \(rounds) rounds")
print("libxxhash    \(rate(best.library)) MiB/s")
print("hand-written \(rate(best.handWritten)) MiB/s")
print(String(format: "libxxhash / hand-written: %.2f", best.handWritten / best.library))
