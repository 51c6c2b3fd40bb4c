import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import GRDB

/// What a run did and what it checked.
package struct SimulationSummary: Sendable, Hashable, Codable {
    /// The seed.
    package var seed: UInt64
    /// The options.
    package var options: SimulationOptions
    /// Saves attempted, acknowledged, and refused by validation.
    package var savesAttempted = 0
    package var savesAcknowledged = 0
    package var savesRefused = 0
    /// Syncs run and logs in the container at the end.
    package var syncs = 0
    package var logs = 0
    /// Faults injected.
    package var faults = FaultCounts()
    /// Baselines published, and whether the new device of the final check
    /// started from one.
    package var baselinesPublished = 0
    /// Compactions that removed something, and the logs they removed.
    package var compactions = 0
    package var compactedLogs = 0
    /// Moves of a device to a new ID, after its files were found behind the
    /// container (restored or copied folders, lost `-wal` files).
    package var identityChanges = 0
    package var newDeviceStartedFromBaseline = false
    /// Virtual milliseconds the workload took, and quiescence after it.
    package var virtualMilliseconds: UInt64 = 0
    package var convergenceMilliseconds: UInt64 = 0
    /// Invariants checked, and the violations found.
    package var invariantsChecked: [String] = []
    package var violations: [String] = []
    /// The converged state hash of the account's devices.
    package var stateHash = ""
    /// What the store managers did (with ``SimulationOptions/lifecycle``).
    package var lifecycle: LifecycleCounts?
    /// What the health monitors did (with corruption faults).
    package var health: HealthCounts?
    /// Devices that upgraded their app's schema while the others worked
    /// (with ``SimulationOptions/upgrades``; the rest upgrade before
    /// quiescence, or started on the upgraded version).
    package var upgrades: Int?
    /// Records visible at the end, per entity.
    package var records: [String: Int] = [:]

    /// Whether every invariant held.
    package var passed: Bool { violations.isEmpty }
}
