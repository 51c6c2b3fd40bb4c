import Chronicle
import Foundation
import Testing

/// The example in README.md and in Chronicle.docc's getting-started article
/// is the code of GettingStarted.swift, which compiles with this target and
/// runs here, so the documents cannot drift from an API that works.
@Suite struct DocumentationExampleTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The text between the `BEGIN <name>` and `END <name>` lines of a compiled file.
    static func compiledExample(_ file: String = "GettingStarted.swift", _ name: String = "EXAMPLE") throws -> String {
        let source = try String(contentsOf: root.appendingPathComponent("Tests/DocumentationTests/\(file)"), encoding: .utf8)
        let lines = source.components(separatedBy: "\n")
        let begin = try #require(lines.firstIndex(of: "// BEGIN \(name)"))
        let end = try #require(lines.firstIndex(of: "// END \(name)"))
        return lines[(begin + 1)..<end].joined(separator: "\n")
    }

    /// The Swift code blocks of a Markdown document, in order.
    static func swiftBlocks(_ path: String) throws -> [String] {
        let text = try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
        var blocks: [String] = []
        var current: [String]?
        for line in text.components(separatedBy: "\n") {
            if current == nil, line == "```swift" {
                current = []
            } else if let block = current, line == "```" {
                blocks.append(block.joined(separator: "\n"))
                current = nil
            } else {
                current?.append(line)
            }
        }
        return blocks
    }

    @Test(arguments: ["README.md", "Sources/Chronicle/Chronicle.docc/GettingStarted.md"])
    func theDocumentShowsTheCompiledExample(path: String) throws {
        let example = try Self.compiledExample()
        let blocks = try Self.swiftBlocks(path)
        #expect(blocks.first == example, "the first Swift block of \(path) differs from Tests/DocumentationTests/GettingStarted.swift")
    }

    @Test func theReadmeShowsTheCompiledManagerExample() throws {
        let example = try Self.compiledExample("ManagerExample.swift", "MANAGER EXAMPLE")
        #expect(try Self.swiftBlocks("README.md").contains(example), "README.md lacks the code of Tests/DocumentationTests/ManagerExample.swift")
    }

    @Test func theReadmeShowsTheCompiledContextExample() throws {
        let example = try Self.compiledExample("ContextExample.swift", "CONTEXT EXAMPLE")
        #expect(try Self.swiftBlocks("README.md").contains(example), "README.md lacks the code of Tests/DocumentationTests/ContextExample.swift")
    }

    @Test(.timeLimit(.minutes(1))) func theContextExampleRuns() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-context-example-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let schema = try Schema(json: Data(#"{"version": 1, "entities": [{"name": "Book", "attributes": [{"name": "title", "type": "string"}, {"name": "pages", "type": "int64"}]}]}"#.utf8))
        let (screens, pages) = try await contextExample(schema: schema, root: root)
        #expect(screens == [[], ["Kindred"], ["Kindred (graphic novel)"]])
        #expect(pages == 288)
    }

    @Test func theManagerExampleRuns() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-manager-example-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let schema = try Schema(json: Data(#"{"version": 1, "entities": [{"name": "Book", "attributes": [{"name": "title", "type": "string"}, {"name": "pages", "type": "int64"}]}]}"#.utf8))
        let titles = try await managerExample(schema: schema, folder: root.appendingPathComponent("device"), shared: root.appendingPathComponent("shared"))
        #expect(titles == ["Kindred"])
    }

    @Test func theExampleRuns() async throws {
        let (books, titles) = try await gettingStarted()
        #expect(Set(books.map(\.title)) == ["The Dispossessed", "Kindred"])
        #expect(titles == ["Kindred", "The Dispossessed"])
    }
}
