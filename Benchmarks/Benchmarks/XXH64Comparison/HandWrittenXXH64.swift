/// The hand-written XXH64 Chronicle carried before it used the system's
/// libxxhash, kept here only to compare the two (see `main.swift`).
enum HandWrittenXXH64 {
    private static let p1: UInt64 = 0x9E37_79B1_85EB_CA87
    private static let p2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    private static let p3: UInt64 = 0x1656_67B1_9E37_79F9
    private static let p4: UInt64 = 0x85EB_CA77_C2B2_AE63
    private static let p5: UInt64 = 0x27D4_EB2F_1656_67C5

    /// The hash of `bytes` with `seed`.
    static func hash(_ bytes: UnsafeRawBufferPointer, seed: UInt64 = 0) -> UInt64 {
        let count = bytes.count
        guard let base = bytes.baseAddress, count > 0 else {
            return finalize(seed &+ p5, base: nil, remaining: 0, total: 0)
        }
        var offset = 0
        var h: UInt64
        if count >= 32 {
            var v1 = seed &+ p1 &+ p2
            var v2 = seed &+ p2
            var v3 = seed
            var v4 = seed &- p1
            let limit = count - 32
            while offset <= limit {
                v1 = round(v1, base.loadUnaligned(fromByteOffset: offset, as: UInt64.self).littleEndian)
                v2 = round(v2, base.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self).littleEndian)
                v3 = round(v3, base.loadUnaligned(fromByteOffset: offset + 16, as: UInt64.self).littleEndian)
                v4 = round(v4, base.loadUnaligned(fromByteOffset: offset + 24, as: UInt64.self).littleEndian)
                offset += 32
            }
            h = v1.rotl(1) &+ v2.rotl(7) &+ v3.rotl(12) &+ v4.rotl(18)
            h = merge(h, v1)
            h = merge(h, v2)
            h = merge(h, v3)
            h = merge(h, v4)
        } else {
            h = seed &+ p5
        }
        return finalize(h, base: base + offset, remaining: count - offset, total: count)
    }

    /// The hash of a byte array.
    static func hash(_ bytes: [UInt8], seed: UInt64 = 0) -> UInt64 {
        bytes.withUnsafeBytes { hash($0, seed: seed) }
    }

    @inline(__always)
    private static func round(_ acc: UInt64, _ input: UInt64) -> UInt64 {
        (acc &+ input &* p2).rotl(31) &* p1
    }

    @inline(__always)
    private static func merge(_ acc: UInt64, _ val: UInt64) -> UInt64 {
        (acc ^ round(0, val)) &* p1 &+ p4
    }

    private static func finalize(
        _ hash: UInt64, base: UnsafeRawPointer?, remaining: Int, total: Int
    ) -> UInt64 {
        var h = hash &+ UInt64(total)
        var offset = 0
        var left = remaining
        if let base {
            while left >= 8 {
                let k = round(0, base.loadUnaligned(fromByteOffset: offset, as: UInt64.self).littleEndian)
                h = (h ^ k).rotl(27) &* p1 &+ p4
                offset += 8
                left -= 8
            }
            if left >= 4 {
                let k = UInt64(base.loadUnaligned(fromByteOffset: offset, as: UInt32.self).littleEndian)
                h = (h ^ (k &* p1)).rotl(23) &* p2 &+ p3
                offset += 4
                left -= 4
            }
            while left > 0 {
                let k = UInt64(base.load(fromByteOffset: offset, as: UInt8.self))
                h = (h ^ (k &* p5)).rotl(11) &* p1
                offset += 1
                left -= 1
            }
        }
        h ^= h >> 33
        h = h &* p2
        h ^= h >> 29
        h = h &* p3
        h ^= h >> 32
        return h
    }
}

extension UInt64 {
    @inline(__always)
    fileprivate func rotl(_ r: UInt64) -> UInt64 { (self << r) | (self >> (64 - r)) }
}
