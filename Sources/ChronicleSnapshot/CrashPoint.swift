import ChronicleCore

/// Places where a simulation can make a device "die". An injector returning
/// true makes the operation throw ``ChronicleError/Code/simulatedCrash`` at
/// that point; whatever was not committed is lost, as in a real crash.
package enum CrashPoint: String, Sendable, CaseIterable {
    /// A save's log body is encoded and staged, its transaction not committed.
    case saveBeforeCommit
    /// A log is in the container; the outbox does not know yet.
    case uploadAfterPut
    /// An import has merged a log's changes, its transaction not committed.
    case importBeforeCommit
}

/// Decides whether to crash at a point. Production code has none.
package struct CrashInjector: Sendable {
    let decide: @Sendable (CrashPoint) -> Bool

    /// Creates an injector.
    package init(_ decide: @escaping @Sendable (CrashPoint) -> Bool) {
        self.decide = decide
    }

    func check(_ point: CrashPoint) throws {
        if decide(point) {
            throw ChronicleError(.simulatedCrash, "simulated crash at \(point.rawValue)")
        }
    }
}
