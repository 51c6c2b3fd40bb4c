import Foundation
import Synchronization

/// Foundation's `Process.run()` on Linux has crashed (a bad memory read
/// mid-launch) when tests started processes from several threads at once;
/// every test launch goes through here, one at a time.
private let launches = Mutex(())

extension Process {
    /// Starts the process, one launch at a time across the test run.
    package func runAlone() throws {
        try launches.withLock { _ in try run() }
    }
}

/// Processes for tests of what a container does about other processes.
package enum TestProcesses {
    /// The process ID of a process that has ended (`/bin/true`, waited for):
    /// what a killed writer's ID looks like afterwards.
    package static func pidOfAnEndedProcess() throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/true")
        try process.runAlone()
        process.waitUntilExit()
        return process.processIdentifier
    }
}
