import Chronicle
#if canImport(Glibc)
import Glibc
#endif
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

    /// Writes the file atomically and durably (temporary file, fsync, rename, directory fsync).
    func save(in directory: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data = try encoder.encode(self)
        let final = directory.appendingPathComponent(DeviceFile.name).path
        let temp = final + ".tmp-\(getpid())"
        let fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw ChronicleError(.io, "cannot write \(temp): errno \(errno)") }
        let written = data.withUnsafeBytes { write(fd, $0.baseAddress!, $0.count) }
        let synced = fsync(fd)
        close(fd)
        guard written == data.count, synced == 0, rename(temp, final) == 0 else {
            unlink(temp)
            throw ChronicleError(.io, "cannot write \(final): errno \(errno)")
        }
        let dir = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 {
            fsync(dir)
            close(dir)
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
