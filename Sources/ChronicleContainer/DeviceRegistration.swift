import ChronicleCore
import Foundation

/// What a device's registration marker (``ContainerLayout/deviceRegistration(store:device:)``)
/// holds: the device, and which copy of its files registered it.
///
/// ```json
/// {"device": "6F1C…", "incarnation": "3a9d04c1e2b7f085"}
/// ```
///
/// The incarnation is a random number a snapshot draws when it is made.
/// Two snapshots that claim one device ID (a lost snapshot rebuilt, a
/// folder restored from a copy) differ in it, which is how the second one
/// learns it must not write under that ID. Registrations written before
/// incarnations existed hold only the device.
package struct DeviceRegistration: MarkerPayload, Hashable {
    /// "a device registration marker".
    package static let markerDescription = "a device registration marker"

    /// The registered device.
    package var device: DeviceID
    /// The incarnation of the snapshot that registered it, if recorded.
    package var incarnation: UInt64?

    /// Creates a registration.
    package init(device: DeviceID, incarnation: UInt64?) {
        self.device = device
        self.incarnation = incarnation
    }

    /// Parses a marker's bytes, or gives nil if they are not a registration
    /// (``init(markerBytes:)`` says why).
    package init?(bytes: [UInt8]) {
        guard let decoded = try? Self(markerBytes: bytes) else { return nil }
        self = decoded
    }

    enum CodingKeys: String, CodingKey { case device, incarnation }

    package init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        device = try c.decode(DeviceID.self, forKey: .device)
        incarnation = try c.decodeIfPresent(String.self, forKey: .incarnation).flatMap { UInt64($0, radix: 16) }
    }

    package func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(device, forKey: .device)
        try c.encodeIfPresent(incarnation?.paddedHex, forKey: .incarnation)
    }
}
