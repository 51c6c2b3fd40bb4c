import Foundation

extension ChronicleDecimal {
    /// The same number as a Foundation `Decimal`, exactly: both hold 38
    /// digits and exponents from -128 to 127. `Decimal` keeps no trailing
    /// zeros (`1.50` becomes `1.5`), so the value is equal, not always
    /// identical.
    public var decimal: Decimal {
        let magnitude: Decimal
        if significand <= UInt128(UInt64.max) {
            magnitude = Decimal(UInt64(significand))
        } else {
            // Digits only: `Decimal(string:)` parses them exactly.
            magnitude = Decimal(string: String(significand))!
        }
        return Decimal(sign: isNegative ? .minus : .plus, exponent: Int(exponent), significand: magnitude)
    }

    /// Creates a decimal from a Foundation `Decimal`, exactly.
    ///
    /// - Throws: ``ChronicleError/Code/invalidValue`` for NaN, or a
    ///   significand beyond 38 digits that no trailing zero can shorten.
    public init(_ decimal: Decimal) throws(ChronicleError) {
        guard !decimal.isNaN else { throw ChronicleError(.invalidValue, "a NaN decimal cannot be stored") }
        // The significand of a `Decimal` is an integer with exponent 0,
        // which its description prints as plain digits.
        guard var digits = UInt128(decimal.significand.magnitude.description) else {
            throw ChronicleError(.invalidValue, "decimal \(decimal) has no integer significand")
        }
        var exponent = decimal.exponent
        while digits > Self.maxSignificand && digits % 10 == 0 {
            digits /= 10
            exponent += 1
        }
        guard (-128...127).contains(exponent) else {
            throw ChronicleError(.invalidValue, "decimal \(decimal) has an exponent out of -128…127")
        }
        try self.init(isNegative: decimal.sign == .minus, significand: digits, exponent: Int8(exponent))
    }
}
