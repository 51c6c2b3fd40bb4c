import CSQLite
import Chronicle
import ChronicleContainer
import ChronicleCore
import Foundation
import GRDB

/// (k) Large stores: the realistic schema of (i) at ten million records.
extension MacroBench {
    /// The records per change of the realistic history (inserts less the
    /// records deletes take, cascades included), measured on its logs.
    static let realisticRecordsPerChange = 0.74

    /// (k): a new device replays a history of ten million records (times
    /// `scale`) into an empty snapshot, and another device a tenth of it;
    /// then both sync the same 1,000 new logs of 100 changes. Each rate is
    /// set against SQLite's own at the same two sizes (the raw tables with
    /// the same indexes, loaded with `INSERT … SELECT` in one transaction),
    /// so what is left is what Chronicle adds as a store grows, not what
    /// SQLite's B-trees cost. And the peak RSS of the large replay.
    func largeStores() async throws -> [Target] {
        let perLog = 1_000
        let records = max(20_000, Int(10_000_000 * scale))
        let logs = max(40, Int((Double(records) / Self.realisticRecordsPerChange / Double(perLog)).rounded(.up)))
        let dir = fresh("large")
        let storeID = StoreID(RecordID(high: 0x018B_0000_0000_7000, low: 0x8000_0000_0000_0003))
        let large = try DirectoryContainer(root: dir.appendingPathComponent("large-container"), create: true)
        let small = try DirectoryContainer(root: dir.appendingPathComponent("small-container"), create: true)
        let largeExpected = try await fillRealistic(large, store: storeID, logs: logs, perLog: perLog, seed: 13).counts
        // The same seed: the small store's logs are the first tenth of the large one's.
        let smallExpected = try await fillRealistic(small, store: storeID, logs: max(4, logs / 10), perLog: perLog, seed: 13).counts
        // The generator's bookkeeping is not the replay's memory.
        _ = releaseFreedMemory(0)

        let clock = ContinuousClock()
        func replay(_ container: DirectoryContainer, device: UInt64, expected: [String: Int]) async throws -> (store: Store, seconds: Double) {
            sync()
            let start = clock.now
            let store = try await realisticStore(dir, container: container, device: device)
            let report = try await store.importLogs()
            let seconds = (clock.now - start) / .seconds(1)
            let counts = try store.snapshot.recordCounts()
            guard report.failures.isEmpty, counts == expected else {
                throw ChronicleError(.applyFailed, "the replay left \(counts), a sequential apply \(expected) (\(report.failures.count) failures)")
            }
            return (store, seconds)
        }
        log("(k) large stores: replaying \(smallExpected.values.reduce(0, +)) records")
        let smallReplay = try await replay(small, device: 1, expected: smallExpected)
        log("(k) large stores: replaying \(largeExpected.values.reduce(0, +)) records, in a process of its own")
        // The large replay runs in a process of its own, as a device's
        // would: this one holds what generating ten million records and the
        // small replay left behind, which is not the replay's memory.
        let child = try Self.replayInChildProcess(container: dir.appendingPathComponent("large-container"), dir: dir, device: 2)
        guard child.failures == 0, child.counts == largeExpected else {
            throw ChronicleError(.applyFailed, "the replay left \(child.counts), a sequential apply \(largeExpected) (\(child.failures) failures)")
        }
        let largeReplay = (store: try await realisticStore(dir, container: large, device: 2), seconds: child.seconds)
        let (startRSS, peak) = (child.startBytes, child.peakBytes)

        // 1,000 new logs of their own records (their own folders, notes and
        // comments, from four other devices), into both stores.
        let tailMilliseconds: UInt64 = 1_700_000_000_000 + UInt64(logs) + 1_000
        var tailExpected: [String: Int] = [:]
        for container in [small, large] {
            tailExpected = try await fillRealistic(container, store: storeID, logs: 1_000, perLog: 100, seed: 14,
                                                   firstDevice: 200, names: "new ", milliseconds: tailMilliseconds).counts
        }
        func syncTail(_ store: Store, before: [String: Int]) async throws -> Double {
            sync()
            let start = clock.now
            let report = try await store.importLogs()
            let seconds = (clock.now - start) / .seconds(1)
            let counts = try store.snapshot.recordCounts()
            let expected = before.merging(tailExpected, uniquingKeysWith: +)
            guard report.failures.isEmpty, counts == expected else {
                throw ChronicleError(.applyFailed, "the sync left \(counts), a sequential apply \(expected) (\(report.failures.count) failures)")
            }
            try await store.close()
            return seconds
        }
        log("(k) large stores: 1,000 new logs into each")
        let smallTail = try await syncTail(smallReplay.store, before: smallExpected)
        let largeTail = try await syncTail(largeReplay.store, before: largeExpected)

        // SQLite alone, at both sizes: the rows before the new logs, then theirs.
        let tailStart = RecordID(high: tailMilliseconds << 16, low: 0).bytes
        log("(k) large stores: the same rows into plain SQLite")
        let smallRaw = try Self.rawLoad(from: smallReplay.store.snapshot.path, into: dir.appendingPathComponent("raw-small.sqlite").path, splitAt: tailStart)
        let largeRaw = try Self.rawLoad(from: largeReplay.store.snapshot.path, into: dir.appendingPathComponent("raw-large.sqlite").path, splitAt: tailStart)

        let (smallRecords, largeRecords) = (Double(smallExpected.values.reduce(0, +)), Double(largeExpected.values.reduce(0, +)))
        let tailRecords = Double(tailExpected.values.reduce(0, +))
        // Rates in records per second, and how much each falls from the small store to the large one.
        let replayFall = (largeRecords / largeReplay.seconds) / (smallRecords / smallReplay.seconds)
        let rawFall = (largeRecords / largeRaw.before) / (smallRecords / smallRaw.before)
        let syncFall = smallTail / largeTail
        let rawTailFall = smallRaw.after / largeRaw.after
        let replayDetail = String(format: "replay into an empty snapshot: %.0f records in %.1f s (%.0f records/s), %.0f records in %.1f s (%.0f records/s): %.2f of the small store's rate; SQLite alone %.0f and %.0f rows/s (%.1f and %.1f s): %.2f",
                                  largeRecords, largeReplay.seconds, largeRecords / largeReplay.seconds,
                                  smallRecords, smallReplay.seconds, smallRecords / smallReplay.seconds, replayFall,
                                  largeRecords / largeRaw.before, smallRecords / smallRaw.before, largeRaw.before, smallRaw.before, rawFall)
        let syncDetail = String(format: "1,000 new logs of 100 changes (%.0f records) synced into the snapshot of %.0f records in %.2f s, into that of %.0f records in %.2f s: %.2f of the small store's rate; SQLite alone, the same rows into its tables of both sizes, %.3f and %.3f s: %.2f",
                                tailRecords, largeRecords, largeTail, smallRecords, smallTail, syncFall, largeRaw.after, smallRaw.after, rawTailFall)
        let memoryDetail = String(format: "peak RSS %.0f MB during the replay of %.0f records, in a process of its own (%.0f MB when it started)",
                                  Double(peak) / 1e6, largeRecords, Double(startRSS) / 1e6)
        log("(k) large stores: \(replayDetail); \(syncDetail); \(memoryDetail)")
        return [
            Target(name: "replay rate at 10M records vs at 1M, against SQLite's own", measured: replayFall / rawFall, limit: 0.8, lowerIsBetter: false,
                   detail: replayDetail),
            Target(name: "1,000 new logs into 10M records vs into 1M, against SQLite's own", measured: syncFall / rawTailFall, limit: 0.8, lowerIsBetter: false,
                   detail: syncDetail),
            Target(name: "peak RSS, 10M-record replay (MB)", measured: Double(peak) / 1e6, limit: 150, lowerIsBetter: true, detail: memoryDetail),
        ]
    }

