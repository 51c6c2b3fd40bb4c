import ArgumentParser
import ChronicleBench
import Foundation

/// `chronicle bench postgres`: the PostgreSQL container on a throw-away
/// server, against its baselines.
struct PostgresBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "postgres",
        abstract: "Save-to-visible latency through LISTEN/NOTIFY against polling, devices through PostgreSQL against a folder, replication into PostgreSQL against COPY.",
        discussion: """
            Starts a throw-away PostgreSQL server (a new cluster in a temporary folder, reached through a Unix \
            socket, fsync on; needs Debian's postgresql package) and removes it at the end. latency: device A \
            saves one record and uploads it; the time until device B's snapshot shows it (B's automatic sync \
            woken by LISTEN/NOTIFY), p50 and p99, against the same with B polling every second. devices: N \
            devices each saving one record at a time and syncing every 100 saves, all at once, through \
            PostgreSQL and through a folder: the time the saves take, and the time from the last save until \
            every device has every save. replication: a store of one writer's logs copied from a folder into \
            PostgreSQL (chronicle replicate), in records per second, against psql's COPY of the same bytes \
            into a table. Build with -c release.
            """)

    @Option(help: "Saves measured with LISTEN/NOTIFY.")
    var saves = 1_000
    @Option(help: "Saves measured with polling every second (each takes about half a second).")
    var pollingSaves = 100
    @Option(help: "Devices in the devices scenario.")
    var devices = 8
    @Option(help: "Saves per device in the devices scenario.")
    var deviceSaves = 1_000
    @Option(help: "Records of the replicated store.")
    var records = 1_000_000
    @Option(help: "Run only these scenarios: latency, devices, replication.")
    var only: [String] = []
    @OptionGroup var output: OutputOptions

    static let scenarios = PostgresScenarios.scenarios

    func validate() throws {
        guard saves > 0, pollingSaves >= 0, devices > 0, deviceSaves > 0, records > 0 else { throw ValidationError("counts must be more than 0") }
        if let unknown = only.first(where: { !Self.scenarios.contains($0) }) {
            throw ValidationError("unknown scenario \(unknown) (--only takes \(Self.scenarios.joined(separator: ", ")))")
        }
    }

    func run() async throws {
        try await reportingErrors(output) {
            var scenarios = PostgresScenarios()
            (scenarios.saves, scenarios.pollingSaves, scenarios.devices) = (saves, pollingSaves, devices)
            (scenarios.deviceSaves, scenarios.records, scenarios.only) = (deviceSaves, records, only)
            let quiet = output.json
            let (json, text) = try await scenarios.run(logger: CLILogging.logger) { line in
                if !quiet { StandardStreams.error(line + "\n") }
            }
            output.print(json, text: text)
        }
    }
}
