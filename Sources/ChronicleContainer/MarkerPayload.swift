import ChronicleCore
import Foundation

/// What a kind of marker holds, as a Codable value: the active-store
/// pointer (``ActiveStorePointer``), a device's registration
/// (``DeviceRegistration``); the layers above add theirs. A marker's bytes
/// are the value's JSON with sorted keys, so equal values are equal bytes.
///
/// ```swift
/// let pointer = ActiveStorePointer(store: store)
/// _ = try await container.createMarker(ContainerLayout.activeStore, pointer)
/// let current = try await container.readMarker(ContainerLayout.activeStore, as: ActiveStorePointer.self)
/// ```
package protocol MarkerPayload: Codable, Sendable {
    /// What this marker is, for messages: "the active-store marker".
    static var markerDescription: String { get }
}

extension MarkerPayload {
    /// Decodes a marker's bytes.
    ///
    /// - Throws: ``ChronicleError/Code/malformedBody`` naming the marker and
    ///   what is wrong with it, with the `DecodingError` as the underlying error.
    package init(markerBytes bytes: [UInt8]) throws(ChronicleError) {
        do {
            self = try JSONDecoder().decode(Self.self, from: Data(bytes))
        } catch {
            throw ChronicleError.decoding(Self.markerDescription, error)
        }
    }

    /// The marker's bytes: the value's JSON, keys sorted.
    ///
    /// - Throws: ``ChronicleError/Code/invalidValue`` for a value JSON cannot hold.
    package func markerBytes() throws(ChronicleError) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return Array(try encoder.encode(self))
        } catch {
            throw ChronicleError(.invalidValue, "cannot encode \(Self.markerDescription)", underlying: error)
        }
    }
}

extension Container {
    /// The marker `name` decoded as `P`, with its version; nil if there is none.
    ///
    /// - Throws: ``ChronicleError/Code/malformedBody`` if the marker does
    ///   not hold a `P`, and whatever ``readMarker(_:)`` throws.
    package func readMarker<P: MarkerPayload>(_ name: ContainerName, as type: P.Type) async throws -> (payload: P, version: UInt64)? {
        guard let marker = try await readMarker(name) else { return nil }
        return (try P(markerBytes: marker.bytes), marker.version)
    }

    /// Creates the marker `name` holding `payload`; see ``createMarker(_:_:)``.
    package func createMarker(_ name: ContainerName, _ payload: some MarkerPayload) async throws -> Marker {
        try await createMarker(name, payload.markerBytes())
    }

    /// Replaces the marker `name` at version `expected` with `payload`;
    /// see ``replaceMarker(_:_:expected:)``.
    package func replaceMarker(_ name: ContainerName, _ payload: some MarkerPayload, expected: UInt64) async throws -> Marker {
        try await replaceMarker(name, payload.markerBytes(), expected: expected)
    }
}

/// What the active-store marker (``ContainerLayout/activeStore``) holds:
/// the store every device of the container uses now.
///
/// ```json
/// {"store": "0192…"}
/// ```
package struct ActiveStorePointer: MarkerPayload, Hashable {
    /// "the active-store marker".
    package static let markerDescription = "the active-store marker"

    /// The active store.
    package var store: StoreID

    /// Creates a pointer to `store`.
    package init(store: StoreID) {
        self.store = store
    }
}

/// What a store's tombstone (``ContainerLayout/tombstone(store:)``) holds:
/// who deleted the store, and when.
///
/// ```json
/// {"device": "0192…", "milliseconds": 1790000000000}
/// ```
public struct StoreTombstone: MarkerPayload, Hashable {
    /// "a store's tombstone".
    public static let markerDescription = "a store's tombstone"

    /// The device that deleted the store.
    public var device: DeviceID
    /// When, in milliseconds since 1970 by that device's clock.
    public var milliseconds: UInt64

    /// Creates a tombstone.
    public init(device: DeviceID, milliseconds: UInt64) {
        self.device = device
        self.milliseconds = milliseconds
    }
}

/// What a store's supersession marker (``ContainerLayout/supersession(store:)``)
/// holds: the store that replaces it, and how far the replacement covers
/// each device's saves. A device moving to the new store carries over its
/// saves beyond its entry in `vector`: unchanged (same device, clock and
/// sequence numbers) when `fromBaseline` is true, since the new store's
/// baseline then holds the old store's whole merge state up to `vector`;
/// as new saves otherwise (a store seeded from other records).
///
/// ```json
/// {"device": "0192…", "milliseconds": 1790000000000, "store": "0193…", "vector": {"0192…": 42}, "fromBaseline": true}
/// ```
public struct StoreSupersession: MarkerPayload, Hashable {
    /// "a store's supersession marker".
    public static let markerDescription = "a store's supersession marker"

