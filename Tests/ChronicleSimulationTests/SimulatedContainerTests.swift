import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSimulation
import ChronicleTestSupport
import Testing

/// The simulated container, with its faults off, behaves as every backend
/// must: the simulation's findings are about devices, not about a container
/// that breaks the rules.
@Suite struct SimulatedContainerTests {
    @Test(arguments: ContainerConformance.checks)
    func conformance(check: ContainerConformance.Check) async throws {
        try await check.run {
            let simulated = SimulatedContainer(clock: ManualClock(), faults: .none, seed: 1)
            let device = DeviceID(index: 1)
            return ContainerConformance.Subject(simulated.view(for: device)) { simulated.view(for: device) }
        }
    }
}
