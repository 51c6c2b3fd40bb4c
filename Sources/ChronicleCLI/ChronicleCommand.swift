import ArgumentParser
import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB

@main
struct ChronicleCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chronicle",
        abstract: "Operate Chronicle stores: save, sync, query, inspect and verify containers and logs.",
        discussion: """
            A device keeps its snapshot in a device directory; devices share a container directory, \
            made once with `chronicle init --container DIR`.
            Every command takes --help, and every one but `dump`, `export` and `export-logs` (which always print JSON) takes \
            --json: one JSON value on standard output, an error as {"error": {"code": ..., "message": ...}} \
            (bad usage has code "usage"). docs/cli.md describes each shape.
            Exit status: 0 on success, 1 when the command found a problem (bad input data included), \
            2 on bad usage (an unknown command or option, a missing or invalid argument); \
            `sync` exits 3 when something it needs is not visible in the container yet.
            Standard error carries errors only, and progress; --log-level LEVEL (any command) or \
            CHRONICLE_LOG=LEVEL logs more (trace, debug, info, notice, warning, error, critical).
            Long runs (sync, import, replicate, export-logs, import-logs, simulate --seeds, bench) report progress with a rate on standard error: \
            one line rewritten in place on a terminal, plain lines otherwise.
            """,
        subcommands: [Init.self, Save.self, Sync.self, Import.self, SampleFeed.self, PublishBaseline.self, Compact.self, Cloud.self, StoreMaintenance.self, Query.self, StateHash.self, Inspect.self, Verify.self, Replicate.self, Export.self, ImportExport.self, ExportLogs.self, ImportLogs.self, Dump.self, HealthCommand.self, SchemaCommand.self, Demo.self, Simulate.self, SimulateWorker.self, Bench.self]
    )

    /// The exit status of bad usage.
    static let usageExitCode: Int32 = 2

    /// Parses and runs a command like ArgumentParser's own entry point, but
    /// with the exit status the help documents for bad usage (2, where
    /// ArgumentParser uses 64), and bad usage as JSON under `--json`.
    ///
    /// SIGPIPE is ignored: a pipe that nobody reads any more (standard
    /// error closed under a save, say) makes a write fail, which
    /// ``StandardStreams`` passes over, instead of ending the process in
    /// the middle of its work.
    static func main() async {
        signal(SIGPIPE, SIG_IGN)
        var arguments = Array(CommandLine.arguments.dropFirst())
        // The command that was parsed, once it was: bad usage found while it
        // runs shows its usage.
        var parsedCommand: (any ParsableCommand.Type)?
        do {
            arguments = try CLILogging.configure(arguments, environment: ProcessInfo.processInfo.environment)
            _ = try ProgressLine.configuredSeconds(ProcessInfo.processInfo.environment)
            try checkHelpNames(arguments)
            try checkPathsAreNotEmpty(arguments)
            var command = try await asyncParseAsRoot(arguments)
            parsedCommand = type(of: command)
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            Foundation.exit(finish(error, json: arguments.prefix(while: { $0 != "--" }).contains("--json"), command: parsedCommand))
        }
    }

    /// Refuses `chronicle help NAME…` when NAME is no command (ArgumentParser
    /// prints the top-level help and exits 0 for it).
    static func checkHelpNames(_ arguments: [String]) throws {
        guard arguments.first == "help" else { return }
        var command: any ParsableCommand.Type = ChronicleCommand.self
        for name in arguments.dropFirst().prefix(while: { !$0.hasPrefix("-") }) {
            let subcommands = command.configuration.subcommands
            guard let found = subcommands.first(where: { $0._commandName == name }) else {
                let known = subcommands.filter { $0.configuration.shouldDisplay }.map { $0._commandName }
                throw ValidationError("no command \"\(name)\"" + (known.isEmpty ? "" : " (there are \(known.joined(separator: ", ")))"))
            }
            command = found
        }
    }

    /// The options, across commands, that take a path.
    static let pathOptions: Set<String> = ["--device-dir", "--container", "--schema", "--earlier-schema", "--input", "-i", "--file", "--write-docs", "--journal",
                                           "--output", "-o", "--from", "--to"]

    /// Refuses an empty path: `URL(fileURLWithPath: "")` is the current
    /// folder, so `--device-dir ""` would make it a device folder, and
    /// `init --container ""` a container.
    static func checkPathsAreNotEmpty(_ arguments: [String]) throws {
        for (i, argument) in arguments.prefix(while: { $0 != "--" }).enumerated() {
            let parts = argument.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let option = String(parts[0])
            guard pathOptions.contains(option) else { continue }
            let value = parts.count == 2 ? String(parts[1]) : (i + 1 < arguments.count ? arguments[i + 1] : nil)
            if value == "" { throw ValidationError("\(option) takes a path, not an empty string") }
        }
    }

    /// Prints what `error` calls for and returns the exit status.
    static func finish(_ error: any Error, json: Bool, command parsedCommand: (any ParsableCommand.Type)? = nil) -> Int32 {
        let code = exitCode(for: error)
        if code == .success {
            // --help and the like.
            let text = fullMessage(for: error)
            if !text.isEmpty { print(text) }
            return code.rawValue
        }
        guard code == .validationFailure else {
            let text = fullMessage(for: error)
            if !text.isEmpty { StandardStreams.error(text + "\n") }
            return code.rawValue
        }
        if json {
            print(JSONText.pretty(.object(["error": .object(["code": .string("usage"), "message": .string(message(for: error))])])))
        } else {
            // Bad usage found while running (a query that writes): the
            // usage of the command that ran, not of `chronicle` itself.
            let text = parsedCommand.map { "Error: \(message(for: error))\nUsage: chronicle \($0.usageString())" }
            StandardStreams.error((text ?? fullMessage(for: error)) + "\n")
        }
        return usageExitCode
    }
}

