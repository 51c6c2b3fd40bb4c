import ChronicleTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Bad operator input to the CLI is a typed message and exit code 1: never a
/// trap, never a side effect.
@Suite struct CLIErrorTests {
    /// What a run of the binary did.
    struct Run {
        /// The exit status (meaningless when `signaled`).
        var status: Int32
        var stdout: Data
        var stderr: String
        /// Ended by a signal: a crash, or killed at the time limit.
        var signaled: Bool
        var seconds: Double
    }

    /// Runs the `chronicle` binary with `input` on standard input, killing it
    /// after `timeLimitSeconds`; `shellPrefix` runs first in a shell
    /// (`ulimit -v …`); `environment` adds variables to the test's own.
    /// Returns its exit status and what it printed.
    static func run(_ arguments: [String], input: String = "", timeLimitSeconds: Double = 300, shellPrefix: String? = nil,
                    environment: [String: String] = [:]) throws -> Run {
        try run(arguments, inputBytes: Data(input.utf8), timeLimitSeconds: timeLimitSeconds, shellPrefix: shellPrefix, environment: environment)
    }

    /// Like ``run(_:input:timeLimitSeconds:shellPrefix:environment:)``, with
    /// any bytes on standard input (text that is not UTF-8 included).
    static func run(_ arguments: [String], inputBytes: Data, timeLimitSeconds: Double = 300, shellPrefix: String? = nil,
                    environment: [String: String] = [:]) throws -> Run {
        let executable: String
        let launchArguments: [String]
        if let shellPrefix {
            executable = "/bin/sh"
            launchArguments = ["-c", shellPrefix + "; exec \"$0\" \"$@\"", CrashSafetyTests.binary!.path] + arguments
        } else {
            executable = CrashSafetyTests.binary!.path
            launchArguments = arguments
        }
        let run = try SpawnedProcess.run(executable, launchArguments, environment: ProcessInfo.processInfo.environment.merging(environment) { $1 },
                                         input: inputBytes, timeLimitSeconds: timeLimitSeconds)
        return Run(status: run.status, stdout: run.stdout, stderr: String(decoding: run.stderr, as: UTF8.self), signaled: run.signaled, seconds: run.seconds)
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
