import ArgumentParser
import Chronicle
import ChronicleCore
import Foundation

/// `chronicle export`: a device's store as portable JSON.
struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a device's store as portable JSON (every record, with its ID and values).",
        discussion: """
            The document (docs/portable-json.md has its JSON Schema) holds the store's ID, its schema, its state \
            hash and every visible record of every entity, ordered by ID. Values take forms any JSON reader keeps \
            exact: int64 as a string of digits, dates as a string of seconds since 1970, binary data as base64 with \
            a MIME type, decimals as strings, and doubles with their IEEE-754 64-bit image beside the number, so \
            NaN payloads, infinities and -0.0 come back bit for bit. `chronicle import-export` reads it into a \
            store of the same schema. Written to standard output, or with --output to a file (replaced whole: \
            written beside it, then renamed).
            """)

    @OptionGroup var device: DeviceOptions

    @Option(name: .shortAndLong, help: "Write the export to this file instead of standard output.")
    var output: String?

    func run() async throws {
        try await reportingErrors(nil) {
            let opened = try await device.open()
            let data: Data
            do {
                data = try await PortableExport.export(opened.store)
                try await opened.manager.close()
            } catch {
                try? await opened.manager.close()
                throw error
            }
            if let output {
                do {
                    try data.write(to: URL(fileURLWithPath: output), options: .atomic)
                } catch {
                    throw ChronicleError(.io, "cannot write \(output): \(error.localizedDescription)", underlying: error)
                }
            } else {
                FileHandle.standardOutput.write(data + Data("\n".utf8))
            }
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
                "notInExport": .int(Int64(report.notInExport)), "stateHash": .string(report.stateHash),
                "exportedStateHash": .string(report.exportedStateHash), "stateHashMatches": .bool(matches),
            ]), text: "inserted \(report.inserted), updated \(report.updated), unchanged \(report.unchanged); "
                + "\(report.notInExport) record(s) the export does not hold were kept\n"
                + "state hash \(report.stateHash)" + (matches ? " (the export's)" : " (the export's was \(report.exportedStateHash))"))
        }
    }
}
