/// A hybrid logical clock reading: 48 bits of physical milliseconds and a
/// 16-bit logical counter, packed so that integer order is clock order.
///
/// Conflicts are decided by (`HybridTimestamp`, ``DeviceID``): the greater pair
/// wins, the same on every device, whatever order logs arrive in.
public struct HybridTimestamp: Hashable, Comparable, Sendable, CustomStringConvertible, Codable {
    /// The packed value: `milliseconds << 16 | counter`.
    public let rawValue: UInt64

    /// Wraps a packed value.
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// Packs milliseconds (lower 48 bits kept) and a counter.
    public init(milliseconds: UInt64, counter: UInt16) {
        rawValue = (milliseconds & 0xFFFF_FFFF_FFFF) << 16 | UInt64(counter)
    }

    /// The physical part, in Unix milliseconds.
    public var milliseconds: UInt64 { rawValue >> 16 }
    /// The logical part.
    public var counter: UInt16 { UInt16(truncatingIfNeeded: rawValue) }

    /// The zero reading, before every real one.
    public static let zero = HybridTimestamp(rawValue: 0)

    /// Throws unless a physical clock reading `milliseconds` is one a device
    /// may act on (at most ``maxMilliseconds``): a clock set thousands of
    /// years ahead would date what it makes there, or wrapped round into
    /// the past.
    public static func checkPhysical(_ milliseconds: UInt64, doing what: String) throws(ChronicleError) {
        guard milliseconds <= maxMilliseconds else {
            throw ChronicleError(.invalidValue, "this device's clock reads \(milliseconds) ms, past \(maxMilliseconds) ms (the year 4199), which no other device would read: \(what) waits until the system clock is set right")
        }
    }

    /// The last millisecond a clock may read: 2^46, in the year 4199. A
    /// log with a later clock is malformed, not a reading to adopt (it would
    /// carry every device's clock there), and a device whose own clock reads
    /// later cannot save. Packed readings must stay below 2^63, which
    /// snapshots store as a signed 64-bit integer; the room between 2^46 and
    /// 2^47 milliseconds is what counters overflowing into the milliseconds
    /// could ever use (2^62 readings past the last accepted one).
    public static let maxMilliseconds: UInt64 = 1 << 46

    /// The latest reading a device takes in from another device's log or
    /// baseline: 2^40 ms (about 35 years) before ``maxMilliseconds``. A log
    /// from further in the future is applied as it is, but the device's own
    /// clock goes no further than this, so that its later saves never reach
    /// the last millisecond (a device that took in a clock at the very end
    /// could not save again).
    public static let latestAdopted = HybridTimestamp(milliseconds: maxMilliseconds - (1 << 40), counter: 0)

    /// `self`, or ``latestAdopted`` if later: what a device's clock moves to
    /// when it takes in this reading from elsewhere.
    public var adoptable: HybridTimestamp { Swift.min(self, Self.latestAdopted) }

    public static func < (lhs: HybridTimestamp, rhs: HybridTimestamp) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { "\(milliseconds).\(counter)" }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(UInt64.self)
    }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(rawValue)
    }
}

/// A hybrid logical clock (Kulkarni et al.): readings never go backwards, stay
/// close to physical time, and exceed every reading the device has observed,
/// even when the physical clock jumps backwards.
package struct HybridClock: Sendable {
    /// The last reading issued or observed.
    package private(set) var last: HybridTimestamp

    /// Creates a clock that will issue readings after `last`.
    package init(last: HybridTimestamp = .zero) { self.last = last }

    /// Issues a new reading for a local event, given the physical time.
    package mutating func tick(physicalMilliseconds: UInt64) -> HybridTimestamp {
        // A physical clock past the last millisecond reads just past it (a
        // reading the save refuses), never wrapped round into the past.
        let physical = min(physicalMilliseconds, HybridTimestamp.maxMilliseconds + 1)
        if physical > last.milliseconds {
            last = HybridTimestamp(milliseconds: physical, counter: 0)
        } else {
            last = Self.successor(of: last)
        }
        return last
    }

    /// Takes in a reading from another device so later local readings exceed it.
    package mutating func observe(_ remote: HybridTimestamp) {
        if remote > last { last = remote }
    }

    /// The next reading after `t`; the counter overflows into the milliseconds.
    static func successor(of t: HybridTimestamp) -> HybridTimestamp {
        if t.counter == .max {
            return HybridTimestamp(milliseconds: t.milliseconds + 1, counter: 0)
        }
        return HybridTimestamp(rawValue: t.rawValue + 1)
    }
}
