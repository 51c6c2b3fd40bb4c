import ChronicleCore
import Testing

@Suite struct XXH64Tests {
    /// Vectors from the reference implementation (python-xxhash).
    @Test(arguments: [
        (0, UInt64(0), UInt64(0xEF46_DB37_51D8_E999)),
        (1, 0, 0xD24E_C4F1_A98C_6E5B),
        (3, 0, 0x44BC_2CF5_AD77_0999),
        (32, 0, 0x642A_9495_8E71_E6C5),
        (768, 0, 0x8E03_C838_C596_036F),
        (0, 42, 0x98B1_582B_0977_E704),
        (1, 42, 0x88E4_FE59_ADF7_B0CC),
        (3, 42, 0x13C1_D910_7027_70E6),
        (32, 42, 0x666B_1F69_D245_5DA5),
        (768, 42, 0x5A08_DEAD_05DF_1080),
    ])
    func referenceVectors(length: Int, seed: UInt64, expected: UInt64) {
        #expect(XXH64.hash(input(length), seed: seed) == expected)
    }

    private func input(_ length: Int) -> [UInt8] {
        switch length {
        case 1: return Array("a".utf8)
        case 3: return Array("abc".utf8)
        case 32: return Array("0123456789abcdef0123456789abcdef".utf8)
        case 768: return Array((0..<768).map { UInt8($0 % 256) })
        default: return []
        }
    }
}