    /// The store that replaces it.
    public var store: StoreID
    /// The device that rebuilt it.
    public var device: DeviceID
    /// When, in milliseconds since 1970 by that device's clock.
    public var milliseconds: UInt64
    /// For each device, the last of its saves the new store holds.
    public var vector: [DeviceID: UInt64]
    /// Whether the new store starts from a baseline of the old store's
    /// merge state as of `vector` (its records, deletions and versions),
    /// so that saves beyond it continue there unchanged.
    public var fromBaseline: Bool

    /// Whether devices carry their saves beyond `vector` into the new store
    /// unchanged: after a rebuild from a baseline, and when the old store was
    /// merged into the new one (an empty vector: every save is carried).
    public var continuesUnchanged: Bool { fromBaseline || vector.isEmpty }

    /// Why the store was replaced, in words (a rebuild after a corruption
    /// says which blob failed); nil when not recorded.
    public var reason: String?

    /// Creates a supersession marker's payload.
    public init(store: StoreID, device: DeviceID, milliseconds: UInt64, vector: [DeviceID: UInt64], fromBaseline: Bool = false,
                reason: String? = nil) {
        self.store = store
        self.device = device
        self.milliseconds = milliseconds
        self.vector = vector
        self.fromBaseline = fromBaseline
        self.reason = reason
    }

    private enum CodingKeys: String, CodingKey { case store, device, milliseconds, vector, fromBaseline, reason }

    /// Reads the JSON form, whose vector is an object keyed by device ID.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        store = try c.decode(StoreID.self, forKey: .store)
        device = try c.decode(DeviceID.self, forKey: .device)
        milliseconds = try c.decode(UInt64.self, forKey: .milliseconds)
        var vector: [DeviceID: UInt64] = [:]
        for (key, value) in try c.decode([String: UInt64].self, forKey: .vector) {
            guard let id = DeviceID(string: key) else {
                throw DecodingError.dataCorruptedError(forKey: .vector, in: c, debugDescription: "\(key) is not a device ID")
            }
            vector[id] = value
        }
        self.vector = vector
        fromBaseline = try c.decodeIfPresent(Bool.self, forKey: .fromBaseline) ?? false
        reason = try c.decodeIfPresent(String.self, forKey: .reason)
    }

    /// Writes the JSON form, whose vector is an object keyed by device ID.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(store, forKey: .store)
        try c.encode(device, forKey: .device)
        try c.encode(milliseconds, forKey: .milliseconds)
        try c.encode(Dictionary(uniqueKeysWithValues: vector.map { ($0.key.description, $0.value) }), forKey: .vector)
        if fromBaseline { try c.encode(true, forKey: .fromBaseline) }
        try c.encodeIfPresent(reason, forKey: .reason)
    }
}

/// What the account marker (``ContainerLayout/account``) holds: a token
/// naming the account the container belongs to. A device that finds another
/// token than the one it last saw is looking at another account's data.
///
/// ```json
/// {"token": "6f1c…"}
/// ```
public struct AccountToken: MarkerPayload, Hashable {
    /// "the account marker".
    public static let markerDescription = "the account marker"

    /// The token.
    public var token: String

    /// Creates a token marker's payload.
    public init(token: String) {
        self.token = token
    }
}

/// What a store's tentative marker (``ContainerLayout/tentative(store:)``)
/// holds: when its seeding began.
///
/// ```json
/// {"milliseconds": 1790000000000}
/// ```
public struct TentativeStore: MarkerPayload, Hashable {
    /// "a store's tentative marker".
    public static let markerDescription = "a store's tentative marker"

    /// When seeding began, in milliseconds since 1970 by the seeding device's clock.
    public var milliseconds: UInt64

    /// Creates a tentative marker's payload.
    public init(milliseconds: UInt64) {
        self.milliseconds = milliseconds
    }
}

/// What a store's origin marker (``ContainerLayout/origin(store:)``) holds:
/// the store starts from a baseline (a rebuild from another store's state,
/// or a first store seeded from a snapshot file), which holds saves no log
/// has. A device that has imported nothing of it waits for that baseline
/// instead of starting from the logs alone.
///
/// ```json
/// {"milliseconds": 1790000000000}
/// ```
public struct StoreOrigin: MarkerPayload, Hashable {
    /// "a store's origin marker".
    public static let markerDescription = "a store's origin marker"

    /// When the baseline was published, in milliseconds since 1970 by the publishing device's clock.
    public var milliseconds: UInt64

    /// Creates an origin marker's payload.
    public init(milliseconds: UInt64) {
        self.milliseconds = milliseconds
    }
}

