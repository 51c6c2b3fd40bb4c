// A libFuzzer target for `LogDecoder`. Build and run it with `make fuzz`
// (see docs/log-format.md, "Fuzzing").
//
// Each input is used twice:
// 1. as a whole log, header and all (the header decoder must refuse it with a
//    typed error, or accept it);
// 2. as a body behind a valid header that the harness builds around it, with
//    the right lengths and checksum, so that the fuzzer's bytes reach the body
//    walker and the baseline parser instead of stopping at a checksum. The
//    first input byte picks the kind (bit 0: transactions or baseline) and,
//    for transactions, the header version (bit 1: 1 or 2); the second the
//    count (1 to 8 transactions, 0 to 7 records).
// It is also read as a whole version 2 log under a fixed location (store,
// device and sequences 1 to 1 + the second byte % 8), which a version 2
// header leaves to the log's name.
//
// A finding is a crash, a sanitizer report, or one of these properties
// failing (each a `fatalError`):
// - with the schema, `decode` accepts only what the schema-free decoder
//   accepts and the schema allows (known entities and fields, no more
//   values than fields, values of the fields' types), and decodes it to the
//   same value as the schema-free decoder;
// - `open` (the replayer's walk) accepts exactly what `decode` accepts;
// - a decoded transactions log re-encodes, in format versions 1 and 2, to
//   logs that decode to the same transactions.
//
// `fuzz-log-decoder --write-seeds DIR` writes a starting corpus: real logs
// and baselines of the schema below in the input format above.

import CFuzzDriver
import ChronicleCore
import Foundation

let schema = try! Schema(version: 1, entities: [
    Entity("Author",
           attributes: [Attribute("name", .string), Attribute("born", .date, optional: true)],
           relationships: [.toMany("books", to: "Book", inverse: "author")]),
    Entity("Book",
           attributes: [
               Attribute("title", .string), Attribute("pages", .int64, default: 0),
               Attribute("rating", .double, optional: true), Attribute("inPrint", .bool, default: true),
               Attribute("price", .decimal, optional: true), Attribute("isbn", .uuid, optional: true),
               Attribute("cover", .data, optional: true), Attribute("extra", .transformable, optional: true),
           ],
           relationships: [.toOne("author", to: "Author", inverse: "books", deleteRule: .cascade)]),
])
let withSchema = LogDecoder(schema: schema, limits: DecodingLimits(maxBodyBytes: 1 << 20))
let schemaFree = LogDecoder(schema: nil, limits: DecodingLimits(maxBodyBytes: 1 << 20))
let store = StoreID(RecordID(high: 0x0192_0000_0000_7000, low: 0x8000_0000_0000_0001))
let device = DeviceID(index: 1)

/// Where a version 2 log of `count` transactions is read from.
func location(count: UInt64) -> LogLocation {
    LogLocation(storeID: store, deviceID: device, firstSequence: 1, lastSequence: count)
}

/// The input's bytes after the two control bytes, behind a valid header,
/// and the location to read it at (nil for version 1).
func sealed(_ input: UnsafeRawBufferPointer) -> ([UInt8], LogLocation?) {
    let kind: LogKind = input[0] & 1 == 0 ? .transactions : .baseline
    let body = Array(input[2...])
    let count: UInt32 = kind == .transactions ? 1 + UInt32(input[1] % 8) : UInt32(input[1] % 8)
    var header = LogHeader(
        kind: kind, flags: [], storeID: store, deviceID: device,
        firstSequence: 1, lastSequence: kind == .transactions ? UInt64(count) : 1,
        minClock: .zero, maxClock: HybridTimestamp(rawValue: .max), schemaHash: schema.hash,
        count: count, dictionaryID: 0, storedBodyLength: UInt32(body.count), bodyLength: UInt32(body.count),
        bodyChecksum: XXH64.hash(body))
    if kind == .transactions && input[0] & 2 != 0 {
        // A group's range must hold every clock (the widest a header
        // passes); a single transaction's clock comes from its body.
        header.maxClock = HybridTimestamp(milliseconds: HybridTimestamp.maxMilliseconds, counter: .max)
        return (body.withUnsafeBytes { header.sealV2($0) }, location(count: UInt64(count)))
    }
    return (header.encoded() + body, nil)
}

func fuzz(_ input: UnsafeRawBufferPointer) {
    _ = try? withSchema.decode(input)
    guard input.count >= 2 else { return }
    _ = try? withSchema.decode(input, at: location(count: 1 + UInt64(input[1] % 8)))
    let (log, at) = sealed(input)
    let decoded = Result { () throws(ChronicleError) in try withSchema.decode(log, at: at) }
    let reference = Result { () throws(ChronicleError) in try schemaFree.decode(log, at: at) }
    let opened = Result { () throws(ChronicleError) in try withSchema.open(log, at: at) }
    switch (decoded, opened) {
    case (.success, .failure(let e)): fatalError("decode accepted a log that open refuses: \(e)")
    case (.failure(let e), .success): fatalError("open accepted a log that decode refuses: \(e)")
    default: break
    }
    guard case .success(let value) = decoded else { return }
    guard case .success(let free) = reference else { fatalError("the schema decoder accepted a log the schema-free decoder refuses") }
    guard free == value else { fatalError("the schema and schema-free decoders disagree") }
    if let problem = schemaProblem(value) { fatalError("the schema decoder accepted \(problem)") }
    if case .transactions(_, let transactions) = value {
        do {
            let again = try LogEncoder(storeID: store, compresses: false).encode(transactions)
            guard case .transactions(_, let back) = try withSchema.decode(again), back == transactions else {
                fatalError("re-encoded transactions decode differently")
            }
            let v2 = try LogEncoder(storeID: store, version: 2).encode(transactions)
            guard case .transactions(_, let backV2) = try withSchema.decode(v2, at: location(count: UInt64(transactions.count))),
                  backV2 == transactions else {
                fatalError("transactions re-encoded in version 2 decode differently")
            }
        } catch {
            fatalError("decoded transactions do not re-encode and decode: \(error)")
        }
    }
}

