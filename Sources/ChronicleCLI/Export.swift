import ArgumentParser
import Chronicle
import ChronicleContainer
import ChronicleCore
import Foundation
import Synchronization

/// `chronicle export`: a device's store as portable JSON.
struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a device's store as portable JSON (every record, with its ID and values).",
        discussion: """
            The export is the device's store as it stands: it does not sync first (run `chronicle sync` for what \
            other devices saved since). The device folder must exist. The document (docs/portable-json.md has its JSON Schema) holds the store's ID, its schema, its state \
            hash and every visible record of every entity, ordered by ID. Values take forms any JSON reader keeps \
            exact: int64 as a string of digits, dates as a string of seconds since 1970, binary data as base64 with \
            a MIME type, decimals as strings, and doubles with their IEEE-754 64-bit image beside the number, so \
            NaN payloads, infinities and -0.0 come back bit for bit. `chronicle import-export` reads it into a \
            store of the same schema. Written to standard output, or with --output to a file (a regular file is replaced whole: \
            written beside it, then renamed; a device, a FIFO or a link is written through).
            """)

    @OptionGroup var device: DeviceOptions

    @Option(name: .shortAndLong, help: "Write the export to this file instead of standard output.")
    var output: String?

    func run() async throws {
        try await reportingErrors(nil) {
            try device.requireExistingFolder()
            let opened = try await device.open()
            let data: Data
            do {
                data = try await PortableExport.export(opened.store)
                try await opened.manager.close()
            } catch {
                try? await opened.manager.close()
                throw error
            }
            try OutputFile.write(data, to: output)
        }
    }
}

/// `chronicle import-export`: an export read into a device's store.
struct ImportExport: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import-export",
        abstract: "Read a portable JSON export (chronicle export) into a device's store, as one save.",
        discussion: """
            Records the store lacks are inserted with their IDs; records it holds with other values get the \
            export's; records the export does not hold are kept. All of it is one transaction (one log): saved \
            whole or not at all. The export's schema must be the store's. Into an empty store the state hash \
            becomes the export's, which the output says. Run `chronicle sync` to upload the save.
            """)

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    @Argument(help: "The export file (or - for standard input).")
    var file: String

    func run() async throws {
        try await reportingErrors(output) {
            let bytes = try InputFile.bytes(of: file == "-" ? nil : file, what: "export", limit: 256 << 20)
            let opened = try await device.open()
            let report: PortableExport.Report
            do {
                report = try await PortableExport.restore(Data(bytes), into: opened.store)
                try await opened.manager.close()
            } catch {
                try? await opened.manager.close()
                throw error
            }
            let matches = report.stateHash == report.exportedStateHash
            output.print(.object([
                "inserted": .int(Int64(report.inserted)), "updated": .int(Int64(report.updated)), "unchanged": .int(Int64(report.unchanged)),
                "notInExport": .int(Int64(report.notInExport)), "mergedIntoOthers": .int(Int64(report.mergedIntoOthers)), "stateHash": .string(report.stateHash),
                "exportedStateHash": .string(report.exportedStateHash), "stateHashMatches": .bool(matches),
            ]), text: "inserted \(report.inserted), updated \(report.updated), unchanged \(report.unchanged); "
                + (report.mergedIntoOthers > 0 ? "\(report.mergedIntoOthers) held merged into another record of the same unique key; " : "")
                + "\(report.notInExport) record(s) the export does not hold were kept\n"
                + "state hash \(report.stateHash)" + (matches ? " (the export's)" : " (the export's was \(report.exportedStateHash))"))
        }
    }
}

/// `chronicle export-logs`: a store's logs and baselines as portable JSON.
struct ExportLogs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export-logs",
        abstract: "Write a store's transaction logs and baselines, from its container, as portable JSON.",
        discussion: """
            Where `chronicle export` writes a store's visible state, this writes its history: every log of every \
            device (its sequences, clocks and changes) and every baseline part, with the schemas the store recorded \
            (docs/portable-json.md has the JSON Schema). Values take the forms of `chronicle export`, each with its \
            type's name beside it. Every log is verified first: one that does not verify stops the export (exit \
            status 1) rather than leave it out. `chronicle import-logs` writes the logs into a container again; a \
            device that syncs there builds the same state. Written to standard output, or with --output to a file \
            (replaced whole). Progress goes to standard error.
            """)

    @OptionGroup var container: ContainerOptions

    @Option(name: .customLong("store"), help: "The store ID to export (default: the container's active store).")
    var store: String?

    @Option(name: .shortAndLong, help: "Write the export to this file instead of standard output.")
    var output: String?

    func validate() throws {
        if let store, StoreID(string: store) == nil { throw ValidationError("--store \(store) is not a store ID") }
    }

    func run() async throws {
        try await reportingErrors(nil) {
            let source = try await container.open()
            let progress = ProgressLine("export-logs", unit: "logs")
            let data: Data
            do {
                let storeID: StoreID
                if let store {
                    storeID = StoreID(string: store)!
                } else if let pointer = try await source.readMarker(ContainerLayout.activeStore, as: ActiveStorePointer.self) {
                    storeID = pointer.payload.store
                } else {
                    throw ChronicleError(.notFound, "\(container.displayName) has no active store: name one with --store (`chronicle inspect` lists them)")
                }
                data = try await stoppingOnInterrupt {
                    try await PortableLogs.export(store: storeID, from: source) { step in
                        progress.update(step.processed, total: step.total, note: step.foreign.isEmpty ? "" : "\(step.foreign.count) foreign passed over")
                    }
                }
                progress.finish()
            } catch {
                progress.finish()
                await source.shutdown()
                if isInterruption(error) {
                    StandardStreams.error("export-logs: interrupted; nothing was written\n")
                    throw ExitCode(130)
                }
                throw error
            }
            await source.shutdown()
            try OutputFile.write(data, to: output)
        }
    }
}

