import ChronicleCore
import Foundation
import Testing

@Suite struct LogCodecTests {
    @Test(arguments: 0..<40)
    func randomTransactionsRoundTrip(seed: UInt64) throws {
        var rng = SeededRandom(seed: seed)
        let schema = Samples.schema(&rng)
        let first = 1 + rng.next() % 1000
        let transactions = (0..<(1 + rng.next() % 5)).map {
            Samples.transaction(schema, sequence: first + $0, changes: Int(rng.next() % 30), &rng)
        }
        let useDictionary = seed % 3 == 0
        let dictionary = try CompressionDictionary(id: 3, bytes: Array(repeating: 0x41, count: 1024))
        let encoder = LogEncoder(storeID: Samples.store, dictionary: useDictionary ? dictionary : nil, compresses: seed % 5 != 0)
        let bytes = try encoder.encode(transactions)
        let decoded = try LogDecoder(schema: schema, dictionaries: [dictionary]).decode(bytes)
        guard case .transactions(let header, let back) = decoded else {
            Issue.record("expected transactions")
            return
        }
        #expect(back == transactions)
        #expect(header.firstSequence == first)
        #expect(header.count == UInt32(transactions.count))
        // Without a schema the same log decodes to the same transactions.
        guard case .transactions(_, let schemaless) = try LogDecoder(schema: nil, dictionaries: [dictionary]).decode(bytes) else {
            Issue.record("expected transactions")
            return
        }
        #expect(schemaless == transactions)
    }

    @Test(arguments: 0..<10)
    func randomBaselinesRoundTrip(seed: UInt64) throws {
        var rng = SeededRandom(seed: seed &+ 1000)
        let schema = Samples.schema(&rng)
        let devices = (1...3).map { DeviceID(index: $0) }
        var records: [Baseline.Record] = []
        for _ in 0..<(rng.next() % 50) {
            let entity = schema.entities[Int(rng.next() % UInt64(schema.entities.count))]
            let id = RecordID(high: rng.next(), low: rng.next())
            let fields = entity.fields.map { f in
                var value = Value.null
                if case .attribute(let type) = f.kind, !f.isOptional || rng.next() & 1 == 0 {
                    value = Samples.value(type, &rng)
                }
                return Baseline.VersionedValue(name: f.name, value: value,
                                        version: Version(clock: HybridTimestamp(rawValue: rng.next() >> 17), device: devices[Int(rng.next() % 3)]))
            }
            // Every shape of state: inserted or not, deleted or not, some fields or none.
            let shape = rng.next() % 4
            let deleteVersion = shape >= 2 ? Version(clock: HybridTimestamp(rawValue: rng.next() >> 17), device: devices[0]) : nil
            records.append(Baseline.Record(entity: entity.name, recordID: id, inserted: shape != 1, deleteVersion: deleteVersion,
                                           fields: shape == 3 ? [] : fields))
        }
        let baseline = Baseline(vector: [devices[0]: 5, devices[1]: 9, devices[2]: 1], records: records)
        let part = 1 + rng.next() % 3
        let isFinal = rng.next() & 1 == 0
        let bytes = try LogEncoder(storeID: Samples.store).encode(baseline, part: part, isFinal: isFinal,
                                                                  deviceID: devices[0], schemaHash: schema.hash)
        guard case .baseline(let header, let back) = try LogDecoder(schema: schema).decode(bytes) else {
            Issue.record("expected a baseline")
            return
        }
        #expect(header.baselinePart == part)
        #expect(header.isFinalBaselinePart == isFinal)
        #expect(back == baseline)
        #expect(header.count == UInt32(records.count))
    }

    @Test func encoderRefusesMixedOrGappedTransactions() throws {
        var rng = SeededRandom(seed: 1)
        let a = Samples.transaction(Samples.library, sequence: 1, changes: 1, &rng)
        let c = Samples.transaction(Samples.library, sequence: 3, changes: 1, &rng)
        let encoder = LogEncoder(storeID: Samples.store)
        expectError(.invalidValue) { _ = try encoder.encode([a, c]) }
        var zero = a
        zero.sequence = 0
        expectError(.invalidValue) { _ = try encoder.encode([zero]) }
    }

    /// A clock past the year 4199 is no device's: such a log is malformed,
    /// so no snapshot adopts a reading whose packed form is past 2^63.
    @Test func aClockPastTheLastMillisecondIsMalformed() throws {
        var rng = SeededRandom(seed: 2)
        var t = Samples.transaction(Samples.library, sequence: 1, changes: 1, &rng)
        let encoder = LogEncoder(storeID: Samples.store)
        let decoder = LogDecoder(schema: Samples.library)
        t.clock = HybridTimestamp(milliseconds: HybridTimestamp.maxMilliseconds, counter: 7)
        #expect(throws: Never.self) { try decoder.decode(try encoder.encode([t])) }
        t.clock = HybridTimestamp(milliseconds: HybridTimestamp.maxMilliseconds + 1, counter: 0)
        expectError(.malformedBody) { _ = try decoder.decode(try encoder.encode([t])) }
    }

    /// An empty list is a misuse of the API, not bad data: a precondition
    /// failure with a message, as GRDB stops on misuse.
    @Test func encodingNoTransactionsIsAPreconditionFailure() async {
        await #expect(processExitsWith: .failure) {
            _ = try? LogEncoder(storeID: Samples.store).encode([])
        }
    }

    @Test func schemaMismatchIsRefused() throws {
        var rng = SeededRandom(seed: 2)
        let t = Samples.transaction(Samples.library, sequence: 1, changes: 2, &rng)
        let bytes = try LogEncoder(storeID: Samples.store).encode([t])
        let other = try Schema(version: 2, entities: [Entity("Other", attributes: [Attribute("x", .int64)])])
        expectError(.schemaMismatch) { _ = try LogDecoder(schema: other).decode(bytes) }
    }

    @Test func missingDictionaryIsATypedError() throws {
        var rng = SeededRandom(seed: 3)
        let t = Samples.transaction(Samples.library, sequence: 1, changes: 20, &rng)
        let dictionary = try CompressionDictionary(id: 9, bytes: Array("AuthorBooktitle".utf8))
        let bytes = try LogEncoder(storeID: Samples.store, dictionary: dictionary).encode([t])
        expectError(.unknownDictionary) { _ = try LogDecoder(schema: Samples.library).decode(bytes) }
    }

    @Test func dictionaryShrinksOneRecordBodies() throws {
        var rng = SeededRandom(seed: 4)
        var samples: [[UInt8]] = []
        for s in 1...50 {
            let t = Samples.transaction(Samples.library, sequence: UInt64(s), changes: 1, &rng)
            samples.append(try LogEncoder(storeID: Samples.store, compresses: false).encode([t]).dropFirst(LogHeader.size).map { $0 })
        }
        let dictionary = try CompressionDictionary.fromSamples(samples, id: 1)
        var plain = 0
        var withDictionary = 0
        for s in 1...50 {
            let t = Samples.transaction(Samples.library, sequence: UInt64(s), changes: 1, &rng)
            plain += try LogEncoder(storeID: Samples.store).encode([t]).count
            withDictionary += try LogEncoder(storeID: Samples.store, dictionary: dictionary).encode([t]).count
        }
        #expect(withDictionary < plain)
    }
}