/// What in a decoded log the schema does not allow, if anything.
func schemaProblem(_ log: DecodedLog) -> String? {
    func check(entity name: String, values: [(String, Value)]) -> String? {
        guard let entity = schema.entity(named: name) else { return "unknown entity \(name)" }
        if values.count > entity.fields.count { return "\(values.count) values for \(name)" }
        for (fieldName, value) in values {
            guard let field = entity.fields.first(where: { $0.name == fieldName }) else { return "unknown field \(name).\(fieldName)" }
            if !field.accepts(value) { return "\(value) for \(name).\(fieldName)" }
        }
        return nil
    }
    switch log {
    case .transactions(_, let transactions):
        for t in transactions {
            for c in t.changes {
                if let problem = check(entity: c.entity, values: c.values.map { ($0.name, $0.value) }) { return problem }
            }
        }
    case .baseline(_, let baseline):
        for r in baseline.records {
            if let problem = check(entity: r.entity, values: r.fields.map { ($0.name, $0.value) }) { return problem }
        }
    }
    return nil
}

/// Writes real logs and baselines as inputs.
func writeSeeds(to directory: String) throws {
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    var ids = RecordIDGenerator(seed: 1)
    let author = ids.next(milliseconds: 1_700_000_000_000)
    let book = ids.next(milliseconds: 1_700_000_000_001)
    let clock = HybridTimestamp(milliseconds: 1_700_000_000_000, counter: 0)
    let changes: [[Change]] = [
        [Change(.insert, entity: "Author", recordID: author, values: [FieldValue("name", .string("Ursula")), FieldValue("born", .null)])],
        [Change(.insert, entity: "Book", recordID: book, values: [
            FieldValue("title", .string("The Dispossessed, a long title of more than thirty-two bytes")),
            FieldValue("pages", .int(387)), FieldValue("rating", .double(4.5)), FieldValue("inPrint", .bool(true)),
            FieldValue("price", .decimal(try ChronicleDecimal(isNegative: false, significand: 1299, exponent: -2))),
            FieldValue("isbn", .uuid(UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)))),
            FieldValue("cover", .data(Data([0xFF, 0xD8, 0xFF]))),
            FieldValue("extra", .transformable(TransformableValue(typeName: "Color", mimeType: "application/json", data: Data("{}".utf8)))),
            FieldValue("author", .reference(author)),
        ])],
        [Change(.update, entity: "Book", recordID: book, values: [FieldValue("pages", .int(400)), FieldValue("rating", .null)]),
         Change(.delete, entity: "Author", recordID: author)],
    ]
    var seeds: [[UInt8]] = []
    for (i, c) in changes.enumerated() {
        let t = Transaction(deviceID: device, sequence: 1, clock: clock, schemaHash: schema.hash, changes: c)
        let log = try LogEncoder(storeID: store, compresses: false).encode([t])
        seeds.append([0, 0] + log[LogHeader.size...])
        if i == 1 {
            seeds.append(try LogEncoder(storeID: store).encode([t]))  // a whole compressed log
            seeds.append(try LogEncoder(storeID: store, version: 2).encode([t]))  // and in version 2
            let v2 = try LogEncoder(storeID: store, compresses: false, version: 2).encode([t])
            seeds.append([2, 0] + v2[try withSchema.header(of: v2, at: location(count: 1)).headerLength...])
        }
    }
    let baseline = Baseline(vector: [device: 2], records: [
        Baseline.Record(entity: "Author", recordID: author, inserted: true, deleteVersion: Version(clock: clock, device: device),
                        fields: [Baseline.VersionedValue(name: "name", value: .string("Ursula"), version: Version(clock: clock, device: device))]),
    ])
    let part = try LogEncoder(storeID: store, compresses: false).encode(baseline, part: 1, isFinal: true, deviceID: device, schemaHash: schema.hash)
    seeds.append([1, 1] + part[LogHeader.size...])
    for (i, seed) in seeds.enumerated() {
        try Data(seed).write(to: URL(fileURLWithPath: directory).appendingPathComponent("seed-\(i)"))
    }
    print("wrote \(seeds.count) seeds to \(directory)")
}

if CommandLine.arguments.count == 3 && CommandLine.arguments[1] == "--write-seeds" {
    do {
        try writeSeeds(to: CommandLine.arguments[2])
    } catch {
        print("error: \(error)")
        exit(1)
    }
    exit(0)
}

var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in
    fuzz(UnsafeRawBufferPointer(start: data, count: size))
    return 0
})
