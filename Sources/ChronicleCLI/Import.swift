import ArgumentParser
import Chronicle
import ChronicleCore
import Foundation

struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import a GeoJSON feed into an entity: new records inserted, existing ones updated by a unique key.",
        discussion: """
            Reads a GeoJSON FeatureCollection in the shape of the USGS earthquake feeds (`chronicle sample-feed` \
            makes one). Each feature is one record of the entity: an attribute takes the property of the same name; \
            longitude, latitude and depth take the point's coordinates when the properties lack them; other properties \
            are ignored. Values use the JSON forms in docs/values.md, except that an integer for a date is milliseconds \
            since 1970, as in the USGS feeds.
            A feature whose --upsert-key value is stored already updates that record (only the attributes that differ; \
            an unchanged feature writes nothing); others are inserted. The key must be declared unique on its own in the schema.
            Features go in batches of --batch-size, each saved whole as one transaction. \
            An import interrupted (Ctrl-C, a crash) keeps the batches saved before it, and nothing of the one under way; \
            running it again finishes the job, since saved features are then unchanged.
            A feature that cannot be read is reported with its number, line and column, then skipped \
            (--on-malformed skip, the default) or the import stops before its batch (--on-malformed stop, exit 1).
            The feed is read whole (at most 256 MiB; about ten times that in memory while it is parsed): split a larger one.
            Progress goes to standard error: one line rewritten on a terminal, plain lines when piped. \
            Ctrl-C stops the import after the batch being saved and says how far it got (exit 130).
            Sync first on a device that has not synced since another device imported the same feed: keys it does \
            not hold yet are inserted again, and merge as duplicates at the next sync. \
            Run `chronicle sync` afterwards to upload the logs.
            """)

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    @Option(name: .customLong("upsert-key"), help: "The attribute that tells new features from stored ones (unique in the schema).")
    var upsertKey: String

    @Option(help: "The entity to import into (default: the one entity whose schema declares --upsert-key unique).")
    var entity: String?

    @Option(name: .customLong("batch-size"), help: "Features per saved batch, each one transaction (1 to 1000000; a batch's log must stay under 64 MiB).")
    var batchSize = 1_000

    @Option(name: .customLong("on-malformed"), help: "What to do with a feature that cannot be read: skip or stop.")
    var onMalformed: BulkImport.OnMalformed = .skip

    @Argument(help: "The GeoJSON file (or pipe) to import; - reads standard input.")
    var feed: String

    /// The most a feed may hold: the whole feed is parsed before the first
    /// batch, in about ten times its size of memory.
    static let feedByteLimit = 256 << 20

    func validate() throws {
        guard (1...1_000_000).contains(batchSize) else { throw ValidationError("--batch-size must be from 1 to 1000000, not \(batchSize)") }
        guard !feed.isEmpty else { throw ValidationError("the feed's path is empty") }
    }

    func run() async throws {
        try await reportingErrors(output) {
            let schema = try device.loadSchema()
            let target = try Self.entity(named: entity, upsertKey: upsertKey, in: schema)
            // Read before the store opens: a bad feed leaves no device folder behind.
            let reading = ContinuousClock.now
            let bytes = try InputFile.bytes(of: feed == "-" ? nil : feed, what: "feed", limit: Self.feedByteLimit)
            // A large feed takes seconds to read: said, so that a run that
            // shows no batch yet is not taken for a hung one.
            let announced = bytes.count >= Self.announcedFeedBytes
            if announced {
                StandardStreams.error("import: reading \(feed == "-" ? "standard input" : oneLine(feed)) (\(Self.megabytes(bytes.count)))\n")
            }
            let parsed = try GeoJSONFeed(data: Data(bytes))
            let items = parsed.items(for: target, requiring: upsertKey)
            if announced {
                let seconds = (ContinuousClock.now - reading) / .seconds(1)
                StandardStreams.error("import: read \(items.count) features in \(String(format: "%.1f", seconds)) s; saving them in batches of \(batchSize)\n")
            }
            let options = BulkImport(entity: target.name, upsertKey: upsertKey, batchSize: batchSize, onMalformed: onMalformed)
            let progress = ProgressLine("import", unit: "features", total: items.count)
            let summary: BulkImport.Summary
            do {
                // The first Ctrl-C stops after the batch being saved.
                summary = try await stoppingOnInterrupt { [device] in
                    let opened = try await device.open(schema: schema)
                    do {
                        let summary = try await opened.store.newBackgroundContext().importRecords(items, options: options) { step in
                            progress.update(step.processed, note: Self.counts(step))
                        }
                        try await opened.close()
                        return summary
                    } catch {
                        try? await opened.close()
                        throw error
                    }
                }
            } catch {
                progress.finish()
                if isInterruption(error) {
                    // Stopped while the device opened: nothing was saved.
                    try output.interrupted(.object(["interrupted": .bool(true), "processed": .int(0), "total": .int(Int64(items.count))]),
                                           text: "import: interrupted before the first batch; nothing was saved")
                }
                throw error
            }
            progress.finish()
            Self.report(summary, output: output)
            if summary.cancelled {
                let p = summary.progress
                try output.interrupted(Self.json(summary),
                                       text: "import: interrupted after \(p.processed) of \(items.count) features (\(Self.counts(p))); every batch reported is saved, nothing of the one under way: run the same command again to import the rest")
            }
            if let stop = summary.stoppedAt {
                // With --json the summary says it (stoppedAt).
                if output.json { throw ExitCode.failure }
                throw ChronicleError(.malformedFeed, "stopped at \(stop.description): nothing from its batch on was saved (--on-malformed skip goes on past such features)")
            }
        }
    }

    /// Feeds from this size on are announced while they are read.
    static let announcedFeedBytes = 8 << 20

    static func megabytes(_ bytes: Int) -> String { String(format: "%.1f MB", Double(bytes) / 1e6) }

    /// The counts of a progress report, in the words of the summary.
    static func counts(_ p: BulkImport.Progress) -> String {
        "\(p.inserted) inserted, \(p.updated) updated, \(p.unchanged) unchanged"
            + (p.skipped > 0 ? ", \(p.skipped) skipped" : "") + (p.folded > 0 ? ", \(p.folded) folded" : "")
    }

    /// The entity to import into: the one named, or the one entity that
    /// declares `upsertKey` unique on its own.
    static func entity(named name: String?, upsertKey: String, in schema: Schema) throws -> Entity {
        if let name {
            guard let entity = schema.entity(named: name) else {
                throw ChronicleError(.unknownEntity, "the schema has no entity \(name) (it has \(schema.entities.map(\.name).joined(separator: ", ")))")
            }
            // Checked before the device folder is opened (or made).
            guard entity.field(named: upsertKey) != nil else {
                throw ChronicleError(.unknownAttribute, "\(entity.name) has no attribute \(upsertKey) to upsert by")
            }
            guard entity.uniqueConstraints.contains([upsertKey]) else {
                throw ChronicleError(.misuse, "\(entity.name).\(upsertKey) is not unique on its own: declare it unique in the schema to upsert by it")
            }
            return entity
        }
        let candidates = schema.entities.filter { $0.uniqueConstraints.contains([upsertKey]) }
        if candidates.count == 1 { return candidates[0] }
        if candidates.count > 1 {
            let names = candidates.map(\.name)
            let all = names.count == 2 ? "\(names[0]) and \(names[1]) both declare" : "\(names.dropLast().joined(separator: ", ")) and \(names.last!) all declare"
            throw ChronicleError(.misuse, "\(all) \(upsertKey) unique: name the entity with --entity")
        }
        // None declares it unique: the one entity that has it gets the
        // precise error; otherwise say where it is (or that it is nowhere).
        let having = schema.entities.filter { $0.field(named: upsertKey) != nil }
        if having.count == 1 {
            throw ChronicleError(.misuse, "\(having[0].name).\(upsertKey) is not unique on its own: declare it unique in the schema to upsert by it")
        }
        if having.isEmpty {
            throw ChronicleError(.unknownAttribute, "no entity has an attribute \(upsertKey) to import by (the schema has \(schema.entities.map(\.name).joined(separator: ", ")))")
        }
        throw ChronicleError(.misuse, "no entity declares \(upsertKey) unique on its own (\(having.map(\.name).joined(separator: ", ")) have it): declare it unique in the schema, and name the entity with --entity")
    }

    /// What an import did, as `--json` prints it.
    static func json(_ summary: BulkImport.Summary) -> JSONValue {
        let p = summary.progress
        var json: [String: JSONValue] = [
            "processed": .int(Int64(p.processed)), "inserted": .int(Int64(p.inserted)), "updated": .int(Int64(p.updated)),
            "unchanged": .int(Int64(p.unchanged)), "skipped": .int(Int64(p.skipped)), "folded": .int(Int64(p.folded)), "batches": .int(Int64(p.batches)),
            "malformed": .array(summary.malformed.map { .object(["position": .string($0.position), "reason": .string($0.reason)]) }),
        ]
        if let total = p.total { json["total"] = .int(Int64(total)) }
        if let stop = summary.stoppedAt {
            json["stoppedAt"] = .object(["position": .string(stop.position), "reason": .string(stop.reason)])
        }
        if summary.cancelled { json["interrupted"] = .bool(true) }
        return .object(json)
    }

    /// Prints what an import did: with `--json` the whole summary on
    /// standard output (the caller prints it for an interrupted run); in
    /// text, the counts on standard output and the features skipped, as
    /// warnings, on standard error.
    static func report(_ summary: BulkImport.Summary, output: OutputOptions) {
        if output.json {
            if !summary.cancelled { output.print(json(summary), text: "") }
            return
        }
        let p = summary.progress
        var warnings = ""
        let shown = 20
        for problem in summary.malformed.prefix(shown) { warnings += "import: skipped \(oneLine(problem.description))\n" }
        if p.skipped > shown {
            let listed = summary.malformed.count < p.skipped ? "the first \(summary.malformed.count) are listed with --json" : "all are listed with --json"
            warnings += "import: … and \(p.skipped - shown) more skipped (\(listed))\n"
        }
        if !warnings.isEmpty { StandardStreams.error(warnings) }
        guard !summary.cancelled else { return }
        let folded = p.folded > 0 ? ", \(p.folded) folded into an earlier feature of their batch with the same key" : ""
        let batches = "in \(p.batches) saved batch\(p.batches == 1 ? "" : "es")"
        let before = summary.stoppedAt == nil ? "" : " before the malformed one it stopped at"
        output.print(.null, text: "imported \(p.processed) feature\(p.processed == 1 ? "" : "s")\(before): \(p.inserted) inserted, \(p.updated) updated, \(p.unchanged) unchanged, "
            + "\(p.skipped) skipped\(folded), \(batches)")
    }
}