/// Options shared by commands that act as one device.
struct DeviceOptions: ParsableArguments {
    @Option(name: .customLong("device-dir"),
            help: "The device's own directory (made by the commands that save, sync or set the cloud; `health`, `cloud status`, `baseline` and `compact` need it to exist).")
    var deviceDirectory: String

    /// Refuses a device folder that is not there: a command that only
    /// reports makes nothing, neither a device folder nor a store.
    func requireExistingFolder(_ why: String = "this command only reports, and makes none") throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: deviceDirectory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw ChronicleError(.notFound, "no device folder at \(deviceDirectory): \(why); "
                                 + "the first `chronicle save`, `import`, `sync` or `cloud enable` with this --device-dir makes it (check the path if the device has saved before)")
        }
    }

    @OptionGroup var container: ContainerOptions

    @Option(name: .customLong("schema"),
            help: "The schema JSON file: the app's version of the model. A device folder of an earlier version migrates when it is opened (see `chronicle schema`).")
    var schema: String

    @Option(name: .customLong("earlier-schema"),
            help: "An earlier version of the schema whose logs this device reads, written by devices not upgraded yet (repeatable). Logs of a version the device does not know wait.")
    var earlierSchemas: [String] = []

    /// How long a command waits for another process that has the device folder open.
    static let lockWait: Duration = .seconds(5)

    /// The schema file's schema.
    func loadSchema() throws(ChronicleError) -> Schema {
        try InputFile.schema(at: schema)
    }

    func open() async throws -> OpenDevice {
        try await open(schema: try loadSchema())
    }

    /// Opens the device's store manager with `schema`, read from the schema
    /// file before, and the store it loads (the cloud store unless the
    /// device turned the cloud off with `chronicle cloud disable`).
    func open(schema: Schema) async throws -> OpenDevice {
        let manager = try await openManager(schema: schema)
        do {
            return OpenDevice(manager: manager, store: try await manager.store)
        } catch {
            try? await manager.close()
            throw error
        }
    }

    /// Opens the device's store manager, whatever it manages to load.
    /// A load that fails throws, unless its code is in `tolerating` (the
    /// manager then opens with nothing loaded).
    func openManager(schema: Schema, cloudOnForANewFolder: Bool = true, health: StoreManager.HealthConfiguration = .init(),
                     tolerating: Set<ChronicleError.Code> = []) async throws -> StoreManager {
        let directory = URL(fileURLWithPath: deviceDirectory)
        // First, so that a missing container leaves no device folder behind.
        let container: any Container
        do {
            container = try await self.container.open()
        } catch let error as ChronicleError where (error.code == .notFound || error.code.isTransient)
                    && StoreManager.hasBeenUsed(directory) {
            // A device folder in use before, its container away now (moved,
            // not mounted, its server down): it works offline, on its
            // fallback store, as an app does; the container gets its saves
            // when it is back.
            container = UnreachableContainer(location: self.container.displayName, reason: error)
        }
        // The manager keeps the device's choices in the folder, and its
        // store holds the folder's lock until it is closed.
        var configuration = Store.Configuration(schema: schema, directory: directory, container: container, logger: CLILogging.logger)
        configuration.lockWait = Self.lockWait
        let given = try earlierSchemas.map { path throws(ChronicleError) in (path, try InputFile.earlierSchema(at: path)) }
        for (path, earlier) in given {
            // Named on purpose, so a version that cannot be read through is
            // an error naming the file, not a silent wait.
            do {
                try SchemaMigration.through(given.map(\.1), from: earlier, to: schema).requireComplete()
            } catch {
                throw ChronicleError(error.code, "--earlier-schema \(path) cannot be read as an earlier version of --schema \(self.schema): \(error.message)",
                                     underlying: error)
            }
            configuration.earlierSchemas.append(earlier)
        }
        let manager = try await StoreManager.open(StoreManager.Configuration(store: configuration, cloudEnabledByDefault: cloudOnForANewFolder,
                                                                             health: health))
        if let failure = await manager.loadError, !tolerating.contains(failure.code) {
            // The reason nothing could be loaded (the folder in use, a damaged file), as it is.
            try? await manager.close()
            throw failure
        }
        return manager
    }
}

