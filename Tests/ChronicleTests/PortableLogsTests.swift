import Chronicle
import ChronicleContainer
import ChronicleCore
import Foundation
import Logging
import Testing

/// A store's logs and baselines as portable JSON, and back into a container.
@Suite struct PortableLogsTests {
    static let schema = PortableExportTests.schema

    /// Two devices' saves of every value type (updates to null, deletes,
    /// the doubles JSON cannot write), synced, with a baseline and logs
    /// after it.
    func history() async throws -> TestDevices {
        let d = try await TestDevices(2, schema: Self.schema)
        try await PortableExportTests().fill(d.stores[0])
        try await d.syncAll()
        let ids = try await d.stores[1].read { db in try RecordID.fetchAll(db, sql: "SELECT id FROM Item ORDER BY title") }
        try await d.stores[1].write { tx in
            tx.update("Item", id: ids[0], ["ratio": Value.null, "title": Value.string("renamed")])
            tx.delete("Item", id: ids[1])
        }
        try await d.syncAll()
        _ = try await d.stores[0].publishBaseline()
        try await d.stores[0].write { tx in tx.update("Item", id: ids[2], ["count": Value.int(-7)]) }
        try await d.stores[1].write { tx in _ = tx.insert("Item", ["title": Value.string("after the baseline")]) }
        try await d.syncAll()
        return d
    }

