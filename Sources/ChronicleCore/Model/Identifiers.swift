import Foundation

/// A device's stable identity, chosen once per installation.
public struct DeviceID: Hashable, Comparable, Sendable, CustomStringConvertible, Codable {
    /// The 16 bytes as an ID (so devices order like records, bytewise).
    public let rawValue: RecordID

    /// Wraps an ID.
    public init(_ rawValue: RecordID) { self.rawValue = rawValue }

    /// Wraps a UUID.
    public init(_ uuid: UUID) { rawValue = RecordID(uuid) }

    /// Parses a canonical UUID string.
    public init?(string: String) {
        guard let id = RecordID(string: string) else { return nil }
        rawValue = id
    }

    /// A device ID derived from a small number, for tests and simulations.
    package init(index: UInt64) { rawValue = RecordID(high: 0x0000_0000_0000_7000, low: 0x8000_0000_0000_0000 | index) }

    public var description: String { rawValue.description }
    public static func < (lhs: DeviceID, rhs: DeviceID) -> Bool { lhs.rawValue < rhs.rawValue }

    public init(from decoder: any Decoder) throws { rawValue = try RecordID(from: decoder) }
    public func encode(to encoder: any Encoder) throws { try rawValue.encode(to: encoder) }
}

/// A store's identity. A rebuild moves every device to a new store ID.
public struct StoreID: Hashable, Comparable, Sendable, CustomStringConvertible, Codable {
    /// The 16 bytes.
    public let rawValue: RecordID

    /// Wraps an ID.
    public init(_ rawValue: RecordID) { self.rawValue = rawValue }

    /// Wraps a UUID.
    public init(_ uuid: UUID) { rawValue = RecordID(uuid) }

    /// Parses a canonical UUID string.
    public init?(string: String) {
        guard let id = RecordID(string: string) else { return nil }
        rawValue = id
    }

    public var description: String { rawValue.description }
    public static func < (lhs: StoreID, rhs: StoreID) -> Bool { lhs.rawValue < rhs.rawValue }

    public init(from decoder: any Decoder) throws { rawValue = try RecordID(from: decoder) }
    public func encode(to encoder: any Encoder) throws { try rawValue.encode(to: encoder) }
}
