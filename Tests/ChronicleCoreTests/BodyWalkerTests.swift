import ChronicleCore
import Foundation
import Testing

/// The body walker reads a log by pointer, with shortcuts for the common
/// cases (names where the previous field points, one-byte counts, varints of
/// up to eight bytes, strings under 128 bytes checked a word at a time).
/// These tests hold it to the schema-free decoder, which reads every name and
/// value through the plain checked `ByteReader` path, on bodies that are
/// damaged but carry a valid checksum, so that the walker and not the
/// checksum has to find the damage.
@Suite struct BodyWalkerTests {
    /// Replaces the body of an uncompressed log and recomputes the lengths
    /// and checksum in its header.
    static func reseal(_ log: [UInt8], body: [UInt8]) throws -> [UInt8] {
        var header = try LogDecoder(schema: nil).header(of: log)
        header.bodyLength = UInt32(body.count)
        header.storedBodyLength = UInt32(body.count)
        header.bodyChecksum = XXH64.hash(body)
        return header.encoded() + body
    }

    /// What the schema decoder must say about a body the schema-free decoder
    /// read: the code of the first problem in body order, or nil if none.
    static func expectedError(_ transactions: [Transaction], schema: Schema) -> ChronicleError.Code? {
        for t in transactions {
            for c in t.changes {
                guard let entity = schema.entity(named: c.entity) else { return .unknownEntity }
                if c.values.count > entity.fields.count { return .malformedBody }
                for v in c.values {
                    guard let field = entity.fields.first(where: { $0.name == v.name }) else { return .unknownAttribute }
                    if !field.accepts(v.value) { return .malformedBody }
                }
            }
        }
        return nil
    }

    /// Damaged bodies (bits flipped, bytes overwritten, inserted, deleted,
    /// the body cut short) of random logs over random schemas: the schema
    /// decoder accepts exactly what the schema-free decoder accepts and the
    /// schema allows, decodes it to the same transactions, and otherwise
    /// throws the error of the first problem.
    @Test(arguments: 0..<12)
    func damagedBodiesAgreeWithTheSchemaFreeDecoder(seed: UInt64) throws {
        var rng = SeededRandom(seed: 0xB0D1 &+ seed)
        let schema = Samples.schema(&rng)
        let transactions = (0..<(1 + rng.next() % 3)).map {
            Samples.transaction(schema, sequence: 1 + $0, changes: 1 + Int(rng.next() % 20), &rng)
        }
        let log = try LogEncoder(storeID: Samples.store, compresses: false).encode(transactions)
        let body = Array(log[LogHeader.size...])
        let withSchema = LogDecoder(schema: schema)
        let schemaFree = LogDecoder(schema: nil)
        var outcomes: [String: Int] = [:]
        for _ in 0..<1_500 {
            var damaged = body
            for _ in 0..<(1 + rng.next() % 3) {
                let at = Int(rng.next() % UInt64(damaged.count))
                switch rng.next() % 5 {
                case 0: damaged[at] ^= UInt8(1) << (rng.next() % 8)
                case 1: damaged[at] = UInt8(truncatingIfNeeded: rng.next())
                case 2: damaged.insert(UInt8(truncatingIfNeeded: rng.next()), at: at)
                case 3: if damaged.count > 1 { damaged.remove(at: at) }
                default: damaged.removeLast(min(damaged.count - 1, 1 + Int(rng.next() % 8)))
                }
            }
            let bytes = try Self.reseal(log, body: damaged)
            let reference: [Transaction]?
            do {
                guard case .transactions(_, let decoded) = try schemaFree.decode(bytes) else {
                    Issue.record("a transactions log decoded as a baseline")
                    return
                }
                reference = decoded
            } catch {
                reference = nil
            }
            do {
                guard case .transactions(_, let decoded) = try withSchema.decode(bytes) else {
                    Issue.record("a transactions log decoded as a baseline")
                    return
                }
                guard let reference else {
                    Issue.record("the schema decoder accepted a body the schema-free decoder refuses")
                    continue
                }
                #expect(Self.expectedError(reference, schema: schema) == nil, "accepted a body the schema does not allow")
                #expect(decoded == reference)
                outcomes["accepted", default: 0] += 1
                // The walk the replayer uses agrees with the full decode.
                _ = try withSchema.open(bytes)
            } catch {
                if let reference {
                    #expect(error.code == Self.expectedError(reference, schema: schema), "\(error)")
                }
                outcomes[error.code.name, default: 0] += 1
            }
        }
        // The damage must reach both outcomes, or the test checks little.
        #expect(outcomes["malformedBody", default: 0] > 0)
        #expect(outcomes.count > 1, "\(outcomes)")
    }