    func emptyContainer() throws -> DirectoryContainer {
        try DirectoryContainer(root: FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-logs-\(UUID().uuidString)"), create: true)
    }

    func blobs(_ container: any Container, _ store: StoreID) async throws -> [ContainerName: [UInt8]] {
        var result: [ContainerName: [UInt8]] = [:]
        for prefix in [ContainerLayout.logsPrefix(store: store), ContainerLayout.baselinesPrefix(store: store)] {
            for blob in try await container.listAll(prefix: prefix) { result[blob.name] = try await container.get(blob.name, maxBytes: 1 << 26) }
        }
        return result
    }

    @Test func logsExportedAndImportedRebuildTheSameStateOnANewDevice() async throws {
        let d = try await history()
        let store = d.stores[0].storeID
        let json = try await PortableLogs.export(store: store, from: d.container)
        let text = String(decoding: json, as: UTF8.self)
        #expect(text.contains("\"kind\" : \"baseline\"") && text.contains("\"kind\" : \"delete\""))
        #expect(text.contains("\"7ff8deadbeef0001\""), "a NaN's payload is kept")
        #expect(try await PortableLogs.export(store: store, from: d.container) == json, "equal contents give equal bytes")

        let target = try emptyContainer()
        let steps = Steps()
        let report = try await PortableLogs.import(json, into: target) { steps.add($0) }
        let source = try await blobs(d.container, store)
        #expect(source.count >= 5)
        #expect(report.written == source.count + 1, "every log and baseline part, and the schema record")
        #expect(report.conflicts.isEmpty && report.alreadyThere == 0)
        #expect(steps.all.last?.ended == true && steps.all.last?.processed == report.total)
        #expect(try await blobs(target, store) == source, "encoded again to the same bytes, under the same names")

        // A device that syncs there builds the same state, under the same store.
        let joiner = try await Store.open(Store.Configuration(
            schema: Self.schema, deviceID: DeviceID(index: 9), directory: d.root.appendingPathComponent("joiner"),
            container: target, clock: d.clock, seed: 9, logger: Logger(label: "test"), durability: .normal))
        try await joiner.sync()
        #expect(joiner.storeID == store)
        #expect(try await joiner.stateHash() == (try await d.stores[0].stateHash()))

        // Again: nothing left to write.
        let again = try await PortableLogs.import(json, into: target)
        #expect(again.written == 0 && again.alreadyThere == report.total && again.conflicts.isEmpty)
    }

    @Test func aDocumentThatDoesNotReadWritesNothing() async throws {
        let d = try await history()
        let json = try await PortableLogs.export(store: d.stores[0].storeID, from: d.container)
        var text = String(decoding: json, as: UTF8.self)
        // The last log's first int64 value, made a word.
        let range = try #require(text.range(of: "\"int64\",\n", options: .backwards))
        let valueStart = text[range.upperBound...].firstIndex(of: "\"")!
        let valueEnd = text[text.index(after: valueStart)...].firstIndex(of: "\"")!
        text.replaceSubrange(valueStart...valueEnd, with: "\"seven\"")
        let target = try emptyContainer()
        let error = try await #require(throws: ChronicleError.self) { try await PortableLogs.import(Data(text.utf8), into: target) }
        #expect(error.code == .typeMismatch)
        #expect(error.message.contains("logs[") && error.message.contains("expected a string of decimal digits"), "\(error.message)")
        #expect(try await target.listAll(prefix: "").isEmpty)
        #expect(try await target.listMarkers(prefix: "").isEmpty)

        // A value of another type than its field's, in a document that holds the schema.
        let wrongType = String(decoding: json, as: UTF8.self).replacingOccurrences(of: "\"title\",\n                  \"string\",\n                  \"nulls\"",
                                                                                   with: "\"title\",\n                  \"int64\",\n                  \"5\"")
        #expect(wrongType != String(decoding: json, as: UTF8.self))
        let mismatch = try await #require(throws: ChronicleError.self) { try await PortableLogs.import(Data(wrongType.utf8), into: target) }
        #expect(mismatch.code == .typeMismatch && mismatch.message.contains("Item.title is a string attribute"), "\(mismatch.message)")
        #expect(try await target.listAll(prefix: "").isEmpty)

        for (document, code) in [("[]", ChronicleError.Code.malformedBody), (#"{"format": "chronicle-export", "version": 1}"#, .malformedBody),
                                 (#"{"format": "chronicle-logs", "version": 2}"#, .unsupportedVersion), ("{", .malformedBody)] {
            let e = try await #require(throws: ChronicleError.self) { try await PortableLogs.import(Data(document.utf8), into: target) }
            #expect(e.code == code, "\(document): \(e)")
        }
    }

    /// Documents devices could not use are refused before anything is
    /// written: logs of a schema the export does not hold, a gap in a
    /// device's sequences, overlapping logs, a clock no device reads.
    @Test func logsDevicesCouldNotUseAreRefused() async throws {
        let d = try await history()
        let json = try await PortableLogs.export(store: d.stores[0].storeID, from: d.container)
        let good = try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any])
        let logs = good["logs"] as! [[String: Any]]
        let transactionLogs = logs.indices.filter { logs[$0]["kind"] as? String == "transactions" }
        func attempt(_ edit: (inout [String: Any]) -> Void) async throws -> ChronicleError {
            var document = good
            edit(&document)
            let target = try emptyContainer()
            let error = try await #require(throws: ChronicleError.self) {
                try await PortableLogs.import(try JSONSerialization.data(withJSONObject: document), into: target)
            }
            let blobs = try await target.listAll(prefix: "")
            let markers = try await target.listMarkers(prefix: "")
            #expect(blobs.isEmpty && markers.isEmpty, "nothing written: \(error)")
            return error
        }
        let noSchema = try await attempt { $0["schemas"] = [] }
        #expect(noSchema.code == .schemaMismatch && noSchema.message.contains("cannot be checked"), "\(noSchema)")
        // Without the baseline, and without a device's first log: a gap.
        let gap = try await attempt { document in
            document["logs"] = logs.enumerated().filter { $0.element["kind"] as? String == "transactions" && $0.offset != transactionLogs[0] }.map(\.element)
        }
        #expect(gap.code == .malformedBody && gap.message.contains("has no log of sequence 1"), "\(gap)")
        // Two writers under one device ID: the same sequences twice.
        let overlap = try await attempt { document in
            var copy = logs[transactionLogs[0]]
            var transactions = copy["transactions"] as! [[String: Any]]
            var changes = transactions[0]["changes"] as! [[String: Any]]
            changes[0]["id"] = UUID().uuidString.lowercased()
            transactions[0]["changes"] = changes
            copy["transactions"] = transactions
            copy["name"] = nil
            copy["device"] = logs[transactionLogs[0]]["device"]
            var all = logs
            all.append(copy)
            document["logs"] = all
        }
        #expect(overlap.code == .malformedBody && (overlap.message.contains("overlaps") || overlap.message.contains("appears twice")), "\(overlap)")
        let future = try await attempt { document in
            var all = logs
            var transactions = all[transactionLogs[0]]["transactions"] as! [[String: Any]]
            transactions[0]["clock"] = "\(HybridTimestamp.maxMilliseconds + 1).0"
            all[transactionLogs[0]]["transactions"] = transactions
            document["logs"] = all
        }
        #expect(future.code == .malformedBody && future.message.contains("clock"), "\(future)")

        // A container where the store was deleted on purpose takes none of it.
        let deleted = try emptyContainer()
        _ = try await deleted.createMarker(ContainerLayout.tombstone(store: d.stores[0].storeID), StoreTombstone(device: DeviceID(index: 5), milliseconds: 1))
        let refused = try await #require(throws: ChronicleError.self) { try await PortableLogs.import(json, into: deleted) }
        #expect(refused.code == .markerConflict && refused.message.contains("deleted on purpose"))
    }

