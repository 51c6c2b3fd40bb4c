import ArgumentParser
import Chronicle
import ChronicleContainer
import ChronicleCore
import ChroniclePostgres
import ChronicleSnapshot
import Foundation
import GRDB

/// The container a command names, and how to open it.
struct ContainerOptions: ParsableArguments {
    @Option(name: .customLong("container"),
            help: "The container: a directory, or a PostgreSQL URL (postgres://user[:password]@host[:port]/database?schema=name, or postgres://user@/database?host=/socket/folder), made by `chronicle init`.")
    var container: String

    @Flag(name: .customLong("follow-root-symlink"),
          help: "Accept a container path that is itself a symbolic link (links inside a container are never followed).")
    var followRootSymlink = false

    @Flag(name: .customLong("synced-folder"),
          help: "The container folder is kept in step between machines by a sync service (not shared directly): creating a file there is not exclusive across machines, so elections and first stores use the rules for that (docs/health.md).")
    var syncedFolder = false

    /// Whether the container is in PostgreSQL.
    var isPostgres: Bool { Self.isPostgres(container) }

    func validate() throws { try Self.validateLocation(container, option: "--container") }

    /// Refuses, as bad usage, a PostgreSQL URL that does not parse (an
    /// unknown option, a bad schema name or port): the URL is an argument.
    static func validateLocation(_ location: String, option: String) throws {
        if location.isEmpty { throw ValidationError("\(option) is empty: name a container folder or a postgres:// URL") }
        guard isPostgres(location) else { return }
        do {
            _ = try PostgresContainer.Configuration(url: location, environment: ProcessInfo.processInfo.environment)
        } catch {
            throw ValidationError("\(option): \(error.message)")
        }
    }

    /// Whether `location` names a container in PostgreSQL.
    static func isPostgres(_ location: String) -> Bool { location.hasPrefix("postgres://") || location.hasPrefix("postgresql://") }

    /// The container as output shows it: a URL without its password.
    var displayName: String {
        isPostgres ? PostgresContainer.Configuration.redacted(container) : container
    }

    /// Opens the container; a missing one is an error unless `create`.
    func open(create: Bool = false) async throws -> any Container {
        try await Self.open(container, create: create, syncedFolder: syncedFolder, followRootSymlink: followRootSymlink)
    }

    /// Opens the container at `location` to write into it, creating it if
    /// it does not exist; a folder that holds other files and no container
    /// is refused, so that a mistyped path never becomes a container.
    static func openDestination(_ location: String, followRootSymlink: Bool = false, syncedFolder: Bool = false) async throws -> any Container {
        if !isPostgres(location) {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: location, isDirectory: &isDirectory), isDirectory.boolValue,
               let entries = try? FileManager.default.contentsOfDirectory(atPath: location), !entries.isEmpty,
               !entries.contains(ContainerLayout.Directory.blobs), !entries.contains(ContainerLayout.Directory.markers) {
                throw ChronicleError(.notFound, "\(location) is a folder that holds other files and no container"
                                     + (entries.contains("device.json") ? " (it is a device folder)" : "") + ": name a new or empty folder, or one `chronicle init` made")
            }
        }
        return try await open(location, create: true, syncedFolder: syncedFolder, followRootSymlink: followRootSymlink)
    }

    /// Opens the container at `location`, a directory or a postgres:// URL.
    static func open(_ location: String, create: Bool = false, syncedFolder: Bool = false,
                     followRootSymlink: Bool = false) async throws -> any Container {
        if isPostgres(location) {
            return try await PostgresContainer.connect(try PostgresContainer.Configuration(url: location, environment: ProcessInfo.processInfo.environment),
                                                       create: create, logger: CLILogging.logger)
        }
        return try DirectoryContainer(root: URL(fileURLWithPath: location), create: create, reliableExclusiveCreate: !syncedFolder,
                                      rootMayBeSymlink: followRootSymlink)
    }
}

struct Init: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create a container directory (or check that one is there).",
        discussion: """
            Every other command refuses a container directory that does not exist or holds no container, \
            so that a mistyped path or an unmounted network share never becomes a separate, empty container. \
            Run init once, where the container should live (a new or empty folder: one that holds other files, \
            a device folder say, is refused); running it again changes nothing. It writes the \
            container's account marker, so that devices working on copies of the folder (a sync service's \
            replicas) before any of them synced agree on the account: each first device would otherwise \
            write its own, and a sync service keeping one would leave the others' saves under an account \
            that never comes back.
            """)

    @OptionGroup var location: ContainerOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await reportingErrors(output) {
            let existed = (try? await location.open()) != nil
            // A folder holding other files (a device folder, say) is refused.
            let container = try await ContainerOptions.openDestination(location.container, followRootSymlink: location.followRootSymlink,
                                                                         syncedFolder: location.syncedFolder)
            if try await container.readMarker(ContainerLayout.account) == nil {
                var random = SystemRandomNumberGenerator()
                let token = (0..<2).map { _ in String(random.next() as UInt64, radix: 16) }.joined(separator: "-")
                do {
                    _ = try await container.createMarker(ContainerLayout.account, AccountToken(token: token))
                } catch let error as ChronicleError where error.code == .markerConflict {
                    // Another init, or a first device, wrote it meanwhile.
                }
            }
            let shown = (container as? DirectoryContainer)?.root.path ?? location.displayName
            output.print(.object(["container": .string(shown), "created": .bool(!existed)]),
                         text: existed ? "container \(shown) is already there" : "created container \(shown)")
        }
    }
}

