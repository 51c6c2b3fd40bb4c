import Foundation

/// Processes for tests of what a container does about other processes.
package enum TestProcesses {
    /// The process ID of a process that has ended (`/bin/true`, waited for):
    /// what a killed writer's ID looks like afterwards.
    package static func pidOfAnEndedProcess() throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/true")
        try process.run()
        process.waitUntilExit()
        return process.processIdentifier
    }
}
