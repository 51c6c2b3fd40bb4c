extension Timestamp {
    /// Parses an ISO 8601 (RFC 3339) date and time, exactly:
    /// `YYYY-MM-DDTHH:MM:SS[.f…]` then `Z` or an offset from UTC (`+02:00`,
    /// `-0530`, `+01`).
    ///
    /// `T` may be `t` or a space and `Z` may be `z`. The fraction may have
    /// any number of digits as long as those after the sixth are zeros: a
    /// timestamp holds whole microseconds, and a finer time is refused rather
    /// than rounded. A leap second (`:60`) is the first second of the next
    /// minute, as in POSIX time. Years run from 0000 to 9999, and beyond in
    /// ISO 8601's expanded form: a sign, then four or more digits
    /// (`-1199-02-15T14:13:20Z`, `+294247-01-10T04:00:54.775807Z`), as far as
    /// a timestamp reaches. A signed year inside 0000...9999 (`+2026`,
    /// `-0000`) is refused: every instant has one spelling.
    ///
    /// ```swift
    /// Timestamp(iso8601: "2026-01-31T14:00:00.000001+02:00")
    /// // 2026-01-31T12:00:00.000001Z
    /// ```
    ///
    /// - Returns: nil for anything else (no date without a time, no time
    ///   without a zone: their instant would depend on where it is read).
    public init?(iso8601 string: String) {
        var scanner = ISO8601Scanner(Array(string.utf8))
        guard let micros = scanner.microsecondsSinceEpoch() else { return nil }
        self.init(microsecondsSinceEpoch: micros)
    }
}

/// Reads the fields of an ISO 8601 date and time, left to right.
private struct ISO8601Scanner {
    let u: [UInt8]
    var i = 0

    init(_ bytes: [UInt8]) { u = bytes }

    mutating func microsecondsSinceEpoch() -> Int64? {
        guard let year = year(), expect("-"), let month = digits(2), expect("-"), let day = digits(2),
              expect("T") || expect("t") || expect(" "),
              let hour = digits(2), expect(":"), let minute = digits(2), expect(":"), let second = digits(2),
              (1...12).contains(month), (1...CivilDate.daysIn(month: month, year: year)).contains(day),
              hour < 24, minute < 60, second <= 60
        else { return nil }
        var micros: Int64 = 0
        if expect(".") || expect(",") {
            var count = 0
            while i < u.count, let d = digit(u[i]) {
                if count < 6 {
                    micros = micros * 10 + Int64(d)
                } else if d != 0 {
                    return nil
                }
                count += 1
                i += 1
            }
            guard count > 0 else { return nil }
            for _ in count..<max(count, 6) { micros *= 10 }
        }
        guard let offset = offsetSeconds(), i == u.count else { return nil }
        let days = CivilDate.daysSinceEpoch(year: year, month: month, day: day)
        let seconds = days * 86_400 + Int64(hour * 3600 + minute * 60 + second) - offset
        // Before 1970 with a fraction, count from the next second down, so
        // that the earliest timestamps do not overflow on the way.
        let (whole, fraction) = seconds < 0 && micros > 0 ? (seconds + 1, micros - 1_000_000) : (seconds, micros)
        let (scaled, overflow) = whole.multipliedReportingOverflow(by: 1_000_000)
        let (total, overflow2) = scaled.addingReportingOverflow(fraction)
        return overflow || overflow2 ? nil : total
    }

    /// Four digits, or a sign and four or more (at most seven: a timestamp
    /// reaches about ±294,000 years).
    private mutating func year() -> Int? {
        let sign: Int
        if expect("+") { sign = 1 } else if expect("-") { sign = -1 } else { return digits(4) }
        var v = 0
        var count = 0
        while i < u.count, count < 7, let d = digit(u[i]) {
            v = v * 10 + d
            count += 1
            i += 1
        }
        // A sign marks a year outside 0000...9999, and only such a year: the
        // one form each instant prints in is the one form it reads from.
        guard count >= 4, sign > 0 ? v > 9999 : v > 0 else { return nil }
        return sign * v
    }

    /// `Z`, `±HH:MM`, `±HHMM` or `±HH`, as seconds east of UTC.
    private mutating func offsetSeconds() -> Int64? {
        if expect("Z") || expect("z") { return 0 }
        let sign: Int64
        if expect("+") { sign = 1 } else if expect("-") { sign = -1 } else { return nil }
        guard let hours = digits(2), hours < 24 else { return nil }
        var minutes = 0
        if i < u.count {
            _ = expect(":")
            guard let m = digits(2), m < 60 else { return nil }
            minutes = m
        }
        return sign * Int64(hours * 3600 + minutes * 60)
    }

    private func digit(_ c: UInt8) -> Int? {
        c >= 48 && c <= 57 ? Int(c - 48) : nil
    }

    private mutating func digits(_ count: Int) -> Int? {
        guard u.count - i >= count else { return nil }
        var v = 0
        for _ in 0..<count {
            guard let d = digit(u[i]) else { return nil }
            v = v * 10 + d
            i += 1
        }
        return v
    }

    private mutating func expect(_ c: Character) -> Bool {
        guard i < u.count, u[i] == c.asciiValue else { return false }
        i += 1
        return true
    }
}

/// Dates in the proleptic Gregorian calendar (ISO 8601's), as days since
/// 1970-01-01, without Foundation's `Calendar`, which switches to the Julian
/// calendar before 1582.
enum CivilDate {
    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days from 1970-01-01 in the proleptic Gregorian calendar (Howard
    /// Hinnant's `days_from_civil`).
    static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let m = Int64(month)
        let dayOfYear = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The year, month and day `days` after 1970-01-01 (Howard Hinnant's
    /// `civil_from_days`).
    static func fromDaysSinceEpoch(_ days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
