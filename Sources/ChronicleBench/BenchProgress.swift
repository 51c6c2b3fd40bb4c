/// The progress report of one long benchmark step: how far it is, then done.
///
/// The command line shows it as a progress line on a terminal and as plain
/// lines when its output is piped; a caller that wants nothing passes
/// ``silentProgress``.
package protocol BenchProgress: Sendable {
    /// Reports that `done` units of the step are finished.
    func advance(to done: Int)
    /// Reports that the step is over.
    func finish()
}

/// Makes the progress report of a step from its label, its unit and its total.
package typealias BenchProgressFactory = @Sendable (_ label: String, _ unit: String, _ total: Int) -> any BenchProgress

/// A progress report that shows nothing.
package struct SilentProgress: BenchProgress {
    package init() {}
    package func advance(to done: Int) {}
    package func finish() {}
}

/// A factory of reports that show nothing.
package let silentProgress: BenchProgressFactory = { _, _, _ in SilentProgress() }