struct Inspect: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a container's stores (with the schema versions their logs use and their compression dictionaries), active pointer, devices, log counts and bytes, and markers.",
        discussion: "Exits 1, naming each, if it finds entries that are not Chronicle's or overlapping logs of one device.")

    @OptionGroup var location: ContainerOptions
    @Flag(name: .customLong("logs"), help: "Also list every blob (logs and baseline parts) by name, as `chronicle dump --name` takes them.")
    var listBlobs = false
    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await reportingErrors(output) {
            let container = try await location.open()
            let inventory = try await ContainerInventory(of: container)
            let blobs = listBlobs ? try await container.listAll(prefix: "") : []
            var active: JSONValue = .null
            if let marker = inventory.activeStore {
                active = (try? JSONDecoder().decode(JSONValue.self, from: Data(marker.bytes))) ?? .string("<unreadable>")
            }
            // The schema versions each store records its logs use.
            var versions: [String: [(version: Int, hash: String)]] = [:]
            for store in inventory.stores.keys {
                guard let id = StoreID(string: store) else { continue }
                versions[store] = await Replayer.recordedSchemas(in: container, store: id)
                    .map { ($0.version, $0.hashString) }.sorted { $0.version < $1.version }
            }
            // The compression dictionaries each store published.
            var dictionaries: [String: (found: [PublishedDictionary], damaged: [(name: ContainerName, error: ChronicleError)])] = [:]
            for store in inventory.stores.keys {
                guard let id = StoreID(string: store) else { continue }
                dictionaries[store] = try await container.publishedDictionaries(store: id)
            }
            // What became of each store, as its markers say.
            var states: [String: String] = [:]
            let pointer = try? await container.readMarker(ContainerLayout.activeStore, as: ActiveStorePointer.self)?.payload.store
            for store in inventory.stores.keys {
                guard let id = StoreID(string: store) else { continue }
                let markers = Set(inventory.markers)
                if markers.contains(ContainerLayout.tombstone(store: id)) {
                    states[store] = "deleted"
                } else if markers.contains(ContainerLayout.supersession(store: id)) {
                    let next = try? await container.readMarker(ContainerLayout.supersession(store: id), as: StoreSupersession.self)?.payload.store
                    states[store] = "replaced by \(next.map { "\($0)" } ?? "another store")"
                } else if pointer == id {
                    states[store] = "active"
                } else if markers.contains(ContainerLayout.tentative(store: id)) {
                    states[store] = "being created"
                } else {
                    states[store] = "not active"
                }
            }
            let json: JSONValue = .object([
                "activeStore": active,
                "stores": .object(inventory.stores.mapValuesWithKeys { store, s in
                    .object([
                        "state": .string(states[store] ?? "not active"),
                        "schemaVersions": .array((versions[store] ?? []).map { .object(["version": .int(Int64($0.version)), "hash": .string($0.hash)]) }),
                        "dictionaries": dictionariesJSON(dictionaries[store]),
                        "baselines": .object(s.baselines.mapValues { .object(["parts": .int(Int64($0.parts)), "bytes": .int(Int64($0.bytes))]) }),
                        "devices": .object(Dictionary(uniqueKeysWithValues: s.devices.map { device, l in
                            (device.description, JSONValue.object(["logs": .int(Int64(l.logs)), "bytes": .int(Int64(l.bytes)), "lastSequence": .int(Int64(l.lastSequence))]))
                        })),
                    ])
                }),
                "markers": .array(inventory.markers.map { .string($0.rawValue) }),
                "foreignEntries": .array(inventory.foreignEntries.map { .string($0.path) }),
                "errors": problemsJSON(inventory.problems),
            ].merging(listBlobs ? ["blobs": .array(blobs.map { .object(["name": .string($0.name.rawValue), "bytes": .int(Int64($0.size))]) })] : [:]) { a, _ in a })
            let activeText: String
            if case .object(let fields) = active, case .string(let store)? = fields["store"] { activeText = store } else { activeText = active == .null ? "none" : JSONText.line(active) }
            var text = "container \(oneLine(location.displayName))\nactive store: \(activeText)\n"
            for (store, s) in inventory.stores.sorted(by: { $0.key < $1.key }) {
                text += "store \(store) (\(states[store] ?? "not active")): \(s.baselines.count) baseline(s)"
                    + ((versions[store] ?? []).isEmpty ? "" : "; schema versions " + (versions[store] ?? []).map { "\($0.version) (\($0.hash))" }.joined(separator: ", "))
                    + "\n"
                for d in dictionaries[store]?.found ?? [] {
                    text += "  compression dictionary \(d.dictionary.id.paddedHex): \(d.dictionary.bytes.count) bytes, published \(publishedTime(d))\n"
                }
                for d in dictionaries[store]?.damaged ?? [] {
                    text += "  compression dictionary \(oneLine(d.name.rawValue)): damaged (\(d.error.code): \(oneLine(d.error.message)))\n"
                }
                for (folder, b) in s.baselines.sorted(by: { $0.key < $1.key }) {
                    text += "  baseline \(folder): \(b.parts) part(s), \(b.bytes) bytes\n"
                }
                for (device, l) in s.devices.sorted(by: { $0.key.description < $1.key.description }) {
                    text += "  device \(device): \(l.logs) log(s), \(l.bytes) bytes, through sequence \(l.lastSequence)\n"
                }
            }
            text += "markers:" + (inventory.markers.isEmpty ? " none" : inventory.markers.map { "\n  \($0)" }.joined())
            if listBlobs {
                text += "\nblobs:" + (blobs.isEmpty ? " none" : blobs.map { "\n  \(oneLine($0.name.rawValue)) (\($0.size) bytes)" }.joined())
            }
            text += problemsText(inventory.problems)
            output.print(json, text: text)
            if !inventory.problems.isEmpty { throw ExitCode.failure }
        }
    }
}

