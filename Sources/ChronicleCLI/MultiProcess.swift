import ArgumentParser
import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSimulation
import ChronicleSnapshot
import Foundation
import GRDB

/// One device of the multi-process simulation (hidden: started by
/// `simulate --processes`, see ``MultiProcessSimulation``).
struct SimulateWorker: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate-worker", abstract: "A device process of `chronicle simulate --processes`.", shouldDisplay: false)

    @OptionGroup var device: DeviceOptions
    @Option var journal: String
    @Option var saves: Int
    @Option var seed: UInt64
    @Flag var lifecycle = false
    @Flag var deleter = false
    @Flag var corruption = false

    func run() async throws {
        if corruption {
            let manager = try await device.openManager(schema: try device.loadSchema(), health: MultiProcessSimulation.workerHealth,
                                                       tolerating: [.cloudContentCorrupted])
            try await MultiProcessSimulation.runWorker(manager: manager, journal: URL(fileURLWithPath: journal), saves: saves, seed: seed,
                                                       deleter: false, toggles: lifecycle)
            return
        }
        let opened = try await device.open()
        if lifecycle {
            try await MultiProcessSimulation.runWorker(manager: opened.manager, journal: URL(fileURLWithPath: journal), saves: saves, seed: seed,
                                                       deleter: deleter)
        } else {
            try await MultiProcessSimulation.runWorker(store: opened.store, journal: URL(fileURLWithPath: journal), saves: saves, seed: seed)
        }
    }
}
