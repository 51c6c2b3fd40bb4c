import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import GRDB

/// A stored log of account A gets one bit flipped.
struct LogBitFlipFault: FaultInjector {
    let probability: Probability

    func step(_ run: Simulation) async throws {
        guard probability.draw(&run.random) else { return }
        // Only logs some live device can put back: a log of a device ID no
        // device holds any more (given up after its files went back in
        // time) has no owner to repair it; that is the health monitor's
        // work (see docs/simulation.md, "Faults that wait").
        // A device whose files went back in time holds none of the bodies its
        // ID uploaded after its copy was made: its ID has no owner either
        // until it moves on.
        // Nor does an ID that a copy of the folder shares with a device
        // that went back in time: the log may be the copy's, uploaded just
        // before its files went back, and the other device never held it.
        let behind = Set(run.devices.filter(\.wentBackInTime).compactMap(\.containerID))
        let owned = Set(run.devices.filter { !$0.wentBackInTime }.compactMap(\.containerID)).subtracting(behind)
        let unowned = !run.devices.flatMap(\.retiredIDs).isEmpty || run.devices.contains(where: \.wentBackInTime)
        if let name = try await run.accounts[0].flipRandomBit(where: { name in
            guard unowned, let device = ContainerLayout.parseLog(name)?.device else { return true }
            return owned.contains(device)
        }) {
            run.note("bit flip in \(name.lastComponent)")
        }
    }
}

/// A stored baseline part of account A gets one bit flipped (drawn from the
/// baselines' stream).
struct BaselineBitFlipFault: FaultInjector {
    let probability: Probability

    func step(_ run: Simulation) async throws {
        guard probability.draw(&run.baselineRandom) else { return }
        // A store rebuilt from a baseline holds its past only there: damage
        // to it is the health monitor's to repair (see docs/simulation.md,
        // "Faults that wait").
        var spared: Set<String> = []
        if run.options.lifecycle {
            try await run.recordFates()
            spared = Set(run.rebuiltFromBaseline.map(\.description))
        }
        if let name = try await run.accounts[0].flipRandomBit(suffix: ContainerLayout.baselinePartExtension, where: { name in
            !spared.contains(String(name.rawValue.prefix { $0 != "/" }))
        }) {
            run.note("bit flip in baseline part \(name)")
        }
    }
}

/// Account A's container fails every call for 50 to 549 ms.
struct OutageFault: FaultInjector {
    let probability: Probability
    static let shortest = Duration.milliseconds(50)
    static let spreadMilliseconds: UInt64 = 500

    func step(_ run: Simulation) async throws {
        guard probability.draw(&run.random) else { return }
        let ms = Self.shortest.wholeMilliseconds + run.random.next() % Self.spreadMilliseconds
        run.accounts[0].beUnavailable(forMilliseconds: ms)
        run.note("container unavailable for \(ms) ms")
    }
}

/// Account A's container loses every blob and marker, as a reset account does.
struct WipeFault: FaultInjector {
    let probability: Probability

    func step(_ run: Simulation) async throws {
        guard probability.draw(&run.random) else { return }
        // A wipe destroys the container's record of what a device ID wrote,
        // which is how a device whose files went back in time (or a second
        // live copy of a folder) learns it must move to a new ID. Until such
        // a device has met the container (after its twin left the ID they
        // shared, too), the wipe waits: a known limit,
        // see docs/simulation.md ("Faults that wait").
        let ids = run.devices.compactMap(\.containerID)
        // A twin that shared its original's ID and no longer does (one of
        // the two moved to a new ID): the one left on the ID has not
        // necessarily met the other's logs under it yet. Both must meet
        // the container before a wipe removes those logs.
        for index in run.twinsSharingAnID {
            let twin = run.devices[index]
            guard let original = twin.twinOf.map({ run.devices[$0] }) else { continue }
            if twin.containerID == original.containerID { continue }
            for d in [twin, original] { d.behindOn.insert(0) }
            run.twinsSharingAnID.remove(index)
        }
        if Set(ids).count < ids.count || run.devices.contains(where: \.wentBackInTime) {
            run.note("container wipe waits: a device's files went back in time, or two copies share a device ID")
            return
        }
        if run.options.lifecycle, let store = try await run.storeBeingLeft() {
            // Devices learn of a deletion or a rebuild from the container's
            // markers: a wipe before each device has seen them would leave
            // it on the old store. A known limit, see docs/simulation.md.
            run.note("container wipe waits: a device has not yet left store \(store), deleted or rebuilt")
            return
        }
        if run.options.lifecycle { try await run.recordFates() }
        try await run.accounts[0].wipe()
        run.note("container wiped")
    }
}
