import Chronicle
import Foundation

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
        do {
            return try JSONDecoder().decode(DeviceFile.self, from: Data(contentsOf: url))
        } catch {
            throw ChronicleError(.malformedBody, "\(url.path) is not a valid device file: \(error.localizedDescription)")
        }
    }

    /// The snapshot of the store last opened in `directory`.
    static func snapshotPath(in directory: URL) throws -> String {
        let file = try load(in: directory)
        guard let store = file.store else {
            throw ChronicleError(.notFound, "\(directory.path) has no snapshot yet (run `chronicle save` or `chronicle sync` first)")
        }
        return directory.appendingPathComponent("\(store).sqlite").path
    }
}
