import ChronicleCore

/// A place where a simulation can make a device "die". An injector returning
/// true makes the operation throw ``ChronicleError/Code/simulatedCrash`` at
/// that point; whatever was not committed is lost, as in a real crash.
///
/// Crash points are open: a layer built on Chronicle (a lifecycle manager, a
/// health monitor) declares its own in an extension and checks them with
/// ``CrashInjector/check(_:)``:
///
/// ```swift
/// extension CrashPoint {
///     static let monitorBeforeReport = CrashPoint("monitorBeforeReport")
/// }
/// try injector?.check(.monitorBeforeReport)
/// ```
package struct CrashPoint: Sendable, Hashable, CustomStringConvertible {
    /// The point's name, unique among crash points (two points with one
    /// name are equal).
    package let name: String

    /// Declares a crash point.
    package init(_ name: String) {
        self.name = name
    }

    package var description: String { name }

    /// A save's log body is encoded and staged, its transaction not committed.
    package static let saveBeforeCommit = CrashPoint("saveBeforeCommit")
    /// A log is in the container; the outbox does not know yet.
    package static let uploadAfterPut = CrashPoint("uploadAfterPut")
    /// An import has merged a log's changes, its transaction not committed.
    package static let importBeforeCommit = CrashPoint("importBeforeCommit")

    /// A snapshot has migrated to a later schema version, its transaction
    /// not committed.
    package static let schemaMigrationBeforeCommit = CrashPoint("schemaMigrationBeforeCommit")

    /// The points Chronicle's own layers check.
    package static let chroniclePoints: [CrashPoint] = [.saveBeforeCommit, .uploadAfterPut, .importBeforeCommit]
}

/// Decides whether to crash at a point. Production code has none.
package struct CrashInjector: Sendable {
    let decide: @Sendable (CrashPoint) -> Bool

    /// Creates an injector.
    package init(_ decide: @escaping @Sendable (CrashPoint) -> Bool) {
        self.decide = decide
    }

    /// Throws ``ChronicleError/Code/simulatedCrash`` if the injector decides
    /// to crash at `point`.
    package func check(_ point: CrashPoint) throws {
        if decide(point) {
            throw ChronicleError(.simulatedCrash, "simulated crash at \(point.name)")
        }
    }
}
