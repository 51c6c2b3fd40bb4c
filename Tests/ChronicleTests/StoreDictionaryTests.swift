import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import Testing

/// The store's compression dictionary: trained on a device from its own
/// saves, published in the container, fetched by every device that reads
/// a log compressed against it. A missing or damaged one keeps logs
/// waiting, never failed, and a device that keeps it publishes it again.
@Suite struct StoreDictionaryTests {
    static let schema = try! Schema(version: 1, entities: [
        Entity("Note", attributes: [Attribute("title", .string), Attribute("body", .string, optional: true), Attribute("stars", .int64, default: 0)]),
    ])

    /// `count` one-record saves on `store`.
    static func save(_ count: Int, on store: Store, from start: Int = 0) async throws {
        for i in start..<(start + count) {
            try await store.write { tx in
                _ = tx.insert("Note", ["title": "note number \(i)", "body": "written on the train, page \(i % 17)", "stars": i % 5])
            }
        }
    }

    /// The header of the newest log of `device`, read by its name.
    static func newestLogHeader(_ devices: TestDevices, device: DeviceID, store: StoreID) async throws -> LogHeader {
        let names = try await devices.blobs(under: ContainerLayout.logPrefix(store: store, device: device))
        let name = try #require(names.last)
        let bytes = try await devices.container.get(name)
        return try LogDecoder(schema: nil).header(of: bytes, name: name)
    }

    static func dictionaryMarkers(_ devices: TestDevices, store: StoreID) async throws -> [ContainerName] {
        try await devices.container.listMarkers(prefix: ContainerLayout.dictionariesPrefix(store: store))
    }

    /// One device that made enough saves to train the store's dictionary,
    /// synced; `extra` one-record saves more, each synced on its own.
    static func writerWithDictionary(extra: Int = 0) async throws -> (devices: TestDevices, writer: Store) {
        let devices = try await TestDevices(1, schema: schema)
        let writer = devices.stores[0]
        try await save(Replayer.defaultDictionaryTrainingSaves + 3, on: writer)
        try await writer.sync()
        for i in 0..<extra {
            try await save(1, on: writer, from: 900 + i)
            try await writer.sync()
        }
        return (devices, writer)
    }

    @Test func aStoreTrainsPublishesAndUsesItsDictionary() async throws {
        let devices = try await TestDevices(2, schema: Self.schema)
        let (writer, reader) = (devices.stores[0], devices.stores[1])
        let store = writer.storeID
        // Too few saves: nothing is trained, logs go out without one.
        try await Self.save(Replayer.defaultDictionaryTrainingSaves - 10, on: writer)
        try await writer.sync()
        #expect(try await Self.dictionaryMarkers(devices, store: store).isEmpty)
        #expect(try await Self.newestLogHeader(devices, device: writer.deviceID, store: store).dictionaryID == 0)
        // Enough: the next upload trains it, publishes it, and uses it.
        try await Self.save(20, on: writer, from: 1_000)
        try await writer.sync()
        let markers = try await Self.dictionaryMarkers(devices, store: store)
        #expect(markers.count == 1)
        let header = try await Self.newestLogHeader(devices, device: writer.deviceID, store: store)
        #expect(header.version == 2 && header.flags.contains(.dictionary))
        #expect(markers.first.flatMap(ContainerLayout.parseDictionaryID) == header.dictionaryID)
        // A one-record log against it.
        try await Self.save(1, on: writer, from: 2_000)
        try await writer.sync()
        let single = try await Self.newestLogHeader(devices, device: writer.deviceID, store: store)
        #expect(single.count == 1 && single.dictionaryID == header.dictionaryID && single.storedBodyLength < single.bodyLength)
        // Another device fetches it to read those logs, and uses it too.
        let report = try await reader.sync()
        #expect(report.status == .upToDate, "\(report.imported.failures)")
        try await devices.syncAll()
        #expect(try await devices.hashes().count == 1)
        #expect(try await devices.count("SELECT count(*) FROM Note", on: 1) == Replayer.defaultDictionaryTrainingSaves - 10 + 21)
        try await Self.save(1, on: reader, from: 3_000)
        try await reader.sync()
        #expect(try await Self.newestLogHeader(devices, device: reader.deviceID, store: store).dictionaryID == header.dictionaryID)
        #expect(try await Self.dictionaryMarkers(devices, store: store).count == 1, "the reader trains no second one")
        for s in devices.stores { try await s.close() }
    }

