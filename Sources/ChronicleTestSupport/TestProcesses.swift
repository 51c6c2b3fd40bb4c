import Foundation

#if canImport(Glibc)
import Glibc

/// A child process started with `posix_spawn`. Every process the tests and
/// the multi-process simulation start goes through here, not through
/// Foundation's `Process.run()`, which on Linux reads past a `/proc/self/fd`
/// directory entry while it counts open descriptors and so crashes its
/// caller now and then (swift-corelibs-foundation, pull request 5472).
///
/// Not thread-safe: one owner starts, polls and waits for it.
package final class SpawnedProcess {
    /// Its process ID.
    package let pid: pid_t
    /// How it ended, once reaped: its exit status, or the signal that ended it.
    private var ended: (status: Int32, signaled: Bool)?

    private init(pid: pid_t) {
        self.pid = pid
    }

    /// Starts `executable` with `arguments` and `environment`, its standard
    /// input, output and error on the given descriptors (duplicated in the
    /// child); no other descriptor of this process reaches the child.
    package static func spawn(_ executable: String, _ arguments: [String], environment: [String: String],
                              stdin: Int32, stdout: Int32, stderr: Int32) throws -> SpawnedProcess {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdin, 0)
        posix_spawn_file_actions_adddup2(&actions, stdout, 1)
        posix_spawn_file_actions_adddup2(&actions, stderr, 2)
        // Nothing else of this process: no other test's pipe ends or locks.
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

    /// Starts `executable` with its standard input, output and error on
    /// `/dev/null`.
    package static func spawnQuietly(_ executable: String, _ arguments: [String],
                                     environment: [String: String] = ProcessInfo.processInfo.environment) throws -> SpawnedProcess {
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        guard null >= 0 else { throw NSError(domain: NSPOSIXErrorDomain, code: Int(errno), userInfo: [NSLocalizedDescriptionKey: "cannot open /dev/null"]) }
        defer { close(null) }
        return try spawn(executable, arguments, environment: environment, stdin: null, stdout: null, stderr: null)
    }

    /// How it ended, or nil while it runs (never blocks).
    package func poll() -> (status: Int32, signaled: Bool)? {
        if let ended { return ended }
        var status: Int32 = 0
        let done = waitpid(pid, &status, WNOHANG)
        if done == pid {
            ended = Self.decode(status)
        } else if done < 0 && errno != EINTR {
            ended = (-1, false)
        }
        return ended
    }

    /// Whether it is still running.
    package var isRunning: Bool { poll() == nil }

    /// Sends it SIGKILL (nothing if it has ended).
    package func kill() {
        if ended == nil { _ = Glibc.kill(pid, SIGKILL) }
    }

    /// Waits until it ends. Returns its exit status, or the signal that ended it.
    @discardableResult
    package func waitUntilExit() -> (status: Int32, signaled: Bool) {
        while true {
            if let ended { return ended }
            var status: Int32 = 0
            let done = waitpid(pid, &status, 0)
            if done == pid {
                ended = Self.decode(status)
            } else if done < 0 && errno != EINTR {
                ended = (-1, false)
            }
        }
    }

    /// Waits until it ends, or kills it (SIGKILL) after `seconds`. Returns
    /// its exit status, or the signal that ended it.
    package func wait(killingAfter seconds: Double) -> (status: Int32, signaled: Bool) {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            if let ended = poll() { return ended }
            if Date() > deadline { kill() }
            usleep(5_000)
        }
    }

    private static func decode(_ status: Int32) -> (status: Int32, signaled: Bool) {
        let signal = status & 0x7f
        return signal == 0 ? ((status >> 8) & 0xff, false) : (signal, true)
    }

    /// What ``run(_:_:environment:input:timeLimitSeconds:)`` saw.
    package struct Run {
        package var status: Int32
        package var signaled: Bool
        package var stdout: Data
        package var stderr: Data
        package var seconds: Double
    }

    /// Runs `executable` to its end (killing it after `timeLimitSeconds`),
    /// with `input` on its standard input; returns its status and what it
    /// wrote. Both streams go to files, so neither can fill a pipe and
    /// block the process.
    package static func run(_ executable: String, _ arguments: [String],
                            environment: [String: String] = ProcessInfo.processInfo.environment,
                            input: Data = Data(), timeLimitSeconds: Double = 300) throws -> Run {
        let files = ["stdout", "stderr"].map { FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-\($0)-\(UUID().uuidString)") }
        for file in files { _ = FileManager.default.createFile(atPath: file.path, contents: nil) }
        defer { for file in files { try? FileManager.default.removeItem(at: file) } }
        let handles = try files.map { try FileHandle(forWritingTo: $0) }
        let stdin = Pipe()
        let started = Date()
        let process = try spawn(executable, arguments, environment: environment, stdin: stdin.fileHandleForReading.fileDescriptor,
                                stdout: handles[0].fileDescriptor, stderr: handles[1].fileDescriptor)
        try stdin.fileHandleForReading.close()
        // A child that exits without reading its input must not end this
        // process with SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        try? stdin.fileHandleForWriting.write(contentsOf: input)
        try stdin.fileHandleForWriting.close()
        let ended = process.wait(killingAfter: timeLimitSeconds)
        for handle in handles { try handle.close() }
        return Run(status: ended.status, signaled: ended.signaled, stdout: try Data(contentsOf: files[0]),
                   stderr: try Data(contentsOf: files[1]), seconds: Date().timeIntervalSince(started))
    }
}

/// Processes for tests of what a container does about other processes.
package enum TestProcesses {
    /// The process ID of a process that has ended (`/bin/true`, waited for):
    /// what a killed writer's ID looks like afterwards.
    package static func pidOfAnEndedProcess() throws -> Int32 {
        let process = try SpawnedProcess.spawnQuietly("/bin/true", [])
        process.waitUntilExit()
        return process.pid
    }
}
#endif
