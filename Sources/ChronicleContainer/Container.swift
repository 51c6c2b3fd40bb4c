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
///   create and compare-and-swap, at most ``Marker/maxBytes`` each.
///
/// **One log per sequence.** A put of a log name (see
/// `ContainerLayout.log(store:device:first:last:)`) whose sequence range
/// overlaps a stored log of the same device under another name fails with
/// ``ChronicleError/Code/blobConflict``, atomically with the put: two
/// writers that use one device ID (a copied device folder) can never store
/// `…11-11` and `…11-12` side by side for readers to mix. A log name spanning
/// more than `ContainerLayout.maxSequencesPerLog` sequences is
/// ``ChronicleError/Code/invalidName``. (`ContainerLayout`, in the
/// `ChronicleContainer` module, parses log names for a backend.)
///
/// **Bounded reads.** ``get(_:maxBytes:)`` refuses a blob larger than the
/// caller's cap with ``ChronicleError/Code/sizeOverCap`` before reading or
/// allocating it, so a hostile blob costs no more memory than the cap.
///
/// Every method throws ``ChronicleError``, keeping the backend's own error
/// (a `POSIXError`, a database driver's) as its underlying error. Codes whose
/// ``ChronicleError/Code/isTransient`` is true (``ChronicleError/Code/unavailable``,
/// ``ChronicleError/Code/diskFull``) may succeed when retried.
///
/// Backends: ``DirectoryContainer`` (the embedded default: a local, synced or
/// network folder), ``InMemoryContainer`` (tests), and the simulation
/// harness's simulated container (package-internal). All three pass the
/// package's conformance suite (`ContainerConformance` in the
/// `ChronicleTestSupport` target, which is not a product): the first two in
/// `ChronicleContainerTests`, the simulated one, with its faults off, in
/// `ChronicleSimulationTests`. A backend added to this package joins that
/// suite; one written outside it must meet the rules above without it.
public protocol Container: Sendable {
    /// What this backend guarantees.
    var capabilities: ContainerCapabilities { get }

    /// Stores `bytes` under `name`, atomically and once. For a log name,
    /// refuses a range that overlaps another log of the device (see above).
    func put(_ name: ContainerName, _ bytes: [UInt8]) async throws
    /// The bytes stored under `name`: ``ChronicleError/Code/notFound`` if
    /// none, ``ChronicleError/Code/sizeOverCap`` if there are more than
    /// `maxBytes` (checked before anything is read), and
    /// ``ChronicleError/Code/foreignEntry`` if what is there is not a blob.
    func get(_ name: ContainerName, maxBytes: Int) async throws -> [UInt8]
    /// Up to `limit` blobs whose names start with `prefix` and sort after
    /// `after`, in name order.
    func list(prefix: String, after: ContainerName?, limit: Int) async throws -> [BlobInfo]
    /// The distinct name components that directly follow `prefix` (empty,
    /// or ending with `/`) in stored blob names, in order: given blobs
    /// `s/logs/a/1` and `s/logs/b/2`, `listChildren(prefix: "s/logs/")` is
    /// `["a", "b"]`. Costs one folder read, not a walk of what is below.
    func listChildren(prefix: String) async throws -> [String]
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
    /// One page of them: at most `limit` names after `after` (nil: from
    /// the first), in name order, for a server backend that should not
    /// send every marker at once.
    func listMarkers(prefix: String, after: ContainerName?, limit: Int) async throws -> [ContainerName]

    /// Entries under `prefix` that are not Chronicle's (see
    /// ``ForeignEntry``), in path order. Backends that cannot hold any
    /// return none.
    func foreignEntries(prefix: String) async throws -> [ForeignEntry]

    /// Releases what the container holds open (a server backend's
    /// connections). The container cannot be used afterwards. Backends
    /// that hold nothing open do nothing.
    func shutdown() async

    /// A stream that yields whenever another handle may have written to
    /// the container (an upload, a marker), so that a sync loop wakes at
    /// once instead of at its next tick; nil for a backend that cannot
    /// tell (a folder: devices poll). A wake may be spurious, and a
    /// notification lost with a connection is made up by the next tick:
    /// it only ever brings a sync forward.
    func changes() async -> AsyncStream<Void>?
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
    /// The most bytes a marker holds (1 MiB): more is
    /// ``ChronicleError/Code/sizeOverCap`` on create and replace, and a
    /// larger marker file is refused before it is read.
    public static let maxBytes = 1 << 20

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
    /// Nothing to release.
    public func shutdown() async {}

    /// None: devices poll.
    public func changes() async -> AsyncStream<Void>? { nil }

    /// A page cut from the whole listing, for backends whose listing is
    /// cheap (a folder, memory).
    public func listMarkers(prefix: String, after: ContainerName?, limit: Int) async throws -> [ContainerName] {
        guard limit > 0 else { return [] }
        return Array(try await listMarkers(prefix: prefix).lazy.filter { after == nil || $0 > after! }.prefix(limit))
    }

    /// The cap ``get(_:)`` reads with: the largest log a decoder with the
    /// default ``DecodingLimits`` accepts (64 MiB of body and the header).
    public static var defaultMaxBlobBytes: Int { DecodingLimits().maxLogBytes }

    /// The bytes stored under `name`, up to ``defaultMaxBlobBytes``. Readers
    /// that decode with other limits pass their own cap to
    /// ``get(_:maxBytes:)``.
    public func get(_ name: ContainerName) async throws -> [UInt8] {
        try await get(name, maxBytes: Self.defaultMaxBlobBytes)
    }

    /// Every entry that is not Chronicle's (see ``ForeignEntry``).
    public func foreignEntries() async throws -> [ForeignEntry] {
        try await foreignEntries(prefix: "")
    }

    /// Throws ``ChronicleError/Code/sizeOverCap`` for marker bytes over ``Marker/maxBytes``.
    package static func checkMarkerSize(_ bytes: [UInt8], _ name: ContainerName) throws(ChronicleError) {
        guard bytes.count <= Marker.maxBytes else {
            throw ChronicleError(.sizeOverCap, "marker \(name) would hold \(bytes.count) bytes, over the cap of \(Marker.maxBytes)")
        }
    }

    /// Throws ``ChronicleError/Code/invalidName`` for a log name spanning
    /// more than ``ContainerLayout/maxSequencesPerLog`` sequences.
    package static func checkLogSpan(_ log: ContainerLayout.ParsedLogName, _ name: ContainerName) throws(ChronicleError) {
        guard log.last - log.first < ContainerLayout.maxSequencesPerLog else {
            throw ChronicleError(.invalidName, "log \(name) spans \(log.last - log.first + 1) sequences; a log holds at most \(ContainerLayout.maxSequencesPerLog)")
        }
    }

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
