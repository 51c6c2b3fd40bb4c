import ChronicleContainer
import ChronicleCore
import Foundation
import Testing

/// The backends every conformance test runs against.
enum Backend: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case memory, directory

    var testDescription: String { rawValue }

    func make() throws -> any Container {
        switch self {
        case .memory: return InMemoryContainer()
        case .directory:
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-conf-\(UUID().uuidString)")
            return try DirectoryContainer(root: dir)
        }
    }
}

func name(_ s: String) -> ContainerName { try! ContainerName(s) }

/// One suite, every backend (Litestream's habit).
@Suite struct ContainerConformanceTests {
    @Test(arguments: Backend.allCases)
    func putGetRoundTripsAndRetriesAreSafe(backend: Backend) async throws {
        let c = try backend.make()
        let bytes: [UInt8] = Array("hello".utf8)
        try await c.put(name("s/logs/d/a.chlog"), bytes)
        try await c.put(name("s/logs/d/a.chlog"), bytes)
        #expect(try await c.get(name("s/logs/d/a.chlog")) == bytes)
        let empty: [UInt8] = []
        try await c.put(name("s/empty"), empty)
        #expect(try await c.get(name("s/empty")) == empty)
    }

    @Test(arguments: Backend.allCases)
    func differentBytesUnderAnExistingNameConflict(backend: Backend) async throws {
        let c = try backend.make()
        try await c.put(name("a"), [1, 2, 3])
        await expectAsyncError(.blobConflict) { try await c.put(name("a"), [1, 2, 4]) }
        #expect(try await c.get(name("a")) == [1, 2, 3])
    }

    @Test(arguments: Backend.allCases)
    func missingBlobIsNotFound(backend: Backend) async throws {
        let c = try backend.make()
        await expectAsyncError(.notFound) { _ = try await c.get(name("nope")) }
        try await c.delete(name("nope"))
    }

    @Test(arguments: Backend.allCases)
    func listIsOrderedPagedAndPrefixed(backend: Backend) async throws {
        let c = try backend.make()
        let names = (0..<25).map { String(format: "s/logs/d/%04d.chlog", $0) }
        for n in names.shuffled() { try await c.put(name(n), Array(n.utf8)) }
        try await c.put(name("s/logs/e/0000.chlog"), [0])
        try await c.put(name("s/logsx"), [0])
        let page1 = try await c.list(prefix: "s/logs/d/", after: nil, limit: 10)
        #expect(page1.map(\.name.rawValue) == Array(names[0..<10]))
        #expect(page1.first?.size == names[0].utf8.count)
        let page2 = try await c.list(prefix: "s/logs/d/", after: page1.last!.name, limit: 10)
        #expect(page2.map(\.name.rawValue) == Array(names[10..<20]))
        let all = try await c.listAll(prefix: "s/logs/d/", pageSize: 7)
        #expect(all.map(\.name.rawValue) == names)
        let logs = try await c.listAll(prefix: "s/logs/")
        #expect(logs.count == 26)
        let everything = try await c.listAll(prefix: "")
        #expect(everything.count == 27)
        #expect(try await c.list(prefix: "zzz/", after: nil, limit: 10).isEmpty)
    }

    @Test(arguments: Backend.allCases)
    func deleteRemovesABlob(backend: Backend) async throws {
        let c = try backend.make()
        try await c.put(name("a/b"), [1])
        try await c.delete(name("a/b"))
        #expect(try await c.listAll(prefix: "a/").isEmpty)
        try await c.put(name("a/b"), [2])
        #expect(try await c.get(name("a/b")) == [2])
    }

    @Test(arguments: Backend.allCases)
    func markersCreateExclusivelyAndCompareAndSwap(backend: Backend) async throws {
        let c = try backend.make()
        let m = name("s/election")
        #expect(try await c.readMarker(m) == nil)
        let first = try await c.createMarker(m, [1])
        #expect(first.version == 1)
        await expectAsyncError(.markerConflict) { _ = try await c.createMarker(m, [2]) }
        let second = try await c.replaceMarker(m, [3], expected: 1)
        #expect(second.version == 2)
        await expectAsyncError(.markerConflict) { _ = try await c.replaceMarker(m, [4], expected: 1) }
        #expect(try await c.readMarker(m) == Marker(bytes: [3], version: 2))
        await expectAsyncError(.markerConflict) { try await c.deleteMarker(m, expected: 1) }
        try await c.deleteMarker(m, expected: 2)
        #expect(try await c.readMarker(m) == nil)
        try await c.deleteMarker(m, expected: nil)
        await expectAsyncError(.markerConflict) { _ = try await c.replaceMarker(m, [5], expected: 2) }
    }

