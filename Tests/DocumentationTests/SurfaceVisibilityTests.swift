import Chronicle
import Foundation
import Testing

/// What an app sees with `import Chronicle` alone, in a target that builds
/// with `MemberImportVisibility` (members are visible only from imported
/// modules): the members the lower modules declare in extensions of the
/// types Chronicle re-exports, such as error codes and conversions, are
/// among them.
@Suite struct SurfaceVisibilityTests {
    @Test func membersDeclaredInExtensionsAreVisible() throws {
        // Codes declared by each layer, all on ChronicleError.Code.
        let codes: [ChronicleError.Code] = [.badMagic, .blobConflict, .foreignEntry, .storeMismatch, .deviceInUse, .uniqueViolation]
        #expect(Set(codes.map(\.description)).count == codes.count)
        // Schema's JSON loading and Timestamp's ISO 8601 form.
        #expect(throws: ChronicleError.self) { try Schema(json: Data("{".utf8)) }
        let noon = try #require(Timestamp(iso8601: "2026-01-31T12:00:00Z"))
        #expect(Value.date(noon) == Value.date(noon))
        // Plain Swift values convert for dynamic writes.
        #expect(387.chronicleValue() == .int(387))
        #expect(Durability.allCases == [.full, .normal])
    }
}
