import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Logging

/// Devices of one account sharing a `DirectoryContainer` and a manual
/// clock, in a temporary folder. The folder is not removed on deinit: the
/// value's lifetime may end at its last use, while its stores are still in
/// use.
final class TestDevices {
    let schema: Schema
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-devices-\(UUID().uuidString)")
    let container: DirectoryContainer
    let clock = ManualClock()
    private(set) var stores: [Store] = []

    init(_ count: Int, schema: Schema) async throws {
        self.schema = schema
        container = try DirectoryContainer(root: root.appendingPathComponent("container"), create: true)
        for _ in 0..<count { try await add() }
    }

    /// Opens one more device (device IDs count from 1).
    @discardableResult
    func add() async throws -> Store {
        let i = stores.count + 1
        let store = try await Store.open(Store.Configuration(
            schema: schema, deviceID: DeviceID(index: UInt64(i)), directory: root.appendingPathComponent("d\(i)"),
            container: container, clock: clock, seed: UInt64(i), logger: Logger(label: "test"), durability: .normal))
        stores.append(store)
        return store
    }

    /// Two rounds of sync on every device: enough for everyone to see everything.
    func syncAll() async throws {
        for _ in 0..<2 { for s in stores { try await s.sync() } }
    }

    /// The distinct state hashes of the devices: one when they agree.
    func hashes() async throws -> Set<String> {
        var result: Set<String> = []
        for s in stores { result.insert(try await s.stateHash()) }
        return result
    }

    /// An integer a query gives on device `i`.
    func count(_ sql: String, on i: Int) async throws -> Int {
        try await stores[i].read { db in try Int.fetchOne(db, sql: sql) ?? 0 }
    }

    /// The blob names under `prefix`.
    func blobs(under prefix: String) async throws -> [ContainerName] {
        try await container.listAll(prefix: prefix).map(\.name)
    }
}

/// A sync service joining two replicas of a container folder: copies into
/// `main` every file of `replica` that `main` lacks; a file both hold (the
/// active-store pointer, say) keeps `main`'s copy.
func copyMissingFiles(from replica: URL, into main: URL) throws {
    for case let url as URL in FileManager.default.enumerator(at: replica, includingPropertiesForKeys: nil)! {
        let target = main.appendingPathComponent(String(url.path.dropFirst(replica.path.count)))
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), isDirectory.boolValue {
            try FileManager.default.createDirectory(at: target, withIntermediateDirectories: true)
        } else if !FileManager.default.fileExists(atPath: target.path) {
            try FileManager.default.copyItem(at: url, to: target)
        }
    }
}
