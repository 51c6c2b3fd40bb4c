/// An exact decimal number: up to 38 significant digits times a power of ten
/// from -128 to 127, the range of `NSDecimalNumber` (seed 004).
///
/// The representation is kept exactly as given (`1.50` stays `150e-2`), so a
/// value round-trips bit for bit through every device. Equality is by value
/// (`1.5 == 1.50`); ``isIdentical(to:)`` compares representations.
public struct ChronicleDecimal: Hashable, Sendable, CustomStringConvertible, Codable {
    /// Whether the number is negative. Zero is never negative.
    public let isNegative: Bool
    /// The digits, less than 10^38.
    public let significand: UInt128
    /// The power of ten.
    public let exponent: Int8

    /// The largest significand: 38 nines.
    public static let maxSignificand: UInt128 = {
        var v: UInt128 = 1
        for _ in 0..<38 { v *= 10 }
        return v - 1
    }()

    /// Creates a decimal, throwing ``ChronicleError/Code/invalidValue`` when the
    /// significand has more than 38 digits.
    public init(isNegative: Bool, significand: UInt128, exponent: Int8) throws(ChronicleError) {
        guard significand <= Self.maxSignificand else {
            throw ChronicleError(.invalidValue, "decimal significand \(significand) has more than 38 digits")
        }
        self.isNegative = isNegative && significand != 0
        self.significand = significand
        self.exponent = exponent
    }

    /// Creates a decimal from an integer.
    public init(_ value: Int64) {
        isNegative = value < 0
        significand = UInt128(value.magnitude)
        exponent = 0
    }

    /// Parses `[-+]digits[.digits][e[-+]digits]`. Returns nil for anything
    /// else, or for more than 38 significant digits, or an exponent out of range.
    public init?(string: String) {
        var utf8 = Substring(string).utf8[...]
        var negative = false
        if let first = utf8.first, first == UInt8(ascii: "-") || first == UInt8(ascii: "+") {
            negative = first == UInt8(ascii: "-")
            utf8 = utf8.dropFirst()
        }
        var digits: UInt128 = 0
        var digitCount = 0
        var fractionDigits = 0
        var sawDot = false
        var sawDigit = false
        var exponent = 0
        while let c = utf8.first {
            if c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") {
                sawDigit = true
                if digitCount > 0 || c != UInt8(ascii: "0") { digitCount += 1 }
                if digitCount > 38 { return nil }
                digits = digits * 10 + UInt128(c - UInt8(ascii: "0"))
                if sawDot { fractionDigits += 1 }
            } else if c == UInt8(ascii: "."), !sawDot {
                sawDot = true
            } else if c == UInt8(ascii: "e") || c == UInt8(ascii: "E") {
                utf8 = utf8.dropFirst()
                guard let e = Int(Substring(utf8)), abs(e) < 100_000 else { return nil }
                exponent = e
                utf8 = utf8[utf8.endIndex...]
                break
            } else {
                return nil
            }
            utf8 = utf8.dropFirst()
        }
        guard sawDigit else { return nil }
        let finalExponent = exponent - fractionDigits
        guard finalExponent >= -128 && finalExponent <= 127 else { return nil }
        guard let d = try? ChronicleDecimal(isNegative: negative, significand: digits, exponent: Int8(finalExponent)) else {
            return nil
        }
        self = d
    }

    /// The exact value: plain notation for exponents from -38 to 0
    /// (`-123.45`, `0.0010`, `7`), scientific beyond (`5e3`, `1e-100`).
    /// ``init(string:)`` parses it back identically.
    public var description: String {
        let sign = isNegative ? "-" : ""
        let digits = String(significand)
        if exponent == 0 { return sign + digits }
        if exponent < 0 && exponent >= -38 {
            let fraction = Int(-exponent)
            let padded = String(repeating: "0", count: max(0, fraction + 1 - digits.count)) + digits
            let split = padded.index(padded.endIndex, offsetBy: -fraction)
            return sign + padded[..<split] + "." + padded[split...]
        }
        return "\(sign)\(digits)e\(exponent)"
    }

    /// Whether both have the same sign, significand and exponent.
    public func isIdentical(to other: ChronicleDecimal) -> Bool {
        isNegative == other.isNegative && significand == other.significand && exponent == other.exponent
    }

    /// The value with trailing zeros removed from the significand.
    public var normalized: ChronicleDecimal {
        var s = significand
        var e = Int(exponent)
        if s == 0 { return try! ChronicleDecimal(isNegative: false, significand: 0, exponent: 0) }
        while s % 10 == 0 && e < 127 {
            s /= 10
            e += 1
        }
        return try! ChronicleDecimal(isNegative: isNegative, significand: s, exponent: Int8(e))
    }

    public static func == (lhs: ChronicleDecimal, rhs: ChronicleDecimal) -> Bool {
        lhs.normalized.isIdentical(to: rhs.normalized)
    }

    public func hash(into hasher: inout Hasher) {
        let n = normalized
        hasher.combine(n.isNegative)
        hasher.combine(n.significand)
        hasher.combine(n.exponent)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let string = try container.decode(String.self)
        guard let value = ChronicleDecimal(string: string) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a decimal: \(string)")
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
