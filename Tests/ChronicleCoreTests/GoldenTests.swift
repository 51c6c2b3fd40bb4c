import ChronicleCore
import Foundation
import Testing

/// Golden log files pin the format: the encoder must reproduce them byte for
/// byte, the decoder must read them to the committed JSON, and
/// `docs/log-format.md` must show the same bytes. Set
/// `CHRONICLE_WRITE_FIXTURES=1` to regenerate them after a deliberate change
/// (and bump the format version).
@Suite struct GoldenTests {
    static let libraryHash = "d42df86dcc4be994"

    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")
    static let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("docs/log-format.md")

    static let author = RecordID(high: 0x018B_CFE5_6800_7001, low: 0x8000_0000_0000_00A1)
    static let book = RecordID(high: 0x018B_CFE5_6800_7002, low: 0x8000_0000_0000_00B1)
    static let t0 = HybridTimestamp(milliseconds: 1_700_000_000_000, counter: 0)

    static let dictionary = try! CompressionDictionary(
        id: 7, bytes: Array(String(repeating: "AuthornameBooktitlepagesratinginPrintauthor", count: 40).utf8))

    /// Where a fixture's name says it lies in a container: what a version 2
    /// header leaves out (nil for version 1).
    static func location(of name: String) -> LogLocation? {
        guard name.hasSuffix("-v2") else { return nil }
        let last: UInt64 = name.hasPrefix("transactions") ? 2 : name.hasPrefix("delete") ? 3 : 1
        return LogLocation(storeID: Samples.store, deviceID: Samples.device, firstSequence: name.hasPrefix("delete") ? 3 : 1, lastSequence: last)
    }

    /// name, the bytes the encoder makes now
    static func cases() throws -> [(String, [UInt8])] {
        let library = Samples.library
        let insert = Transaction(deviceID: Samples.device, sequence: 1, clock: t0, schemaHash: library.hash, changes: [
            Change(.insert, entity: "Author", recordID: author, values: [
                FieldValue("name", "Ursula K. Le Guin"),
                FieldValue("born", .date(Timestamp(microsecondsSinceEpoch: -1_277_337_600_000_000))),
            ]),
            Change(.insert, entity: "Book", recordID: book, values: [
                FieldValue("title", "The Dispossessed"), FieldValue("pages", 387), FieldValue("rating", 4.5),
                FieldValue("inPrint", true), FieldValue("price", .decimal(ChronicleDecimal(string: "9.99")!)),
                FieldValue("isbn", .null), FieldValue("cover", .data(Data([0xFF, 0xD8, 0xFF]))),
                FieldValue("extra", .transformable(TransformableValue(typeName: "Tag", mimeType: "text/plain", data: Data("sf".utf8)))),
                FieldValue("author", .reference(author)),
            ]),
        ])
        let update = Transaction(deviceID: Samples.device, sequence: 2, clock: HybridTimestamp(milliseconds: 1_700_000_000_000, counter: 1),
                                 schemaHash: library.hash, changes: [
            Change(.update, entity: "Book", recordID: book, values: [FieldValue("rating", .double(-0.0)), FieldValue("pages", 388)]),
        ])
        let delete = Transaction(deviceID: Samples.device, sequence: 3, clock: HybridTimestamp(milliseconds: 1_700_000_000_005, counter: 0),
                                 schemaHash: library.hash, changes: [Change(.delete, entity: "Book", recordID: book)])
        let baseline = Baseline(
            vector: [Samples.device: 3],
            records: [
                Baseline.Record(entity: "Author", recordID: author, fields: [
                    Baseline.VersionedValue(name: "name", value: "Ursula K. Le Guin", version: Version(clock: t0, device: Samples.device)),
                    Baseline.VersionedValue(name: "born", value: .null, version: Version(clock: t0, device: Samples.device)),
                ]),
                // Deleted after an update: the state keeps the fields and the delete.
                Baseline.Record(entity: "Book", recordID: book, deleteVersion: Version(clock: delete.clock, device: Samples.device), fields: [
                    Baseline.VersionedValue(name: "title", value: "The Dispossessed", version: Version(clock: t0, device: Samples.device)),
                    Baseline.VersionedValue(name: "pages", value: 388, version: Version(clock: update.clock, device: Samples.device)),
                ]),
            ])
        let encoder = LogEncoder(storeID: Samples.store)
        let v2 = LogEncoder(storeID: Samples.store, version: 2)
        return [
            ("transactions-v1", try encoder.encode([insert, update])),
            ("delete-raw-v1", try encoder.encode([delete])),
            ("dictionary-v1", try LogEncoder(storeID: Samples.store, dictionary: dictionary).encode([insert])),
            ("baseline-v1", try encoder.encode(baseline, deviceID: Samples.device, schemaHash: library.hash)),
            ("transactions-v2", try v2.encode([insert, update])),
            ("delete-raw-v2", try v2.encode([delete])),
            ("dictionary-v2", try LogEncoder(storeID: Samples.store, dictionary: dictionary, version: 2).encode([insert])),
        ]
    }

