import ChronicleCore
import Foundation

/// A sequence vector in a marker's JSON: an object keyed by device ID.
enum VectorCoding {
    static func decode<K: CodingKey>(_ c: KeyedDecodingContainer<K>, forKey key: K) throws -> [DeviceID: UInt64] {
        var vector: [DeviceID: UInt64] = [:]
        for (text, value) in try c.decode([String: UInt64].self, forKey: key) {
            guard let id = DeviceID(string: text) else {
                throw DecodingError.dataCorruptedError(forKey: key, in: c, debugDescription: "\(text) is not a device ID")
            }
            vector[id] = value
        }
        return vector
    }

    static func encode<K: CodingKey>(_ vector: [DeviceID: UInt64], _ c: inout KeyedEncodingContainer<K>, forKey key: K) throws {
        try c.encode(Dictionary(uniqueKeysWithValues: vector.map { ($0.key.description, $0.value) }), forKey: key)
    }
}

/// What a device's applied report (``ContainerLayout/appliedReport(store:device:)``)
/// holds: how far it has applied each device's logs, and when it said so.
/// Compaction removes a log only once every device that reported within
/// the retention period has applied a baseline's worth (see
/// `docs/compaction.md`).
///
/// ```json
/// {"device": "0192…", "milliseconds": 1790000000000, "vector": {"0192…": 42, "0193…": 7}}
/// ```
public struct AppliedReport: MarkerPayload, Hashable {
    /// "a device's applied report".
    public static let markerDescription = "a device's applied report"

    /// The reporting device.
    public var device: DeviceID
    /// When, in milliseconds since 1970 by that device's clock.
    public var milliseconds: UInt64
    /// For each device, the last of its sequences applied (the reporting
    /// device's own entry: its last save).
    public var vector: [DeviceID: UInt64]

    /// Creates a report.
    public init(device: DeviceID, milliseconds: UInt64, vector: [DeviceID: UInt64]) {
        self.device = device
        self.milliseconds = milliseconds
        self.vector = vector
    }

    private enum CodingKeys: String, CodingKey { case device, milliseconds, vector }

    /// Reads the JSON form.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        device = try c.decode(DeviceID.self, forKey: .device)
        milliseconds = try c.decode(UInt64.self, forKey: .milliseconds)
        vector = try VectorCoding.decode(c, forKey: .vector)
    }

    /// Writes the JSON form.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(device, forKey: .device)
        try c.encode(milliseconds, forKey: .milliseconds)
        try VectorCoding.encode(vector, &c, forKey: .vector)
    }
}

/// What a store's compaction marker (``ContainerLayout/compaction(store:)``)
/// holds: the baseline that stands for the logs compaction removed, and
/// how far it covers each device. Any log of device *d* whose last
/// sequence is at most `vector[d]` may be gone; the baseline at `baseline`
/// holds its saves, and stays until a later compaction names a newer one.
///
/// ```json
/// {"baseline": "0192…/baselines/…/", "device": "0193…", "milliseconds": 1790000000000, "vector": {"0193…": 42}}
/// ```
public struct CompactionHorizon: MarkerPayload, Hashable {
    /// "a store's compaction marker".
    public static let markerDescription = "a store's compaction marker"

    /// The folder of the baseline's parts (``ContainerLayout/baselinePrefix(store:clock:device:vector:)``).
    public var baseline: String
    /// The device that compacted.
    public var device: DeviceID
    /// When, in milliseconds since 1970 by that device's clock.
    public var milliseconds: UInt64
    /// The baseline's vector: for each device, the last sequence it covers.
    public var vector: [DeviceID: UInt64]
    /// For the devices whose last covered save the compacting device knew
    /// as it was made, that save's clock (its raw hybrid timestamp): a
    /// device that holds another save under the same sequence (its files,
    /// or the container, went back in time and the sequence was used
    /// again) sees that its history went apart from the container's, though
    /// the logs that would show it are gone. Absent in markers written
    /// before it existed.
    public var clocks: [DeviceID: UInt64]

    /// Creates a compaction marker's payload.
    public init(baseline: String, device: DeviceID, milliseconds: UInt64, vector: [DeviceID: UInt64], clocks: [DeviceID: UInt64] = [:]) {
        self.baseline = baseline
        self.device = device
        self.milliseconds = milliseconds
        self.vector = vector
        self.clocks = clocks
    }

    /// Whether compaction may have removed the log of `device` that ends at `last`.
    public func mayHaveRemoved(device: DeviceID, last: UInt64) -> Bool {
        last <= (vector[device] ?? 0)
    }

    private enum CodingKeys: String, CodingKey { case baseline, device, milliseconds, vector, clocks }

    /// Reads the JSON form.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        baseline = try c.decode(String.self, forKey: .baseline)
        device = try c.decode(DeviceID.self, forKey: .device)
        milliseconds = try c.decode(UInt64.self, forKey: .milliseconds)
        vector = try VectorCoding.decode(c, forKey: .vector)
        clocks = c.contains(.clocks) ? try VectorCoding.decode(c, forKey: .clocks) : [:]
    }

    /// Writes the JSON form.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(baseline, forKey: .baseline)
        try c.encode(device, forKey: .device)
        try c.encode(milliseconds, forKey: .milliseconds)
        try VectorCoding.encode(vector, &c, forKey: .vector)
        if !clocks.isEmpty { try VectorCoding.encode(clocks, &c, forKey: .clocks) }
    }
}
