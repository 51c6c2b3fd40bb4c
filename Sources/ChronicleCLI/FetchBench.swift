import ArgumentParser
import ChronicleBench

/// Reading Codable records back: `Store.fetchAll` against a plain GRDB
/// `FetchableRecord` fetch of the same rows.
struct FetchBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fetch",
        abstract: "Codable records read with Store.fetchAll, against a GRDB FetchableRecord of the same rows.")

    @Option(help: "Records to save and read back (1 to 10000000).")
    var records: Int = 60_000

    @Option(help: "Rounds: the two fetches take turns this many times and each reports its best round (1 to 1000).")
    var rounds: Int = 5

    @OptionGroup var output: OutputOptions

    func validate() throws {
        guard (1...10_000_000).contains(records) else { throw ValidationError("--records takes 1 to 10000000, not \(records)") }
        guard (1...1000).contains(rounds) else { throw ValidationError("--rounds takes 1 to 1000, not \(rounds)") }
    }

    func run() async throws {
        try await reportingErrors(output) {
            let (json, text) = try await FetchScenario(records: records, rounds: rounds).run()
            output.print(json, text: text)
        }
    }
}