    /// The dictionary's marker lost, then damaged: a device that has not
    /// fetched it waits (a transient failure, never a permanent one, its
    /// logs left where they are), and the device that keeps it publishes
    /// it again at its next look, after which the other one reads them.
    @Test(arguments: ["lost", "damaged"])
    func aMissingOrDamagedDictionaryKeepsLogsWaitingUntilItIsPublishedAgain(damage: String) async throws {
        let devices = try await TestDevices(2, schema: Self.schema)
        let (writer, reader) = (devices.stores[0], devices.stores[1])
        let store = writer.storeID
        try await Self.save(Replayer.defaultDictionaryTrainingSaves + 5, on: writer)
        try await writer.sync()
        let name = try #require(try await Self.dictionaryMarkers(devices, store: store).first)
        let marker = try #require(try await devices.container.readMarker(name))
        if damage == "lost" {
            try await devices.container.deleteMarker(name, expected: nil)
        } else {
            var bytes = marker.bytes
            bytes[bytes.count - 3] ^= 0x40
            _ = try await devices.container.replaceMarker(name, bytes, expected: marker.version)
        }
        let logs = try await devices.blobs(under: ContainerLayout.logPrefix(store: store, device: writer.deviceID))

        let waiting = try await reader.sync()
        #expect(waiting.status == .waiting, "\(waiting.imported.failures)")
        #expect(waiting.imported.permanentFailures.isEmpty)
        #expect(waiting.imported.failures.contains { $0.error.code == .unknownDictionary })
        #expect(try await devices.count("SELECT count(*) FROM Note", on: 1) == 0)
        #expect(try await devices.blobs(under: ContainerLayout.logPrefix(store: store, device: writer.deviceID)) == logs, "no log is removed")

        // The writer looks again once its listing interval has passed, at
        // a sync with nothing to upload.
        try await writer.sync()
        #expect(try await devices.container.readMarker(name)?.bytes != marker.bytes, "not before the interval has passed")
        devices.clock.advance(byMilliseconds: Replayer.defaultDictionaryListingInterval.components.seconds * 1000 + 1)
        try await writer.sync()
        let republished = try #require(try await devices.container.readMarker(name))
        #expect(republished.bytes == marker.bytes)
        let caughtUp = try await reader.sync()
        #expect(caughtUp.status == .upToDate, "\(caughtUp.imported.failures)")
        #expect(try await devices.count("SELECT count(*) FROM Note", on: 1) == Replayer.defaultDictionaryTrainingSaves + 5)
        #expect(try await devices.hashes().count == 1)
        for s in devices.stores { try await s.close() }
    }

    /// `chronicle verify` and a replication read logs compressed against
    /// the store's dictionary with the published one, and a damaged
    /// dictionary is a problem `verify` names.
    @Test func verificationReadsLogsWithThePublishedDictionary() async throws {
        let (devices, writer) = try await Self.writerWithDictionary(extra: 1)
        let verified = try await ContainerVerification(of: devices.container, decoder: LogDecoder(schema: Self.schema))
        #expect(verified.passed, "\(verified.problems)")
        #expect(verified.valid == 2)
        let name = try #require(try await Self.dictionaryMarkers(devices, store: writer.storeID).first)
        let marker = try #require(try await devices.container.readMarker(name))
        var bytes = marker.bytes
        bytes[40] ^= 1
        _ = try await devices.container.replaceMarker(name, bytes, expected: marker.version)
        let damaged = try await ContainerVerification(of: devices.container, decoder: LogDecoder(schema: Self.schema))
        #expect(damaged.problems.contains { $0.name == name.rawValue && $0.error.code == .bodyChecksumMismatch }, "\(damaged.problems)")
        #expect(damaged.problems.contains { $0.error.code == .unknownDictionary }, "the log that needs it cannot be read")
        try await writer.close()
    }

    /// A dictionary cut short is named damaged (not a stop of the listing);
    /// a replication does not copy it, and puts a damaged copy in the
    /// destination right from a whole one.
    @Test func aDamagedDictionaryIsNamedAndNotCopied() async throws {
        let (devices, writer) = try await Self.writerWithDictionary()
        let store = writer.storeID
        let name = try #require(try await Self.dictionaryMarkers(devices, store: store).first)
        let whole = try #require(try await devices.container.readMarker(name))
        _ = try await devices.container.replaceMarker(name, Array(whole.bytes.prefix(100)), expected: whole.version)
        let listed = try await devices.container.publishedDictionaries(store: store)
        #expect(listed.found.isEmpty)
        #expect(listed.damaged.map(\.name) == [name] && listed.damaged.first?.error.code == .malformedBody)

        let root = devices.root.appendingPathComponent("replica")
        let replica = try DirectoryContainer(root: root, create: true)
        let copied = try await ContainerReplication(from: devices.container, to: replica).run()
        #expect(copied.damaged.contains { $0.hasPrefix(name.rawValue) }, "\(copied.damaged)")
        #expect(try await replica.readMarker(name) == nil)
        // The damage copied by hand; the source whole again: copying again mends it.
        _ = try await replica.createMarker(name, Array(whole.bytes.prefix(100)))
        let cut = try #require(try await devices.container.readMarker(name))
        _ = try await devices.container.replaceMarker(name, whole.bytes, expected: cut.version)
        _ = try await ContainerReplication(from: devices.container, to: replica).run()
        #expect(try await replica.readMarker(name)?.bytes == whole.bytes)
        try await writer.close()
    }

    /// A log export carries the dictionaries its logs use, and an import
    /// publishes them and writes every log byte for byte as it was.
    @Test func aLogExportCarriesTheDictionaryAndImportsByteForByte() async throws {
        let (devices, writer) = try await Self.writerWithDictionary(extra: 1)
        let data = try await PortableLogs.export(store: writer.storeID, from: devices.container)
        let other = try DirectoryContainer(root: devices.root.appendingPathComponent("elsewhere"), create: true)
        _ = try await PortableLogs.import(data, into: other)
        let blobs = try await devices.container.listAll(prefix: ContainerLayout.logsPrefix(store: writer.storeID))
        #expect(blobs.count == 2)
        for blob in blobs {
            #expect(try await other.get(blob.name) == (try await devices.container.get(blob.name)), "\(blob.name)")
        }
        let name = try #require(try await Self.dictionaryMarkers(devices, store: writer.storeID).first)
        #expect(try await other.readMarker(name)?.bytes == (try await devices.container.readMarker(name))?.bytes)
        try await writer.close()
    }
}
