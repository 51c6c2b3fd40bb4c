import Foundation
import Testing

/// Bad operator input to the CLI is a typed message and exit code 1: never a
/// trap, never a side effect.
@Suite struct CLIErrorTests {
    static func run(_ arguments: [String]) throws -> (status: Int32, stderr: String) {
        let process = Process()
        process.executableURL = CrashSafetyTests.binary!
        process.arguments = arguments
        let stderr = Pipe()
        process.standardError = stderr
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
    }

    /// Regression: `dump` and `demo` reported errors through an
    /// `OutputOptions()` made by hand, which ArgumentParser traps on reading;
    /// and `dump` created the folders of a mistyped container path.
    @Test(.enabled(if: CrashSafetyTests.binary != nil, "needs the chronicle binary: swift build --build-tests"))
    func readOnlyCommandsRefuseAMissingContainer() throws {
        let missing = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-missing-\(UUID().uuidString)").path
        for arguments in [["dump", "--container", missing, "--name", "x"], ["inspect", "--container", missing], ["verify", "--container", missing]] {
            let outcome = try Self.run(arguments)
            #expect(outcome.status == 1, "\(arguments[0])")
            #expect(outcome.stderr.contains("notFound: no container at \(missing)"), "\(arguments[0]): \(outcome.stderr)")
            #expect(!FileManager.default.fileExists(atPath: missing), "\(arguments[0]) created the container")
        }
        let file = try Self.run(["dump", "--file", missing + ".chlog"])
        #expect(file.status == 1 && file.stderr.contains("notFound: cannot read"))
    }
}
