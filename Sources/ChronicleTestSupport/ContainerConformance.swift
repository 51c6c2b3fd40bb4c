import ChronicleContainer
import ChronicleCore
import Foundation
import Testing

/// One conformance suite for every container backend (Litestream's habit):
/// each backend's test target runs every ``Check`` against fresh containers
/// of its own.
///
/// ```swift
/// @Test(arguments: ContainerConformance.checks)
/// func conformance(check: ContainerConformance.Check) async throws {
///     try await check.run { ContainerConformance.Subject(InMemoryContainer()) }
/// }
/// ```
///
/// Checks record failures with Swift Testing's `#expect`, so they must run
/// inside a test.
package enum ContainerConformance {
    /// A fresh, empty container to check, and a way to open it again.
    package struct Subject: Sendable {
        /// The container.
        package var container: any Container
        /// Another handle on the same container, as another process would
        /// open it (for a backend without one, the same handle).
        package var reopen: @Sendable () async throws -> any Container

        /// A subject whose other handles are itself.
        package init(_ container: any Container) {
            self.container = container
            self.reopen = { container }
        }

        /// A subject with a way to open other handles.
        package init(_ container: any Container, reopen: @escaping @Sendable () async throws -> any Container) {
            self.container = container
            self.reopen = reopen
        }
    }

    /// One behaviour every backend must have.
    package struct Check: Sendable, CustomTestStringConvertible {
        /// What it checks.
        package let name: String
        let body: @Sendable (Subject) async throws -> Void

        package var testDescription: String { name }

        /// Runs the check on a subject `make` gives.
        package func run(_ make: () async throws -> Subject) async throws {
            try await body(try await make())
        }
    }

    /// Every check.
    package static let checks: [Check] = blobChecks + markerChecks + logChecks

    static func name(_ s: String) -> ContainerName { try! ContainerName(s) }

    // MARK: Blobs

    static let blobChecks: [Check] = [
        Check(name: "put and get round-trip; retries are safe") { s in
            let c = s.container
            let bytes: [UInt8] = Array("hello".utf8)
            try await c.put(name("s/logs/d/a.chlog"), bytes)
            try await c.put(name("s/logs/d/a.chlog"), bytes)
            #expect(try await c.get(name("s/logs/d/a.chlog")) == bytes)
            let empty: [UInt8] = []
            try await c.put(name("s/empty"), empty)
            #expect(try await c.get(name("s/empty")) == empty)
        },
        Check(name: "different bytes under an existing name conflict") { s in
            let c = s.container
            try await c.put(name("a"), [1, 2, 3])
            await expectError(.blobConflict) { try await c.put(name("a"), [1, 2, 4]) }
            await expectError(.blobConflict) { try await c.put(name("a"), [1, 2, 3, 4]) }
            await expectError(.blobConflict) { try await c.put(name("a"), [1, 2]) }
            #expect(try await c.get(name("a")) == [1, 2, 3])
        },
        Check(name: "a missing blob is notFound; deleting it succeeds") { s in
            let c = s.container
            await expectError(.notFound) { _ = try await c.get(name("nope")) }
            try await c.delete(name("nope"))
        },
        Check(name: "listings are ordered, paged and prefixed") { s in
            let c = s.container
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
            #expect(try await c.listAll(prefix: "s/logs/").count == 26)
            #expect(try await c.listAll(prefix: "").count == 27)
            #expect(try await c.list(prefix: "zzz/", after: nil, limit: 10).isEmpty)
        },
        Check(name: "children list the next name components, one level") { s in
            let c = s.container
            for n in ["s/logs/b/0/1.chlog", "s/logs/a/0/1.chlog", "s/logs/a/0/2.chlog", "s/baselines/x/1.chbase", "t/x"] {
                try await c.put(name(n), [1])
            }
            #expect(try await c.listChildren(prefix: "s/logs/") == ["a", "b"])
            #expect(try await c.listChildren(prefix: "s/") == ["baselines", "logs"])
            #expect(try await c.listChildren(prefix: "") == ["s", "t"])
            #expect(try await c.listChildren(prefix: "s/logs/a/0/") == ["1.chlog", "2.chlog"])
            #expect(try await c.listChildren(prefix: "u/").isEmpty)
        },
        Check(name: "delete removes a blob") { s in
            let c = s.container
            try await c.put(name("a/b"), [1])
            try await c.delete(name("a/b"))
            #expect(try await c.listAll(prefix: "a/").isEmpty)
            try await c.put(name("a/b"), [2])
            #expect(try await c.get(name("a/b")) == [2])
        },
        Check(name: "get refuses a blob over the caller's cap") { s in
            let c = s.container
            let bytes = [UInt8](repeating: 7, count: 1000)
            try await c.put(name("s/big"), bytes)
            await expectError(.sizeOverCap) { _ = try await c.get(name("s/big"), maxBytes: 999) }
            #expect(try await c.get(name("s/big"), maxBytes: 1000) == bytes)
            #expect(try await c.get(name("s/big")) == bytes)
        },
        Check(name: "a clean container has no foreign entries") { s in
            let c = s.container
            try await c.put(name("s/logs/d/a.chlog"), [1])
            _ = try await c.createMarker(name("s/devices/d"), [])
            _ = try await c.replaceMarker(name("s/devices/d"), [1], expected: 1)
            #expect(try await c.foreignEntries().isEmpty)
        },
    ]

    // MARK: Markers

    static let markerChecks: [Check] = [
        Check(name: "marker listings page in name order") { s in
            let c = s.container
            let names = (0..<12).map { String(format: "s/devices/%03d", $0) }
            for n in names.shuffled() { _ = try await c.createMarker(name(n), [1]) }
            _ = try await c.createMarker(name("s/devicesx"), [1])
            let first = try await c.listMarkers(prefix: "s/devices/", after: nil, limit: 5)
            #expect(first.map(\.rawValue) == Array(names[0..<5]))
            let second = try await c.listMarkers(prefix: "s/devices/", after: first.last, limit: 5)
            #expect(second.map(\.rawValue) == Array(names[5..<10]))
            let last = try await c.listMarkers(prefix: "s/devices/", after: second.last, limit: 5)
            #expect(last.map(\.rawValue) == Array(names[10..<12]))
            #expect(try await c.listMarkers(prefix: "s/devices/", after: nil, limit: 0).isEmpty)
            #expect(try await c.listMarkers(prefix: "s/devices/") == names.map(name))
        },
        Check(name: "markers create exclusively and compare-and-swap") { s in
            let c = s.container
            let m = name("s/election")
            #expect(try await c.readMarker(m) == nil)
            let first = try await c.createMarker(m, [1])
            #expect(first.version == 1)
            await expectError(.markerConflict) { _ = try await c.createMarker(m, [2]) }
            let second = try await c.replaceMarker(m, [3], expected: 1)
            #expect(second.version == 2)
            await expectError(.markerConflict) { _ = try await c.replaceMarker(m, [4], expected: 1) }
            #expect(try await c.readMarker(m) == Marker(bytes: [3], version: 2))
            await expectError(.markerConflict) { try await c.deleteMarker(m, expected: 1) }
            try await c.deleteMarker(m, expected: 2)
            #expect(try await c.readMarker(m) == nil)
            try await c.deleteMarker(m, expected: nil)
            await expectError(.markerConflict) { _ = try await c.replaceMarker(m, [5], expected: 2) }
        },
        Check(name: "concurrent creates have exactly one winner") { s in
            let winners = await withTaskGroup(of: Bool.self) { group in
                for i in 0..<16 {
                    group.addTask {
                        guard let c = try? await s.reopen() else { return false }
                        return (try? await c.createMarker(name("s/lease"), [UInt8(i)])) != nil
                    }
                }
                return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(winners == 1)
        },
        Check(name: "concurrent compare-and-swaps never lose an increment") { s in
            let m = name("s/counter")
            _ = try await s.container.createMarker(m, [0])
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        guard let c = try? await s.reopen() else { return }
                        var done = 0
                        while done < 10 {
                            guard let current = try? await c.readMarker(m) else { continue }
                            if (try? await c.replaceMarker(m, [current.bytes[0] + 1], expected: current.version)) != nil { done += 1 }
                        }
                    }
                }
            }
            #expect(try await s.container.readMarker(m)?.bytes == [40])
            #expect(try await s.container.readMarker(m)?.version == 41)
        },
        Check(name: "markers list by prefix, nothing else") { s in
            let c = s.container
            _ = try await c.createMarker(name("s/devices/b"), [])
            _ = try await c.createMarker(name("s/devices/a"), [])
            _ = try await c.createMarker(name("t/devices/c"), [])
            _ = try await c.replaceMarker(name("s/devices/a"), [1], expected: 1)
            try await c.deleteMarker(name("t/devices/c"), expected: nil)
            #expect(try await c.listMarkers(prefix: "s/devices/").map(\.rawValue) == ["s/devices/a", "s/devices/b"])
            #expect(try await c.listMarkers(prefix: "").map(\.rawValue) == ["s/devices/a", "s/devices/b"])
        },
        Check(name: "markers over the cap are refused") { s in
            let c = s.container
            let m = name("s/big")
            let limit = [UInt8](repeating: 1, count: Marker.maxBytes)
            await expectError(.sizeOverCap) { _ = try await c.createMarker(m, limit + [1]) }
            #expect(try await c.readMarker(m) == nil)
            _ = try await c.createMarker(m, limit)
            await expectError(.sizeOverCap) { _ = try await c.replaceMarker(m, limit + [1], expected: 1) }
            #expect(try await c.readMarker(m) == Marker(bytes: limit, version: 1))
        },
    ]

    // MARK: One log per sequence

    static let store = StoreID(RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_00AA))
    static let device = DeviceID(index: 0xD1)

    static func log(_ first: UInt64, _ last: UInt64, device: DeviceID = device, store: StoreID = store) -> ContainerName {
        ContainerLayout.log(store: store, device: device, first: first, last: last)
    }

    static let logChecks: [Check] = [
        Check(name: "a log overlapping another of its device is refused") { s in
            let c = s.container
            try await c.put(log(1, 1), [1])
            try await c.put(log(1, 1), [1])
            await expectError(.blobConflict) { try await c.put(log(1, 2), [2]) }
            try await c.put(log(2, 3), [3])
            for (first, last) in [(2, 2), (3, 3), (3, 4), (1, 5)] {
                await expectError(.blobConflict, "\(first)-\(last)") { try await c.put(log(UInt64(first), UInt64(last)), [9]) }
            }
            await expectError(.blobConflict) { try await c.put(log(2, 3), [4]) }
            // Other devices and stores have sequences of their own.
            try await c.put(log(1, 2, device: DeviceID(index: 0xD2)), [5])
            try await c.put(log(1, 2, store: StoreID(RecordID(high: 9, low: 9))), [6])
            try await c.put(log(4, 4), [7])
            // Once a log is deleted (a device repairing its own), its range is free again.
            try await c.delete(log(2, 3))
            try await c.put(log(2, 2), [8])
            #expect(try await c.listAll(prefix: ContainerLayout.logPrefix(store: store, device: device)).map(\.name)
                == [log(1, 1), log(2, 2), log(4, 4)])
        },
        Check(name: "overlaps are found across shard folders") { s in
            let c = s.container
            let perShard = ContainerLayout.sequencesPerShard
            try await c.put(log(perShard - 10, perShard + 10), [1])
            await expectError(.blobConflict) { try await c.put(log(perShard + 10, perShard + 10), [2]) }
            await expectError(.blobConflict) { try await c.put(log(perShard - 20, perShard - 10), [3]) }
            try await c.put(log(perShard + 11, 2 * perShard + 5), [4])
            await expectError(.blobConflict) { try await c.put(log(2 * perShard, 2 * perShard), [5]) }
            try await c.put(log(perShard - 11, perShard - 11), [6])
        },
        Check(name: "a log spanning more than the most sequences is an invalid name") { s in
            let c = s.container
            let most = ContainerLayout.maxSequencesPerLog
            await expectError(.invalidName) { try await c.put(log(1, most + 1), [1]) }
            try await c.put(log(1, most), [1])
        },
        Check(name: "concurrent overlapping puts of one device have one winner") { s in
            for round in UInt64(0)..<4 {
                let middle = 100 + round * 10
                // Twelve different names, every one covering `middle`.
                let ranges = (0..<12).map { i in (middle - UInt64(i % 4), middle + UInt64(i / 4)) }
                let stored = await withTaskGroup(of: Bool.self) { group in
                    for (first, last) in ranges {
                        group.addTask {
                            guard let c = try? await s.reopen() else { return false }
                            do {
                                try await c.put(log(first, last), [UInt8(first & 0xFF), UInt8(last & 0xFF)])
                                return true
                            } catch {
                                #expect((error as? ChronicleError)?.code == .blobConflict, "\(error)")
                                return false
                            }
                        }
                    }
                    return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
                }
                #expect(stored == 1, "round \(round)")
                let listed = try await s.container.listAll(prefix: ContainerLayout.logPrefix(store: store, device: device))
                #expect(ContainerLayout.overlappingLogs(listed.map(\.name)).isEmpty)
            }
        },
    ]

    /// Expects `body` to throw a ``ChronicleError`` with `code`.
    package static func expectError(
        _ code: ChronicleError.Code, _ comment: String = "", sourceLocation: SourceLocation = #_sourceLocation,
        _ body: () async throws -> Void
    ) async {
        do {
            try await body()
            Issue.record("expected \(code), nothing was thrown \(comment)", sourceLocation: sourceLocation)
        } catch let error as ChronicleError {
            #expect(error.code == code, "\(error) \(comment)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("expected ChronicleError \(code), got \(error) \(comment)", sourceLocation: sourceLocation)
        }
    }
}
