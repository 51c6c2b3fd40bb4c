import ArgumentParser
import Chronicle
import ChronicleCore
import ChronicleSnapshot
import Foundation

/// `chronicle schema diff|migrate`.
struct SchemaCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schema",
        abstract: "Compare two versions of a schema, or migrate a device folder to a later one.",
        discussion: """
            A later version of a schema gets a higher version number and names what it renamed \
            ("renamedFrom" on an entity, attribute or to-one relationship). Added entities and fields, \
            renames, fields made optional, defaults, unique constraints and indexes migrate by \
            declaration; a field or entity removed, a type changed or a field made required needs the \
            app's code (a SchemaConversion in the library). docs/schema-evolution.md has examples.
            """,
        subcommands: [SchemaDiff.self, SchemaMigrate.self])
}

struct SchemaDiff: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diff",
        abstract: "List what migrating from one schema version to another does, and what needs the app's code.",
        discussion: """
            Exit status: 0 when everything migrates by declaration; 4 when some step needs the app's \
            code (each such step is named); 1 when a file does not read or the second schema is not a \
            later version of the first; 2 on bad usage.
            """)

    /// The exit status when some step needs the app's code.
    static let needsAppCodeExitCode: Int32 = 4

    @Argument(help: "The earlier schema JSON file.")
    var earlier: String
    @Argument(help: "The later schema JSON file.")
    var later: String
    @Option(name: .customLong("through"), help: "A version between the two (repeatable): the migration goes through each, one version at a time, as on a device that knows them (from the store's schema records, or its app).")
    var between: [String] = []
    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await reportingErrors(output) {
            let source = try InputFile.schema(at: earlier), target = try InputFile.schema(at: later)
            let through = try between.map { path throws(ChronicleError) in try InputFile.schema(at: path) }
            if source.version == target.version, source.hash != target.hash, through.isEmpty {
                // Two schemas under one version: say what differs, as if the
                // later one had the next version, and refuse.
                let bumped = try Schema(version: target.version + 1, entities: target.entities)
                let steps = (try? SchemaMigration.through([], from: source, to: bumped))?.steps ?? []
                throw ChronicleError(.schemaMismatch, "\(earlier) and \(later) are both version \(source.version) but differ (\(source.hashString), \(target.hashString)): "
                    + (steps.isEmpty ? "" : "\(steps.map(\.description).joined(separator: "; ")). ")
                    + "Devices cannot tell two schemas of one version apart: give the later one version \(source.version + 1)")
            }
            let migration = try SchemaMigration.through(through, from: source, to: target)
            let missing = Set(migration.missingAppCode)
            var lines = ["schema version \(source.version) (\(source.hashString)) to \(target.version) (\(target.hashString))"]
            if migration.steps.isEmpty { lines.append("  nothing changes") }
            for step in migration.steps {
                if case .addRequiredField = step {
                    lines.append("  cannot migrate: \(step)")
                } else {
                    lines.append(missing.contains(step) ? "  needs the app's code: \(step)" : "  \(step)")
                }
            }
            lines.append(missing.isEmpty
                ? "migrates by declaration"
                : "\(missing.count) step(s) cannot migrate by declaration: see docs/schema-evolution.md")
            if !missing.isEmpty, target.version - source.version > 1, through.isEmpty {
                // Plain renames name the previous version's fields: the path goes through it.
                let span = target.version - source.version == 2 ? "version \(source.version + 1) lies" : "versions \(source.version + 1) to \(target.version - 1) lie"
                lines.append("\(span) between: devices that know them migrate through them; give them with --through to check that path")
            }
            output.print(.object([
                "from": .object(["version": .int(Int64(source.version)), "hash": .string(source.hashString)]),
                "to": .object(["version": .int(Int64(target.version)), "hash": .string(target.hashString)]),
                "steps": .array(migration.steps.map { .object(["step": .string($0.description), "needsAppCode": .bool(missing.contains($0))]) }),
                "complete": .bool(missing.isEmpty),
            ]), text: lines.map(oneLine).joined(separator: "\n"))
            if !missing.isEmpty { throw ExitCode(Self.needsAppCodeExitCode) }
        }
    }
}

struct SchemaMigrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Open a device folder with a later schema version, migrating the store it loads.",
        discussion: """
            The snapshot of the store the device loads (the cloud store, or its local store while the \
            cloud is off) migrates in one SQLite transaction; a copy of the file is kept beside it until \
            the migration commits, so a failure or a crash leaves the earlier snapshot as it was. Pending \
            saves are rewritten for the later version and upload as its logs. Other snapshots in the folder \
            migrate when they are next loaded. Every command that opens a device does the same; this one \
            says what it did. A change that needs the app's code is refused, naming the step, and nothing \
            is touched.
            """)

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await reportingErrors(output) {
            try device.requireExistingFolder()
            let schema = try device.loadSchema()
            let before = Self.snapshotSchemas(in: device.deviceDirectory)
            let open = try await device.open(schema: schema)
            let store = open.store
            let kind = await open.manager.loadedKind?.rawValue ?? "cloud"
            let hash = try await store.stateHash()
            try await open.close()
            var lines: [String] = []
            var steps: [String] = []
            let path = URL(fileURLWithPath: device.deviceDirectory).appendingPathComponent("\(store.storeID).sqlite").path
            if let migration = store.schemaMigration {
                steps = migration.steps.map(\.description)
                lines.append("migrated the \(kind) store \(store.storeID) from schema version \(migration.source.version) to \(schema.version):")
                lines += steps.map { "  \($0)" }
            } else {
                lines.append("the \(kind) store \(store.storeID) is on schema version \(schema.version): nothing to migrate")
            }
            let waiting = before.filter { $0.key != path && $0.value.version < schema.version }.keys.sorted()
            for other in waiting {
                lines.append("\(URL(fileURLWithPath: other).lastPathComponent) (schema version \(before[other]!.version)) migrates when it is loaded")
            }
            lines.append("state hash \(hash)")
            output.print(.object([
                "store": .string(store.storeID.description), "loaded": .string(kind),
                "from": store.schemaMigration.map { .int(Int64($0.source.version)) } ?? .null, "to": .int(Int64(schema.version)),
                "steps": .array(steps.map { .string($0) }), "stateHash": .string(hash),
                "notYetMigrated": .array(waiting.map { .string(URL(fileURLWithPath: $0).lastPathComponent) }),
            ]), text: lines.map(oneLine).joined(separator: "\n"))
        }
    }

    /// The schema of each snapshot directly in the device folder, by path.
    static func snapshotSchemas(in folder: String) -> [String: Schema] {
        let url = URL(fileURLWithPath: folder)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        var result: [String: Schema] = [:]
        for name in names where name.hasSuffix(".sqlite") {
            let path = url.appendingPathComponent(name).path
            if let identity = try? Snapshot.identity(at: path) { result[path] = identity.schema }
        }
        return result
    }
}
