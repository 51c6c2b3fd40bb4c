import ChronicleContainer
import ChronicleCore
import ChronicleTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Markers hold typed Codable values, and every path of a directory
/// container comes from ``ContainerLayout``.
@Suite struct MarkerPayloadTests {
    let store = StoreID(RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0001))
    let device = DeviceID(index: 7)

    /// The active-store pointer is written as every earlier version wrote
    /// it by hand, so old and new devices read each other's.
    @Test func theActiveStorePointerKeepsItsBytes() throws {
        let bytes = try ActiveStorePointer(store: store).markerBytes()
        #expect(String(decoding: bytes, as: UTF8.self) == #"{"store":"\#(store)"}"#)
        #expect(try ActiveStorePointer(markerBytes: bytes) == ActiveStorePointer(store: store))
    }

    /// A marker that does not hold its value says which marker and what is
    /// wrong, and keeps the decoding error.
    @Test(arguments: [#"{"store": 7}"#, #"{"stor": "x"}"#, "not json", #"{"store": "not-a-uuid"}"#])
    func aMalformedMarkerIsATypedErrorThatSaysWhy(text: String) {
        do {
            _ = try ActiveStorePointer(markerBytes: Array(text.utf8))
            Issue.record("\(text) decoded")
        } catch {
            #expect(error.code == .malformedBody)
            #expect(error.message.hasPrefix("the active-store marker is not valid: "), "\(error.message)")
            #expect(error.underlying(as: DecodingError.self) != nil)
        }
    }

    @Test func typedMarkersRoundTripThroughEveryBackend() async throws {
        for backend in Backend.allCases {
            let container = try backend.make().container
            let name = ContainerLayout.deviceRegistration(store: store, device: device)
            let registration = DeviceRegistration(device: device, incarnation: 0x3A9D_04C1_E2B7_F085)
            _ = try await container.createMarker(name, registration)
            let read = try await container.readMarker(name, as: DeviceRegistration.self)
            #expect(read?.payload == registration && read?.version == 1)
            _ = try await container.replaceMarker(name, DeviceRegistration(device: device, incarnation: nil), expected: 1)
            #expect(try await container.readMarker(name, as: DeviceRegistration.self)?.payload.incarnation == nil)
            #expect(try await container.listMarkers(prefix: ContainerLayout.deviceRegistrationsPrefix(store: store)) == [name])
        }
    }

    /// Where a directory container keeps a blob and a marker is what the
    /// layout says.
    @Test func directoryPathsComeFromTheLayout() async throws {
        let root = temporaryFolder("layout")
        defer { try? FileManager.default.removeItem(at: root) }
        let container = try DirectoryContainer(root: root, create: true)
        let log = ContainerLayout.log(store: store, device: device, first: 1, last: 1)
        try await container.put(log, [1, 2, 3])
        _ = try await container.createMarker(ContainerLayout.activeStore, ActiveStorePointer(store: store))
        let blob = root.appendingPathComponent(ContainerLayout.Directory.blobPath(log)).path
        #expect(FileManager.default.contents(atPath: blob) == Data([1, 2, 3]))
        let marker = root.appendingPathComponent(ContainerLayout.Directory.markerPath(ContainerLayout.activeStore)).path
        #expect(FileManager.default.fileExists(atPath: marker))
        #expect(try await container.listChildren(prefix: ContainerLayout.storesPrefix) == [store.description])
    }

    /// A file that cannot be read says why in the system's words, names the
    /// path, and keeps the POSIX error; never "errno 20".
    @Test func anUnreadableFileSaysWhyAndKeepsTheErrno() throws {
        let folder = temporaryFolder("unreadable")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("file")
        try Data([1]).write(to: file)
        let path = file.appendingPathComponent("inside").path
        do {
            _ = try DirectoryContainer.readFile(atPath: path, maxBytes: 10)
            Issue.record("read through a file")
        } catch {
            #expect(error.code == .io)
            #expect(error.message == "cannot read \(path): Not a directory")
            #expect(error.underlying(as: POSIXError.self)?.code == .ENOTDIR)
        }
    }
}
