import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Logging
import Testing

/// What opening a store reports when its files or the container's markers
/// are not what they should be: the path, what is wrong in plain words, and
/// the cause kept underneath.
@Suite struct StoreErrorTests {
    static let schema = try! Schema(version: 1, entities: [Entity("Note", attributes: [Attribute("title", .string)])])

    let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-store-errors-\(UUID().uuidString)")

    func open(_ folder: URL, container: any Container) async throws -> Store {
        try await Store.open(Store.Configuration(
            schema: Self.schema, directory: folder, container: container, clock: ManualClock(), seed: 1,
            logger: Logger(label: "test"), durability: .normal))
    }

    /// Opens a store in a folder whose `device.json` is `prepare`d, and
    /// returns what it threw.
    func openingError(_ prepare: (URL) throws -> Void) async throws -> ChronicleError? {
        defer { try? FileManager.default.removeItem(at: root) }
        let folder = root.appendingPathComponent("device")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try prepare(folder.appendingPathComponent("device.json"))
        do {
            let store = try await open(folder, container: InMemoryContainer())
            try await store.close()
            Issue.record("the store opened")
            return nil
        } catch let error as ChronicleError {
            return error
        }
    }

    @Test func aDeviceFileThatCannotBeReadSaysWhyInWords() async throws {
        let error = try await openingError { file in
            try FileManager.default.createSymbolicLink(atPath: file.path, withDestinationPath: "/etc/hostname")
        }
        #expect(error?.code == .io)
        #expect(error?.message.contains("device.json: it is a symbolic link, and it should be a regular file holding the device's ID") == true,
                "\(String(describing: error))")
        #expect(error?.message.contains("errno") == false)
        #expect(error?.underlying(as: POSIXError.self)?.code == .ELOOP)
    }

    @Test func aDeviceFileWithoutItsIDNamesTheMissingKey() async throws {
        let error = try await openingError { file in try Data(#"{"store": null}"#.utf8).write(to: file) }
        #expect(error?.code == .malformedBody)
        #expect(error?.message.contains(#""device" is missing"#) == true, "\(String(describing: error))")
        #expect(error?.underlying(as: DecodingError.self) != nil)
    }

    /// The active-store marker is a typed value: one that does not hold a
    /// store (a sync service truncated it, a stray write) is repaired as a
    /// lost pointer is, not a stop for every device: a device that knows no
    /// store removes it and opens the store the container then names.
    @Test func aMalformedActiveStoreMarkerIsRepaired() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let container = InMemoryContainer()
        _ = try await container.createMarker(ContainerLayout.activeStore, Array(#"{"store": "yesterday's"}"#.utf8))
        let store = try await open(root.appendingPathComponent("device"), container: container)
        let pointer = try await container.readMarker(ContainerLayout.activeStore, as: ActiveStorePointer.self)
        #expect(pointer?.payload.store == store.storeID)
        try await store.close()
    }
}
