import Chronicle
import Foundation

/// `device.json` in a device directory: the device's stable ID and the store
/// it last opened (so `query` and `state-hash` find the snapshot).
struct DeviceFile: Codable {
    var device: DeviceID
    var store: StoreID?

    static let name = "device.json"

    /// Loads the file, or makes a new device ID if there is none yet.
    static func load(in directory: URL) throws -> DeviceFile {
        let url = directory.appendingPathComponent(name)
        guard FileManager.default.fileExists(atPath: url.path) else {
            return DeviceFile(device: DeviceID(UUID()), store: nil)
        }
        do {
            return try JSONDecoder().decode(DeviceFile.self, from: Data(contentsOf: url))
        } catch {
            throw ChronicleError(.malformedBody, "\(url.path) is not a valid device file: \(error)")
        }
    }

    func save(in directory: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(self).write(to: directory.appendingPathComponent(DeviceFile.name), options: .atomic)
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
