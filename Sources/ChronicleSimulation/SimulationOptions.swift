import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB

/// Everything a simulation run depends on besides its seed.
///
/// Every rate is a ``Probability`` per step of the workload (or per crash
/// point, for crashes); ``Rate`` names each one for the command line and for
/// swarm testing (``swarm(seed:base:)``).
package struct SimulationOptions: Sendable, Hashable, Codable {
    /// Devices on the account.
    package var devices = 5
    /// Save attempts per device.
    package var savesPerDevice = 20
    /// How often each workload operation is chosen, by operation name (see
    /// ``operationNames``); a weight of 0 turns an operation off.
    package var operationWeights: [String: Int] = Workload.standardWeights
    /// Chance per step that the chosen device syncs instead of saving.
    package var syncProbability: Probability = 0.25
    /// Container faults.
    package var container = ContainerFaults()
    /// Chance per step that a device goes offline (or comes back).
    package var offlineProbability: Probability = 0.04
    /// Chance at each crash point that the device crashes there.
    package var crashProbability: Probability = 0.03
    /// Chance per step that a stored log gets a bit flip (and, drawn
    /// separately, that a baseline part does).
    package var bitFlipProbability: Probability = 0.01
    /// Chance per step that the container becomes unavailable for a while.
    package var outageProbability: Probability = 0.01
    /// Chance per step that the whole container is wiped.
    package var wipeProbability: Probability = 0.002
    /// Chance per step that a device switches to another account for a while.
    package var accountSwitchProbability: Probability = 0.005

    /// Chance per step that a device publishes a baseline (in small parts,
    /// so that faults hit some of them). Drawn from a random stream of its
    /// own, so the other choices of a seed stay what they were.
    package var baselineProbability: Probability = 0.03

    /// Chance per step that a device's folder is copied (when it has no copy
    /// yet) or, once everything it saved is in the container, replaced by
    /// that older copy, as a backup restore does.
    package var folderRestoreProbability: Probability = 0.003
    /// Chance per step that a device's folder is copied to a new device that
    /// opens it (the same device ID on disk) and runs the workload beside the
    /// original (at most two a run).
    package var folderTwinProbability: Probability = 0.002
    /// Chance per step that a device, once everything it saved is in the
    /// container, loses its snapshot's `-wal` file (and `-shm`).
    package var lostWALProbability: Probability = 0.003

    /// Whether every device runs through a ``StoreManager``: it starts on
    /// its local store with the cloud off, several devices turn the cloud on
    /// at the same moment, and the lifecycle rates below toggle the cloud,
    /// delete the cloud store, and run maintenance operations. Off, every
    /// device opens the container's store directly.
    package var lifecycle = false
    /// Whether the app's schema changes during the run: devices start on
    /// the workload's first version (a quarter of them on the second, as
    /// new installs), upgrade at random moments while the others keep
    /// writing, and all have upgraded before quiescence (see
    /// `Workload.upgraded`).
    package var upgrades = false
    /// With ``lifecycle``: how many devices turn the cloud on at the same
    /// moment, first, each with its own local data (0 draws it from the
    /// seed, 2 to ``devices``).
    package var firstEnables = 0
    /// Whether the container's exclusive create of the active-store pointer
    /// is reliable (``ContainerFaults/reliableExclusiveCreate``).
    package var exclusiveCreate: ExclusiveCreate = .drawn
    /// With ``lifecycle``: chance per step that a device turns the cloud on
    /// (merging its local data, or leaving it local) or off.
    package var cloudToggleProbability: Probability = 0.01
    /// With ``lifecycle``: chance per step that a device deletes the cloud
    /// store everywhere (half of them after copying it to its local store).
    package var cloudDeletionProbability: Probability = 0.002
    /// With ``lifecycle``: chance per step that a device runs a maintenance
    /// operation: reload, delete its copy of the cloud store, migrate the
    /// cloud store to its local store, delete its local store, or rebuild
    /// the cloud store under a new store ID.
    package var maintenanceProbability: Probability = 0.006
    /// With ``lifecycle``: chance per step that a log of the active store
    /// is seen damaged by some devices (not its owner), for good: a bit flip
    /// in their copy of the synced folder. Off by default; `--corruption`
    /// turns it on.
    package var damagedViewProbability: Probability = 0
    /// With ``lifecycle``: chance per step that a log of the active store is
    /// damaged in the container and its owner can no longer put it back
    /// (every later upload of the name is lost). Off by default;
    /// `--corruption` turns it on.
    package var unrepairableLogProbability: Probability = 0
    /// Without ``lifecycle``: chance per step that a device compacts the
    /// store, with a retention period drawn per run (``compactionRetention``):
    /// devices that synced within it are waited for, the others apply the
    /// baseline when they come back. Drawn from a random stream of its own.
    package var compactionProbability: Probability = 0.01
    /// The retention period compactions use; nil draws it from the seed
    /// (0.4 to 4 seconds of the run's clock: devices that sync report every
    /// 0.2 seconds, and a run lasts seconds).
    package var compactionRetention: Duration?
    /// Whether half the runs (by seed) compact by themselves after a few
    /// dozen saves, as ``Store/Configuration/automaticCompaction`` does
    /// after ten thousand.
    package var automaticCompaction = true

    /// Whether the corruption faults are on: the devices' health monitors
    /// then run on the simulation's timings (``Simulation/health``).
    package var corruption: Bool { !damagedViewProbability.isNever || !unrepairableLogProbability.isNever }

    /// Turns the lifecycle and the corruption faults on, at their default rates.
    package mutating func enableCorruption() {
        lifecycle = true
        damagedViewProbability = 0.005
        unrepairableLogProbability = 0.005
    }

    /// Whether devices can put back their own logs that are missing or
    /// damaged. Every sync does so; turning this off also stops the extra
    /// full repair passes and makes the container swallow every later put of
    /// a name whose upload was lost (``ContainerFaults/lostUploadsStayLost``),
    /// so lost uploads are unrecoverable: the checkers must then report
    /// violations (a control for the checkers themselves).
    package var devicesRepairTheirLogs = true

    /// Creates the default options: every fault kind on.
    package init() {}

    /// No faults at all.
    package static var calm: SimulationOptions {
        var o = SimulationOptions()
        for rate in Rate.allCases where rate.isFault { o[rate] = .never }
        o.container.maxVisibilityDelay = .zero
        return o
    }

    /// The workload's operations, in the order their weights are laid out.
    package static var operationNames: [String] { Workload.operations.map(\.name) }

    /// The probability of `rate`.
    package subscript(rate: Rate) -> Probability {
        get { self[keyPath: rate.keyPath] }
        set { self[keyPath: rate.keyPath] = newValue }
    }

    /// Checks the options a run needs to make sense.
    ///
    /// - Throws: ``ChronicleError/Code/invalidValue`` naming the option.
    package func validate() throws(ChronicleError) {
        guard (1...64).contains(devices) else {
            throw ChronicleError(.invalidValue, "devices takes 1 to 64, not \(devices)")
        }
        guard savesPerDevice >= 0 else {
            throw ChronicleError(.invalidValue, "saves per device cannot be negative (\(savesPerDevice))")
        }
        guard container.maxVisibilityDelay >= .zero else {
            throw ChronicleError(.invalidValue, "the visibility delay cannot be negative")
        }
        let known = Set(Self.operationNames)
        for (name, weight) in operationWeights {
            guard known.contains(name) else {
                throw ChronicleError(.invalidValue, "no workload operation named \(name) (there are \(Self.operationNames.joined(separator: ", ")))")
            }
            guard weight >= 0, weight <= 1_000_000 else {
                throw ChronicleError(.invalidValue, "operation weights take 0 to 1000000, not \(weight) for \(name)")
            }
        }
        guard firstEnables == 0 || (lifecycle && (1...devices).contains(firstEnables)) else {
            throw ChronicleError(.invalidValue, "first enables takes 1 to the number of devices (\(devices)), and only with the lifecycle on, not \(firstEnables)")
        }
        guard operationWeights.values.reduce(0, +) > 0 else {
            throw ChronicleError(.invalidValue, "at least one workload operation needs a weight above 0")
        }
    }

    /// The rates, delay and operation weights on one line, as `--swarm` prints them.
    package var rateSummary: String {
        let rates = Rate.allCases.map { "\($0.rawValue) \(self[$0].isNever ? "off" : self[$0].description)" }
        let weights = Self.operationNames.map { "\($0) \(operationWeights[$0] ?? 0)" }
        return rates.joined(separator: ", ") + "; max delay \(container.maxVisibilityDelay.wholeMilliseconds) ms; weights "
            + weights.joined(separator: ", ")
    }
}

