import Foundation

/// Bounded memory: the process's resident size stays under a limit.
struct BoundedMemoryChecker: InvariantChecker {
    let invariant = "bounded memory"
    /// The most resident memory allowed.
    var limitBytes = 1 << 30

    func check(_ state: QuiescedState, _ report: inout CheckReport) async throws {
        let rss = Self.residentBytes()
        if rss > limitBytes { report.violation("memory: resident size \(rss >> 20) MiB exceeds \(Self.text(limitBytes))") }
    }

    static func text(_ bytes: Int) -> String {
        if bytes >= 1 << 30 && bytes % (1 << 30) == 0 { return "\(bytes >> 30) GiB" }
        return bytes >= 1 << 20 ? "\(bytes >> 20) MiB" : "\(bytes) bytes"
    }

    static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