    /// SQLite alone at the size of the snapshot at `source`: its rows copied
    /// into a raw database with the same tables and indexes, in one
    /// transaction (`INSERT … SELECT`, `synchronous = NORMAL`), first those
    /// with IDs before `split`, then the rest. Returns the seconds of each.
    static func rawLoad(from source: String, into path: String, splitAt split: [UInt8]) throws -> (before: Double, after: Double) {
        let raw = try RawSQLite(path: path, synchronous: "NORMAL", creating: false)
        let exec = raw.exec
        defer { withExtendedLifetime(raw) {} }
        for sql in realisticTables(indexed: true) { try exec(sql) }
        try exec("ATTACH DATABASE '\(source.replacingOccurrences(of: "'", with: "''"))' AS source")
        let splitLiteral = "X'" + split.map { String(format: "%02X", $0) }.joined() + "'"
        let clock = ContinuousClock()
        func load(_ condition: String) throws -> Double {
            sync()
            let start = clock.now
            try exec("BEGIN")
            for entity in realisticSchema.entities {
                let columns = (["id"] + entity.fields.map { $0.name.quotedDatabaseIdentifier }).joined(separator: ", ")
                try exec("INSERT INTO main.\(entity.name) (\(columns)) SELECT \(columns) FROM source.\(entity.name) WHERE id \(condition) \(splitLiteral) ORDER BY id")
            }
            try exec("COMMIT")
            return (clock.now - start) / .seconds(1)
        }
        return (try load("<"), try load(">="))
    }
}

extension MacroBench.RealisticHistory {
    /// The records left, by entity.
    var counts: [String: Int] { ["Folder": folders.count, "Note": notes.count, "Comment": comments.count] }
}

/// What a replay in a process of its own reports (`chronicle bench
/// replay-child`, which the large-store scenario runs).
package struct ChildReplay: Codable, Sendable {
    /// From opening the store to the end of its import.
    package var seconds: Double
    /// The process's peak resident size, and its size when the replay started.
    package var peakBytes: Int
    package var startBytes: Int
    /// The store's records, by entity, after the import.
    package var counts: [String: Int]
    /// The import's failures.
    package var failures: Int
}

extension MacroBench {
    /// The realistic replay of the container at `container` by device
    /// `device` (its folder in `dir`), in this process: what `chronicle
    /// bench replay-child` runs and prints.
    package static func replayHere(container: URL, dir: URL, device: UInt64) async throws -> ChildReplay {
        resetPeakResident()
        let startBytes = peakResidentBytes()
        let clock = ContinuousClock()
        let start = clock.now
        let bench = MacroBench(scale: 1, directory: dir, log: { _ in })
        let store = try await bench.realisticStore(dir, container: try DirectoryContainer(root: container), device: device)
        let report = try await store.importLogs()
        let seconds = (clock.now - start) / .seconds(1)
        let counts = try store.snapshot.recordCounts()
        let peakBytes = peakResidentBytes()
        try await store.close()
        return ChildReplay(seconds: seconds, peakBytes: peakBytes, startBytes: startBytes, counts: counts, failures: report.failures.count)
    }

    /// ``replayHere(container:dir:device:)`` in a child process: this
    /// executable, run as `chronicle bench replay-child`.
    static func replayInChildProcess(container: URL, dir: URL, device: UInt64) throws -> ChildReplay {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = ["bench", "replay-child", "--container", container.path, "--dir", dir.path, "--device", String(device)]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ChronicleError(.applyFailed, "the replay's process exited with status \(process.terminationStatus)")
        }
        do {
            return try JSONDecoder().decode(ChildReplay.self, from: data)
        } catch {
            throw ChronicleError(.applyFailed, "the replay's process printed no report: \(String(decoding: data.prefix(300), as: UTF8.self))", underlying: error)
        }
    }
}
