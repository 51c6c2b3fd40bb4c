import Chronicle
import ChronicleContainer
import ChronicleCore
import Foundation
import Logging
import Testing

/// Copying a store between containers: what goes first, and what a
/// destination that is not empty gets.
@Suite struct ReplicationTests {
    static let schema = try! Schema(version: 1, entities: [Entity("Note", attributes: [Attribute("title", .string)])])

    func source() async throws -> TestDevices {
        let d = try await TestDevices(2, schema: Self.schema)
        if try await d.container.readMarker(ContainerLayout.account) == nil {
            _ = try await d.container.createMarker(ContainerLayout.account, AccountToken(token: "the-source-account"))
        }
        for i in 0..<6 {
            try await d.stores[i % 2].write { tx in _ = tx.insert("Note", ["title": Value.string("note \(i)")]) }
            try await d.syncAll()
        }
        return d
    }

    func folder(_ d: TestDevices, _ name: String, create: Bool = true) throws -> DirectoryContainer {
        try DirectoryContainer(root: d.root.appendingPathComponent(name), create: create)
    }

    func open(_ d: TestDevices, _ name: String, on container: any Container, device: UInt64) async throws -> Store {
        try await Store.open(Store.Configuration(
            schema: Self.schema, deviceID: DeviceID(index: device), directory: d.root.appendingPathComponent(name),
            container: container, clock: d.clock, seed: device, logger: Logger(label: "test"), durability: .normal))
    }

    /// Interrupted at its first blob, a copy already holds the account and
    /// the active-store pointer: a device that syncs there joins the store
    /// being copied, under the same account, and has every save once the
    /// copy is run again.
    @Test func anInterruptedCopyAlreadyNamesTheAccountAndTheStore() async throws {
        let d = try await source()
        let destination = try folder(d, "copy")
        let blobs = try await d.container.listAll(prefix: "").count
        let origin = d.container
        let interrupted = Task {
            try await ContainerReplication(from: origin, to: destination).run { step in
                // Every marker is handled before the first blob.
                if step.processed == step.total - blobs + 1 { withUnsafeCurrentTask { $0?.cancel() } }
            }
        }
        await #expect(throws: CancellationError.self) { try await interrupted.value }
        #expect(try await destination.readMarker(ContainerLayout.account)?.bytes == (try await d.container.readMarker(ContainerLayout.account))?.bytes)
        #expect(try await destination.readMarker(ContainerLayout.activeStore)?.bytes == (try await d.container.readMarker(ContainerLayout.activeStore))?.bytes)
        #expect(try await destination.listAll(prefix: "").count == 1, "one blob copied")

        let joiner = try await open(d, "joiner", on: destination, device: 9)
        try await joiner.sync()
        #expect(joiner.storeID == d.stores[0].storeID, "the store being copied, not one of its own")
        let finished = try await ContainerReplication(from: d.container, to: destination).run()
        #expect(finished.conflicts.isEmpty, "\(finished.conflicts)")
        try await joiner.sync()
        #expect(try await joiner.stateHash() == (try await d.stores[0].stateHash()))
    }

    /// A copy made again after the devices synced carries their newer
    /// applied reports: no conflict, and the copy's reports are the newer.
    @Test func aCopyMadeAgainAfterSyncsCarriesTheNewerAppliedReports() async throws {
        let d = try await source()
        let destination = try folder(d, "again")
        let first = try await ContainerReplication(from: d.container, to: destination).run()
        #expect(first.conflicts.isEmpty, "\(first.conflicts)")
        d.clock.advance(byMilliseconds: 700_000)
        try await d.stores[0].write { tx in _ = tx.insert("Note", ["title": Value.string("later")]) }
        try await d.syncAll()
        let again = try await ContainerReplication(from: d.container, to: destination).run()
        #expect(again.conflicts.isEmpty, "\(again.conflicts)")
        let name = ContainerLayout.appliedReport(store: d.stores[0].storeID, device: d.stores[0].deviceID)
        #expect(try await destination.readMarker(name)?.bytes == (try await d.container.readMarker(name))?.bytes)
    }

