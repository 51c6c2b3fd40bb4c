import Foundation
import Testing

/// The documents say what the code does.
@Suite struct DocsTests {
    static let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("docs")

    static func read(_ name: String) throws -> String {
        try String(contentsOf: docs.appendingPathComponent(name), encoding: .utf8)
    }

    /// The layers table of `docs/architecture.md` lists every module, the
    /// simulation included, and the page names every command
    /// `chronicle --help` lists.
    @Test(.enabled(if: CrashSafetyTests.binary != nil, "needs the chronicle binary: swift build --build-tests"))
    func theArchitectureNamesEveryModuleAndCommand() throws {
        let architecture = try Self.read("architecture.md")
        let modules = try FileManager.default.contentsOfDirectory(
            at: Self.docs.deletingLastPathComponent().appendingPathComponent("Sources"), includingPropertiesForKeys: nil)
            .map(\.lastPathComponent)
        #expect(modules.contains("ChronicleSimulation"))
        let table = architecture.split(separator: "\n").filter { $0.hasPrefix("| `") }.joined(separator: "\n")
        for module in modules {
            #expect(table.contains("`\(module)`"), "the layers table of docs/architecture.md does not list the module \(module)")
        }
        let help = try CLIErrorTests.run(["--help"])
        let listing = String(decoding: help.stdout, as: UTF8.self).components(separatedBy: "SUBCOMMANDS:").last ?? ""
        let commands = listing.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("  "), !line.hasPrefix("   "), let word = line.split(separator: " ").first,
                  word.first?.isLowercase == true else { return nil }
            return String(word)
        }
        #expect(commands.count >= 10, "\(listing)")
        for command in commands {
            #expect(architecture.contains("`\(command)`"), "docs/architecture.md does not name the command \(command)")
        }
    }
}