/// What a corruption mark (``ContainerLayout/corruptionMark(store:device:)``)
/// holds: a device could not import `blob` of `store`, even after building
/// its copy of the store again from the container, and stopped using the
/// store. Healthy devices that see it elect one of them to rebuild the store.
///
/// ```json
/// {"blob": "0193…/logs/…", "device": "0192…", "milliseconds": 1790000000000, "reason": "bodyChecksumMismatch: …", "store": "0193…"}
/// ```
public struct CorruptionMark: MarkerPayload, Hashable {
    /// "a corruption mark".
    public static let markerDescription = "a corruption mark"

    /// The device that could not import.
    public var device: DeviceID
    /// The store it could not import.
    public var store: StoreID
    /// The blob that failed (a log or baseline part name), or the missing
    /// sequence in words.
    public var blob: String
    /// Why, in words: the error code and its message.
    public var reason: String
    /// When, in milliseconds since 1970 by that device's clock.
    public var milliseconds: UInt64
    /// True when the device that marked the store stays loaded and healthy
    /// on it: it holds every save, but a device that joins could not build
    /// the store (a log damaged or missing in the container for good). Such
    /// a device may rebuild the store itself. Nil (absent) when the device
    /// could not import and unloaded the store.
    public var healthy: Bool?

    /// Creates a corruption mark's payload.
    public init(device: DeviceID, store: StoreID, blob: String, reason: String, milliseconds: UInt64, healthy: Bool? = nil) {
        self.device = device
        self.store = store
        self.blob = blob
        self.reason = reason
        self.milliseconds = milliseconds
        self.healthy = healthy
    }
}

/// What a store's election lease (``ContainerLayout/election(store:)``)
/// holds, where the container's exclusive create is reliable: the healthy
/// device that created it rebuilds the store as `newStore`. A lease whose
/// `expires` has passed without a finished rebuild is taken over by
/// compare-and-swap.
///
/// ```json
/// {"device": "0192…", "expires": 1790000060000, "newStore": "0193…"}
/// ```
public struct ElectionLease: MarkerPayload, Hashable {
    /// "a store's election lease".
    public static let markerDescription = "a store's election lease"

    /// The device elected to rebuild.
    public var device: DeviceID
    /// The ID the rebuilt store takes.
    public var newStore: StoreID
    /// When the lease ends, in milliseconds since 1970.
    public var expires: UInt64

    /// Creates a lease's payload.
    public init(device: DeviceID, newStore: StoreID, expires: UInt64) {
        self.device = device
        self.newStore = newStore
        self.expires = expires
    }
}

/// What a device's candidacy (``ContainerLayout/candidacy(store:device:)``)
/// holds, where exclusive create is not reliable: every healthy device that
/// sees a corruption mark stands, and after the candidacy window every
/// device picks the same winner from the candidacies (healthy first, then
/// most saves applied, then the smallest device ID).
///
/// ```json
/// {"applied": 412, "device": "0192…", "milliseconds": 1790000000000, "since": 1789999990000}
/// ```
public struct RebuildCandidacy: MarkerPayload, Hashable {
    /// "a rebuild candidacy".
    public static let markerDescription = "a rebuild candidacy"

    /// The candidate.
    public var device: DeviceID
    /// How many saves of the store it had applied when it first stood
    /// (the sum of its sequence vector): fixed, so every device ranks it alike.
    public var applied: UInt64
    /// When it first stood, in milliseconds since 1970.
    public var since: UInt64
    /// When it last said it is still there (each sync refreshes it).
    public var milliseconds: UInt64
    /// Whether it stands as a healthy device. A device that marked the
    /// store stands only once no healthy device rebuilt it within the lease
    /// time, and any healthy candidate outranks it.
    public var healthy: Bool

    /// Creates a candidacy's payload.
    public init(device: DeviceID, applied: UInt64, since: UInt64, milliseconds: UInt64, healthy: Bool = true) {
        self.device = device
        self.applied = applied
        self.since = since
        self.milliseconds = milliseconds
        self.healthy = healthy
    }

    private enum CodingKeys: String, CodingKey { case device, applied, since, milliseconds, healthy }

    /// Reads the JSON form (`healthy` true when absent).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        device = try c.decode(DeviceID.self, forKey: .device)
        applied = try c.decode(UInt64.self, forKey: .applied)
        since = try c.decode(UInt64.self, forKey: .since)
        milliseconds = try c.decode(UInt64.self, forKey: .milliseconds)
        healthy = try c.decodeIfPresent(Bool.self, forKey: .healthy) ?? true
    }

    /// Whether this candidate wins over `other`: a healthy one first, then
    /// more saves applied, then the smaller device ID.
    public func outranks(_ other: RebuildCandidacy) -> Bool {
        if healthy != other.healthy { return healthy }
        return applied != other.applied ? applied > other.applied : device < other.device
    }
}
