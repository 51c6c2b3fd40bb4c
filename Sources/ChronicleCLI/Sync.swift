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
            ]), text: """
                uploaded \(report.uploadedLogs) log(s), imported \(report.imported.appliedLogs) log(s) with \(report.imported.appliedTransactions) transaction(s)
                state hash \(hash)
                """ + failures.map { "\nfailed: \($0.name): \($0.error.code): \($0.error.message)" }.joined())
            if !failures.isEmpty { throw ExitCode.failure }
        }
    }
}
