import ChronicleCore

/// The shared place all devices of one account write to and read from.
///
/// A container holds two kinds of things:
/// - **blobs**: immutable, named byte strings (logs and baselines). A put is
///   atomic (readers see all of it or nothing), putting the same bytes again
///   succeeds (so retries are safe) and putting different bytes under an
///   existing name fails with ``ChronicleError/Code/blobConflict``.
/// - **markers**: small mutable records (the active-store pointer, device
///   registrations, corruption marks, the election lease) with exclusive
///   create and compare-and-swap.
///
/// Every method throws ``ChronicleError``. Codes whose
/// ``ChronicleError/Code/isTransient`` is true (``ChronicleError/Code/unavailable``)
/// may succeed when retried.
///
/// Backends: ``DirectoryContainer`` (the embedded default: a local, synced or
/// network folder), ``InMemoryContainer`` (tests), and, in other modules, the
/// simulated and PostgreSQL containers. All pass the same conformance suite.
public protocol Container: Sendable {
    /// What this backend guarantees.
    var capabilities: ContainerCapabilities { get }

    /// Stores `bytes` under `name`, atomically and once.
    func put(_ name: ContainerName, _ bytes: [UInt8]) async throws
    /// The bytes stored under `name`; ``ChronicleError/Code/notFound`` if none.
    func get(_ name: ContainerName) async throws -> [UInt8]
    /// Up to `limit` blobs whose names start with `prefix` and sort after
    /// `after`, in name order.
    func list(prefix: String, after: ContainerName?, limit: Int) async throws -> [BlobInfo]
    /// Removes a blob. Removing a missing blob succeeds.
    func delete(_ name: ContainerName) async throws

    /// The marker named `name`, or nil.
    func readMarker(_ name: ContainerName) async throws -> Marker?
    /// Creates a marker that must not exist yet; ``ChronicleError/Code/markerConflict``
    /// if it does.
    func createMarker(_ name: ContainerName, _ bytes: [UInt8]) async throws -> Marker
    /// Replaces a marker if its version is still `expected`;
    /// ``ChronicleError/Code/markerConflict`` otherwise.
    func replaceMarker(_ name: ContainerName, _ bytes: [UInt8], expected: UInt64) async throws -> Marker
    /// Removes a marker if its version is still `expected` (or whatever it is,
    /// when `expected` is nil). Removing a missing marker succeeds.
    func deleteMarker(_ name: ContainerName, expected: UInt64?) async throws
    /// The markers whose names start with `prefix`, in name order.
    func listMarkers(prefix: String) async throws -> [ContainerName]
}

/// What a container backend guarantees.
public struct ContainerCapabilities: Sendable, Hashable {
    /// Whether ``Container/createMarker(_:_:)`` is exclusive across every
    /// device. True for a local disk, a network file system with working
    /// `link(2)` and PostgreSQL; false for folders synchronized by a service
    /// that can deliver two devices' files under one name. Where it is false,
    /// elections resolve concurrent winners by a deterministic rule instead.
    public var reliableExclusiveCreate: Bool

    /// Creates capabilities.
    public init(reliableExclusiveCreate: Bool) {
        self.reliableExclusiveCreate = reliableExclusiveCreate
    }
}

/// A blob's name and size, from a listing.
public struct BlobInfo: Sendable, Hashable {
    /// The blob's name.
    public var name: ContainerName
    /// Its size in bytes.
    public var size: Int

    /// Creates a listing entry.
    public init(name: ContainerName, size: Int) {
        self.name = name
        self.size = size
    }
}

/// A marker's content and version. The version increases with every replace.
public struct Marker: Sendable, Hashable {
    /// The marker's bytes.
    public var bytes: [UInt8]
    /// Its version, starting at 1.
    public var version: UInt64

    /// Creates a marker value.
    public init(bytes: [UInt8], version: UInt64) {
        self.bytes = bytes
        self.version = version
    }
}

extension Container {
    /// Every blob under `prefix`, fetching pages of `pageSize`.
    public func listAll(prefix: String, after: ContainerName? = nil, pageSize: Int = 1000) async throws -> [BlobInfo] {
        var result: [BlobInfo] = []
        var cursor = after
        while true {
            let page = try await list(prefix: prefix, after: cursor, limit: pageSize)
            result += page
            guard page.count == pageSize, let last = page.last else { return result }
            cursor = last.name
        }
    }
}
