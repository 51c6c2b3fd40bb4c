import ArgumentParser
import Chronicle
import Foundation

@main
struct ChronicleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chronicle",
        abstract: "Operate Chronicle stores: save, sync, query, inspect and verify containers and logs.",
        discussion: """
            A device keeps its snapshot in a device directory; devices share a container directory, \
            made once with `chronicle init --container DIR`.
            Every command takes --help, and every one but `dump` (which always prints JSON) takes \
            --json: one JSON value on standard output, an error as {"error": {"code": ..., "message": ...}} \
            (bad usage has code "usage"). docs/cli.md describes each shape.
            Exit status: 0 on success, 1 when the command found a problem (bad input data included), \
            2 on bad usage (an unknown command or option, a missing or invalid argument); \
            `sync` exits 3 when something it needs is not visible in the container yet.
            Long runs (sync, simulate --seeds, bench) report progress with a rate on standard error: \
            one line rewritten in place on a terminal, plain lines otherwise.
            """,
        subcommands: [Init.self, Save.self, Sync.self, PublishBaseline.self, Query.self, StateHash.self, Inspect.self, Verify.self, Dump.self, Demo.self, Simulate.self, SimulateWorker.self, Bench.self]
    )

    /// The exit status of bad usage.
    static let usageExitCode: Int32 = 2

    /// Parses and runs a command like ArgumentParser's own entry point, but
    /// with the exit status the help documents for bad usage (2, where
    /// ArgumentParser uses 64), and bad usage as JSON under `--json`.
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        do {
            var command = try await asyncParseAsRoot(arguments)
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            Foundation.exit(finish(error, json: arguments.prefix(while: { $0 != "--" }).contains("--json")))
        }
    }

    /// Prints what `error` calls for and returns the exit status.
    static func finish(_ error: any Error, json: Bool) -> Int32 {
        let code = exitCode(for: error)
        if code == .success {
            // --help and the like.
            let text = fullMessage(for: error)
            if !text.isEmpty { print(text) }
            return code.rawValue
        }
        guard code == .validationFailure else {
            let text = fullMessage(for: error)
            if !text.isEmpty { FileHandle.standardError.write(Data((text + "\n").utf8)) }
            return code.rawValue
        }
        if json {
            print(JSONText.pretty(.object(["error": .object(["code": .string("usage"), "message": .string(message(for: error))])])))
        } else {
            FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
        }
        return usageExitCode
    }
}

/// Options shared by commands that act as one device.
struct DeviceOptions: ParsableArguments {
    @Option(name: .customLong("device-dir"), help: "The device's own directory (created if needed).")
    var deviceDirectory: String

    @OptionGroup var container: ContainerOptions

    @Option(name: .customLong("schema"), help: "The schema JSON file.")
    var schema: String

    /// How long a command waits for another process that has the device folder open.
    static let lockWait: Duration = .seconds(5)

    func open() async throws -> Store {
        let schema = try Schema(contentsOf: URL(fileURLWithPath: self.schema))
        let directory = URL(fileURLWithPath: deviceDirectory)
        // First, so that a missing container leaves no device folder behind.
        let container = try self.container.open()
        // The store keeps the device's ID and its store in the folder's
        // device.json, and holds the folder's lock until it is closed.
        var configuration = Store.Configuration(schema: schema, directory: directory, container: container, logger: CLILogging.logger)
        configuration.lockWait = Self.lockWait
        return try await Store.open(configuration)
    }
}

/// Output shared by every command.
struct OutputOptions: ParsableArguments {
    @Flag(name: .long, help: "Print machine-readable JSON instead of text.")
    var json = false

    func print(_ value: JSONValue, text: String) {
        if json {
            Swift.print(JSONText.pretty(value))
        } else {
            Swift.print(text)
        }
    }
}

/// Runs a command's body and turns its errors into a message and exit code 1.
/// Usage errors (`ValidationError`) go on to ``ChronicleCommand/main()``,
/// which exits 2. Commands without `--json` pass nil (an `OutputOptions()`
/// made by hand cannot be read: ArgumentParser traps on it).
func reportingErrors(_ output: OutputOptions?, _ body: () async throws -> Void) async throws {
    let json = output?.json ?? false
    do {
        try await body()
    } catch let error as ValidationError {
        throw error
    } catch let error as ChronicleError {
        if json {
            print(JSONText.pretty(.object(["error": .object(["code": .string(error.code.name), "message": .string(error.message)])])))
        } else {
            FileHandle.standardError.write(Data("chronicle: \(error.code): \(error.message)\n".utf8))
        }
        throw ExitCode.failure
    } catch let error as ExitCode {
        throw error
    } catch {
        if json {
            print(JSONText.pretty(.object(["error": .object(["code": .string("error"), "message": .string("\(error)")])])))
        } else {
            FileHandle.standardError.write(Data("chronicle: \(error)\n".utf8))
        }
        throw ExitCode.failure
    }
}

enum JSONText {
    static func pretty(_ value: JSONValue) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return String(decoding: (try? encoder.encode(value)) ?? Data("null".utf8), as: UTF8.self)
    }

    static func line(_ value: JSONValue) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: (try? encoder.encode(value)) ?? Data("null".utf8), as: UTF8.self)
    }
}
