import ChronicleCore
import Foundation
import Testing

/// Every damaged input gives the right typed error, never a crash.
@Suite struct CorruptionTests {
    static func golden(_ name: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: GoldenTests.fixtures.appendingPathComponent("\(name).chlog")))
    }

    static let decoder = LogDecoder(schema: Samples.library, dictionaries: [GoldenTests.dictionary])

    @Test(arguments: ["transactions-v1", "delete-raw-v1", "dictionary-v1", "baseline-v1"])
    func truncationAtEveryOffset(name: String) throws {
        let bytes = try Self.golden(name)
        for length in 0..<bytes.count {
            expectError(.shortRead) { _ = try Self.decoder.decode(Array(bytes[0..<length])) }
        }
        _ = try Self.decoder.decode(bytes)
    }

    @Test func trailingBytesAreRefused() throws {
        let bytes = try Self.golden("transactions-v1")
        expectError(.malformedBody) { _ = try Self.decoder.decode(bytes + [0]) }
    }

    /// Flipping any bit of the header: the magic gives badMagic, the version
    /// unsupportedVersion, anything else the header checksum.
    @Test(arguments: ["transactions-v1", "baseline-v1"])
    func everyHeaderBitFlip(name: String) throws {
        let bytes = try Self.golden(name)
        for offset in 0..<LogHeader.size {
            for bit in 0..<8 {
                var damaged = bytes
                damaged[offset] ^= 1 << bit
                let expected: ChronicleError.Code = switch offset {
                case 0..<4: .badMagic
                case 4..<6: .unsupportedVersion
                default: .headerChecksumMismatch
                }
                expectError(expected) { _ = try Self.decoder.decode(damaged) }
            }
        }
    }

    @Test(arguments: ["transactions-v1", "delete-raw-v1", "dictionary-v1", "baseline-v1"])
    func everyBodyBitFlipFailsTheBodyChecksum(name: String) throws {
        let bytes = try Self.golden(name)
        for offset in LogHeader.size..<bytes.count {
            var damaged = bytes
            damaged[offset] ^= UInt8(1 << (offset % 8))
            expectError(.bodyChecksumMismatch) { _ = try Self.decoder.decode(damaged) }
        }
    }

    /// A forged header with a correct checksum still cannot make the decoder
    /// allocate past the cap or read past the end.
    @Test func declaredSizeOverTheCapIsRefusedBeforeAllocating() throws {
        var header = try Self.decoder.header(of: try Self.golden("transactions-v1"))
        header.bodyLength = UInt32.max
        let forged = header.encoded()
        let small = LogDecoder(schema: Samples.library, limits: DecodingLimits(maxBodyBytes: 1024))
        expectError(.sizeOverCap) { _ = try small.decode(forged) }
        expectError(.sizeOverCap) { _ = try Self.decoder.decode(forged) }
    }

    /// Valid framing around a hostile body: every structural problem is a
    /// typed error.
    @Test func forgedBodiesGiveTypedErrors() throws {
        func forge(_ body: [UInt8], count: UInt32 = 1) -> [UInt8] {
            let header = LogHeader(kind: .transactions, flags: [], storeID: Samples.store, deviceID: Samples.device,
                                   firstSequence: 1, lastSequence: UInt64(count), minClock: .zero, maxClock: HybridTimestamp(milliseconds: HybridTimestamp.maxMilliseconds, counter: .max),
                                   schemaHash: Samples.library.hash, count: count, dictionaryID: 0,
                                   storedBodyLength: UInt32(body.count), bodyLength: UInt32(body.count),
                                   bodyChecksum: XXH64.hash(body))
            return header.encoded() + body
        }
        let clock: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 1]
        let id = [UInt8](repeating: 0xAB, count: 16)
        // sequence 1, clock, 1 op: insert "Nope"
        expectError(.unknownEntity) { _ = try Self.decoder.decode(forge([1] + clock + [1, 1, 4] + Array("Nope".utf8) + id + [0])) }
        // insert Book with field "nope"
        expectError(.unknownAttribute) {
            _ = try Self.decoder.decode(forge([1] + clock + [1, 1, 4] + Array("Book".utf8) + id + [1, 4] + Array("nope".utf8) + [0]))
        }
        // field "title" with an int value
        expectError(.malformedBody) {
            _ = try Self.decoder.decode(forge([1] + clock + [1, 1, 4] + Array("Book".utf8) + id + [1, 5] + Array("title".utf8) + [2, 2]))
        }
        // unknown value tag
        expectError(.malformedBody) {
            _ = try Self.decoder.decode(forge([1] + clock + [1, 1, 4] + Array("Book".utf8) + id + [1, 5] + Array("title".utf8) + [99]))
        }
        // unknown operation kind
        expectError(.malformedBody) { _ = try Self.decoder.decode(forge([1] + clock + [1, 9])) }
        // wrong sequence
        expectError(.malformedBody) { _ = try Self.decoder.decode(forge([2] + clock + [0])) }
        // operation count larger than the body
        expectError(.malformedBody) { _ = try Self.decoder.decode(forge([1] + clock + [0xFF, 0xFF, 0x03])) }
        // string length running past the end
        expectError(.malformedBody) { _ = try Self.decoder.decode(forge([1] + clock + [1, 1, 0x7F, 0x41])) }
        // overlong varint
        expectError(.malformedBody) { _ = try Self.decoder.decode(forge([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01])) }
        // invalid UTF-8 in a string value
        expectError(.malformedBody) {
            _ = try Self.decoder.decode(forge([1] + clock + [1, 1, 4] + Array("Book".utf8) + id + [1, 5] + Array("title".utf8) + [1, 2, 0xC3, 0x28]))
        }
        // a delete carrying values
        expectError(.malformedBody) {
            _ = try Self.decoder.decode(forge([1] + clock + [1, 3, 4] + Array("Book".utf8) + id + [1, 5] + Array("title".utf8) + [0]))
        }
        // bytes after the last transaction
        expectError(.malformedBody) { _ = try Self.decoder.decode(forge([1] + clock + [0, 0])) }
        // a compressed body that is not LZ4
        var header = try Self.decoder.header(of: forge([1] + clock + [0]))
        let junk: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
        header.flags = .lz4
        header.bodyLength = 100
        header.storedBodyLength = UInt32(junk.count)
        header.bodyChecksum = XXH64.hash(junk)
        expectError(.decompressionFailed) { _ = try Self.decoder.decode(header.encoded() + junk) }
    }

    @Test func randomGarbageNeverCrashes() {
        var rng = SeededRandom(seed: 0xBAD)
        var codes: [String: Int] = [:]
        for i in 0..<5_000 {
            let length = Int(rng.next() % 400)
            var bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            if i % 2 == 0 && length >= 4 { bytes.replaceSubrange(0..<4, with: LogHeader.magic) }
            do {
                _ = try Self.decoder.decode(bytes)
                Issue.record("garbage decoded as a valid log")
            } catch {
                codes[error.code.name, default: 0] += 1
            }
        }
        #expect(codes["badMagic", default: 0] > 0)
    }

    /// Random damage anywhere in real logs: a typed error, never a crash or a
    /// partly decoded log.
    @Test func randomMutationsOfRealLogs() throws {
        var rng = SeededRandom(seed: 0xF00D)
        let originals = try ["transactions-v1", "dictionary-v1", "baseline-v1"].map(Self.golden)
        for _ in 0..<3_000 {
            var bytes = originals[Int(rng.next() % 3)]
            for _ in 0..<(1 + rng.next() % 4) {
                bytes[Int(rng.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: rng.next())
            }
            if bytes == originals[0] || bytes == originals[1] || bytes == originals[2] { continue }
            #expect(throws: ChronicleError.self) { _ = try Self.decoder.decode(bytes) }
        }
    }
}