    @Test(arguments: Backend.allCases)
    func concurrentCreatesHaveExactlyOneWinner(backend: Backend) async throws {
        let c = try backend.make()
        let winners = await withTaskGroup(of: Bool.self) { group in
            for i in 0..<16 {
                group.addTask { (try? await c.createMarker(name("s/lease"), [UInt8(i)])) != nil }
            }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(winners == 1)
    }

    @Test(arguments: Backend.allCases)
    func concurrentCompareAndSwapsNeverLoseAnIncrement(backend: Backend) async throws {
        let c = try backend.make()
        let m = name("s/counter")
        _ = try await c.createMarker(m, [0])
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    var done = 0
                    while done < 10 {
                        guard let current = try? await c.readMarker(m) else { continue }
                        if (try? await c.replaceMarker(m, [current.bytes[0] + 1], expected: current.version)) != nil { done += 1 }
                    }
                }
            }
        }
        #expect(try await c.readMarker(m)?.bytes == [40])
        #expect(try await c.readMarker(m)?.version == 41)
    }

    @Test(arguments: Backend.allCases)
    func listMarkersByPrefix(backend: Backend) async throws {
        let c = try backend.make()
        _ = try await c.createMarker(name("s/devices/b"), [])
        _ = try await c.createMarker(name("s/devices/a"), [])
        _ = try await c.createMarker(name("t/devices/c"), [])
        #expect(try await c.listMarkers(prefix: "s/devices/").map(\.rawValue) == ["s/devices/a", "s/devices/b"])
    }

    @Test(arguments: ["", "/etc/passwd", "../escape", "a/../../b", "a//b", "A", "a b", "a\\b", "a/", ".hidden",
                      "a/\u{0}", "é", String(repeating: "a", count: 101), "1/2/3/4/5/6/7/8/9"])
    func hostileNamesAreTypedErrors(raw: String) {
        #expect(throws: ChronicleError.self) { try ContainerName(raw) }
    }

    @Test func layoutNamesParseBackAndSort() throws {
        let store = StoreID(RecordID(high: 1, low: 2))
        let device = DeviceID(index: 3)
        let a = ContainerLayout.log(store: store, device: device, first: 9, last: 9)
        let b = ContainerLayout.log(store: store, device: device, first: 10, last: 12)
        #expect(a < b)
        #expect(ContainerLayout.parseLog(b) == ContainerLayout.ParsedLogName(store: store, device: device, first: 10, last: 12))
        #expect(ContainerLayout.parseLog(try ContainerName("\(store)/logs/\(device)/x.chlog")) == nil)
        #expect(ContainerLayout.parseLog(try ContainerName("\(store)/logs/\(device)/0000000000000002-0000000000000001.chlog")) == nil)
    }

    @Test func directoryContainerReportsForeignFilesAndNeverListsThem() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-foreign-\(UUID().uuidString)")
        let c = try DirectoryContainer(root: dir)
        try await c.put(name("s/logs/d/a.chlog"), [1])
        try Data([9]).write(to: dir.appendingPathComponent("blobs/s/logs/d/a (conflicted copy).chlog"))
        try Data([9]).write(to: dir.appendingPathComponent("blobs/s/logs/d/.DS_Store"))
        #expect(try await c.listAll(prefix: "s/").map(\.name.rawValue) == ["s/logs/d/a.chlog"])
        #expect(c.foreignEntries() == ["blobs/s/logs/d/.DS_Store", "blobs/s/logs/d/a (conflicted copy).chlog"])
    }

    @Test func directoryPutsLeaveNoTemporaryFiles() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-tmp-\(UUID().uuidString)")
        let c = try DirectoryContainer(root: dir)
        for i in 0..<20 { try await c.put(name("s/\(i)"), [UInt8(i)]) }
        try? await c.put(name("s/1"), [0xFF])
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.appendingPathComponent("tmp").path).isEmpty)
    }
}

func expectAsyncError(
    _ code: ChronicleError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void
) async {
    do {
        try await body()
        Issue.record("expected \(code), nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as ChronicleError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected ChronicleError \(code), got \(error)", sourceLocation: sourceLocation)
    }
}
