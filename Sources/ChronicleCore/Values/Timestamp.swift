import Foundation

/// A point in time, exact to the microsecond, portable across platforms.
///
/// Stored as whole microseconds since 1970-01-01T00:00:00Z (seed 004's
/// portable time, with six more digits). Foundation's `Date` is a `Double` of
/// seconds since 2001 and cannot hold every microsecond exactly; converting a
/// `Date` rounds to the nearest microsecond, so the value that is saved is the
/// value every device reads back.
public struct Timestamp: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// Microseconds since the Unix epoch; negative before 1970.
    public var microsecondsSinceEpoch: Int64

    /// Creates a timestamp from microseconds since the Unix epoch.
    public init(microsecondsSinceEpoch: Int64) {
        self.microsecondsSinceEpoch = microsecondsSinceEpoch
    }

    /// Creates a timestamp from a `Date`, rounded to the nearest microsecond.
    public init(_ date: Date) {
        let micros = (date.timeIntervalSince1970 * 1_000_000).rounded()
        if micros >= 9.2e18 {
            microsecondsSinceEpoch = .max
        } else if micros <= -9.2e18 {
            microsecondsSinceEpoch = .min
        } else {
            microsecondsSinceEpoch = Int64(micros)
        }
    }

    /// The `Date` nearest to this timestamp: `Date(timeIntervalSince1970:
    /// secondsSince1970)`.
    public var date: Date {
        Date(timeIntervalSince1970: secondsSince1970)
    }

    /// Seconds since the Unix epoch as a `Double`: whole seconds plus the
    /// microseconds over a million. Snapshots store dates this way, so
    /// GRDB's `Date` decoding gives exactly ``date``.
    public var secondsSince1970: Double {
        Double(microsecondsSinceEpoch / 1_000_000) + Double(microsecondsSinceEpoch % 1_000_000) / 1_000_000
    }

    /// The timestamp whose ``secondsSince1970`` is `seconds`, or nil if no
    /// timestamp has it. A double cannot hold every microsecond far from
    /// 1970: this succeeds for every microsecond from about 1834 to 2106,
    /// and for whole seconds at any date.
    public init?(exactlySecondsSince1970 seconds: Double) {
        let micros = (seconds * 1_000_000).rounded()
        guard micros > -9.2e18 && micros < 9.2e18 else { return nil }
        let t = Timestamp(microsecondsSinceEpoch: Int64(micros))
        guard t.secondsSince1970.bitPattern == seconds.bitPattern else { return nil }
        self = t
    }

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        lhs.microsecondsSinceEpoch < rhs.microsecondsSinceEpoch
    }

    /// ISO 8601 with six fractional digits, in UTC, in the proleptic
    /// Gregorian calendar (as ``init(iso8601:)`` reads it). Years before 0000
    /// or after 9999 (a timestamp spans about ±294,000 years) take ISO 8601's
    /// expanded form, with a sign: `-1199-02-15T…`, `+294247-01-10T…`.
    public var description: String {
        let seconds = microsecondsSinceEpoch.floorDivided(by: 1_000_000)
        // The remainder, not `seconds * 1_000_000`, which overflows near Int64.min.
        let remainder = microsecondsSinceEpoch % 1_000_000
        let micros = remainder < 0 ? remainder + 1_000_000 : remainder
        let days = seconds.floorDivided(by: 86_400)
        let time = seconds - days * 86_400
        let (year, month, day) = CivilDate.fromDaysSinceEpoch(days)
        func pad(_ v: Int64, _ width: Int) -> String {
            let s = String(v.magnitude)
            return (v < 0 ? "-" : "") + String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(year > 9999 ? "+" : "")\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(time / 3600, 2)):\(pad(time / 60 % 60, 2)):\(pad(time % 60, 2)).\(pad(micros, 6))Z"
    }
}

extension Int64 {
    /// Division rounding toward negative infinity.
    func floorDivided(by divisor: Int64) -> Int64 {
        let q = self / divisor
        return (self % divisor < 0) ? q - 1 : q
    }
}