struct Verify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check every log in a container; exit 1 naming each bad blob and why.",
        discussion: """
            Also exits 1 naming each entry that is not Chronicle's (symbolic links, FIFOs, folders at a blob's name, \
            names outside the grammar) and each pair of overlapping logs of one device. With --schema, names and value \
            types are checked against it too; a log of an earlier version of it is checked through the migration, the \
            version read from the stores' schema records or given with --earlier-schema. A damaged blob of a store that was rebuilt as another (after a \
            corruption, say) is named apart and does not fail: no device reads it: the store that replaced it started from a device's copy.
            """)

    @OptionGroup var location: ContainerOptions

    @Option(name: .customLong("schema"), help: "A schema JSON file to check logs against.")
    var schema: String?

    @Option(name: .customLong("earlier-schema"), help: "An earlier version of --schema whose logs are checked through the migration (repeatable; the stores' schema records are read too).")
    var earlierSchemas: [String] = []

    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await reportingErrors(output) {
            let container = try await location.open()
            var decoder = LogDecoder(schema: nil)
            if let schema = try schema.map({ path throws(ChronicleError) in try InputFile.schema(at: path) }) {
                var earlier = try earlierSchemas.map { path throws(ChronicleError) in try InputFile.earlierSchema(at: path) }
                for store in try await container.listChildren(prefix: ContainerLayout.storesPrefix).compactMap({ StoreID(string: $0) }) {
                    earlier += await Replayer.recordedSchemas(in: container, store: store, skipping: Set(earlier.map(\.hash) + [schema.hash]))
                }
                let migrations = earlier.filter { $0.version < schema.version }.compactMap { s in
                    (try? SchemaMigration.through(earlier, from: s, to: schema)).flatMap { $0.isComplete ? $0 : nil }
                }
                decoder = LogDecoder(schema: schema, earlier: migrations)
            }
            let result = try await ContainerVerification(of: container, decoder: decoder)
            output.print(.object([
                "valid": .int(Int64(result.valid)), "bytes": .int(Int64(result.bytes)),
                "bad": problemsJSON(result.problems),
                "badInReplacedStores": problemsJSON(result.replacedStoreProblems),
                "otherSchemaVersions": problemsJSON(result.otherVersions),
            ]), text: "\(result.valid) valid blob(s) (logs and baseline parts), \(result.bytes) bytes" + result.problems.map { "\nBAD \(oneLine("\($0)"))" }.joined()
                + result.replacedStoreProblems.map { "\nin a replaced store (no device reads it: the store that replaced it started from a device's copy): \(oneLine("\($0)"))" }.joined()
                + result.otherVersions.map { "\nnot checked, another schema version (devices on --schema's version hold it): \(oneLine("\($0)"))" }.joined())
            if !result.passed { throw ExitCode.failure }
        }
    }
}

