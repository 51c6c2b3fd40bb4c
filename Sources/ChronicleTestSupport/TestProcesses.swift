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

#if canImport(Glibc)
import Glibc

/// A child process started with `posix_spawn`, for tests that launch many:
/// Foundation's `Process.run()` on Linux reads past a `/proc/self/fd`
/// directory entry while it counts open descriptors, which crashes the test
/// process now and then (swift-corelibs-foundation, pull request 5472).
package struct SpawnedProcess {
    /// Its process ID.
    package let pid: pid_t

    /// Starts `executable` with `arguments` and `environment`, its standard
    /// input, output and error on the given descriptors (duplicated in the child).
    package static func spawn(_ executable: String, _ arguments: [String], environment: [String: String],
                              stdin: Int32, stdout: Int32, stderr: Int32) throws -> SpawnedProcess {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdin, 0)
        posix_spawn_file_actions_adddup2(&actions, stdout, 1)
        posix_spawn_file_actions_adddup2(&actions, stderr, 2)
        // Nothing else of the test process: no other test's pipe ends or locks.
        // (glibc 2.34 has it; Swift's Glibc module does not declare it.)
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else {
            throw NSError(domain: NSPOSIXErrorDomain, code: Int(ENOSYS), userInfo: [NSLocalizedDescriptionKey: "this libc cannot close a child's other descriptors"])
        }
        _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for p in argv + envp { free(p) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, nil, argv, envp)
        guard result == 0 else {
            throw NSError(domain: NSPOSIXErrorDomain, code: Int(result), userInfo: [NSLocalizedDescriptionKey: "posix_spawn \(executable) failed"])
        }
        return SpawnedProcess(pid: pid)
    }

    /// Waits until it ends, or kills it (SIGKILL) after `seconds`. Returns
    /// its exit status, or the signal that ended it.
    package func wait(killingAfter seconds: Double) -> (status: Int32, signaled: Bool) {
        let deadline = Date().addingTimeInterval(seconds)
        var status: Int32 = 0
        while true {
            let done = waitpid(pid, &status, WNOHANG)
            if done == pid { break }
            if done < 0 && errno != EINTR { return (-1, false) }
            if Date() > deadline { kill(pid, SIGKILL) }
            usleep(10_000)
        }
        let signal = status & 0x7f
        return signal == 0 ? ((status >> 8) & 0xff, false) : (signal, true)
    }
}
#endif
