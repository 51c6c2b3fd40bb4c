import ArgumentParser
import Chronicle
import Foundation

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Upload this device's pending saves and import other devices' logs, once.",
        discussion: "Exits 1 if some log could not be imported (the others still are); each failure is named.")

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await reportingErrors(output) {
            let store = try await device.open()
            let report = try await store.sync()
            let hash = try await store.stateHash()
            try await store.close()
            let failures = report.imported.failures
            output.print(.object([
                "uploadedLogs": .int(Int64(report.uploadedLogs)),
                "importedLogs": .int(Int64(report.imported.appliedLogs)),
                "importedTransactions": .int(Int64(report.imported.appliedTransactions)),
                "waitingForLogs": .array(report.imported.gaps.map { .string("\($0.device) needs \($0.expected)") }),
                "failures": .array(failures.map { .object(["name": .string($0.name), "code": .string($0.error.code.name), "message": .string($0.error.message)]) }),
                "stateHash": .string(hash),
                "startedFromBaseline": report.imported.baseline.map { b in
                    .object(["device": .string(b.device.description), "parts": .int(Int64(b.parts)), "records": .int(Int64(b.records))])
                } ?? .null,
            ]), text: (report.imported.baseline.map { "started from a baseline by device \($0.device): \($0.parts) part(s), \($0.records) record state(s)\n" } ?? "") + """
                uploaded \(report.uploadedLogs) log(s), imported \(report.imported.appliedLogs) log(s) with \(report.imported.appliedTransactions) transaction(s)
                state hash \(hash)
                """ + failures.map { "\nfailed: \($0.name): \($0.error.code): \($0.error.message)" }.joined())
            if !failures.isEmpty { throw ExitCode.failure }
        }
    }
}

struct PublishBaseline: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "baseline",
        abstract: "Publish this device's state as a baseline of the store, after uploading its pending saves.",
        discussion: """
            A new device then starts from the newest complete baseline and imports only the logs after it, \
            instead of replaying the whole history. Parts are written in order and the last is marked final, \
            so a reader never uses a baseline that is still being written.
            """)

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    @Option(name: .customLong("part-kib"), help: "Uncompressed size of each part, in KiB (at least 1).")
    var partKiB = Snapshot.baselinePartBytes / 1024

    func validate() throws {
        guard partKiB >= 1 else { throw ValidationError("--part-kib must be at least 1") }
    }

    func run() async throws {
        try await reportingErrors(output) {
            let store = try await device.open()
            let published = try await store.publishBaseline(partBytes: partKiB * 1024)
            try await store.close()
            output.print(.object([
                "baseline": .string(published.prefix),
                "parts": .int(Int64(published.parts)),
                "records": .int(Int64(published.records)),
            ]), text: "published baseline \(published.prefix): \(published.parts) part(s), \(published.records) record state(s)")
        }
    }
}