/// A device's store manager and the store it loaded.
struct OpenDevice {
    let manager: StoreManager
    let store: Store

    /// The container, when it could not be reached and the device works
    /// offline (a device folder used before, see `openManager`).
    var unreachable: UnreachableContainer? {
        manager.configuration.store.container as? UnreachableContainer
    }

    /// Closes the store and lets go of the device folder.
    func close() async throws {
        try await manager.close()
    }
}

/// Output shared by every command.
struct OutputOptions: ParsableArguments {
    @Flag(name: .long, help: "Print machine-readable JSON instead of text.")
    var json = false

    /// Reports a run Ctrl-C stopped: `value` (on standard output with
    /// `--json`) or `text` (on standard error); then exits with status 130,
    /// as a shell reports a run SIGINT ended.
    func interrupted(_ value: JSONValue, text: String) throws -> Never {
        if json {
            Swift.print(JSONText.pretty(value))
        } else {
            StandardStreams.error("\(oneLine(text))\n")
        }
        throw ExitCode(130)
    }

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
func reportingErrors(_ output: OutputOptions?, unavailableExit: Int32? = nil, _ body: () async throws -> Void) async throws {
    let json = output?.json ?? false
    do {
        try await body()
    } catch let error as ValidationError {
        throw error
    } catch let error as ChronicleError {
        if json {
            print(JSONText.pretty(.object(["error": .object(["code": .string(error.code.name), "message": .string(error.message)])])))
        } else {
            StandardStreams.error("chronicle: \(error.code): \(oneLine(error.message))\n")
        }
        // The container not answering: another run later may succeed.
        if let unavailableExit, error.code == .unavailable { throw ExitCode(unavailableExit) }
        throw ExitCode.failure
    } catch let error as ExitCode {
        throw error
    } catch {
        if json {
            print(JSONText.pretty(.object(["error": .object(["code": .string("error"), "message": .string("\(error)")])])))
        } else {
            StandardStreams.error("chronicle: \(oneLine("\(error)"))\n")
        }
        throw ExitCode.failure
    }
}

/// `message` on one line, as an error on standard error must be: line
/// breaks and other control characters (from a path or a name in the
/// input, or another device's words in the container) are escaped (`\n`,
/// `\r`, `\t`, `\u{1b}`).
func oneLine(_ message: String) -> String {
    guard message.unicodeScalars.contains(where: isTerminalControl) else { return message }
    var out = ""
    for scalar in message.unicodeScalars {
        switch scalar {
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case _ where isTerminalControl(scalar): out += "\\u{\(String(scalar.value, radix: 16))}"
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out
}

/// Whether a terminal would act on `scalar` rather than show it: C0 and C1
/// controls, DEL, and the bidirectional overrides and isolates (which
/// reorder what follows them).
func isTerminalControl(_ scalar: Unicode.Scalar) -> Bool {
    switch scalar.value {
    case 0..<0x20, 0x7F...0x9F, 0x202A...0x202E, 0x2066...0x2069: true
    default: false
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
