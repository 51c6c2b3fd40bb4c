import ChronicleCore
import Synchronization

/// A container in memory, for tests. Exclusive create is reliable.
public final class InMemoryContainer: Container {
    private struct State {
        var blobs: [ContainerName: [UInt8]] = [:]
        var markers: [ContainerName: Marker] = [:]
    }

    // Mutex makes the class safe to share across tasks.
    private let state = Mutex(State())

    public let capabilities = ContainerCapabilities(reliableExclusiveCreate: true)

    /// Creates an empty container.
    public init() {}

    public func put(_ name: ContainerName, _ bytes: [UInt8]) async throws {
        try state.withLock { (s) throws(ChronicleError) in
            if let existing = s.blobs[name] {
                guard existing == bytes else {
                    throw ChronicleError(.blobConflict, "blob \(name) already exists with different bytes")
                }
                return
            }
            s.blobs[name] = bytes
        }
    }

    public func get(_ name: ContainerName) async throws -> [UInt8] {
        guard let bytes = state.withLock({ $0.blobs[name] }) else {
            throw ChronicleError(.notFound, "no blob named \(name)")
        }
        return bytes
    }

    public func list(prefix: String, after: ContainerName?, limit: Int) async throws -> [BlobInfo] {
        state.withLock { s in
            Array(s.blobs.filter { $0.key.rawValue.hasPrefix(prefix) && (after == nil || $0.key > after!) }
                .map { BlobInfo(name: $0.key, size: $0.value.count) }
                .sorted { $0.name < $1.name }
                .prefix(max(0, limit)))
        }
    }

    public func delete(_ name: ContainerName) async throws {
        _ = state.withLock { $0.blobs.removeValue(forKey: name) }
    }

    public func readMarker(_ name: ContainerName) async throws -> Marker? {
        state.withLock { $0.markers[name] }
    }

    public func createMarker(_ name: ContainerName, _ bytes: [UInt8]) async throws -> Marker {
        try state.withLock { (s) throws(ChronicleError) -> Marker in
            guard s.markers[name] == nil else { throw ChronicleError(.markerConflict, "marker \(name) already exists") }
            let marker = Marker(bytes: bytes, version: 1)
            s.markers[name] = marker
            return marker
        }
    }

    public func replaceMarker(_ name: ContainerName, _ bytes: [UInt8], expected: UInt64) async throws -> Marker {
        try state.withLock { (s) throws(ChronicleError) -> Marker in
            guard let current = s.markers[name], current.version == expected else {
                throw ChronicleError(.markerConflict, "marker \(name) is not at version \(expected)")
            }
            let marker = Marker(bytes: bytes, version: expected + 1)
            s.markers[name] = marker
            return marker
        }
    }

    public func deleteMarker(_ name: ContainerName, expected: UInt64?) async throws {
        try state.withLock { (s) throws(ChronicleError) in
            guard let current = s.markers[name] else { return }
            if let expected, current.version != expected {
                throw ChronicleError(.markerConflict, "marker \(name) is at version \(current.version), expected \(expected)")
            }
            s.markers[name] = nil
        }
    }

    public func listMarkers(prefix: String) async throws -> [ContainerName] {
        state.withLock { s in s.markers.keys.filter { $0.rawValue.hasPrefix(prefix) }.sorted() }
    }
}
