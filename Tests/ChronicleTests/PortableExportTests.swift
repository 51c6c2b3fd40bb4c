import Chronicle
import ChronicleContainer
import ChronicleCore
import Foundation
import GRDB
import Testing

/// A store's state as portable JSON and back: every type exact, the
/// doubles JSON cannot write included.
@Suite struct PortableExportTests {
    static let schema = try! Schema(json: Data("""
        {"version": 1, "entities": [
          {"name": "Folder", "attributes": [{"name": "name", "type": "string"}], "unique": [["name"]]},
          {"name": "Item", "attributes": [
             {"name": "title", "type": "string"}, {"name": "count", "type": "int64", "optional": true},
             {"name": "ratio", "type": "double", "optional": true}, {"name": "done", "type": "bool", "optional": true},
             {"name": "when", "type": "date", "optional": true}, {"name": "blob", "type": "data", "optional": true},
             {"name": "price", "type": "decimal", "optional": true}, {"name": "tag", "type": "uuid", "optional": true},
             {"name": "shape", "type": "transformable", "optional": true}],
           "relationships": [{"name": "folder", "destination": "Folder"}]}
        ]}
        """.utf8))

    /// Doubles JSON has no number for, and ones a JSON reader may round.
    static let doubles: [Double] = [
        .nan, Double(bitPattern: 0x7FF8_DEAD_BEEF_0001), Double(bitPattern: 0xFFF0_0000_0000_0001), .infinity, -.infinity, -0.0, 0.0,
        0.1, 1e308, .leastNonzeroMagnitude, .pi, -123456.789e-300,
    ]

    func devices() async throws -> TestDevices { try await TestDevices(2, schema: Self.schema) }

    func fill(_ store: Store) async throws {
        try await store.write { tx in
            let folder = tx.insert("Folder", ["name": Value.string("Inbox \u{1F4E5} \"quoted\" \\ /")])
            for (i, d) in Self.doubles.enumerated() {
                _ = tx.insert("Item", [
                    "title": Value.string("item \(i)"), "count": Value.int(i == 0 ? .max : i == 1 ? .min : Int64(i)), "ratio": Value.double(d),
                    "done": Value.bool(i % 2 == 0),
                    "when": Value.date(Timestamp(microsecondsSinceEpoch: i == 0 ? -1_500_001 : 1_700_000_000_000_001 + Int64(i))),
                    "blob": Value.data(Data(i == 0 ? [] : [0, 255, UInt8(i)])),
                    "price": Value.decimal(ChronicleDecimal(string: i == 0 ? "-0.000000000000000000000000000000000001" : "12345678901234567890123456789.\(i)")!),
                    "tag": Value.uuid(UUID()),
                    "shape": Value.transformable(TransformableValue(typeName: "Shape", mimeType: "image/png", data: Data([1, 2, UInt8(i)]))),
                    "folder": Value.reference(folder),
                ])
            }
            _ = tx.insert("Item", ["title": Value.string("nulls")])
        }
    }

    @Test func anExportRestoredIntoAnEmptyStoreGivesTheSameStateHashBitForBit() async throws {
        let d = try await devices()
        let source = d.stores[0]
        try await fill(source)
        let json = try await PortableExport.export(source)
        let text = String(decoding: json, as: UTF8.self)
        #expect(text.contains("\"ieee754\" : \"7ff8deadbeef0001\""), "a NaN's payload is kept")
        #expect(text.contains("\"ieee754\" : \"8000000000000000\""), "-0.0 is kept")
        #expect(text.contains("\"double\" : \"-Infinity\""))
        #expect(text.contains("\"seconds\" : \"-1.500001\""), "dates are exact seconds since 1970")
        #expect(text.contains("\"9223372036854775807\""), "int64 as a string of digits")
        #expect(text.contains("\"mimeType\" : \"application/octet-stream\""))
        #expect(text.contains("\"typeName\" : \"Shape\""))
        #expect(try await PortableExport.export(source) == json, "equal states give equal bytes")

        // Another container, another device: an empty store of the same schema.
        let other = try await TestDevices(1, schema: Self.schema)
        let target = other.stores[0]
        let report = try await PortableExport.restore(json, into: target)
        #expect(report.inserted == Self.doubles.count + 2 && report.updated == 0 && report.notInExport == 0)
        #expect(report.stateHash == report.exportedStateHash)
        #expect(try await target.stateHash() == (try await source.stateHash()))
        let bits = try await target.read { db in try Int64.fetchAll(db, sql: "SELECT ratio FROM Item WHERE ratio IS NOT NULL ORDER BY title") }
        #expect(bits.count == Self.doubles.count)
        // Again: nothing to do.
        let again = try await PortableExport.restore(json, into: target)
        #expect(again.inserted == 0 && again.updated == 0 && again.unchanged == Self.doubles.count + 2)
        // Through the container: a third device sees the same state.
        try await target.sync()
        let joiner = try await other.add()
        try await joiner.sync()
        #expect(try await joiner.stateHash() == (try await source.stateHash()))
    }

