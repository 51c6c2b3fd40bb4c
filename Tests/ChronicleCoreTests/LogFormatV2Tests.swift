import ChronicleCore
import Foundation
import Testing

/// Format version 2, the compact header of the logs devices upload: its
/// size, what it leaves to the log's name, and every damage a typed error.
@Suite struct LogFormatV2Tests {
    static let decoder = CorruptionTests.decoder
    static let names = ["transactions-v2", "delete-raw-v2", "dictionary-v2"]

    static func golden(_ name: String) throws -> (bytes: [UInt8], location: LogLocation) {
        (try CorruptionTests.golden(name), try #require(GoldenTests.location(of: name)))
    }

    static func insert(sequence: UInt64, _ title: String, milliseconds: UInt64 = 1_700_000_000_000) -> Transaction {
        Transaction(deviceID: Samples.device, sequence: sequence, clock: HybridTimestamp(milliseconds: milliseconds, counter: 0),
                    schemaHash: Samples.library.hash, changes: [
            Change(.insert, entity: "Book", recordID: RecordID(high: 0x018B_CFE5_6800_7000 + sequence, low: 0x8000_0000_0000_0001),
                   values: [FieldValue("title", .string(title)), FieldValue("pages", .int(Int64(sequence)))]),
        ])
    }

    static func location(_ first: UInt64, _ last: UInt64, device: DeviceID = Samples.device, store: StoreID = Samples.store) -> LogLocation {
        LogLocation(storeID: store, deviceID: device, firstSequence: first, lastSequence: last)
    }

    @Test func aOneTransactionLogWithADictionaryHasATwentyThreeByteHeader() throws {
        let bytes = try LogEncoder(storeID: Samples.store, dictionary: GoldenTests.dictionary, version: 2)
            .encode([Self.insert(sequence: 5, "The Left Hand of Darkness")])
        let header = try Self.decoder.header(of: bytes, at: Self.location(5, 5))
        #expect(header.flags == [.lz4, .dictionary])
        #expect(header.headerLength == 23)
        #expect(bytes.count == 23 + Int(header.storedBodyLength))
        let v1 = try LogEncoder(storeID: Samples.store, dictionary: GoldenTests.dictionary).encode([Self.insert(sequence: 5, "The Left Hand of Darkness")])
        #expect(v1.count - bytes.count >= LogHeader.size - 23)
    }

    /// Encoding and decoding in version 2 gives the same transactions as
    /// version 1, for single logs and groups, raw, compressed, or against
    /// a dictionary.
    @Test(arguments: [1, 2, 7]) func roundTripsLikeVersionOne(count: Int) throws {
        let transactions = (1...count).map { Self.insert(sequence: UInt64(9 + $0), String(repeating: "title \($0) ", count: $0),
                                                         milliseconds: 1_700_000_000_000 + UInt64($0 * $0)) }
        let location = Self.location(10, UInt64(9 + count))
        for encoder in [LogEncoder(storeID: Samples.store, version: 2), LogEncoder(storeID: Samples.store, compresses: false, version: 2),
                        LogEncoder(storeID: Samples.store, dictionary: GoldenTests.dictionary, version: 2)] {
            let bytes = try encoder.encode(transactions)
            guard case .transactions(let header, let decoded) = try Self.decoder.decode(bytes, at: location) else {
                Issue.record("not a transactions log")
                return
            }
            #expect(decoded == transactions)
            #expect(header.version == 2 && header.storeID == Samples.store && header.deviceID == Samples.device)
            #expect(header.firstSequence == 10 && header.lastSequence == UInt64(9 + count) && header.count == UInt32(count))
            #expect(header.minClock == transactions.map(\.clock).min() && header.maxClock == transactions.map(\.clock).max())
            let opened = try Self.decoder.open(bytes, at: location)
            #expect(try opened.transactions() == transactions)
            #expect(opened.header.maxClock == header.maxClock)
        }
    }

    /// One transaction's clock is in its body only: the header alone reads
    /// it as 0 and says so; opening the log fills it in.
    @Test func aSingleTransactionsClockComesFromItsBody() throws {
        let t = Self.insert(sequence: 3, "Always Coming Home", milliseconds: 1_750_000_000_123)
        let bytes = try LogEncoder(storeID: Samples.store, version: 2).encode([t])
        let header = try Self.decoder.header(of: bytes, at: Self.location(3, 3))
        #expect(header.clockInBody && header.maxClock == .zero)
        #expect(try Self.decoder.open(bytes, at: Self.location(3, 3)).header.maxClock == t.clock)
        // A group keeps its range in the header.
        let group = try LogEncoder(storeID: Samples.store, version: 2).encode([t, Self.insert(sequence: 4, "x", milliseconds: 1_750_000_000_200)])
        let groupHeader = try Self.decoder.header(of: group, at: Self.location(3, 4))
        #expect(!groupHeader.clockInBody && groupHeader.minClock == t.clock && groupHeader.maxClock.milliseconds == 1_750_000_000_200)
    }

    @Test func withoutItsNameAVersionTwoLogIsRefused() throws {
        for name in Self.names {
            let (bytes, _) = try Self.golden(name)
            expectError(.invalidValue) { _ = try Self.decoder.decode(bytes) }
            expectError(.invalidValue) { _ = try Self.decoder.header(of: bytes) }
        }
    }

    /// A log under a name it was not written under (another store, device
    /// or sequence range) fails its header check: it is never read as
    /// someone else's saves.
    @Test func aLogUnderAnotherNameFailsItsHeaderCheck() throws {
        for name in Self.names {
            let (bytes, at) = try Self.golden(name)
            _ = try Self.decoder.decode(bytes, at: at)
            let others = [
                Self.location(at.firstSequence, at.lastSequence, device: DeviceID(index: 2)),
                Self.location(at.firstSequence, at.lastSequence, store: StoreID(RecordID(high: 1, low: 2))),
                Self.location(at.firstSequence + 1, at.lastSequence + 1),
                Self.location(at.firstSequence, at.lastSequence + 1),
            ]
            for other in others {
                expectError(.headerChecksumMismatch) { _ = try Self.decoder.decode(bytes, at: other) }
            }
        }
    }

    /// Cut anywhere: a short header is a short read; a short body is a
    /// short read when stored raw, and fails the body checksum when
    /// compressed (a version 2 body is every byte after the header).
    @Test(arguments: ["transactions-v2", "delete-raw-v2", "dictionary-v2"])
    func truncationAtEveryOffset(name: String) throws {
        let (bytes, at) = try Self.golden(name)
        let header = try Self.decoder.header(of: bytes, at: at)
        for length in 0..<bytes.count {
            let expected: ChronicleError.Code = length < header.headerLength || !header.flags.contains(.lz4) ? .shortRead : .bodyChecksumMismatch
            expectError(expected) { _ = try Self.decoder.decode(Array(bytes[0..<length]), at: at) }
        }
    }

    @Test func trailingBytesFailTheBodyChecksum() throws {
        let (bytes, at) = try Self.golden("transactions-v2")
        expectError(.bodyChecksumMismatch) { _ = try Self.decoder.decode(bytes + [0], at: at) }
    }

    /// Any bit of the header: the magic and version give badMagic, an
    /// unknown codec flag unsupportedVersion, the body checksum field the
    /// body checksum, anything else the header check.
    @Test(arguments: ["transactions-v2", "delete-raw-v2", "dictionary-v2"])
    func everyHeaderBitFlip(name: String) throws {
        let (bytes, at) = try Self.golden(name)
        let length = try Self.decoder.header(of: bytes, at: at).headerLength
        for offset in 0..<length {
            for bit in 0..<8 {
                var damaged = bytes
                damaged[offset] ^= 1 << bit
                let expected: ChronicleError.Code = switch offset {
                case 0..<3: .badMagic
                case 3 where bit >= 3: .unsupportedVersion
                case (length - 4)...: .bodyChecksumMismatch
                default: .headerChecksumMismatch
                }
                expectError(expected) { _ = try Self.decoder.decode(damaged, at: at) }
            }
        }
    }

    @Test(arguments: ["transactions-v2", "delete-raw-v2", "dictionary-v2"])
    func everyBodyBitFlipFailsTheBodyChecksum(name: String) throws {
        let (bytes, at) = try Self.golden(name)
        let length = try Self.decoder.header(of: bytes, at: at).headerLength
        for offset in length..<bytes.count {
            var damaged = bytes
            damaged[offset] ^= UInt8(1 << (offset % 8))
            expectError(.bodyChecksumMismatch) { _ = try Self.decoder.decode(damaged, at: at) }
        }
    }

    /// A header with valid checks that declares a body over the cap is
    /// refused before anything is allocated.
    @Test func declaredSizeOverTheCapIsRefusedBeforeAllocating() throws {
        let (bytes, at) = try Self.golden("transactions-v2")
        var header = try Self.decoder.header(of: bytes, at: at)
        header.bodyLength = UInt32.max
        let stored = Array(bytes[header.headerLength...])
        let forged = stored.withUnsafeBytes { header.sealV2($0) }
        let small = LogDecoder(schema: Samples.library, limits: DecodingLimits(maxBodyBytes: 1024))
        expectError(.sizeOverCap) { _ = try small.decode(forged, at: at) }
        expectError(.sizeOverCap) { _ = try Self.decoder.decode(forged, at: at) }
    }

    /// The sealed flag (authenticated encryption, reserved) with its key ID
    /// and nonce: a well-formed header this build refuses by name.
    @Test func aSealedLogIsRefusedAsUnsupported() throws {
        let (bytes, at) = try Self.golden("delete-raw-v2")
        var header = try Self.decoder.header(of: bytes, at: at)
        header.flags.insert(.sealed)
        var prefix = header.prefixV2()
        prefix += [0x05] + [UInt8](repeating: 0x11, count: 12)  // key ID 5, nonce
        let seed = prefix.withUnsafeBytes { LogHeader.seedV2(at, prefix: $0) }
        var w = ByteWriter(capacity: 64)
        w.writeRaw(prefix)
        w.writeUInt16(UInt16(truncatingIfNeeded: seed))
        w.writeUInt32(0)
        let forged = w.bytes + bytes[header.headerLength...]
        let error = expectError(.unsupportedVersion) { _ = try Self.decoder.decode(forged, at: at) }
        #expect(error?.message.contains("sealed") == true)
    }

    /// A one-transaction log whose body's clock is past the year 4199 is
    /// refused, as a version 1 header with that clock is.
    @Test func aClockPastTheLimitInTheBodyIsRefused() throws {
        let late = Self.insert(sequence: 1, "late", milliseconds: HybridTimestamp.maxMilliseconds + 1)
        let bytes = try LogEncoder(storeID: Samples.store, version: 2).encode([late])
        expectError(.malformedBody) { _ = try Self.decoder.decode(bytes, at: Self.location(1, 1)) }
    }

    /// Random damage anywhere in real version 2 logs: a typed error, never a
    /// crash or a partly decoded log.
    @Test func randomMutationsOfRealLogs() throws {
        var rng = SeededRandom(seed: 0x0F2)
        let originals = try Self.names.map(Self.golden)
        for _ in 0..<3_000 {
            let pick = originals[Int(rng.next() % UInt64(originals.count))]
            var bytes = pick.bytes
            for _ in 0..<(1 + rng.next() % 4) {
                bytes[Int(rng.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: rng.next())
            }
            if bytes == pick.bytes { continue }
            #expect(throws: ChronicleError.self) { _ = try Self.decoder.decode(bytes, at: pick.location) }
        }
    }
}