    @Test func logsTheContainerHoldsOtherwiseAreConflictsLeftAsTheyAre() async throws {
        let d = try await history()
        let store = d.stores[0].storeID
        let json = try await PortableLogs.export(store: store, from: d.container)
        let source = try await blobs(d.container, store)
        let logs = source.keys.filter { ContainerLayout.parseLog($0) != nil }.sorted { $0.rawValue < $1.rawValue }
        let target = try emptyContainer()
        // The same name with other content, and a log of the same device over overlapping sequences.
        let first = try #require(ContainerLayout.parseLog(logs[0]))
        let other = try Self.log(store: store, device: first.device, first: first.first, last: first.first)
        try await target.put(logs[0], other)
        let second = try #require(logs.dropFirst().compactMap { name in ContainerLayout.parseLog(name).map { (name, $0) } }.first { $0.1.last > $0.1.first || $0.1.device != first.device })
        let overlapping = ContainerLayout.log(store: store, device: second.1.device, first: second.1.last, last: second.1.last + 5)
        try await target.put(overlapping, try Self.log(store: store, device: second.1.device, first: second.1.last, last: second.1.last + 5))

        let report = try await PortableLogs.import(json, into: target)
        #expect(report.conflicts.contains(logs[0].rawValue))
        #expect(report.conflicts.contains { $0.hasPrefix(second.0.rawValue) && $0.contains("overlaps") })
        #expect(report.written + report.conflicts.count == report.total && report.conflicts.count >= 2)
        #expect(try await target.get(logs[0], maxBytes: 1 << 20) == other, "not replaced")
        #expect((try? await target.get(second.0, maxBytes: 1 << 20)) == nil, "an overlapping log is not written")
    }

    /// A log of one folder insert per sequence, other than any the devices made.
    static func log(store: StoreID, device: DeviceID, first: UInt64, last: UInt64) throws -> [UInt8] {
        let transactions = (first...last).map { sequence in
            Transaction(deviceID: device, sequence: sequence, clock: HybridTimestamp(milliseconds: 1, counter: UInt16(sequence)),
                        schemaHash: schema.hash, changes: [Change(.insert, entity: "Folder", recordID: RecordID(UUID()), values: [FieldValue("name", .string("other \(sequence)"))])])
        }
        return try LogEncoder(storeID: store).encode(transactions)
    }

    /// A log whose clock reads the last millisecond is applied, but a
    /// device takes in no reading later than ``HybridTimestamp/latestAdopted``:
    /// it keeps saving, and every device reads its saves.
    @Test func aClockAtTheLastMillisecondLeavesDevicesSaving() async throws {
        let d = try await TestDevices(2, schema: Self.schema)
        let store = d.stores[0].storeID
        try await d.stores[0].write { tx in _ = tx.insert("Folder", ["name": Value.string("first")]) }
        try await d.syncAll()
        let device = DeviceID(index: 77)
        let late = Transaction(deviceID: device, sequence: 1, clock: HybridTimestamp(milliseconds: HybridTimestamp.maxMilliseconds, counter: .max),
                               schemaHash: Self.schema.hash, changes: [Change(.insert, entity: "Folder", recordID: RecordID(UUID()), values: [FieldValue("name", .string("late"))])])
        try await d.container.put(ContainerLayout.log(store: store, device: device, first: 1, last: 1), try LogEncoder(storeID: store).encode([late]))
        try await d.syncAll()
        #expect(try await d.count("SELECT count(*) FROM Folder", on: 0) == 2)
        for i in 0..<3 { try await d.stores[0].write { tx in _ = tx.insert("Folder", ["name": Value.string("after \(i)")]) } }
        try await d.syncAll()
        #expect(try await d.hashes().count == 1)
        #expect(try await d.count("SELECT count(*) FROM Folder", on: 1) == 5)
    }

    @Test func anExportStopsAtALogThatDoesNotVerify() async throws {
        let d = try await history()
        let store = d.stores[0].storeID
        let name = try #require(try await blobs(d.container, store).keys.first { ContainerLayout.parseLog($0) != nil })
        var bytes = try await d.container.get(name, maxBytes: 1 << 20)
        bytes[bytes.count - 1] ^= 0xFF
        let path = d.root.appendingPathComponent("container/blobs/\(name.rawValue)")
        try Data(bytes).write(to: path)
        let error = try await #require(throws: ChronicleError.self) { try await PortableLogs.export(store: store, from: d.container) }
        #expect(error.code == .bodyChecksumMismatch && error.message.hasPrefix(name.rawValue), "\(error)")
    }
}

/// Progress values, as a callback delivers them.
final class Steps: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [PortableLogs.Progress] = []
    func add(_ step: PortableLogs.Progress) { lock.withLock { values.append(step) } }
    var all: [PortableLogs.Progress] { lock.withLock { values } }
}
