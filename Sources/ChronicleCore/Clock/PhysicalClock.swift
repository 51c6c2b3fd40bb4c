import Foundation
import Synchronization

/// The source of wall-clock time, for reading it and for waiting on it.
/// Library code never reads the system clock or sleeps on its own; it is
/// handed one of these, so the simulation and tests can run every device on
/// a virtual clock and move time by hand.
public protocol PhysicalClock: Sendable {
    /// Milliseconds since the Unix epoch. May jump backwards.
    func nowMilliseconds() -> UInt64

    /// Waits for `duration` on this clock.
    ///
    /// - Throws: `CancellationError` if the task is cancelled while waiting.
    func sleep(for duration: Duration) async throws
}

/// The system's real-time clock.
public struct SystemClock: PhysicalClock {
    /// The system's clock.
    public init() {}
    public func nowMilliseconds() -> UInt64 {
        UInt64(max(0, Date().timeIntervalSince1970 * 1000))
    }

    /// Sleeps for real (`Task.sleep`).
    public func sleep(for duration: Duration) async throws {
        try await Task.sleep(for: duration)
    }
}

/// A clock that only moves when told to: for tests and the simulation.
///
/// ``sleep(for:)`` waits until the clock has been moved forward by the
/// duration (with ``advance(byMilliseconds:)`` or ``set(milliseconds:)``),
/// however long that takes in real time:
///
/// ```swift
/// let clock = ManualClock()
/// let nap = Task { try await clock.sleep(for: .seconds(30)) }
/// await clock.waitForSleepers(1)
/// clock.advance(byMilliseconds: 30_000)   // the nap ends now
/// ```
package final class ManualClock: PhysicalClock {
    private struct Sleeper {
        var deadline: UInt64
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now: UInt64
        var sleepers: [UInt64: Sleeper] = [:]
        var nextID: UInt64 = 0
    }

    // Mutex makes the class safe to share across tasks.
    private let state: Mutex<State>

    /// Creates a clock reading `milliseconds`.
    package init(milliseconds: UInt64 = 1_700_000_000_000) {
        state = Mutex(State(now: milliseconds))
    }

    package func nowMilliseconds() -> UInt64 { state.withLock { $0.now } }

    /// Moves the clock forward (or, with a negative amount, backward), and
    /// wakes the sleepers whose time has come.
    package func advance(byMilliseconds delta: Int64) {
        wake(state.withLock { state in
            state.now = UInt64(max(0, Int64(state.now) + delta))
            return Self.due(&state)
        })
    }

    /// Sets the clock, and wakes the sleepers whose time has come.
    package func set(milliseconds: UInt64) {
        wake(state.withLock { state in
            state.now = milliseconds
            return Self.due(&state)
        })
    }

    /// How many tasks are sleeping on this clock.
    package var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// Waits (in real time, yielding) until at least `count` tasks sleep on
    /// this clock: a test calls it before ``advance(byMilliseconds:)`` so
    /// that the sleep it means to end has started.
    package func waitForSleepers(_ count: Int = 1) async {
        while sleeperCount < count {
            await Task.yield()
            try? await Task.sleep(for: .milliseconds(1))
        }
    }

    /// Returns once the clock has moved forward by `duration`. A duration of
    /// zero or less returns at once.
    package func sleep(for duration: Duration) async throws {
        let milliseconds = Self.milliseconds(duration)
        guard milliseconds > 0 else { return try Task.checkCancellation() }
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow: Bool = state.withLock { state in
                    if Task.isCancelled { return true }
                    let deadline = state.now &+ milliseconds
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return false
                }
                if resumeNow { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    private static func due(_ state: inout State) -> [Sleeper] {
        let now = state.now
        let ready = state.sleepers.filter { $0.value.deadline <= now }
        for id in ready.keys { state.sleepers.removeValue(forKey: id) }
        return ready.values.sorted { $0.deadline < $1.deadline }
    }

    private func wake(_ sleepers: [Sleeper]) {
        for sleeper in sleepers { sleeper.continuation.resume() }
    }

    private static func milliseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return 0 }
        // Rounded up: a sleep never ends before its duration has passed.
        let fraction = (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return UInt64(seconds).multipliedReportingOverflow(by: 1000).partialValue &+ UInt64(max(0, fraction))
    }
}
