import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import GRDB
import Synchronization

/// The crash decisions of one run, shared with the devices' injectors.
final class CrashControl: Sendable {
    // Mutex and atomics make the decisions safe to share across tasks.
    let random: Mutex<SeededRandom>
    let enabled = Atomic<Bool>(true)
    let count = Atomic<Int>(0)
    let probability: Probability

    init(seed: UInt64, probability: Probability) {
        random = Mutex(SeededRandom(seed: seed))
        self.probability = probability
    }

    /// Whether the device crashes at the crash point it reached (drawn from
    /// the crash points' own stream).
    func decide() -> Bool {
        guard enabled.load(ordering: .relaxed) else { return false }
        let crash = random.withLock { probability.draw(&$0) }
        if crash { count.wrappingAdd(1, ordering: .relaxed) }
        return crash
    }

    /// Whether the device crashes right after a save's commit, before any
    /// upload (drawn from the workload's stream, where that point lies).
    func decideAfterCommit(_ workload: inout SeededRandom) -> Bool {
        guard probability.draw(&workload) else { return false }
        count.wrappingAdd(1, ordering: .relaxed)
        return true
    }
}
