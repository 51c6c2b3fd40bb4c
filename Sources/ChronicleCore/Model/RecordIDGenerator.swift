/// Makes time-ordered ``RecordID``s from an injected clock and random source.
///
/// IDs from one generator strictly increase, even within one millisecond and
/// when the clock steps back: the 12-bit sequence field and then the random
/// bits act as a counter (RFC 9562, method 3).
package struct RecordIDGenerator: Sendable {
    private var lastHigh: UInt64 = 0
    private var lastLow: UInt64 = 0
    private var random: SeededRandom

    /// Creates a generator whose random bits come from `seed`.
    package init(seed: UInt64) {
        random = SeededRandom(seed: seed)
    }

    /// The next ID at physical time `milliseconds`.
    package mutating func next(milliseconds: UInt64) -> RecordID {
        let ms = milliseconds & 0xFFFF_FFFF_FFFF
        var high = ms << 16 | 0x7000 | (random.next() & 0x0FFF)
        var low = 0x8000_0000_0000_0000 | (random.next() & 0x3FFF_FFFF_FFFF_FFFF)
        if (high, low) <= (lastHigh, lastLow) {
            // Same millisecond or a clock step back: count up from the last ID.
            high = lastHigh
            low = lastLow &+ 1
            if low & 0x3FFF_FFFF_FFFF_FFFF == 0 {
                low = 0x8000_0000_0000_0000
                high = (high & 0x0FFF) == 0x0FFF
                    ? ((high >> 16) + 1) << 16 | 0x7000
                    : high + 1
            }
        }
        lastHigh = high
        lastLow = low
        return RecordID(high: high, low: low)
    }
}
