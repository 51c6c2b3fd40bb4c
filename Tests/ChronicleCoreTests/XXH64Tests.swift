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

    /// Every path through XXH64 (the 32-byte stripes, and tails of 8-, 4-
    /// and 1-byte steps in every combination), from an unaligned start, with
    /// and without a seed. The expected hashes were computed by the
    /// hand-written XXH64 that Chronicle carried before it used libxxhash:
    /// the library gives the same, so every checksum ever written verifies.
    @Test(arguments: Self.paths)
    func sameHashesAsEveryEarlierLog(length: Int, seed: UInt64, expected: UInt64) {
        let data = (0..<(length + 3)).map { UInt8(($0 &* 31 &+ 7) % 251) }
        #expect(data.withUnsafeBytes { XXH64.hash(UnsafeRawBufferPointer(rebasing: $0[3...]), seed: seed) } == expected)
    }

    /// (length, seed, hash) of the bytes `(i * 31 + 7) % 251`, from the fourth byte on.
    static let paths: [(Int, UInt64, UInt64)] = [
        (0, 0x0, 0xEF46DB3751D8E999),
        (0, 0x9E3779B97F4A7C15, 0xC4349FC93C010000),
        (1, 0x0, 0x5000D8F2907D14E4),
        (1, 0x9E3779B97F4A7C15, 0xEE323B9ED228B76C),
        (2, 0x0, 0xB379B10513013682),
        (2, 0x9E3779B97F4A7C15, 0xFCC30ED881D14C5B),
        (3, 0x0, 0x200A338CF7BFBE9B),
        (3, 0x9E3779B97F4A7C15, 0xC04CBE0241F0DC67),
        (4, 0x0, 0x5C6CB835A5C22957),
        (4, 0x9E3779B97F4A7C15, 0x670C93D386B984FB),
        (5, 0x0, 0xB0D1DA391FA50709),
        (5, 0x9E3779B97F4A7C15, 0xB9028A8A43E1328A),
        (7, 0x0, 0x710B8B6A6B4799B0),
        (7, 0x9E3779B97F4A7C15, 0x9DCB0055F1AA84F3),
        (8, 0x0, 0xA7B3DF68AF5DCD3B),
        (8, 0x9E3779B97F4A7C15, 0xC16487346B928CF9),
        (9, 0x0, 0x85B5F629A6282FA1),
        (9, 0x9E3779B97F4A7C15, 0x5C18D2E9E37E15E),
        (11, 0x0, 0x826341D747165CDC),
        (11, 0x9E3779B97F4A7C15, 0x4E1F2DBCFA7A0886),
        (12, 0x0, 0xFB81002B508D41C8),
        (12, 0x9E3779B97F4A7C15, 0xCC9CFBC5562A3C41),
        (15, 0x0, 0xD0C9AF32C775FF4F),
        (15, 0x9E3779B97F4A7C15, 0xF49A5EA44852A06D),
        (16, 0x0, 0x5EE9EADD4841BA1B),
        (16, 0x9E3779B97F4A7C15, 0x7FC4B465A0F57A9C),
        (17, 0x0, 0x22CC4FCA4298B41B),
        (17, 0x9E3779B97F4A7C15, 0x2C40428A51855048),
        (23, 0x0, 0xD6929127F21061D8),
        (23, 0x9E3779B97F4A7C15, 0xDF4DD37A81DEFBC3),
        (24, 0x0, 0x32C5447E9E9ECCDA),
        (24, 0x9E3779B97F4A7C15, 0x4CDF60271FD41151),
        (31, 0x0, 0xC93F2CC15CD74B54),
        (31, 0x9E3779B97F4A7C15, 0x4227E2968703DC81),
        (32, 0x0, 0x2F5B33846FBF774B),
        (32, 0x9E3779B97F4A7C15, 0xDE07A22D3F818E51),
        (33, 0x0, 0x16A3F1067B2CFC8A),
        (33, 0x9E3779B97F4A7C15, 0xE3A00DB8D58733C0),
        (35, 0x0, 0x8CF92B1845B8FB98),
        (35, 0x9E3779B97F4A7C15, 0x8984B54C8637A2D0),
        (36, 0x0, 0x7673AA50AA8BAC7E),
        (36, 0x9E3779B97F4A7C15, 0xB087153FD6B1C49B),
        (39, 0x0, 0x7315330F05200033),
        (39, 0x9E3779B97F4A7C15, 0x6EDCDBD48B9386A6),
        (40, 0x0, 0x12411434FF65FB80),
        (40, 0x9E3779B97F4A7C15, 0xE8B048A878007581),
        (47, 0x0, 0x521F49F34476A577),
        (47, 0x9E3779B97F4A7C15, 0x4A7442ABF02E11BC),
        (48, 0x0, 0xE3D03F3DDBC7E0A7),
        (48, 0x9E3779B97F4A7C15, 0x80B9740020526B37),
        (63, 0x0, 0x7381A1E5D5AD1DB8),
        (63, 0x9E3779B97F4A7C15, 0x7C4432C69A2330C7),
        (64, 0x0, 0xFF5114959AA40603),
        (64, 0x9E3779B97F4A7C15, 0x89DDB90DD551BBE2),
        (65, 0x0, 0xE63C6DC45290E633),
        (65, 0x9E3779B97F4A7C15, 0xD9435F278FBCE1F9),
        (95, 0x0, 0xA701D8A2FABA3002),
        (95, 0x9E3779B97F4A7C15, 0x926777840976CFB2),
        (96, 0x0, 0xE81332E00E69B7ED),
        (96, 0x9E3779B97F4A7C15, 0x5E325BB3CE226D43),
        (100, 0x0, 0x9DB315FFA842A346),
        (100, 0x9E3779B97F4A7C15, 0xAE5C91BD54A2CEA0),
        (127, 0x0, 0xAC4D5AA2F586E178),
        (127, 0x9E3779B97F4A7C15, 0x96267DAC4ABBEAD6),
        (128, 0x0, 0xAD85D86D2DD9C294),
        (128, 0x9E3779B97F4A7C15, 0x4CD46623DFD098DA),
        (255, 0x0, 0xBD8E2A790C2539CD),
        (255, 0x9E3779B97F4A7C15, 0x9BEA3D0EDE17E24E),
        (256, 0x0, 0xF4422FEF14B7BA39),
        (256, 0x9E3779B97F4A7C15, 0x914A1315C403CFF3),
        (1000, 0x0, 0x1AC3179269C50A),
        (1000, 0x9E3779B97F4A7C15, 0xF889062A7DB71F4B),
        (4096, 0x0, 0xDDD9DEC4EAF80D12),
        (4096, 0x9E3779B97F4A7C15, 0x990913A688DD134C),
        (65536, 0x0, 0xD71575B2013D41CA),
        (65536, 0x9E3779B97F4A7C15, 0x7C78ADBE21FB9C21),
    ]

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
