import Foundation
import Testing

/// Bad operator input to the CLI is a typed message and exit code 1: never a
/// trap, never a side effect.
@Suite struct CLIErrorTests {
    /// Runs the `chronicle` binary; returns its exit status and what it printed.
    static func run(_ arguments: [String]) throws -> (status: Int32, stdout: Data, stderr: String) {
        let process = Process()
        process.executableURL = CrashSafetyTests.binary!
        process.arguments = arguments
        // Standard error goes to a file, so neither stream can fill a pipe
        // and block the process while the other is read.
        let errors = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-stderr-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: errors) }
        let errorHandle = try FileHandle(forWritingTo: errors)
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardError = errorHandle
        try process.run()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        try errorHandle.close()
        return (process.terminationStatus, out, try String(contentsOf: errors, encoding: .utf8))
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
