import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The name of a temporary file in a directory container's `tmp/`, which
/// says who wrote it: `<boot id>-<pid>-<process start>-<counter>-<random>.tmp`.
///
/// The boot ID (Linux's `/proc/sys/kernel/random/boot_id`, 32 hex digits)
/// tells whether the writer ran on this machine since it last booted; only
/// then do its process ID and start time (clock ticks after boot, from
/// `/proc/<pid>/stat`) say whether it still runs. A reused process ID has
/// another start time.
struct TemporaryFileName: Hashable {
    /// The writer's machine and boot, or "0" where the system does not say.
    var bootID: String
    /// The writer's process ID.
    var pid: Int32
    /// When the writer's process started, or 0 where the system does not say.
    var startTime: UInt64
    /// Makes names of one process unique.
    var counter: UInt64
    /// Makes names unique across processes that share the first three.
    var random: UInt64

    var rawValue: String { "\(bootID)-\(pid)-\(startTime)-\(counter)-\(String(random, radix: 16)).tmp" }

    /// A new name for this process.
    init(counter: UInt64, random: UInt64) {
        let writer = Self.currentWriter
        self.bootID = writer.bootID
        self.pid = getpid()
        self.startTime = writer.startTime
        self.counter = counter
        self.random = random
    }

    /// Parses a name made by this type, or gives nil (a name of an older
    /// version, or a file that is not a temporary file of Chronicle's).
    init?(parsing name: String) {
        guard name.hasSuffix(".tmp") else { return nil }
        let parts = name.dropLast(4).split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0] == "0" || (parts[0].count == 32 && parts[0].allSatisfy(\.isHexDigit)),
              let pid = Int32(parts[1]), pid > 0, let start = UInt64(parts[2]), let counter = UInt64(parts[3]),
              let random = UInt64(parts[4], radix: 16)
        else { return nil }
        self.bootID = String(parts[0])
        self.pid = pid
        self.startTime = start
        self.counter = counter
        self.random = random
    }

    /// Whether the process that wrote this file has certainly ended: it ran
    /// on this boot of this machine and its process ID is gone, or now
    /// belongs to a process that started at another time. False when that
    /// cannot be known (another machine, an earlier boot, no `/proc`).
    var writerHasEnded: Bool {
        let current = Self.currentWriter
        guard bootID != "0", bootID == current.bootID else { return false }
        if pid == getpid() { return startTime != current.startTime }
        if kill(pid, 0) != 0 && errno == ESRCH { return true }
        guard startTime != 0, let now = Self.startTime(of: pid) else { return false }
        return now != startTime
    }

    /// This process's boot ID and start time, read once.
    static let currentWriter: (bootID: String, startTime: UInt64) = (
        bootID: (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8))
            .map { $0.filter(\.isHexDigit).lowercased() }
            .flatMap { $0.count == 32 ? $0 : nil } ?? "0",
        startTime: startTime(of: getpid()) ?? 0
    )

    /// Field 22 of `/proc/<pid>/stat`: when the process started, in clock
    /// ticks after boot. The command name (field 2) may hold spaces and
    /// parentheses, so fields are counted after its closing parenthesis.
    static func startTime(of pid: Int32) -> UInt64? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (the state), so field 22 is fields[19].
        guard fields.count > 19 else { return nil }
        return UInt64(fields[19])
    }
}