    static func expectedJSON(_ log: DecodedLog) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(log.jsonValue), as: UTF8.self) + "\n"
    }

    @Test func encoderReproducesTheGoldenFilesAndDecoderReadsThem() throws {
        let decoder = LogDecoder(schema: Samples.library, dictionaries: [Self.dictionary])
        let regenerate = ProcessInfo.processInfo.environment["CHRONICLE_WRITE_FIXTURES"] == "1"
        for (name, bytes) in try Self.cases() {
            let logURL = Self.fixtures.appendingPathComponent("\(name).chlog")
            let jsonURL = Self.fixtures.appendingPathComponent("\(name).json")
            if regenerate {
                try FileManager.default.createDirectory(at: Self.fixtures, withIntermediateDirectories: true)
                try Data(bytes).write(to: logURL)
                try Data(try Self.expectedJSON(try decoder.decode(bytes, at: Self.location(of: name))).utf8).write(to: jsonURL)
            }
            let golden = [UInt8](try Data(contentsOf: logURL))
            #expect(bytes == golden, "encoder output drifted from \(name).chlog")
            let decoded = try decoder.decode(golden, at: Self.location(of: name))
            let expected = try String(contentsOf: jsonURL, encoding: .utf8)
            #expect(try Self.expectedJSON(decoded) == expected, "decoding of \(name).chlog drifted")
        }
    }

    @Test func rawFixtureIsUncompressedAndOthersAreCompressed() throws {
        let decoder = LogDecoder(schema: Samples.library, dictionaries: [Self.dictionary])
        for (name, bytes) in try Self.cases() {
            let header = try decoder.header(of: bytes, at: Self.location(of: name))
            #expect(header.flags.contains(.lz4) == !name.hasPrefix("delete-raw"), "\(name)")
            #expect(header.flags.contains(.dictionary) == name.hasPrefix("dictionary"), "\(name)")
            #expect(header.version == (name.hasSuffix("-v2") ? 2 : 1), "\(name)")
        }
    }

    /// The byte tables in docs/log-format.md show delete-raw-v1.chlog and
    /// delete-raw-v2.chlog; they must be the real files.
    @Test(arguments: ["delete-raw-v1", "delete-raw-v2"])
    func documentationShowsTheGoldenBytes(name: String) throws {
        let doc = try String(contentsOf: Self.docs, encoding: .utf8)
        let start = try #require(doc.range(of: "<!-- golden:\(name) -->"))
        let end = try #require(doc.range(of: "<!-- /golden -->", range: start.upperBound..<doc.endIndex))
        var bytes: [UInt8] = []
        for line in doc[start.upperBound..<end.lowerBound].split(separator: "\n") {
            // lines look like: `0000: 43 48 52 4e ...  |CHRN...|`
            guard let colon = line.firstIndex(of: ":"), line.first?.isHexDigit == true else { continue }
            let hexPart = line[line.index(after: colon)...].split(separator: "|").first ?? ""
            bytes += hexPart.split(separator: " ").compactMap { UInt8($0, radix: 16) }
        }
        let golden = [UInt8](try Data(contentsOf: Self.fixtures.appendingPathComponent("\(name).chlog")))
        #expect(bytes == golden)
    }
}
