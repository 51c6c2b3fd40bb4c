/// A small, fast, seedable random number generator (xoshiro256**, seeded
/// through SplitMix64). The same seed gives the same sequence on every platform.
package struct SeededRandom: RandomNumberGenerator, Sendable {
    private var s0: UInt64, s1: UInt64, s2: UInt64, s3: UInt64

    /// Creates a generator from a 64-bit seed.
    package init(seed: UInt64) {
        var x = seed
        func splitMix() -> UInt64 {
            x &+= 0x9E37_79B9_7F4A_7C15
            var z = x
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        s0 = splitMix(); s1 = splitMix(); s2 = splitMix(); s3 = splitMix()
    }

    package mutating func next() -> UInt64 {
        let result = (s1 &* 5).rotatedLeft(7) &* 9
        let t = s1 << 17
        s2 ^= s0; s3 ^= s1; s1 ^= s2; s0 ^= s3
        s2 ^= t
        s3 = s3.rotatedLeft(45)
        return result
    }
}

extension UInt64 {
    @inline(__always)
    func rotatedLeft(_ r: UInt64) -> UInt64 { (self << r) | (self >> (64 - r)) }
}
