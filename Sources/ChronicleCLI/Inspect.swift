import ArgumentParser
import Chronicle
import Foundation

struct Inspect: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a container's stores, active pointer, devices, log counts and bytes, and markers.")

    @Option(name: .customLong("container"), help: "The container directory.")
    var container: String

    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await reportingErrors(output) {
            let c = try existingContainer(container)
            var active: JSONValue = .null
            if let marker = try await c.readMarker(ContainerLayout.activeStore) {
                active = (try? JSONDecoder().decode(JSONValue.self, from: Data(marker.bytes))) ?? .string("<unreadable>")
            }
            var stores: [String: (logs: [String: (count: Int, bytes: Int, last: UInt64)], baselines: [String: (parts: Int, bytes: Int)])] = [:]
            for blob in try await c.listAll(prefix: "") {
                let parts = blob.name.rawValue.split(separator: "/")
                let store = String(parts[0])
                if let log = ContainerLayout.parseLog(blob.name) {
                    var entry = stores[store, default: ([:], [:])]
                    let d = log.device.description
                    let current = entry.logs[d, default: (0, 0, 0)]
                    entry.logs[d] = (current.count + 1, current.bytes + blob.size, max(current.last, log.last))
                    stores[store] = entry
                } else if let part = ContainerLayout.parseBaselinePart(blob.name) {
                    let folder = String(ContainerLayout.baselinePrefix(store: part.store, clock: part.clock, device: part.device, vector: part.vector)
                        .split(separator: "/").last!)
                    let current = stores[store, default: ([:], [:])].baselines[folder, default: (0, 0)]
                    stores[store, default: ([:], [:])].baselines[folder] = (current.parts + 1, current.bytes + blob.size)
                } else {
                    stores[store, default: ([:], [:])] = stores[store] ?? ([:], [:])
                }
            }
            let markers = try await c.listMarkers(prefix: "")
            let foreign = c.foreignEntries()
            let json: JSONValue = .object([
                "activeStore": active,
                "stores": .object(stores.mapValues { s in
                    .object([
                        "baselines": .object(s.baselines.mapValues { .object(["parts": .int(Int64($0.parts)), "bytes": .int(Int64($0.bytes))]) }),
                        "devices": .object(s.logs.mapValues { .object(["logs": .int(Int64($0.count)), "bytes": .int(Int64($0.bytes)), "lastSequence": .int(Int64($0.last))]) }),
                    ])
                }),
                "markers": .array(markers.map { .string($0.rawValue) }),
                "foreignEntries": .array(foreign.map { .string($0) }),
            ])
            var text = "container \(container)\nactive store: \(JSONText.line(active))\n"
            for (store, s) in stores.sorted(by: { $0.key < $1.key }) {
                text += "store \(store): \(s.baselines.count) baseline(s)\n"
                for (folder, b) in s.baselines.sorted(by: { $0.key < $1.key }) {
                    text += "  baseline \(folder): \(b.parts) part(s), \(b.bytes) bytes\n"
                }
                for (device, l) in s.logs.sorted(by: { $0.key < $1.key }) {
                    text += "  device \(device): \(l.count) log(s), \(l.bytes) bytes, through sequence \(l.last)\n"
                }
            }
            text += "markers:" + (markers.isEmpty ? " none" : markers.map { "\n  \($0)" }.joined())
            if !foreign.isEmpty { text += "\nforeign entries (not Chronicle's; ignored):" + foreign.map { "\n  \($0)" }.joined() }
            output.print(json, text: text)
        }
    }
}

struct Verify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check every log in a container; exit 1 naming each bad blob and why.",
        discussion: "With --schema, names and value types are checked against it too.")

    @Option(name: .customLong("container"), help: "The container directory.")
    var container: String

    @Option(name: .customLong("schema"), help: "A schema JSON file to check logs against.")
    var schema: String?

    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await reportingErrors(output) {
            let c = try existingContainer(container)
            let decoder = LogDecoder(schema: try schema.map { try Schema(contentsOf: URL(fileURLWithPath: $0)) })
            var bad: [(String, ChronicleError)] = []
            var good = 0
            var bytes = 0
            for blob in try await c.listAll(prefix: "") {
                guard blob.name.rawValue.hasSuffix(".chlog") || blob.name.rawValue.hasSuffix(".chbase") else { continue }
                do {
                    let data = try await c.get(blob.name)
                    let log = try decoder.open(data)
                    if let parsed = ContainerLayout.parseLog(blob.name),
                       (parsed.device, parsed.first, parsed.last) != (log.header.deviceID, log.header.firstSequence, log.header.lastSequence) {
                        throw ChronicleError(.malformedBody, "contents (device \(log.header.deviceID), sequences \(log.header.firstSequence)...\(log.header.lastSequence)) do not match the name")
                    }
                    good += 1
                    bytes += data.count
                } catch let error as ChronicleError {
                    bad.append((blob.name.rawValue, error))
                }
            }
            output.print(.object([
                "valid": .int(Int64(good)), "bytes": .int(Int64(bytes)),
                "bad": .array(bad.map { .object(["name": .string($0.0), "code": .string($0.1.code.name), "message": .string($0.1.message)]) }),
            ]), text: "\(good) valid log(s), \(bytes) bytes" + bad.map { "\nBAD \($0.0): \($0.1.code): \($0.1.message)" }.joined())
            if !bad.isEmpty { throw ExitCode.failure }
        }
    }
}

struct Dump: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Decode one log or baseline to JSON.",
        discussion: "Give either --file, or --container with --name (a blob name as `chronicle inspect` lists them).")

    @Option(name: .customLong("file"), help: "A log file.")
    var file: String?

    @Option(name: .customLong("container"), help: "The container directory.")
    var container: String?

    @Option(name: .customLong("name"), help: "The blob's name in the container.")
    var name: String?

    @Option(name: .customLong("schema"), help: "A schema JSON file to resolve names against.")
    var schema: String?

    func validate() throws {
        guard (file != nil) != (container != nil && name != nil) else {
            throw ValidationError("give either --file, or both --container and --name")
        }
    }

    func run() async throws {
        try await reportingErrors(nil) {
            let bytes: [UInt8]
            if let file {
                guard let data = FileManager.default.contents(atPath: file) else { throw ChronicleError(.notFound, "cannot read \(file)") }
                bytes = [UInt8](data)
            } else {
                let c = try existingContainer(container!)
                bytes = try await c.get(try ContainerName(name!))
            }
            let decoder = LogDecoder(schema: try schema.map { try Schema(contentsOf: URL(fileURLWithPath: $0)) })
            print(JSONText.pretty(try decoder.decode(bytes).jsonValue))
        }
    }
}

/// Opens a container the operator names for reading. `DirectoryContainer`
/// creates its folders, which is right for devices but would turn a mistyped
/// path into an empty container: the read-only commands refuse it instead.
func existingContainer(_ path: String) throws -> DirectoryContainer {
    guard FileManager.default.fileExists(atPath: path) else {
        throw ChronicleError(.notFound, "no container at \(path)")
    }
    return try DirectoryContainer(root: URL(fileURLWithPath: path))
}