extension BulkImport.OnMalformed: ExpressibleByArgument {}

struct SampleFeed: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sample-feed",
        abstract: "Write a made-up earthquake feed in the USGS GeoJSON shape, and its schema, to try `chronicle import`.",
        discussion: """
            The same --features, --seed and --revision always give the same bytes. Revision 1 holds --features \
            earthquakes; each later revision revises about one in ten of them and adds about one in twenty, as a live \
            feed does between two downloads, so importing revision 2 after revision 1 shows updates.
            --schema-out writes the schema to import it with (entity Quake, unique by code):
              chronicle sample-feed --features 30000 --schema-out quakes.schema.json > quakes.geojson
              chronicle import --device-dir dev --container shared --schema quakes.schema.json --upsert-key code quakes.geojson
            """)

    @Option(help: "How many earthquakes revision 1 holds (1 to 5000000).")
    var features = 30_000

    @Option(help: "The seed the feed is made from.")
    var seed: UInt64 = 1

    @Option(help: "The feed's revision (1 to 100).")
    var revision = 1

    @Option(name: .shortAndLong, help: "Write the feed to this file instead of standard output.")
    var output: String?

    @Option(name: .customLong("schema-out"), help: "Also write the feed's schema to this file.")
    var schemaOut: String?

    @Flag(help: "Print what was written as JSON (needs --output: the feed itself is not JSON output).")
    var json = false

    func validate() throws {
        guard (1...5_000_000).contains(features) else { throw ValidationError("--features must be from 1 to 5000000, not \(features)") }
        guard (1...100).contains(revision) else { throw ValidationError("--revision must be from 1 to 100, not \(revision)") }
        if json, output == nil { throw ValidationError("--json needs --output: the feed goes to standard output otherwise") }
        let count = GeoJSONFeed.sampleCount(features: features, revision: revision)
        guard count <= 5_000_000 else {
            throw ValidationError("--features \(features) at --revision \(revision) makes \(count) features, over 5000000 (each revision adds about one in twenty)")
        }
        if let output, let schemaOut, URL(fileURLWithPath: output).standardizedFileURL == URL(fileURLWithPath: schemaOut).standardizedFileURL {
            throw ValidationError("--output and --schema-out name the same file")
        }
    }

    func run() async throws {
        try await reportingErrors(nil) {
            let feed = GeoJSONFeed.sample(features: features, seed: seed, revision: revision)
            if let schemaOut {
                try write(Data((JSONText.pretty(GeoJSONFeed.sampleSchema.jsonValue) + "\n").utf8), to: schemaOut)
            }
            if let output {
                try write(feed, to: output)
            } else {
                StandardStreams.output(feed)
            }
            if json, let output {
                var summary: [String: JSONValue] = ["output": .string(output), "bytes": .int(Int64(feed.count)), "seed": .string(String(seed)),
                                                    "revision": .int(Int64(revision)), "features": .int(Int64(try GeoJSONFeed(data: feed).count))]
                summary["schema"] = schemaOut.map(JSONValue.string) ?? .null
                print(JSONText.pretty(.object(summary)))
            }
        }
    }

    private func write(_ data: Data, to path: String) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw ChronicleError(.io, "cannot write \(path): it is a folder; name a file")
        }
        try OutputFile.write(data, to: path)
    }
}
