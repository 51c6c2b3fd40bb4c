import ChronicleContainer
import ChronicleCore
import ChronicleTestSupport
import Foundation
import Testing

/// The backends of this module that every conformance check runs against
/// (the simulated container runs them in ChronicleSimulationTests).
enum Backend: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case memory, directory

    var testDescription: String { rawValue }

    func make() throws -> ContainerConformance.Subject {
        switch self {
        case .memory:
            return ContainerConformance.Subject(InMemoryContainer())
        case .directory:
            let dir = temporaryFolder("conf")
            let container = try DirectoryContainer(root: dir, create: true)
            // Other handles are separate opens of the folder, as other processes' would be.
            return ContainerConformance.Subject(container) { try DirectoryContainer(root: dir) }
        }
    }
}

func name(_ s: String) -> ContainerName { try! ContainerName(s) }

/// A path in the temporary folder that does not exist yet.
func temporaryFolder(_ label: String) -> URL {
    FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-\(label)-\(UUID().uuidString)")
}

/// One suite, every backend (Litestream's habit).
@Suite struct ContainerConformanceTests {
    @Test(arguments: Backend.allCases, ContainerConformance.checks)
    func conformance(backend: Backend, check: ContainerConformance.Check) async throws {
        try await check.run { try backend.make() }
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
        let shard = ContainerLayout.log(store: store, device: device, first: 5000, last: 5000)
        #expect(shard.rawValue.hasPrefix(ContainerLayout.logShardPrefix(store: store, device: device, shard: 4)))
    }

    @Test func overlappingLogsAreFoundInAnyOrder() {
        let store = StoreID(RecordID(high: 1, low: 2))
        func log(_ d: UInt64, _ f: UInt64, _ l: UInt64) -> ContainerName {
            ContainerLayout.log(store: store, device: DeviceID(index: d), first: f, last: l)
        }
        let names = [log(1, 3, 3), log(1, 1, 1), log(1, 2, 2), log(1, 2, 3), log(2, 2, 3), log(2, 4, 4), log(1, 1, 9)]
        let overlaps = ContainerLayout.overlappingLogs(names)
        // 1-1 and 1-9 start together; 1-9 reaches furthest and covers 2-2, 2-3 and 3-3.
        #expect(overlaps.map { [$0.earlier, $0.later] } == [
            [log(1, 1, 1), log(1, 1, 9)], [log(1, 1, 9), log(1, 2, 2)], [log(1, 1, 9), log(1, 2, 3)], [log(1, 1, 9), log(1, 3, 3)],
        ])
        #expect(ContainerLayout.overlappingLogs([log(1, 1, 1), log(1, 2, 5), log(2, 1, 4)]).isEmpty)
    }
}
