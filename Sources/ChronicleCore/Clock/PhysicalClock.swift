import Foundation
import Synchronization

/// The source of wall-clock time. Library code never reads the system clock
/// directly; it is handed one of these, so the simulation can run every device
/// on a virtual clock.
public protocol PhysicalClock: Sendable {
    /// Milliseconds since the Unix epoch. May jump backwards.
    func nowMilliseconds() -> UInt64
}

/// The system's real-time clock.
public struct SystemClock: PhysicalClock {
    /// The system clock.
    public init() {}
    public func nowMilliseconds() -> UInt64 {
        UInt64(max(0, Date().timeIntervalSince1970 * 1000))
    }
}

/// A clock that only moves when told to: for tests and the simulation.
package final class ManualClock: PhysicalClock {
    // Mutex makes the class safe to share across tasks.
    private let now: Mutex<UInt64>

    /// Creates a clock reading `milliseconds`.
    package init(milliseconds: UInt64 = 1_700_000_000_000) {
        now = Mutex(milliseconds)
    }

    package func nowMilliseconds() -> UInt64 { now.withLock { $0 } }

    /// Moves the clock forward (or, with a negative amount, backward).
    package func advance(byMilliseconds delta: Int64) {
        now.withLock { $0 = UInt64(max(0, Int64($0) + delta)) }
    }

    /// Sets the clock.
    package func set(milliseconds: UInt64) {
        now.withLock { $0 = milliseconds }
    }
}