/// `chronicle import-logs`: a log export written into a container.
struct ImportLogs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import-logs",
        abstract: "Write the logs and baselines of a portable log export (chronicle export-logs) into a container.",
        discussion: """
            Each log is encoded again and written under the name it had, with the schemas the store recorded; where \
            the container has none, its account marker and (when the store was its container's active one) the \
            active-store pointer are written too, so the copy is the same account. The whole document is read and \
            checked before anything is written: a document that does not read writes nothing. Run it again after an \
            interruption: logs the container holds with the same content are passed over. Nothing the container holds \
            is replaced: a log there with other content, or one overlapping an imported log's sequences, is reported \
            as a conflict and left as it is (exit status 1). The container is created if it does not exist (in a \
            new or empty folder: a folder that holds other files is refused).
            """)

    @OptionGroup var container: ContainerOptions
    @OptionGroup var output: OutputOptions

    @Argument(help: "The export file (or - for standard input).")
    var file: String

    func run() async throws {
        try await reportingErrors(output) {
            let bytes = try InputFile.bytes(of: file == "-" ? nil : file, what: "log export", limit: PortableLogs.maxDocumentBytes)
            // Read and checked before the container is opened (or made).
            let document = Data(bytes)
            let prepared: PortableLogs.Prepared
            do {
                prepared = try await stoppingOnInterrupt {
                    let prepared = try PortableLogs.parse(document)
                    try Task.checkCancellation()
                    return prepared
                }
            } catch {
                if isInterruption(error) {
                    try output.interrupted(.object([
                        "interrupted": .bool(true), "processed": .int(0), "total": .int(0), "written": .int(0), "alreadyThere": .int(0),
                        "conflicts": .array([]),
                    ]), text: "import-logs: interrupted while reading the document; nothing was written")
                }
                throw error
            }
            let progress = ProgressLine("import-logs", unit: "items")
            let last = Mutex(PortableLogs.Progress())
            let (location, followRootSymlink, syncedFolder) = (container.container, container.followRootSymlink, container.syncedFolder)
            // Made inside the interruptible run: a Ctrl-C that comes while
            // the container is made takes effect after its account marker and
            // active-store pointer are written, never between.
            let opened = Mutex<(any Container)?>(nil)
            let result: PortableLogs.Progress
            do {
                result = try await stoppingOnInterrupt {
                    let destination = try await ContainerOptions.openDestination(location, followRootSymlink: followRootSymlink, syncedFolder: syncedFolder)
                    opened.withLock { $0 = destination }
                    return try await PortableLogs.write(prepared, into: destination) { step in
                        last.withLock { $0 = step }
                        progress.update(step.processed, total: step.total, note: "\(step.written) written")
                    }
                }
            } catch {
                progress.finish()
                if let destination = opened.withLock({ $0 }) { await destination.shutdown() }
                if isInterruption(error) {
                    let step = last.withLock { $0 }
                    try output.interrupted(.object([
                        "interrupted": .bool(true), "processed": .int(Int64(step.processed)), "total": .int(Int64(step.total)),
                        "written": .int(Int64(step.written)), "alreadyThere": .int(Int64(step.alreadyThere)),
                        "conflicts": .array(step.conflicts.map { .string($0) }),
                    ]), text: "import-logs: interrupted after \(step.processed) of \(step.total) items (\(step.written) written, \(step.alreadyThere) already there); run the same command again to write the rest")
                }
                throw error
            }
            progress.finish()
            if let destination = opened.withLock({ $0 }) { await destination.shutdown() }
            let outcome = result.conflicts.isEmpty
                ? "no conflicts" : "\(result.conflicts.count) conflict(s), left as they are: \(result.conflicts.joined(separator: ", "))"
            output.print(.object([
                "processed": .int(Int64(result.processed)), "total": .int(Int64(result.total)), "written": .int(Int64(result.written)),
                "alreadyThere": .int(Int64(result.alreadyThere)), "conflicts": .array(result.conflicts.map { .string($0) }),
            ]), text: "wrote \(result.written) of \(result.total) items (\(result.alreadyThere) already there); \(outcome)")
            if !result.conflicts.isEmpty { throw ExitCode.failure }
        }
    }
}
