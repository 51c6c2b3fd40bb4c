import ArgumentParser
import Chronicle
import ChronicleSimulation
import Foundation

struct Simulate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the deterministic multi-device simulation and check every invariant.",
        discussion: """
            Devices save, sync, go offline, crash at injected points and restart, while the simulated
            container delays, reorders, tears, loses and damages blobs, goes down and is wiped, and
            devices switch accounts; all from one seed on a virtual clock. Afterwards it checks
            convergence, order independence, that no acknowledged save was lost, all-or-nothing
            imports, that accounts stay apart, and bounded memory.
            The same seed prints the same summary. On a violation it prints the command that
            reproduces it and exits 1.
            """)

    @Option(help: "The seed (decimal or 0x hex).", transform: Simulate.parseSeed)
    var seed: UInt64 = 1

    @Option(help: "Run this many seeds, from --seed on.")
    var seeds: Int = 1

    @Option(help: "Devices on the account.")
    var devices: Int = 5

    @Option(help: "Save attempts per device.")
    var saves: Int = 20

    @Option(help: "Run this many real OS processes as devices on one DirectoryContainer, killing and restarting them at random.")
    var processes: Int?

    @Flag(help: "Turn every fault off.")
    var calm = false

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
    }

    func reproduce(_ seed: UInt64) -> String {
        "chronicle simulate --seed 0x\(String(seed, radix: 16)) --devices \(devices) --saves \(saves)\(calm ? " --calm" : "") --verbose"
    }

    func run() async throws {
        if let processes {
            try await runProcesses(processes)
            return
        }
        try await reportingErrors(output) {
            var options = calm ? SimulationOptions.calm : SimulationOptions()
            options.devices = devices
            options.savesPerDevice = saves
            var failed: [(UInt64, SimulationSummary)] = []
            var summaries: [SimulationSummary] = []
            for i in 0..<seeds {
                let s = seed &+ UInt64(i)
                let simulation = Simulation(seed: s, options: options, verbose: verbose)
                let summary = try await simulation.run()
                if verbose { simulation.events.forEach { print($0) } }
                summaries.append(summary)
                if !summary.passed { failed.append((s, summary)) }
                if seeds > 1 && !output.json {
                    FileHandle.standardError.write(Data("\rseed \(i + 1)/\(seeds), \(failed.count) failed".utf8))
                }
            }
            if seeds > 1 && !output.json { FileHandle.standardError.write(Data("\n".utf8)) }
            if output.json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                print(String(decoding: try encoder.encode(seeds == 1 ? AnyEncodable(summaries[0]) : AnyEncodable(summaries)), as: UTF8.self))
            } else if seeds == 1 {
                print(Self.text(summaries[0]))
            } else {
                let acknowledged = summaries.reduce(0) { $0 + $1.savesAcknowledged }
                let attempted = summaries.reduce(0) { $0 + $1.savesAttempted }
                let syncs = summaries.reduce(0) { $0 + $1.syncs }
                let logs = summaries.reduce(0) { $0 + $1.logs }
                let faults = summaries.reduce(FaultCounts()) { $0 + $1.faults }
                print("""
                    \(seeds) seeds × \(devices) devices: \(seeds - failed.count) passed, \(failed.count) failed; \(acknowledged) acknowledged saves checked
                    in all: \(attempted) saves attempted, \(syncs) syncs, \(logs) logs, \(summaries.reduce(0) { $0 + $1.baselinesPublished }) baselines published; the final check's new device started from one in \(summaries.filter(\.newDeviceStartedFromBaseline).count) seeds
                    faults in all: \(faults.summary)
                    """)
            }
            for (s, summary) in failed {
                FileHandle.standardError.write(Data(("seed 0x\(String(s, radix: 16)) violated: " + summary.violations.joined(separator: "; ")
                                                     + "\n  reproduce: \(reproduce(s))\n").utf8))
            }
            if !failed.isEmpty { throw ExitCode.failure }
        }
    }

    func runProcesses(_ processes: Int) async throws {
        try await reportingErrors(output) {
            guard processes >= 1, processes <= 32 else { throw ValidationError("--processes takes 1 to 32") }
            let binary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().path
            var failures = 0
            for i in 0..<seeds {
                let s = seed &+ UInt64(i)
                let result = try await MultiProcessRun(processes: processes, saves: saves, seed: s, binary: binary, verbose: verbose).run()
                let line = "run \(i + 1)/\(seeds) seed \(s): \(processes) processes, \(result.kills) kills, \(result.acknowledged) acknowledged saves checked, state \(result.hash): "
                    + (result.violations.isEmpty ? "all invariants hold" : "VIOLATIONS: " + result.violations.prefix(5).joined(separator: "; "))
                output.print(.object(["seed": .int(Int64(s)), "kills": .int(Int64(result.kills)), "acknowledged": .int(Int64(result.acknowledged)),
                                      "violations": .array(result.violations.map { .string($0) })]), text: line)
                if !result.violations.isEmpty {
                    failures += 1
                    FileHandle.standardError.write(Data("  reproduce: chronicle simulate --processes \(processes) --seed \(s) --saves \(saves) --verbose\n".utf8))
                }
            }
            if failures > 0 { throw ExitCode.failure }
        }
    }

    static func text(_ s: SimulationSummary) -> String {
        let f = s.faults
        return """
            seed 0x\(String(s.seed, radix: 16)): \(s.options.devices) devices, \(s.savesAttempted) saves attempted, \(s.savesAcknowledged) acknowledged, \(s.savesRefused) refused by validation, \(s.syncs) syncs, \(s.logs) logs
            faults: \(f.summary)
            baselines: \(s.baselinesPublished) published; the final check's new device started \(s.newDeviceStartedFromBaseline ? "from the newest intact one" : "from the logs alone")
            virtual time: \(s.virtualMilliseconds) ms of work, converged \(s.convergenceMilliseconds) ms after
            records: \(s.records.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")); state \(s.stateHash)
            invariants checked: \(s.invariantsChecked.joined(separator: ", "))
            \(s.passed ? "all invariants hold" : "VIOLATIONS:\n  " + s.violations.joined(separator: "\n  "))
            """
    }
}

/// Erases the type of an encodable value.
struct AnyEncodable: Encodable {
    let value: any Encodable
    init(_ value: any Encodable) { self.value = value }
    func encode(to encoder: any Encoder) throws { try value.encode(to: encoder) }
}
