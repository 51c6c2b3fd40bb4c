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
