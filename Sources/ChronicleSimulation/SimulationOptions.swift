import Foundation

/// Everything a simulation run depends on besides its seed.
public struct SimulationOptions: Sendable, Hashable, Codable {
    /// Devices on the account.
    public var devices = 5
    /// Save attempts per device.
    public var savesPerDevice = 20
    /// Container faults.
    public var container = ContainerFaults()
    /// Chance per step that a device goes offline (or comes back).
    public var offlineProbability = 0.04
    /// Chance at each crash point that the device crashes there.
    public var crashProbability = 0.03
    /// Chance per step that a stored log gets a bit flip.
    public var bitFlipProbability = 0.01
    /// Chance per step that the container becomes unavailable for a while.
    public var outageProbability = 0.01
    /// Chance per step that the whole container is wiped.
    public var wipeProbability = 0.002
    /// Chance per step that a device switches to another account for a while.
    public var accountSwitchProbability = 0.005

    /// Chance per step that a device publishes a baseline (in small parts,
    /// so that faults hit some of them). Drawn from a random stream of its
    /// own, so the other choices of a seed stay what they were.
    public var baselineProbability = 0.03

    /// Whether devices check their own uploads and put back what is missing or
    /// damaged. Turning it off makes lost uploads unrecoverable: the checkers
    /// must then report violations (a control for the checkers themselves).
    public var devicesRepairTheirLogs = true

    /// Creates the default options: every fault kind on.
    public init() {}

    /// No faults at all.
    public static var calm: SimulationOptions {
        var o = SimulationOptions()
        o.container = .none
        o.offlineProbability = 0
        o.crashProbability = 0
        o.bitFlipProbability = 0
        o.outageProbability = 0
        o.wipeProbability = 0
        o.accountSwitchProbability = 0
        return o
    }
}

/// What a run did and what it checked.
public struct SimulationSummary: Sendable, Hashable, Codable {
    /// The seed.
    public var seed: UInt64
    /// The options.
    public var options: SimulationOptions
    /// Saves attempted, acknowledged, and refused by validation.
    public var savesAttempted = 0
    public var savesAcknowledged = 0
    public var savesRefused = 0
    /// Syncs run and logs in the container at the end.
    public var syncs = 0
    public var logs = 0
    /// Faults injected.
    public var faults = FaultCounts()
    /// Baselines published, and whether the new device of the final check
    /// started from one.
    public var baselinesPublished = 0
    public var newDeviceStartedFromBaseline = false
    /// Virtual milliseconds the workload took, and quiescence after it.
    public var virtualMilliseconds: UInt64 = 0
    public var convergenceMilliseconds: UInt64 = 0
    /// Invariants checked, and the violations found.
    public var invariantsChecked: [String] = []
    public var violations: [String] = []
    /// The converged state hash of the account's devices.
    public var stateHash = ""
    /// Records visible at the end, per entity.
    public var records: [String: Int] = [:]

    /// Whether every invariant held.
    public var passed: Bool { violations.isEmpty }
}