    /// A string of every length up to 140 bytes (past the one-byte length
    /// and the 32-byte blocks), with a bad byte or a valid two-byte character
    /// at every position, in a change in the middle of the body (where the
    /// walker may read past the string) and in the last one (where it may
    /// not).
    @Test func stringsAreCheckedAtEveryLengthAndPosition() throws {
        let schema = try Schema(version: 1, entities: [Entity("Note", attributes: [Attribute("text", .string)])])
        let decoder = LogDecoder(schema: schema)
        for length in 0...140 {
            let changes = (0..<2).map { i in
                Change(.insert, entity: "Note", recordID: RecordID(high: 1, low: UInt64(i)),
                       values: [FieldValue("text", .string(String(repeating: "q", count: length)))])
            }
            let t = Transaction(deviceID: Samples.device, sequence: 1, clock: HybridTimestamp(milliseconds: 1, counter: 0),
                                schemaHash: schema.hash, changes: changes)
            let log = try LogEncoder(storeID: Samples.store, compresses: false).encode([t])
            let body = Array(log[LogHeader.size...])
            #expect(try decoder.decode(log) == .transactions(try decoder.header(of: log), [t]))
            guard length > 0 else { continue }
            let run = [UInt8](repeating: UInt8(ascii: "q"), count: length)
            // Runs that end where the string does (a length prefix of 113 is a "q" too).
            let starts = (0...(body.count - length)).filter {
                Array(body[$0..<($0 + length)]) == run && ($0 + length == body.count || body[$0 + length] != UInt8(ascii: "q"))
            }
            let first = try #require(starts.first), last = try #require(starts.last)
            #expect(last >= first + length, "two strings of \(length) bytes")
            for start in [first, last] {
                for position in 0..<length {
                    var bad = body
                    bad[start + position] = 0xFF
                    expectError(.malformedBody) { _ = try decoder.decode(try Self.reseal(log, body: bad)) }
                    guard position + 1 < length else { continue }
                    var good = body
                    good.replaceSubrange((start + position)...(start + position + 1), with: [0xC3, 0xA9])  // é
                    let decoded = try decoder.decode(try Self.reseal(log, body: good))
                    guard case .transactions(_, let back) = decoded else {
                        Issue.record("expected transactions")
                        continue
                    }
                    let text = back[0].changes[start == first ? 0 : 1].values[0].value
                    #expect(text == .string(String(repeating: "q", count: position) + "é"
                                                + String(repeating: "q", count: length - position - 2)))
                }
            }
        }
    }

    /// A change may carry at most as many values as its entity has fields,
    /// whether its count takes one byte or two (an entity of 130 fields).
    @Test(arguments: [3, 130])
    func valueCountsAreBoundedByTheEntitysFields(fieldCount: Int) throws {
        let schema = try Schema(version: 1, entities: [
            Entity("Wide", attributes: (0..<fieldCount).map { Attribute("f\($0)", .int64) }),
        ])
        let decoder = LogDecoder(schema: schema)
        func log(values: Int) throws -> [UInt8] {
            let change = Change(.update, entity: "Wide", recordID: RecordID(high: 1, low: 1),
                                values: (0..<values).map { FieldValue("f\($0 % fieldCount)", .int(Int64($0))) })
            let t = Transaction(deviceID: Samples.device, sequence: 1, clock: HybridTimestamp(milliseconds: 1, counter: 0),
                                schemaHash: schema.hash, changes: [change])
            return try LogEncoder(storeID: Samples.store).encode([t])
        }
        guard case .transactions(_, let back) = try decoder.decode(try log(values: fieldCount)) else {
            Issue.record("expected transactions")
            return
        }
        #expect(back[0].changes[0].values.count == fieldCount)
        expectError(.malformedBody) { _ = try decoder.decode(try log(values: fieldCount + 1)) }
        _ = try LogDecoder(schema: nil).decode(try log(values: fieldCount + 1))
    }
}