extension SimulationOptions {
    /// A rate of the simulation, by the name the command line uses.
    package enum Rate: String, CaseIterable, Sendable, Codable {
        case sync
        case baseline
        case offline
        case crash
        case bitFlip = "bit-flip"
        case outage
        case wipe
        case accountSwitch = "account-switch"
        case torn
        case lostUpload = "lost-upload"
        case folderRestore = "folder-restore"
        case folderTwin = "folder-twin"
        case lostWAL = "lost-wal"
        case cloudToggle = "cloud-toggle"
        case cloudDeletion = "cloud-deletion"
        case maintenance
        case damagedView = "damaged-view"
        case unrepairableLog = "unrepairable-log"
        case compaction

        /// Where the rate lives in the options.
        var keyPath: WritableKeyPath<SimulationOptions, Probability> {
            switch self {
            case .sync: \.syncProbability
            case .baseline: \.baselineProbability
            case .offline: \.offlineProbability
            case .crash: \.crashProbability
            case .bitFlip: \.bitFlipProbability
            case .outage: \.outageProbability
            case .wipe: \.wipeProbability
            case .accountSwitch: \.accountSwitchProbability
            case .torn: \.container.tornProbability
            case .lostUpload: \.container.lostUploadProbability
            case .folderRestore: \.folderRestoreProbability
            case .folderTwin: \.folderTwinProbability
            case .lostWAL: \.lostWALProbability
            case .cloudToggle: \.cloudToggleProbability
            case .cloudDeletion: \.cloudDeletionProbability
            case .maintenance: \.maintenanceProbability
            case .damagedView: \.damagedViewProbability
            case .unrepairableLog: \.unrepairableLogProbability
            case .compaction: \.compactionProbability
            }
        }

        /// Whether it is a fault (the workload's own rates, syncing and
        /// publishing baselines, are not).
        package var isFault: Bool { self != .sync && self != .baseline && self != .compaction }

        /// What it is the chance of.
        package var help: String {
            switch self {
            case .sync: "a step syncs the chosen device instead of saving"
            case .baseline: "a device publishes a baseline, per step"
            case .offline: "a device goes offline or comes back, per step"
            case .crash: "a device crashes, per crash point"
            case .bitFlip: "a stored log (and, drawn apart, a baseline part) gets a bit flip, per step"
            case .outage: "the container is unavailable for 50 to 550 ms, per step"
            case .wipe: "the container is wiped, per step"
            case .accountSwitch: "a device switches accounts, per step"
            case .torn: "another device first reads a blob torn, per upload"
            case .lostUpload: "an upload reports success and never arrives, per upload"
            case .folderRestore: "a device's folder is copied, or restored from its older copy, per step"
            case .folderTwin: "a device's folder is copied to a twin device that runs beside it, per step"
            case .lostWAL: "a device loses its snapshot's -wal file, per step"
            case .cloudToggle: "with --lifecycle, a device turns the cloud on or off, per step"
            case .cloudDeletion: "with --lifecycle, a device deletes the cloud store everywhere, per step"
            case .maintenance: "with --lifecycle, a device runs a maintenance operation, per step"
            case .damagedView: "with --lifecycle, some devices see a log of the active store damaged for good, per step"
            case .unrepairableLog: "with --lifecycle, a log of the active store is damaged and its owner cannot put it back, per step"
            case .compaction: "without --lifecycle, a device compacts the store (the logs its newest baseline covers leave the container), per step"
            }
        }

        /// The range `--swarm` draws the rate from, or nil when swarm mode
        /// keeps the rate as given.
        package var swarmRange: ClosedRange<Double>? {
            switch self {
            case .sync: 0.05...0.6
            case .baseline: 0...0.1
            case .offline: 0...0.15
            case .crash: 0...0.25
            case .bitFlip: 0...0.05
            case .outage: 0...0.05
            case .wipe: 0...0.01
            case .accountSwitch: 0...0.02
            case .torn: 0...0.2
            case .lostUpload: 0...0.1
            case .folderRestore: 0...0.01
            case .folderTwin: 0...0.005
            case .lostWAL: 0...0.01
            case .cloudToggle: 0...0.04
            case .cloudDeletion: 0...0.006
            case .maintenance: 0...0.02
            case .compaction: 0...0.03
            // Kept as given: swarm runs without --corruption stay as they were.
            case .damagedView, .unrepairableLog: nil
            }
        }

        /// Whether it drives the store manager (``SimulationOptions/lifecycle``).
        package var isLifecycle: Bool {
            self == .cloudToggle || self == .cloudDeletion || self == .maintenance || self == .damagedView || self == .unrepairableLog
        }
    }
}

extension Duration {
    /// The whole milliseconds in the duration (0 for a negative one).
    var wholeMilliseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        return UInt64(seconds) * 1_000 + UInt64(attoseconds / 1_000_000_000_000_000)
    }
}

/// How reliable a simulated container's exclusive create is.
package enum ExclusiveCreate: String, Sendable, Hashable, Codable, CaseIterable {
    /// Exclusive: one device creates a marker, the others see it at once.
    case reliable
    /// A folder a sync service shares: two devices can both create the
    /// active-store pointer, and the later one stays.
    case unreliable
    /// Drawn from the seed with the lifecycle (half the seeds unreliable);
    /// reliable without it.
    case drawn

    /// Whether a run of `seed` has a reliable exclusive create.
    package func isReliable(seed: UInt64, lifecycle: Bool) -> Bool {
        switch self {
        case .reliable: return true
        case .unreliable: return false
        case .drawn:
            guard lifecycle else { return true }
            var random = SeededRandom(seed: seed ^ 0xE8C1_0517_C4EA_7E00)
            return random.next() % 2 == 0
        }
    }
}
