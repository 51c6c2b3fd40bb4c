import ArgumentParser
import Chronicle
import ChronicleContainer
import ChronicleCore
import ChroniclePostgres
import Foundation
import Synchronization

struct Replicate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy a store (or every store) from one container to another: a folder to PostgreSQL, PostgreSQL to a folder, any two.",
        discussion: """
            Copies the store's logs, baseline parts and markers, and the container's account marker and active-store \
            pointer where the destination has none (the copy is the same account). The destination is created if it \
            does not exist. Run it again after an interruption (a crash, a lost connection, Ctrl-C): what the destination \
            holds is skipped, so nothing is copied twice. Nothing is deleted, and nothing the destination holds is \
            replaced: a name it holds with other bytes is reported as a conflict and left as it is (exit status 1). \
            Only logs and baseline parts that verify are copied (a damaged one is reported, exit status 1). A \
            destination of another account takes nothing (markerConflict). Ctrl-C stops between two items and says \
            how far the copy got (exit status 130); run the command again to finish. \
            Progress goes to standard error: a line that updates in \
            a terminal, plain lines when piped.
            """)

    @Option(name: .customLong("from"), help: "The source container: a directory or a postgres:// URL.")
    var from: String

    @Option(name: .customLong("to"), help: "The destination container: a directory or a postgres:// URL.")
    var to: String

    @Option(name: .customLong("store"), help: "The store ID to copy (default: every store of the source).")
    var store: String?

    @Flag(name: .customLong("follow-root-symlink"),
          help: "Accept a container path (--from or --to) that is itself a symbolic link (links inside a container are never followed).")
    var followRootSymlink = false

    @OptionGroup var output: OutputOptions

    func validate() throws {
        if let store, StoreID(string: store) == nil { throw ValidationError("--store \(store) is not a store ID") }
        try ContainerOptions.validateLocation(from, option: "--from")
        try ContainerOptions.validateLocation(to, option: "--to")
        if Self.sameContainer(from, to) { throw ValidationError("--from and --to name the same container: nothing to copy") }
    }

    /// Whether two locations name one container: the same URL, or folders
    /// that resolve to the same path.
    static func sameContainer(_ a: String, _ b: String) -> Bool {
        if ContainerOptions.isPostgres(a) && ContainerOptions.isPostgres(b) {
            // The same server, database and schema, whatever the URLs' spelling.
            let environment = ProcessInfo.processInfo.environment
            guard let x = try? PostgresContainer.Configuration(url: a, environment: environment),
                  let y = try? PostgresContainer.Configuration(url: b, environment: environment)
            else { return a == b }
            func place(_ c: PostgresContainer.Configuration) -> String {
                (c.socketPath ?? "\(c.host ?? "127.0.0.1"):\(c.port)") + "/\(c.database ?? c.username)/\(c.schema)"
            }
            return place(x) == place(y)
        }
        if ContainerOptions.isPostgres(a) || ContainerOptions.isPostgres(b) { return false }
        func resolved(_ path: String) -> String { URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path }
        return resolved(a) == resolved(b)
    }

    func run() async throws {
        try await reportingErrors(output) {
            let source = try await ContainerOptions.open(from, followRootSymlink: followRootSymlink)
            // A store the source does not hold is told before the
            // destination is made.
            if let wanted = store.flatMap(StoreID.init(string:)) {
                let holds: Bool
                do {
                    let blobs = try await source.list(prefix: "\(wanted)/", after: nil, limit: 1)
                    let markers = try await source.listMarkers(prefix: "\(wanted)/", after: nil, limit: 1)
                    holds = !blobs.isEmpty || !markers.isEmpty
                } catch {
                    await source.shutdown()
                    throw error
                }
                if !holds {
                    await source.shutdown()
                    throw ChronicleError(.notFound, "the source holds no store \(wanted) (`chronicle inspect` lists its stores)")
                }
            }
            let progress = ProgressLine("replicate", unit: "items")
            let last = Mutex(ContainerReplication.Progress())
            let storeID = store.flatMap(StoreID.init(string:))
            let (to, followRootSymlink) = (self.to, self.followRootSymlink)
            // Made inside the interruptible run: a Ctrl-C that comes while
            // the destination is made takes effect after its account marker
            // and active-store pointer are written, never between.
            let opened = Mutex<(any Container)?>(nil)
            let result: ContainerReplication.Progress
            do {
                result = try await stoppingOnInterrupt {
                    let destination = try await ContainerOptions.openDestination(to, followRootSymlink: followRootSymlink)
                    opened.withLock { $0 = destination }
                    return try await ContainerReplication(from: source, to: destination).run(store: storeID) { step in
                        last.withLock { $0 = step }
                        progress.update(step.processed, total: step.total, note: "\(step.copied) copied")
                    }
                }
            } catch {
                progress.finish()
                await source.shutdown()
                if let destination = opened.withLock({ $0 }) { await destination.shutdown() }
                if isInterruption(error) {
                    let step = last.withLock { $0 }
                    try output.interrupted(.object([
                        "interrupted": .bool(true), "processed": .int(Int64(step.processed)), "total": .int(Int64(step.total)),
                        "copied": .int(Int64(step.copied)), "alreadyThere": .int(Int64(step.alreadyThere)), "bytes": .int(Int64(step.bytes)),
                        "conflicts": .array(step.conflicts.map { .string($0) }), "damaged": .array(step.damaged.map { .string($0) }),
                        "foreign": .array(step.foreign.map { .string($0) }),
                    ]), text: "replicate: interrupted after \(step.processed) of \(step.total) items (\(step.copied) copied, \(step.alreadyThere) already there"
                        + (step.conflicts.isEmpty ? "" : ", \(step.conflicts.count) conflict(s)") + (step.damaged.isEmpty ? "" : ", \(step.damaged.count) damaged")
                        + "); run the same command again to copy the rest")
                }
                throw error
            }
            progress.finish()
            await source.shutdown()
            if let destination = opened.withLock({ $0 }) { await destination.shutdown() }
            let conflicts: [JSONValue] = result.conflicts.map { .string($0) }
            let value: JSONValue = .object([
                "processed": .int(Int64(result.processed)), "total": .int(Int64(result.total)), "copied": .int(Int64(result.copied)),
                "alreadyThere": .int(Int64(result.alreadyThere)), "bytes": .int(Int64(result.bytes)), "conflicts": .array(conflicts),
                "damaged": .array(result.damaged.map { .string($0) }), "foreign": .array(result.foreign.map { .string($0) }),
                "deletedInSource": .array(result.deleted.map { .string($0) }),
            ])
            var lines = ["copied \(result.copied) of \(result.total) items (\(result.bytes) bytes of blobs), \(result.alreadyThere) already there; "
                + (result.conflicts.isEmpty ? "no conflicts"
                    : "\(result.conflicts.count) conflict(s), left as they are: \(result.conflicts.joined(separator: ", "))")]
            if !result.damaged.isEmpty {
                lines.append("\(result.damaged.count) damaged or misnamed log(s) of the source, not copied (a damaged log is put back by its device at its next sync; copy again then): \(result.damaged.joined(separator: ", "))")
            }
            if !result.deleted.isEmpty {
                lines.append("\(result.deleted.count) store(s) deleted on purpose in the source, not copied: \(result.deleted.joined(separator: ", "))")
            }
            if !result.foreign.isEmpty {
                lines.append("\(result.foreign.count) entr(ies) that are neither logs nor baseline parts, not copied: \(result.foreign.joined(separator: ", "))")
            }
            output.print(value, text: lines.map(oneLine).joined(separator: "\n"))
            if !result.conflicts.isEmpty || !result.damaged.isEmpty { throw ExitCode.failure }
        }
    }
}
