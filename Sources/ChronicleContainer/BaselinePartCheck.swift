import ChronicleCore

/// Checks that the parts read from one baseline's folder belong together:
/// each part is the baseline part its name says (the store, the device and
/// the number), the parts are numbered 1 to the last without a gap, no part
/// before the last is marked final, and every part carries the first
/// part's vector.
/// Each part verifies alone (its checksums cover its own bytes only), so a
/// part swapped with another, copied in from an older baseline or from
/// another store, or a part missing, is found only here: applying such a
/// baseline, or compacting the logs it stands for, would lose saves.
///
/// ```swift
/// var check = BaselinePartCheck(count: names.count)
/// for (i, name) in names.enumerated() { try check.check(try decoder.open(bytes[i]), name: name, index: i) }
/// ```
package struct BaselinePartCheck: Sendable {
    /// How many parts the folder lists.
    package let count: Int
    /// The first part's device and vector, once it is checked.
    private var first: (device: DeviceID, vector: [DeviceID: UInt64])?

    package init(count: Int) {
        self.count = count
    }

    /// Checks the part at `index` (from 0, in the folder's name order) of
    /// the folder's `count` parts, read from `name`. Parts may be checked in
    /// any order, but the first part's vector is the reference: a later
    /// part checked before it is held to its name only.
    ///
    /// - Throws: ``ChronicleError/Code/malformedBody`` naming what does
    ///   not match (permanent: the part is not what its name says).
    package mutating func check(_ part: VerifiedLog, name: ContainerName, index: Int) throws(ChronicleError) {
        guard part.header.kind == .baseline else {
            throw ChronicleError(.malformedBody, "\(name) holds a \(part.header.kind) log, not a baseline part")
        }
        try check(part.header, vector: part.baselineVector(), name: name, index: index)
    }

    /// ``check(_:name:index:)`` of a part whose header and vector were read.
    package mutating func check(_ header: LogHeader, vector: [DeviceID: UInt64], name: ContainerName, index: Int) throws(ChronicleError) {
        guard let parsed = ContainerLayout.parseBaselinePart(name) else {
            throw ChronicleError(.malformedBody, "\(name) is not a baseline part's name")
        }
        guard header.kind == .baseline else {
            throw ChronicleError(.malformedBody, "\(name) holds a \(header.kind) log, not a baseline part")
        }
        guard header.storeID == parsed.store, header.deviceID == parsed.device, header.baselinePart == parsed.part else {
            throw ChronicleError(.malformedBody, "\(name) holds part \(header.baselinePart) of device \(header.deviceID)'s baseline of store \(header.storeID), which its name does not match")
        }
        guard parsed.part == UInt64(index + 1) else {
            throw ChronicleError(.malformedBody, "\(name) is listed as part \(index + 1) of its baseline: a part before it is missing")
        }
        // (A last part not marked final is a baseline still being written
        // or copied: the callers wait for it or pass it over.)
        guard !header.isFinalBaselinePart || index == count - 1 else {
            throw ChronicleError(.malformedBody, "\(name) is marked the final part, but its baseline lists \(count - index - 1) part(s) after it")
        }
        if index == 0 {
            first = (header.deviceID, vector)
        } else if let first, first.vector != vector || first.device != header.deviceID {
            throw ChronicleError(.malformedBody, "\(name) does not belong with part 1 of its baseline: its vector differs (a part of another baseline)")
        }
    }
}