    @Test func aStoreThatChangedSinceIsSetBackToTheExportAndKeepsWhatTheExportLacks() async throws {
        let d = try await devices()
        let store = d.stores[0]
        try await fill(store)
        let json = try await PortableExport.export(store)
        let id = try await store.read { db in try RecordID.fetchOne(db, sql: "SELECT id FROM Item WHERE title = 'item 3'") }
        try await store.write { tx in
            tx.update("Item", id: id!, ["ratio": Value.double(-.nan), "count": Value.null])
            _ = tx.insert("Folder", ["name": Value.string("Later")])
        }
        let report = try await PortableExport.restore(json, into: store)
        #expect(report.updated == 1 && report.inserted == 0 && report.notInExport == 1)
        #expect(report.stateHash != report.exportedStateHash, "the folder the export lacks stays")
        let count = try await store.read { db in try Int64.fetchOne(db, sql: "SELECT count FROM Item WHERE id = ?", arguments: [id!]) }
        #expect(count == 3)
    }

    /// Regression: an export made before the device met another's record
    /// of the same unique key could not be restored after: its record, now
    /// a duplicate merged into the other, was taken for one the store had
    /// deleted.
    @Test func anExportOfARecordSinceMergedIntoAnotherRestores() async throws {
        let d = try await devices()
        try await d.stores[0].write { tx in _ = tx.insert("Folder", ["name": Value.string("Inbox")], id: RecordID(high: 0x0100_0000_0000_7000, low: 1)) }
        try await d.stores[1].write { tx in _ = tx.insert("Folder", ["name": Value.string("Inbox")], id: RecordID(high: 0x0200_0000_0000_7000, low: 1)) }
        let json = try await PortableExport.export(d.stores[1])
        try await d.syncAll()
        let report = try await PortableExport.restore(json, into: d.stores[1])
        #expect(report.mergedIntoOthers == 1 && report.inserted == 0, "\(report)")
        #expect(try await d.stores[1].read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM Folder") } == 1)
    }

