import Chronicle

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
    /// Moves of a device to a new ID, after its files were found behind the
    /// container (restored or copied folders, lost `-wal` files).
    public var identityChanges = 0
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