struct Dump: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Decode one log or baseline to JSON.",
        discussion: """
            Give either --file, or --container with --name (a blob name as `chronicle inspect --logs` lists them). \
            A --file compressed against its store's dictionary also needs the --container that holds the dictionary.

            A log of format version 2 (what devices upload) leaves its store, device and sequences to its name, and its checksums cover that name:             a --file is read under the name its path ends with (…/<store>/logs/<device>/<shard>/<first>-<last>.chlog, as in a container folder's blobs/),             or under --name when the file was copied elsewhere.
            """)

    @Option(name: .customLong("file"), help: "A log file.")
    var file: String?

    @Option(name: .customLong("container"), help: "The container: a directory, or a PostgreSQL URL.")
    var container: String?

    @Flag(name: .customLong("follow-root-symlink"), help: "Accept a container path that is itself a symbolic link.")
    var followRootSymlink = false

    @Option(name: .customLong("name"), help: "The blob's name in the container (with --file: the name the file had there).")
    var name: String?

    @Option(name: .customLong("schema"), help: "A schema JSON file to resolve names against.")
    var schema: String?

    func validate() throws {
        guard file != nil || (container != nil && name != nil) else {
            throw ValidationError("give either --file, or both --container and --name")
        }
    }

    func run() async throws {
        try await reportingErrors(nil) {
            let decoder = LogDecoder(schema: try schema.map { try InputFile.schema(at: $0) })
            var bytes: [UInt8] = []
            var blobName = try name.map { try ContainerName($0) }
            if let file {
                bytes = try DirectoryContainer.readFile(atPath: file, maxBytes: decoder.limits.maxLogBytes)
                if blobName == nil {
                    // The name a container folder gives the file: its path's last five parts.
                    let parts = file.split(separator: "/", omittingEmptySubsequences: true).suffix(5)
                    blobName = try? ContainerName(parts.joined(separator: "/"))
                }
            }
            if let container {
                let c = try await ContainerOptions.open(container, followRootSymlink: followRootSymlink)
                let decoded: DecodedLog
                do {
                    if file == nil, let blobName { bytes = try await c.get(blobName, maxBytes: decoder.limits.maxLogBytes) }
                    // A log compressed against its store's dictionary is read with it.
                    if let blobName {
                        decoded = try await decoder.decode(bytes, name: blobName, fetchingFrom: c)
                    } else {
                        decoded = try decoder.decode(bytes)
                    }
                } catch {
                    await c.shutdown()
                    throw error
                }
                await c.shutdown()
                print(JSONText.pretty(decoded.jsonValue))
                return
            }
            do {
                print(JSONText.pretty(try decoder.decode(bytes, at: blobName.flatMap(ContainerLayout.location(of:))).jsonValue))
            } catch let error as ChronicleError where error.code == .unknownDictionary {
                throw ChronicleError(.unknownDictionary, "\(error.message): the log is compressed against its store's dictionary, which its container holds; add --container")
            }
        }
    }
}

/// A store's compression dictionaries as `chronicle inspect --json` shows them.
private func dictionariesJSON(_ d: (found: [PublishedDictionary], damaged: [(name: ContainerName, error: ChronicleError)])?) -> JSONValue {
    var list: [JSONValue] = []
    for found in d?.found ?? [] {
        list.append(.object(["id": .string(found.dictionary.id.paddedHex), "bytes": .int(Int64(found.dictionary.bytes.count)),
                             "published": .string(publishedTime(found))]))
    }
    for damaged in d?.damaged ?? [] {
        list.append(.object(["name": .string(damaged.name.rawValue), "damaged": .string("\(damaged.error.code): \(damaged.error.message)")]))
    }
    return .array(list)
}

/// When a dictionary was published, by its publisher's clock, in ISO 8601.
private func publishedTime(_ d: PublishedDictionary) -> String {
    Timestamp(microsecondsSinceEpoch: Int64(clamping: min(d.created, UInt64(Int64.max / 1000))) * 1000).description
}

private func problemsJSON(_ problems: [ContainerProblem]) -> JSONValue {
    .array(problems.map { .object(["name": .string($0.name), "code": .string($0.error.code.name), "message": .string($0.error.message)]) })
}

private func problemsText(_ problems: [ContainerProblem]) -> String {
    // A name in a container may hold a line break or an escape sequence.
    problems.isEmpty ? "" : "\nerrors:" + problems.map { "\n  \(oneLine("\($0)"))" }.joined()
}

extension Dictionary {
    /// The dictionary with each value transformed, given its key too.
    func mapValuesWithKeys<T>(_ transform: (Key, Value) throws -> T) rethrows -> [Key: T] {
        Dictionary<Key, T>(uniqueKeysWithValues: try map { ($0.key, try transform($0.key, $0.value)) })
    }
}