    /// A destination `chronicle init` made (an account marker, no store)
    /// takes the source's account; one that holds a store keeps its own,
    /// and the account is reported as a conflict.
    @Test func aNewlyMadeDestinationTakesTheSourceAccount() async throws {
        let d = try await source()
        let fresh = try folder(d, "fresh")
        _ = try await fresh.createMarker(ContainerLayout.account, AccountToken(token: "made-by-init"))
        let copied = try await ContainerReplication(from: d.container, to: fresh).run()
        #expect(copied.conflicts.isEmpty, "\(copied.conflicts)")
        #expect(try await fresh.readMarker(ContainerLayout.account)?.bytes == (try await d.container.readMarker(ContainerLayout.account))?.bytes)

        let used = try folder(d, "used")
        _ = try await used.createMarker(ContainerLayout.account, AccountToken(token: "in-use"))
        let other = try await open(d, "other", on: used, device: 7)
        try await other.write { tx in _ = tx.insert("Note", ["title": Value.string("theirs")]) }
        try await other.sync()
        let before = try await used.listAll(prefix: "").map(\.name)
        let refused = try await #require(throws: ChronicleError.self) {
            try await ContainerReplication(from: d.container, to: used).run(store: d.stores[0].storeID)
        }
        #expect(refused.code == .markerConflict && refused.message.contains("another account"), "\(refused)")
        #expect(try await used.readMarker(ContainerLayout.account, as: AccountToken.self)?.payload.token == "in-use", "not replaced")
        #expect(try await used.listAll(prefix: "").map(\.name) == before, "nothing copied into another account's container")

        // Another account whose stores were all deleted: still its account.
        let emptied = try folder(d, "emptied")
        _ = try await emptied.createMarker(ContainerLayout.account, AccountToken(token: "emptied-account"))
        _ = try await emptied.createMarker(ContainerLayout.tombstone(store: StoreID(RecordID(high: 9, low: 9))), StoreTombstone(device: DeviceID(index: 3), milliseconds: 1))
        let kept = try await #require(throws: ChronicleError.self) { try await ContainerReplication(from: d.container, to: emptied).run() }
        #expect(kept.code == .markerConflict)
        #expect(try await emptied.readMarker(ContainerLayout.account, as: AccountToken.self)?.payload.token == "emptied-account")

        // The same size, other bytes: a conflict, not "already there".
        let copy = try folder(d, "same-size")
        _ = try await ContainerReplication(from: d.container, to: copy).run()
        let log = try #require(try await copy.listAll(prefix: ContainerLayout.logsPrefix(store: d.stores[0].storeID)).first?.name)
        let path = d.root.appendingPathComponent("same-size/blobs/\(log.rawValue)")
        var bytes = try Data(contentsOf: path)
        bytes[bytes.count - 1] ^= 0x55
        try bytes.write(to: path)
        let again = try await ContainerReplication(from: d.container, to: copy).run()
        #expect(again.conflicts == [log.rawValue], "\(again.conflicts)")
    }

    @Test func aStoreTheSourceDoesNotHoldIsNotFoundAndCopiesNothing() async throws {
        let d = try await source()
        let destination = try folder(d, "nothing")
        let missing = StoreID(RecordID(high: 1, low: 2))
        let error = try await #require(throws: ChronicleError.self) { try await ContainerReplication(from: d.container, to: destination).run(store: missing) }
        #expect(error.code == .notFound)
        #expect(try await destination.readMarker(ContainerLayout.activeStore) == nil)
        #expect(try await destination.readMarker(ContainerLayout.account) == nil)
    }

    /// A file someone left among a device's logs (a sync service's
    /// conflicted copy) is passed over and said, not a failure; a copy
    /// leaves it out, and leaves out a log that does not verify.
    @Test func strayEntriesArePassedOverAndDamagedLogsAreNotCopied() async throws {
        let d = try await source()
        let store = d.stores[0].storeID
        let logs = try await d.container.listAll(prefix: ContainerLayout.logsPrefix(store: store)).map(\.name)
        let first = try #require(logs.first)
        let stray = try ContainerName(first.rawValue + ".conflicted")
        try await d.container.put(stray, Array("a copy a sync service kept".utf8))
        let joiner = try await open(d, "joiner", on: d.container, device: 9)
        let report = try await joiner.sync()
        #expect(report.status == .upToDate, "\(report.imported.failures)")
        #expect(report.imported.passedOver == [stray.rawValue])
        #expect(try await joiner.stateHash() == (try await d.stores[0].stateHash()))

        // A damaged log in the source: not spread.
        let damaged = try #require(logs.last)
        let path = d.root.appendingPathComponent("container/blobs/\(damaged.rawValue)")
        var bytes = try Data(contentsOf: path)
        bytes[bytes.count - 1] ^= 0xFF
        try bytes.write(to: path)
        let destination = try folder(d, "copy")
        let copy = try await ContainerReplication(from: d.container, to: destination).run()
        #expect(copy.foreign == [stray.rawValue])
        #expect(copy.damaged.count == 1 && copy.damaged[0].hasPrefix(damaged.rawValue), "\(copy.damaged)")
        let copied = try await destination.listAll(prefix: "").map(\.name)
        #expect(!copied.contains(damaged) && !copied.contains(stray) && copied.contains(first))
    }
}
