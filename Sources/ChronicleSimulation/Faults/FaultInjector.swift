import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import GRDB

/// One kind of fault, injected between the workload's steps.
///
/// Each step the run asks every injector, in the order of
/// ``standard(_:)``, whether its fault strikes; an injector draws that from
/// one of the run's random streams with its own probability, and if so
/// injects the fault and counts it. To add a fault kind: a probability in
/// ``SimulationOptions`` (default 0, so existing seeds run as they did), a
/// ``SimulationOptions/Rate`` case naming it for the command line, a count
/// in ``FaultCounts``, and an injector appended to ``standard(_:)``.
/// Injectors appended last, drawing from a stream of their own, leave every
/// other draw of a seed where it was.
protocol FaultInjector {
    /// Decides whether the fault strikes at this step and, if so, injects it.
    func step(_ run: Simulation) async throws
}

enum FaultInjectors {
    /// Every fault kind, in the order the run asks them each step.
    static func standard(_ options: SimulationOptions) -> [any FaultInjector] {
        [
            OfflineFault(probability: options.offlineProbability),
            LogBitFlipFault(probability: options.bitFlipProbability),
            BaselineBitFlipFault(probability: options.bitFlipProbability),
            OutageFault(probability: options.outageProbability),
            WipeFault(probability: options.wipeProbability),
            AccountSwitchFault(probability: options.accountSwitchProbability),
            FolderRestoreFault(probability: options.folderRestoreProbability),
            FolderTwinFault(probability: options.folderTwinProbability),
            LostWALFault(probability: options.lostWALProbability),
            CloudToggleFault(probability: options.cloudToggleProbability),
            CloudDeletionFault(probability: options.cloudDeletionProbability),
            MaintenanceFault(probability: options.maintenanceProbability),
            DamagedViewFault(probability: options.damagedViewProbability),
            UnrepairableLogFault(probability: options.unrepairableLogProbability),
        ]
    }
}
