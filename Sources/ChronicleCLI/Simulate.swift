import ArgumentParser
import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSimulation
import ChronicleSnapshot
import ChronicleTestSupport
import Foundation
import GRDB

struct Simulate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the deterministic multi-device simulation and check every invariant.",
        discussion: """
            Devices save, sync, go offline, crash at injected points and restart, while the simulated \
            container delays, reorders, tears, loses and damages blobs, goes down and is wiped, and \
            devices switch accounts; all from one seed on a virtual clock. Afterwards it checks \
            convergence, order independence, that no acknowledged save was lost, all-or-nothing \
            imports, that accounts stay apart, that a new device starting from a baseline agrees, \
            and bounded memory. The same seed prints the same summary. On a violation it prints \
            the command that reproduces it and exits 1.

            With --swarm every seed draws its own rates, visibility delay and operation weights \
            (each fault kind off entirely in about a third of the seeds) and prints them. --rate, \
            --weight and --max-delay set what they name, with or without --swarm.

            Rates (--rate kind=probability, default in brackets), the chance that:
            \(SimulationOptions.Rate.allCases.map { "  \($0.rawValue) [\(SimulationOptions()[$0])]: \($0.help)" }.joined(separator: "\n"))

            Operations (--weight operation=weight): \(SimulationOptions.operationNames.map { "\($0) \(SimulationOptions().operationWeights[$0] ?? 0)" }.joined(separator: ", ")).
            """)

    @Option(help: "The seed (decimal or 0x hex).", transform: Simulate.parseSeed)
    var seed: UInt64 = 1

    @Option(help: "Run this many seeds, from --seed on.")
    var seeds: Int = 1

    @Option(help: "Devices on the account.")
    var devices: Int = 5

    @Option(help: "Save attempts per device.")
    var saves: Int = 20

    @Option(name: .customLong("rate"), help: ArgumentHelp("Set rates: kind=probability items, comma-separated or repeated (kinds below).", valueName: "kind=p"))
    var rates: [String] = []

    @Option(name: .customLong("weight"), help: ArgumentHelp("Set operation weights: operation=weight items, comma-separated or repeated.", valueName: "operation=w"))
    var weights: [String] = []

    @Option(name: .customLong("max-delay"), help: "The longest delay before another device sees a blob (400ms, 2s, 0).")
    var maxDelay: String?

    @Flag(help: "Draw each seed's rates, delay and operation weights from the seed (swarm testing).")
    var swarm = false

    @Option(help: "Run this many real OS processes as devices on one DirectoryContainer, killing and restarting them at random.")
    var processes: Int?

    @Flag(help: "With --processes: run the devices on a PostgreSQL container instead, on a throw-away server this command starts (a new cluster in a temporary folder, reached through a Unix socket; needs Debian's postgresql package) and removes at the end. The server is killed with SIGKILL three times while the devices save and sync, and started again a moment later.")
    var postgres = false

    @Flag(help: "Turn every fault off.")
    var calm = false

    @Flag(help: "Run every device through a store manager: local stores first, several devices turning the cloud on at the same moment, then cloud toggles, deletions and maintenance operations (the cloud-toggle, cloud-deletion and maintenance rates).")
    var lifecycle = false

    @Flag(help: "Turn the lifecycle and the corruption faults on (the damaged-view and unrepairable-log rates): logs some devices see damaged for good, logs their owner cannot put back. The health monitors find them, mark the store, elect one device to rebuild it, and every device moves to the new store.")
    var corruption = false

    @Flag(help: "Change the app's schema during the run: devices start on the workload's first version (some on the second, as new installs), upgrade at random moments while the others keep writing (notes gain a color, a reading's label is renamed, tags are new, with a unique label), and all have upgraded before the checks. Adds the check that schema versions never cause a corruption mark or a rebuild.")
    var upgrades = false

    @Flag(name: .customLong("no-automatic-compaction"), help: "Devices compact only when the workload says so. By default half the seeds (drawn from each seed) have their devices publish a baseline and compact by themselves every few dozen saves, as stores do every ten thousand.")
    var noAutomaticCompaction = false

    @Option(help: "With --lifecycle: how many devices turn the cloud on at the same moment, first (default: drawn from the seed, 2 to --devices).")
    var firstEnables: Int?

    @Option(help: ArgumentHelp("With --lifecycle: whether creating the container's active-store pointer is exclusive: reliable, or unreliable as in a folder a sync service shares, where two devices can both create it and the later one stays (default: drawn from the seed, half the seeds each).", valueName: "reliable|unreliable"))
    var exclusiveCreate: ExclusiveCreate?

    @Flag(help: "Print the run's timeline.")
    var verbose = false

    @OptionGroup var output: OutputOptions

    static func parseSeed(_ text: String) throws -> UInt64 {
        let value = text.hasPrefix("0x") ? UInt64(text.dropFirst(2), radix: 16) : UInt64(text)
        guard let value else { throw ValidationError("not a seed: \(text)") }
        return value
    }

    func validate() throws {
        guard devices >= 1, devices <= 64 else { throw ValidationError("--devices takes 1 to 64") }
        guard saves >= 0, seeds >= 1 else { throw ValidationError("--saves and --seeds must be positive") }
        guard !(swarm && calm) else { throw ValidationError("--swarm draws the rates and --calm turns them off: give one of them") }
        if firstEnables != nil && !(lifecycle || corruption) { throw ValidationError("--first-enables needs --lifecycle") }
        if exclusiveCreate != nil && !(lifecycle || corruption) { throw ValidationError("--exclusive-create needs --lifecycle") }

        if exclusiveCreate == .drawn { throw ValidationError("--exclusive-create takes reliable or unreliable") }
        if processes != nil && (swarm || calm || upgrades || !rates.isEmpty || !weights.isEmpty || maxDelay != nil) {
            throw ValidationError("--processes runs real processes without simulated faults: it takes --seed, --seeds, --saves, --lifecycle, --corruption, --postgres and --verbose")
        }
        if postgres && processes == nil { throw ValidationError("--postgres runs the devices of --processes on a PostgreSQL server: give --processes") }
        if postgres && corruption { throw ValidationError("--corruption damages the files of a folder container: it cannot run with --postgres") }
        if let processes {
            do {
                try MultiProcessSimulation(processes: processes, saves: saves, seed: seed, executable: URL(fileURLWithPath: "/")).validate()
            } catch {
                throw ValidationError("--\(error.message)")
            }
        }
        do {
            try options(for: seed, try overrides()).validate()
        } catch {
            throw ValidationError(error.message)
        }
    }

    func overrides() throws(ChronicleError) -> SimulationOverrides {
        try SimulationOverrides(rates: rates, weights: weights, maxDelay: maxDelay)
    }

    /// The options of one seed: the defaults (or calm ones, or the seed's
    /// swarm draw), then what the command line sets.
    func options(for seed: UInt64, _ overrides: SimulationOverrides) -> SimulationOptions {
        var base = calm ? SimulationOptions.calm : SimulationOptions()
        base.devices = devices
        base.savesPerDevice = saves
        base.lifecycle = lifecycle
        base.upgrades = upgrades
        base.automaticCompaction = !noAutomaticCompaction
        if corruption { base.enableCorruption() }
        base.firstEnables = firstEnables ?? 0
        base.exclusiveCreate = exclusiveCreate ?? .drawn
        var options = swarm ? SimulationOptions.swarm(seed: seed, base: base) : base
        overrides.apply(to: &options)
        return options
    }

    func reproduce(_ seed: UInt64, _ overrides: SimulationOverrides) -> String {
        (["chronicle", "simulate", "--seed", "0x\(String(seed, radix: 16))"] + (swarm ? ["--swarm"] : []) + (calm ? ["--calm"] : [])
            + (lifecycle ? ["--lifecycle"] : []) + (corruption ? ["--corruption"] : []) + (upgrades ? ["--upgrades"] : [])
            + (firstEnables.map { ["--first-enables", String($0)] } ?? [])
            + (exclusiveCreate.map { ["--exclusive-create", $0.rawValue] } ?? [])
            + ["--devices", String(devices), "--saves", String(saves)] + overrides.arguments + ["--verbose"]).joined(separator: " ")
    }

    /// The JSON of `simulate --json`: one object, the same shape for one
    /// seed or many and for both modes (docs/cli.md).
    struct Report: Encodable {
        /// One seed's outcome: the same fields in both modes, and `details`,
        /// what the mode adds.
        struct SeedResult: Encodable {
            var seed: UInt64
            var passed: Bool
            var stateHash: String
            var savesAcknowledged: Int
            var violations: [String]
            var reproduce: String
            var details: Details
        }

        /// The in-process run's whole summary, or the processes' kills and
        /// timeline.
        enum Details: Encodable {
            case simulated(SimulationSummary)
            case processes(MultiProcessSimulation.Result)

            func encode(to encoder: any Encoder) throws {
                switch self {
                case .simulated(let summary): try summary.encode(to: encoder)
                case .processes(let result): try result.encode(to: encoder)
                }
            }
        }

        struct Failure: Encodable {
            var seed: UInt64
            var reproduce: String
            var violations: [String]
        }

        /// "simulated" (one process, simulated faults) or "processes".
        var mode: String
        var seeds: Int
        var passed: Int
        var failed: Int
        var swarm: Bool
        var results: [SeedResult]
        var failures: [Failure]

        init(mode: String, swarm: Bool, results: [SeedResult]) {
            self.mode = mode
            self.swarm = swarm
            self.results = results
            seeds = results.count
            failed = results.filter { !$0.passed }.count
            passed = seeds - failed
            failures = results.filter { !$0.passed }.map { Failure(seed: $0.seed, reproduce: $0.reproduce, violations: $0.violations) }
        }

        func print() throws {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            Swift.print(String(decoding: try encoder.encode(self), as: UTF8.self))
        }
    }

    func run() async throws {
        if let processes {
            try await runProcesses(processes)
            return
        }
        try await reportingErrors(output) {
            let overrides = try self.overrides()
            var failed: [SimulationSummary] = []
            var summaries: [SimulationSummary] = []
            let progress = seeds > 1 ? ProgressLine("simulate", unit: "seeds", total: seeds) : nil
            for i in 0..<seeds {
                let s = seed &+ UInt64(i)
                let simulation = Simulation(seed: s, options: options(for: s, overrides), verbose: verbose)
                let summary = try await simulation.run()
                if verbose {
                    let events = simulation.events.joined(separator: "\n") + "\n"
                    if output.json { StandardStreams.error(events) } else { print(events, terminator: "") }
                }
                summaries.append(summary)
                if !summary.passed { failed.append(summary) }
                progress?.update(i + 1, note: "\(failed.count) failed")
            }
            progress?.finish()
            if output.json {
                try Report(mode: "simulated", swarm: swarm, results: summaries.map { s in
                    .init(seed: s.seed, passed: s.passed, stateHash: s.stateHash, savesAcknowledged: s.savesAcknowledged,
                          violations: s.violations, reproduce: reproduce(s.seed, overrides), details: .simulated(s))
                }).print()
            } else if seeds == 1 {
                print(Self.text(summaries[0]))
                if swarm || !overrides.isEmpty {
                    print("rates: \(summaries[0].options.rateSummary)")
                    print("reproduce: \(reproduce(seed, overrides))")
                }
            } else {
                print(sweepText(summaries, failed: failed.count))
            }
            for summary in failed {
                var lines = ["seed 0x\(String(summary.seed, radix: 16)) violated: " + summary.violations.joined(separator: "; ")]
                if swarm || !overrides.isEmpty { lines.append("  rates: \(summary.options.rateSummary)") }
                lines.append("  reproduce: \(reproduce(summary.seed, overrides))")
                StandardStreams.error(lines.joined(separator: "\n") + "\n")
            }
            if !failed.isEmpty { throw ExitCode.failure }
        }
    }

    func sweepText(_ summaries: [SimulationSummary], failed: Int) -> String {
        let acknowledged = summaries.reduce(0) { $0 + $1.savesAcknowledged }
        let attempted = summaries.reduce(0) { $0 + $1.savesAttempted }
        let syncs = summaries.reduce(0) { $0 + $1.syncs }
        let logs = summaries.reduce(0) { $0 + $1.logs }
        let faults = summaries.reduce(FaultCounts()) { $0 + $1.faults }
        var text = """
            \(seeds) seeds × \(devices) devices: \(seeds - failed) passed, \(failed) failed; \(acknowledged) acknowledged saves checked
            in all: \(attempted) saves attempted, \(syncs) syncs, \(logs) logs, \(summaries.reduce(0) { $0 + $1.baselinesPublished }) baselines published, \(summaries.reduce(0) { $0 + $1.compactions }) compactions removing \(summaries.reduce(0) { $0 + $1.compactedLogs }) logs; the final check's new device started from one in \(summaries.filter(\.newDeviceStartedFromBaseline).count) seeds
            faults in all: \(faults.summary)
            """
        let upgraded = summaries.compactMap(\.upgrades)
        if !upgraded.isEmpty {
            text += "\nupgrades: \(upgraded.reduce(0, +)) devices upgraded to schema version 2 while the others worked"
        }
        let lifecycles = summaries.compactMap(\.lifecycle)
        if !lifecycles.isEmpty {
            let all = lifecycles.reduce(LifecycleCounts(), +)
            // How many devices turned the cloud on at the same moment, and in how many seeds.
            let firstEnables = Dictionary(grouping: lifecycles, by: \.firstEnables).mapValues(\.count).sorted { $0.key < $1.key }
                .map { "\($0.value) with \($0.key)" }.joined(separator: ", ")
            text += "\nlifecycle in all: \(all.summary)"
            text += "\nfirst enables at one moment: \(firstEnables) devices; \(lifecycles.filter(\.firstEnablesDuringOutage).count) during an outage"
        }
        let healths = summaries.compactMap(\.health)
        if !healths.isEmpty {
            text += "\nhealth in all: \(healths.reduce(HealthCounts(), +).summary)"
        }
        if swarm {
            let off = SimulationOptions.Rate.allCases.filter { $0.swarmRange != nil }.map { rate in
                "\(rate.rawValue) \(summaries.filter { $0.options[rate].isNever }.count)"
            }
            text += "\nswarm: seeds with a rate off: " + off.joined(separator: ", ")
        }
        return text
    }

    func runProcesses(_ processes: Int) async throws {
        try await reportingErrors(output) {
            let binary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            var results: [MultiProcessSimulation.Result] = []
            let progress = seeds > 1 ? ProgressLine("simulate --processes", unit: "seeds", total: seeds) : nil
            for i in 0..<seeds {
                let s = seed &+ UInt64(i)
                var run = MultiProcessSimulation(processes: processes, saves: saves, seed: s, executable: binary)
                run.lifecycle = lifecycle
                run.corruption = corruption
                var server: ThrowAwayPostgres?
                if postgres {
                    let started = try ThrowAwayPostgres()
                    server = started
                    run.containerLocation = started.url
                    run.openContainer = { location in try await ContainerOptions.open(location, create: true) }
                    run.server = .init(kill: { try started.kill() }, start: { try started.start() })
                }
                defer { server?.remove() }
                let result = try await run.run()
                results.append(result)
                if !output.json {
                    if verbose { result.events.forEach { print($0) } }
                    print("run \(i + 1)/\(seeds) seed \(s): \(processes) processes, \(result.kills) kills, \(result.acknowledged) acknowledged saves checked"
                          + (lifecycle ? " (\(result.savesDeletedWithTheirStore) went with \(result.deletedStores) cloud store deleted on purpose; \(result.toggles) cloud toggles)" : "")
                          + (corruption ? " (\(result.damagedLogs) logs damaged for good, \(result.corruptionRebuilds) rebuilds after a corruption, \(result.killsDuringElection) lease holders killed while rebuilding)" : "")
                          + (postgres ? " (the PostgreSQL server killed \(result.serverKills) times, down \(result.serverDownMilliseconds) ms in all)" : "")
                          + ", state \(result.stateHash): "
                          + (result.passed ? "all invariants hold" : "VIOLATIONS: " + result.violations.prefix(5).joined(separator: "; ")))
                }
                if !result.passed {
                    StandardStreams.error("  reproduce: \(reproduceProcesses(processes, s))\n")
                }
                progress?.update(i + 1, note: "\(results.filter { !$0.passed }.count) failed")
            }
            progress?.finish()
            let failed = results.filter { !$0.passed }
            if output.json {
                try Report(mode: "processes", swarm: false, results: results.map { r in
                    .init(seed: r.seed, passed: r.passed, stateHash: r.stateHash, savesAcknowledged: r.acknowledged,
                          violations: r.violations, reproduce: reproduceProcesses(processes, r.seed), details: .processes(r))
                }).print()
            }
            if !failed.isEmpty { throw ExitCode.failure }
        }
    }

    func reproduceProcesses(_ processes: Int, _ seed: UInt64) -> String {
        "chronicle simulate --processes \(processes)" + (postgres ? " --postgres" : "") + (lifecycle ? " --lifecycle" : "") + (corruption ? " --corruption" : "") + " --seed \(seed) --saves \(saves) --verbose"
    }

    static func text(_ s: SimulationSummary) -> String {
        let f = s.faults
        return """
            seed 0x\(String(s.seed, radix: 16)): \(s.options.devices) devices, \(s.savesAttempted) saves attempted, \(s.savesAcknowledged) acknowledged, \(s.savesRefused) refused by validation, \(s.syncs) syncs, \(s.logs) logs
            faults: \(f.summary)\(s.upgrades.map { "\nupgrades: \($0) device(s) upgraded to schema version 2 while the others worked (the rest started on it, or upgraded before the checks)" } ?? "")\(s.lifecycle.map { "\nlifecycle: \($0.summary)" } ?? "")\(s.health.map { "\nhealth: \($0.summary)" } ?? "")
            baselines: \(s.baselinesPublished) published, \(s.compactions) compactions removing \(s.compactedLogs) logs; the final check's new device started \(s.newDeviceStartedFromBaseline ? "from the newest intact one" : "from the logs alone")
            virtual time: \(s.virtualMilliseconds) ms of work, converged \(s.convergenceMilliseconds) ms after
            records: \(s.records.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")); state \(s.stateHash)
            invariants checked: \(s.invariantsChecked.joined(separator: ", "))
            \(s.passed ? "all invariants hold" : "VIOLATIONS:\n  " + s.violations.joined(separator: "\n  "))
            """
    }
}

extension ExclusiveCreate: ExpressibleByArgument {}
