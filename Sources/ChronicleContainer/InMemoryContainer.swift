import ChronicleCore
import Synchronization

/// A container in memory, for tests. Exclusive create is reliable.
public final class InMemoryContainer: Container {
    private struct State {
        var blobs: [ContainerName: [UInt8]] = [:]
        var markers: [ContainerName: Marker] = [:]
        /// Per device (its log prefix), the ranges of its stored logs sorted
        /// by first sequence; they never overlap, so they are sorted by last
        /// sequence too.
        var logRanges: [String: [(first: UInt64, last: UInt64, name: ContainerName)]] = [:]

        /// The stored log of the device whose range overlaps `log`'s, if any:
        /// the one with the greatest first sequence at or before `log.last`.
        func overlapping(_ log: ContainerLayout.ParsedLogName, name: ContainerName) -> ContainerName? {
            let ranges = logRanges[ContainerLayout.logPrefix(store: log.store, device: log.device)] ?? []
            var low = 0
            var high = ranges.count
            while low < high {
                let mid = (low + high) / 2
                if ranges[mid].first <= log.last { low = mid + 1 } else { high = mid }
            }
            guard low > 0, ranges[low - 1].last >= log.first, ranges[low - 1].name != name else { return nil }
            return ranges[low - 1].name
        }

        mutating func index(_ log: ContainerLayout.ParsedLogName, name: ContainerName) {
            let key = ContainerLayout.logPrefix(store: log.store, device: log.device)
            var ranges = logRanges[key] ?? []
            let at = ranges.firstIndex { $0.first > log.first } ?? ranges.count
            ranges.insert((log.first, log.last, name), at: at)
            logRanges[key] = ranges
        }

        mutating func unindex(_ name: ContainerName) {
            guard let log = ContainerLayout.parseLog(name) else { return }
            logRanges[ContainerLayout.logPrefix(store: log.store, device: log.device)]?.removeAll { $0.name == name }
        }
    }

    // Mutex makes the class safe to share across tasks.
    private let state = Mutex(State())

    public let capabilities = ContainerCapabilities(reliableExclusiveCreate: true)

    /// Creates an empty container.
    public init() {}

    public func put(_ name: ContainerName, _ bytes: [UInt8]) async throws {
        let log = ContainerLayout.parseLog(name)
        if let log { try Self.checkLogSpan(log, name) }
        try state.withLock { (s) throws(ChronicleError) in
            if let existing = s.blobs[name] {
                guard existing == bytes else {
                    throw ChronicleError(.blobConflict, "blob \(name) already exists with different bytes")
                }
                return
            }
            if let log {
                if let other = s.overlapping(log, name: name) {
                    throw ChronicleError(.blobConflict, "log \(name) overlaps the stored log \(other) of device \(log.device): two writers use one device ID")
                }
                s.index(log, name: name)
            }
            s.blobs[name] = bytes
        }
    }

    public func get(_ name: ContainerName, maxBytes: Int) async throws -> [UInt8] {
        guard let bytes = state.withLock({ $0.blobs[name] }) else {
            throw ChronicleError(.notFound, "no blob named \(name)")
        }
        guard bytes.count <= maxBytes else {
            throw ChronicleError(.sizeOverCap, "blob \(name) is \(bytes.count) bytes, over the cap of \(maxBytes)")
        }
        return bytes
    }

    public func listChildren(prefix: String) async throws -> [String] {
        state.withLock { s in
            Set(s.blobs.keys.compactMap { name -> String? in
                guard name.rawValue.hasPrefix(prefix) else { return nil }
                return name.rawValue.dropFirst(prefix.count).split(separator: "/").first.map(String.init)
            }).sorted()
        }
    }

    /// None: nothing but blobs and markers can be stored in memory.
    public func foreignEntries(prefix: String) async throws -> [ForeignEntry] { [] }

    public func list(prefix: String, after: ContainerName?, limit: Int) async throws -> [BlobInfo] {
        state.withLock { s in
            Array(s.blobs.filter { $0.key.rawValue.hasPrefix(prefix) && (after == nil || $0.key > after!) }
                .map { BlobInfo(name: $0.key, size: $0.value.count) }
                .sorted { $0.name < $1.name }
                .prefix(max(0, limit)))
        }
    }

    public func delete(_ name: ContainerName) async throws {
        state.withLock { s in
            if s.blobs.removeValue(forKey: name) != nil { s.unindex(name) }
        }
    }

    public func readMarker(_ name: ContainerName) async throws -> Marker? {
        state.withLock { $0.markers[name] }
    }

    public func createMarker(_ name: ContainerName, _ bytes: [UInt8]) async throws -> Marker {
        try Self.checkMarkerSize(bytes, name)
        return try state.withLock { (s) throws(ChronicleError) -> Marker in
            guard s.markers[name] == nil else { throw ChronicleError(.markerConflict, "marker \(name) already exists") }
            let marker = Marker(bytes: bytes, version: 1)
            s.markers[name] = marker
            return marker
        }
    }

    public func replaceMarker(_ name: ContainerName, _ bytes: [UInt8], expected: UInt64) async throws -> Marker {
        try Self.checkMarkerSize(bytes, name)
        return try state.withLock { (s) throws(ChronicleError) -> Marker in
            guard let current = s.markers[name], current.version == expected else {
                throw ChronicleError(.markerConflict, "marker \(name) is not at version \(expected)")
            }
            let marker = Marker(bytes: bytes, version: expected == .max ? 1 : expected + 1)
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
