import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
#if canImport(Glibc)
import Glibc
#endif

/// `device.json` in a device directory, as the store keeps it: the device's
/// ID and the store it last opened. Commands that only read a snapshot
/// (`query`, `state-hash`) find it through this file, without opening the
/// store (and without its lock: SQLite lets readers in beside a writer).
struct DeviceFile: Codable {
    var device: DeviceID
    var store: StoreID?

    static let name = "device.json"

    /// Reads the file.
    static func load(in directory: URL) throws -> DeviceFile {
        let url = directory.appendingPathComponent(name)
        guard FileManager.default.fileExists(atPath: url.path) else {
            throw ChronicleError(.notFound, "\(directory.path) is not a device folder yet (run `chronicle save` or `chronicle sync` first)")
        }
        var st = stat()
        guard lstat(url.path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_size <= 64 * 1024 else {
            throw ChronicleError(.malformedBody, "\(url.path) is not a device file (a regular file of at most 64 KiB naming the device)")
        }
        let data = Data(try InputFile.regularFileBytes(at: url.path, what: "device file", limit: 64 * 1024))
        do {
            return try JSONDecoder().decode(DeviceFile.self, from: data)
        } catch {
            throw ChronicleError.decoding("\(url.path), the device file,", error)
        }
    }

    /// The snapshot of the store last opened in `directory`.
    static func snapshotPath(in directory: URL) throws -> String {
        let file = try load(in: directory)
        guard let store = file.store else {
            throw ChronicleError(.notFound, "\(directory.path) has no snapshot yet (run `chronicle save` or `chronicle sync` first)")
        }
        let path = directory.appendingPathComponent("\(store).sqlite").path
        var st = stat()
        guard lstat(path, &st) == 0 else {
            throw ChronicleError(.notFound, "\(directory.path) has no snapshot of store \(store) (run `chronicle sync` first)")
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            throw ChronicleError(.foreignEntry, "\(path) is not a regular file, where the device's snapshot belongs")
        }
        return path
    }
}
