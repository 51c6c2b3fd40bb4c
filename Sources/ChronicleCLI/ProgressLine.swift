import ArgumentParser
import Foundation
import Synchronization

/// Progress of a long run on standard error, with a rate.
///
/// On a terminal it is one line rewritten in place (`\r`) at most every
/// 0.1 s and ended with a line break when the run finishes. When standard
/// error is a file or a pipe it is a plain line at most every 2 s, with
/// never a `\r`, and a last line at the end if any was printed; a run that
/// ends sooner prints nothing. `CHRONICLE_PROGRESS_SECONDS` sets the least
/// time between two reports (0: every step, for tests and logs).
///
/// Thread-safe: a sync reports from the store's actor.
final class ProgressLine: Sendable {
    private struct State {
        var done = 0
        var total: Int?
        var note = ""
        var lastReport: ContinuousClock.Instant?
        var printed = false
        /// The count the last report showed, and its note.
        var shown: Int?
        var shownNote = ""
        var finished = false
    }

    private let label: String
    private let unit: String
    private let terminal: Bool
    private let interval: Duration
    private let start: ContinuousClock.Instant
    private let state: Mutex<State>
    private let write: @Sendable (String) -> Void

    /// A progress line for `label` counting `unit` (plural), out of `total`
    /// if known, for work that began at `start`.
    init(_ label: String, unit: String, total: Int? = nil, start: ContinuousClock.Instant = .now,
         terminal: Bool = isatty(STDERR_FILENO) != 0,
         environment: [String: String] = ProcessInfo.processInfo.environment,
         write: @escaping @Sendable (String) -> Void = { StandardStreams.error($0) }) {
        self.label = label
        self.unit = unit
        self.start = start
        self.terminal = terminal
        self.write = write
        let seconds = (try? Self.configuredSeconds(environment)) ?? nil
        interval = .milliseconds(Int64((seconds ?? (terminal ? 0.1 : 2)) * 1000))
        state = Mutex(State(total: total))
    }

    /// The variable that sets the least time between two reports.
    static let variable = "CHRONICLE_PROGRESS_SECONDS"

    /// The seconds `CHRONICLE_PROGRESS_SECONDS` gives, or nil when it is not set.
    ///
    /// - Throws: `ValidationError` (bad usage) unless it is a number of
    ///   seconds from 0 to 86400.
    static func configuredSeconds(_ environment: [String: String]) throws -> Double? {
        guard let text = environment[variable] else { return nil }
        guard let seconds = Double(text), seconds.isFinite, (0...86_400).contains(seconds) else {
            throw ValidationError("\(variable)=\(text) is not a number of seconds from 0 to 86400")
        }
        return seconds
    }

    /// Records that `done` units are done (with an optional note, such as
    /// "2 failed"), and reports if the last report is old enough, or at
    /// once with `now` (a phase that starts, such as a commit) if anything
    /// was reported before.
    func update(_ done: Int, total: Int? = nil, note: String = "", now immediately: Bool = false) {
        let now = ContinuousClock.now
        let text: String? = state.withLock { s in
            guard !s.finished else { return nil }
            s.done = done
            if let total { s.total = total }
            s.note = note
            guard now - (s.lastReport ?? start) >= interval || (immediately && s.printed) else { return nil }
            // The same line again says nothing new.
            if s.shown == done && s.shownNote == note { return nil }
            s.lastReport = now
            s.printed = true
            s.shown = done
            s.shownNote = note
            return render(s, at: now)
        }
        if let text { write(terminal ? "\r" + text + "\u{1B}[K" : text + "\n") }
    }

    /// Reports the final count if anything was reported before, ending the
    /// terminal line. Later updates are ignored.
    func finish() {
        let now = ContinuousClock.now
        let (text, printed): (String?, Bool) = state.withLock { s in
            guard !s.finished else { return (nil, false) }
            s.finished = true
            return (s.printed && s.shown != s.done ? render(s, at: now) : nil, s.printed)
        }
        if let text {
            write(terminal ? "\r" + text + "\u{1B}[K\n" : text + "\n")
        } else if printed, terminal {
            // The last report showed the end already: end its line.
            write("\n")
        }
    }

    private func render(_ s: State, at now: ContinuousClock.Instant) -> String {
        let seconds = (now - start) / .seconds(1)
        let rate = seconds > 0 ? Double(s.done) / seconds : 0
        var text = "\(label): \(s.done)" + (s.total.map { "/\($0)" } ?? "") + " \(unit), "
        text += (rate < 10 ? String(format: "%.1f", rate) : String(format: "%.0f", rate)) + " \(unit)/s"
        if let total = s.total, rate > 0, s.done < total, Double(total - s.done) / rate >= 1 {
            text += String(format: ", about %.0f s left", Double(total - s.done) / rate)
        }
        return text + (s.note.isEmpty ? "" : ", " + s.note)
    }
}

/// Runs `work` so that the first Ctrl-C (SIGINT) cancels it instead of
/// killing the process: the work stops between two items (a blob, a log),
/// leaving nothing half-written, and the command says how far it got. A
/// second Ctrl-C stops the process at once.
func stoppingOnInterrupt<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) async throws -> T {
    signal(SIGINT, SIG_IGN)
    let task = Task { try await work() }
    let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
    source.setEventHandler {
        task.cancel()
        signal(SIGINT, SIG_DFL)
    }
    source.resume()
    defer {
        source.cancel()
        signal(SIGINT, SIG_DFL)
    }
    return try await task.value
}

/// Whether `error` is the cancellation ``stoppingOnInterrupt(_:)`` causes.
func isInterruption(_ error: any Error) -> Bool {
    error is CancellationError
}