    @Test func badExportsAreTypedErrorsAndWriteNothing() async throws {
        let d = try await devices()
        let store = d.stores[0]
        try await fill(store)
        let good = try #require(try JSONSerialization.jsonObject(with: try await PortableExport.export(store)) as? [String: Any])
        let empty = d.stores[1]
        let before = try await empty.stateHash()
        func restore(_ object: Any) async -> ChronicleError? {
            do {
                _ = try await PortableExport.restore(try JSONSerialization.data(withJSONObject: object), into: empty)
                return nil
            } catch {
                return error as? ChronicleError
            }
        }
        var later = good
        later["version"] = 2
        #expect(await restore(later)?.code == .unsupportedVersion)
        var foreign = good
        foreign["format"] = "something-else"
        #expect(await restore(foreign)?.code == .malformedBody)
        var otherSchema = good
        otherSchema["schemaHash"] = "0000000000000000"
        #expect(await restore(otherSchema)?.code == .schemaMismatch)
        var badValue = good
        var records = good["records"] as! [String: Any]
        var items = records["Item"] as! [[String: Any]]
        var values = items[0]["values"] as! [String: Any]
        values["ratio"] = ["double": 1.5, "ieee754": "not hex"]
        items[0]["values"] = values
        records["Item"] = items
        badValue["records"] = records
        let error = await restore(badValue)
        #expect(error?.code == .typeMismatch)
        #expect(error?.message.contains("records.Item[0].values.ratio") == true, "\(error?.message ?? "")")
        // Hand edits a reader cannot settle: the number and its image
        // disagree, a key a double does not have, an int64 out of range,
        // a date with nanoseconds, a field the entity lacks.
        records = good["records"] as! [String: Any]
        items = records["Item"] as! [[String: Any]]
        for (field, value, expected) in [
            ("ratio", ["double": 1.5, "ieee754": "4000000000000000"] as Any, "one of them was changed"),
            ("ratio", ["double": 1.5, "ieee754": "3ff8000000000000", "extra": 1] as Any, "\"extra\" is not one of its keys"),
            ("count", "9223372036854775808" as Any, "out of the int64 range"),
            ("when", ["seconds": "1.1234567"] as Any, "at most 6 decimals"),
        ] {
            var edited = items
            var v = edited[1]["values"] as! [String: Any]
            v[field] = value
            edited[1]["values"] = v
            var r = records
            r["Item"] = edited
            var document = good
            document["records"] = r
            let e = await restore(document)
            #expect(e?.code == .typeMismatch && e?.message.contains(expected) == true, "\(field): \(e?.message ?? "accepted")")
        }
        var unknownField = items
        var v = unknownField[1]["values"] as! [String: Any]
        v["colour"] = "red"
        unknownField[1]["values"] = v
        var r = records
        r["Item"] = unknownField
        var withUnknown = good
        withUnknown["records"] = r
        #expect(await restore(withUnknown)?.code == .unknownAttribute)
        do {
            _ = try await PortableExport.restore(Data("[1, 2".utf8), into: empty)
            Issue.record("a broken document was read")
        } catch let error as ChronicleError {
            #expect(error.code == .malformedBody)
        }
        #expect(try await empty.stateHash() == before, "nothing was written")
    }
}

/// `chronicle export` and `chronicle import-export`, as a user runs them.
@Suite(.enabled(if: CrashSafetyTests.binary != nil, "needs the chronicle binary: swift build --build-tests"))
struct CLIPortableExportTests {
    @Test func anExportImportedOnAnotherContainerGivesTheSameStateHash() throws {
        let w = try CLIDataSafetyTests.Workspace()
        defer { try? FileManager.default.removeItem(at: w.root) }
        try w.save("a", "one")
        try w.save("a", "two")
        let file = w.root.appendingPathComponent("export.json").path
        let exported = try w.run("export", "a", ["--output", file])
        #expect(exported.status == 0, "\(exported.stderr)")
        let document = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: file))) as? [String: Any])
        #expect(document["format"] as? String == "chronicle-export")
        #expect(document["stateHash"] as? String == (try w.stateHash("a")))

        // Another container, a new device.
        let other = w.root.appendingPathComponent("other").path
        #expect(try CLIErrorTests.run(["init", "--container", other]).status == 0)
        let into = ["--device-dir", w.device("b"), "--container", other, "--schema", w.schema]
        let imported = try CLIErrorTests.run(["import-export", file, "--json"] + into)
        #expect(imported.status == 0, "\(imported.stderr)")
        let report = try CLILifecycleTests.object(String(decoding: imported.stdout, as: UTF8.self))
        #expect(report["inserted"] as? Int == 2 && report["stateHashMatches"] as? Bool == true, "\(report)")
        #expect(try w.stateHash("b") == (try w.stateHash("a")))
        // To standard output too, byte for byte the same.
        let printed = try w.run("export", "a")
        #expect(printed.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
                == String(decoding: try Data(contentsOf: URL(fileURLWithPath: file)), as: UTF8.self))

        // A file that is not an export: a clear error, nothing written.
        let junk = w.root.appendingPathComponent("junk.json")
        try Data(#"{"format": "something"}"#.utf8).write(to: junk)
        let refused = try CLIErrorTests.run(["import-export", junk.path] + into)
        #expect(refused.status == 1 && refused.stderr.contains("not a Chronicle export"), "\(refused.stderr)")
    }
}
