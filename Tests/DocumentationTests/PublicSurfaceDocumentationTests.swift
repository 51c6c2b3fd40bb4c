import ChronicleTestSupport
import Foundation
import Testing

/// Every public symbol of `Chronicle` has a doc comment and every public type
/// is in Chronicle.docc: `scripts/check-docs` on the modules this test was
/// built with (it takes about a second).
@Suite struct PublicSurfaceDocumentationTests {
    /// The folder holding the built modules: the one the test binary is in.
    static func buildDirectory() throws -> URL {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        for _ in 0..<4 where !FileManager.default.fileExists(atPath: directory.appendingPathComponent("Modules/Chronicle.swiftmodule").path) {
            directory.deleteLastPathComponent()
        }
        try #require(FileManager.default.fileExists(atPath: directory.appendingPathComponent("Modules/Chronicle.swiftmodule").path),
                     "no Modules/Chronicle.swiftmodule above \(CommandLine.arguments[0])")
        return directory
    }

    @Test func everyPublicSymbolIsDocumentedAndCatalogued() throws {
        let script = DocumentationExampleTests.root.appendingPathComponent("scripts/check-docs")
        let run = try SpawnedProcess.run("/usr/bin/env", ["python3", script.path, "--build-dir", try Self.buildDirectory().path], timeLimitSeconds: 300)
        let text = String(decoding: run.stdout + run.stderr, as: UTF8.self)
        #expect(!run.signaled && run.status == 0, "scripts/check-docs:\n\(text)")
    }
}
