import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import GRDB

/// A device goes offline, or comes back online.
struct OfflineFault: FaultInjector {
    let probability: Probability

    func step(_ run: Simulation) async throws {
        guard probability.draw(&run.random) else { return }
        let d = run.devices[run.pick(run.devices.count)]
        d.online.toggle()
        if !d.online { run.deviceFaults.offlinePeriods += 1 }
        run.note("device \(d.number) goes \(d.online ? "online" : "offline")")
    }
}

/// A device moves to the other account's container, or back.
struct AccountSwitchFault: FaultInjector {
    let probability: Probability

    func step(_ run: Simulation) async throws {
        guard probability.draw(&run.random) else { return }
        let d = run.devices[run.pick(run.devices.count)]
        try await run.reopen(d) { d.account = 1 - d.account }
        if d.account == 1 { run.deviceFaults.accountSwitches += 1 }
        run.note("device \(d.number) switches to account \(d.account == 0 ? "A" : "B")")
    }
}
