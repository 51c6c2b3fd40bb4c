import ChronicleCore
import Foundation

#if canImport(Glibc)
import Glibc

/// A PostgreSQL server of its own for a run: a new cluster in a temporary
/// folder (`initdb`), reached only through a Unix-domain socket in that
/// folder, trusting local connections. It can be killed with SIGKILL (the
/// server process and every one of its children, as a crash or the OOM
/// killer leaves them) and started again, which runs PostgreSQL's crash
/// recovery. ``remove()`` stops it and deletes its folder.
///
/// Needs PostgreSQL's server programs (Debian's `postgresql` package). As
/// root, the cluster belongs to the `postgres` user, since `initdb`
/// refuses to run as root.
///
/// ```swift
/// let server = try ThrowAwayPostgres()
/// defer { server.remove() }
/// let container = try await PostgresContainer.connect(server.url, create: true)
/// try server.kill()
/// try server.start()
/// ```
package final class ThrowAwayPostgres: @unchecked Sendable {
    /// The folder holding the cluster (`data/`), its log and its socket.
    package let folder: URL
    /// A `postgres://` URL of the server's `postgres` database, as user `chronicle`.
    package let url: String
    private let bin: String
    private let asOwner: [String]
    private let port = 5432
    private let fsync: Bool

    /// Makes the cluster and starts the server.
    ///
    /// - Throws: ``ChronicleError/Code/unavailable`` when PostgreSQL is not
    ///   installed, or `initdb` or the server fails (with its log).
    /// - Parameter fsync: whether the server makes its commits durable
    ///   (a benchmark's server does; a test's does not need to: killing
    ///   the server, not the machine, loses nothing written).
    package init(fsync: Bool = false) throws(ChronicleError) {
        self.fsync = fsync
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? [])
            .filter { FileManager.default.isExecutableFile(atPath: "/usr/lib/postgresql/\($0)/bin/initdb") }
            .sorted { (Int($0) ?? 0) < (Int($1) ?? 0) }
        guard let version = versions.last else {
            throw ChronicleError(.unavailable, "PostgreSQL's server programs (initdb, pg_ctl) are not installed: install Debian's postgresql package ('make deps' does)")
        }
        bin = "/usr/lib/postgresql/\(version)/bin"
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-postgres-\(UUID().uuidString.prefix(8))")
        url = "postgres://chronicle@/postgres?host=\(folder.path)&port=\(port)"
        var owner: [String] = []
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            if getuid() == 0 {
                guard getpwnam("postgres") != nil else {
                    throw ChronicleError(.unavailable, "running as root, and there is no 'postgres' user to own a PostgreSQL cluster")
                }
                try FileManager.default.setAttributes([.ownerAccountName: "postgres", .posixPermissions: 0o755], ofItemAtPath: folder.path)
                owner = ["/usr/sbin/runuser", "-u", "postgres", "--"]
            }
        } catch let error as ChronicleError {
            throw error
        } catch {
            throw ChronicleError(.unavailable, "cannot make the server's folder \(folder.path): \(error.localizedDescription)")
        }
        asOwner = owner
        try run(bin + "/initdb", ["-D", folder.appendingPathComponent("data").path, "-U", "chronicle", "--auth=trust", "-E", "UTF8", "--locale=C"],
                what: "initdb")
        try start()
    }

    /// Starts the server (after ``kill()``: PostgreSQL recovers from its log).
    package func start() throws(ChronicleError) {
        let options = "-c listen_addresses='' -c unix_socket_directories='\(folder.path)' -p \(port) -c fsync=\(fsync ? "on" : "off")"
        try run(bin + "/pg_ctl", ["-D", folder.appendingPathComponent("data").path, "-l", folder.appendingPathComponent("server.log").path,
                                  "-w", "-t", "60", "-o", options, "start"], what: "starting the server")
    }

    /// Kills the server with SIGKILL: its main process and all its
    /// children at once, with no shutdown of any kind. Returns once they
    /// are gone.
    package func kill() throws(ChronicleError) {
        let pidFile = folder.appendingPathComponent("data/postmaster.pid").path
        guard let text = try? String(contentsOfFile: pidFile, encoding: .utf8),
              let pid = text.split(separator: "\n").first.flatMap({ pid_t($0.trimmingCharacters(in: .whitespaces)) }) else {
            throw ChronicleError(.unavailable, "the server is not running (no \(pidFile))")
        }
        let victims = [pid] + Self.children(of: pid)
        for victim in victims { _ = Glibc.kill(victim, SIGKILL) }
        // Gone means reaped: PostgreSQL takes a process it can still signal
        // (a zombie its parent has not reaped yet) for a server running.
        let deadline = ContinuousClock.now + .seconds(10)
        while victims.contains(where: { Glibc.kill($0, 0) == 0 }), ContinuousClock.now < deadline {
            usleep(10_000)
        }
        if Glibc.kill(pid, 0) == 0 {
            guard Self.isZombie(pid) else { throw ChronicleError(.unavailable, "the server (process \(pid)) did not die of SIGKILL") }
            // Dead, and never reaped (no process reaps orphans here): its lock file is stale.
            try? FileManager.default.removeItem(atPath: pidFile)
        }
    }

    /// Runs one psql command (SQL, or a meta-command such as `\copy`) on
    /// the `postgres` database; returns what it printed.
    @discardableResult
    package func psql(_ command: String) throws(ChronicleError) -> String {
        let result: SpawnedProcess.Run
        do {
            result = try SpawnedProcess.run(bin + "/psql", ["-h", folder.path, "-p", String(port), "-U", "chronicle", "-d", "postgres",
                                                            "-v", "ON_ERROR_STOP=1", "-qAt", "-c", command], timeLimitSeconds: 3_600)
        } catch {
            throw ChronicleError(.unavailable, "psql could not start: \(error.localizedDescription)")
        }
        guard result.status == 0, !result.signaled else {
            throw ChronicleError(.io, "psql failed (status \(result.status)): \(String(decoding: result.stderr, as: UTF8.self))")
        }
        return String(decoding: result.stdout, as: UTF8.self)
    }

    /// Stops the server (immediately) and deletes its folder.
    package func remove() {
        let command = asOwner + [bin + "/pg_ctl", "-D", folder.appendingPathComponent("data").path, "-m", "immediate", "-w", "stop"]
        _ = try? SpawnedProcess.run(command[0], Array(command.dropFirst()), timeLimitSeconds: 60)
        try? FileManager.default.removeItem(at: folder)
    }

    private func run(_ program: String, _ arguments: [String], what: String) throws(ChronicleError) {
        let command = asOwner + [program] + arguments
        let result: SpawnedProcess.Run
        do {
            result = try SpawnedProcess.run(command[0], Array(command.dropFirst()), timeLimitSeconds: 120)
        } catch {
            throw ChronicleError(.unavailable, "\(what) could not start: \(error.localizedDescription)")
        }
        guard result.status == 0, !result.signaled else {
            let log = (try? String(contentsOf: folder.appendingPathComponent("server.log"), encoding: .utf8)) ?? ""
            let output = String(decoding: result.stdout + result.stderr, as: UTF8.self)
            throw ChronicleError(.unavailable, "\(what) failed (status \(result.status)): \(output)\(log.suffix(2_000))")
        }
    }

    /// The processes whose parent is `pid` (from `/proc`).
    private static func children(of pid: pid_t) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { pid_t($0) }.filter { child in
            guard let stat = try? String(contentsOfFile: "/proc/\(child)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return false }
            // After "pid (name) ": state, then the parent's ID.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && pid_t(fields[1]) == pid
        }
    }

    /// Whether `pid` has ended and waits to be reaped by its parent.
    private static func isZombie(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return true }
        return stat[stat.index(after: close)...].split(separator: " ").first == "Z"
    }
}
#endif
