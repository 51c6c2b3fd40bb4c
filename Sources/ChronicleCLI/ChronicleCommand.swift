import ArgumentParser
import Chronicle
import Foundation

@main
struct ChronicleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chronicle",
        abstract: "Operate Chronicle stores: save, sync, query, inspect and verify containers and logs.",
        discussion: """
            A device keeps its snapshot in a device directory; devices share a container directory,
            made once with `chronicle init --container DIR`.
            Every command takes --help; most take --json for machine-readable output.
            Exit status: 0 on success, 1 when the command found a problem, 2 on bad usage;
            `sync` exits 3 when something it needs is not visible in the container yet.
            """,
        subcommands: [Init.self, Save.self, Sync.self, PublishBaseline.self, Query.self, StateHash.self, Inspect.self, Verify.self, Dump.self, Demo.self, Simulate.self, SimulateWorker.self, Bench.self]
    )
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
        return try await Store.open(Store.Configuration(
            schema: schema, directory: directory, container: container,
            logger: CLILogging.logger, lockWait: Self.lockWait))
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
/// Commands without `--json` pass nil (an `OutputOptions()` made by hand
/// cannot be read: ArgumentParser traps on it).
func reportingErrors(_ output: OutputOptions?, _ body: () async throws -> Void) async throws {
    let json = output?.json ?? false
    do {
        try await body()
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
