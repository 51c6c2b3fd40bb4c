import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Logging
import Testing

/// Compaction: the logs a baseline covers leave the container once every
/// device still reporting has applied them; devices that were away apply
/// the baseline instead; nothing a device saved is lost, and nothing puts
/// the removed logs back.
@Suite struct CompactionTests {
    static let schema = BaselineTests.schema

    /// The logs of the store, by device: their sequence ranges.
    static func logs(_ d: TestDevices, _ store: Store) async throws -> [ContainerLayout.ParsedLogName] {
        try await d.container.listAll(prefix: ContainerLayout.logsPrefix(store: store.storeID)).compactMap { ContainerLayout.parseLog($0.name) }
    }

    /// The folders of the store's baselines.
    static func baselines(_ d: TestDevices, _ store: Store) async throws -> Set<String> {
        Set(try await d.container.listAll(prefix: ContainerLayout.baselinesPrefix(store: store.storeID)).compactMap { blob in
            ContainerLayout.parseBaselinePart(blob.name).map { ContainerLayout.baselinePrefix(store: $0.store, clock: $0.clock, device: $0.device, vector: $0.vector) }
        })
    }

    /// With automatic compaction, a device that a sync leaves up to date
    /// publishes a baseline and compacts once the store has taken enough
    /// saves: the container holds one baseline and the logs after it, and
    /// a device that joins starts from it with every save. Without it,
    /// nothing is published or removed.
    @Test(arguments: [true, false]) func devicesCompactByThemselvesOnceTheStoreHasTakenEnoughSaves(automatic: Bool) async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-autocompact-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let container = try DirectoryContainer(root: root.appendingPathComponent("container"), create: true)
        let clock = ManualClock()
        func open(_ i: UInt64) async throws -> Store {
            var configuration = Store.Configuration(schema: Self.schema, deviceID: DeviceID(index: i), directory: root.appendingPathComponent("d\(i)"),
                                                    container: container, clock: clock, seed: i, logger: Logger(label: "test"), durability: .normal)
            configuration.automaticCompaction = automatic ? Store.AutomaticCompaction(saves: 20) : nil
            return try await Store.open(configuration)
        }
        let (a, b) = (try await open(1), try await open(2))
        var rng = SeededRandom(seed: 11)
        var compactions: [CompactionReport] = []
        for _ in 0..<8 {
            for (store, saves) in [(a, 10), (b, 3)] {
                for _ in 0..<saves {
                    let name = "author \(rng.next() % 1_000_000)"
                    try await store.write { tx in _ = tx.insert("Author", ["name": .string(name)]) }
                }
            }
            // Five minutes between syncs: a compaction that waited for a
            // device is tried again after an applied-report interval (ten).
            for store in [a, b, a] {
                clock.advance(byMilliseconds: 300_000)
                if let compaction = try await store.sync().compaction { compactions.append(compaction) }
            }
        }
        let baselines = try await container.listAll(prefix: ContainerLayout.baselinesPrefix(store: a.storeID))
        let logs = try await container.listAll(prefix: ContainerLayout.logsPrefix(store: a.storeID)).compactMap { ContainerLayout.parseLog($0.name) }
        if automatic {
            #expect(compactions.contains { $0.removedLogs > 0 }, "\(compactions)")
            #expect(Set(baselines.compactMap { ContainerLayout.parseBaselinePart($0.name)?.vector }).count <= 2, "the compaction's baseline, and one published for the next")
            let horizon = try #require(try await container.readMarker(ContainerLayout.compaction(store: a.storeID), as: CompactionHorizon.self)?.payload)
            // The logs a compaction covered are gone; what is left is what
            // came after the newest compaction that removed any.
            let removed = compactions.filter { $0.removedLogs > 0 }.count
            #expect(removed >= 2, "\(compactions.map { "\($0.removedLogs) removed, waiting for \($0.waitingFor)" })")
            _ = horizon
            #expect(logs.count <= 8, "\(logs.count) logs left of 16 rounds of uploads")
        } else {
            #expect(compactions.isEmpty && baselines.isEmpty)
            #expect(logs.count >= 16)
        }
        // A device that joins gets every save.
        let c = try await open(3)
        try await c.sync()
        for store in [a, b, c] { try await store.sync() }
        var counts: [Int] = []
        var hashes = Set<String>()
        for store in [a, b, c] {
            counts.append(try await store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM Author") ?? 0 })
            hashes.insert(try await store.stateHash())
        }
        #expect(counts == [104, 104, 104])
        #expect(hashes.count == 1)
        for store in [a, b, c] { try await store.close() }
    }

    @Test func aCompactionRemovesTheLogsABaselineCoversAndTheOlderBaselines() async throws {
        let d = try await TestDevices(3, schema: Self.schema)
        var rng = SeededRandom(seed: 7)
        try await BaselineTests.randomSaves(d, &rng, rounds: 12)
        try await d.syncAll()
        let first = try await d.stores[0].publishBaseline(partBytes: 1024)
        try await BaselineTests.randomSaves(d, &rng, rounds: 12)
        try await d.syncAll()
        let second = try await d.stores[1].publishBaseline(partBytes: 1024)
        try await d.syncAll()
        let before = try await Self.logs(d, d.stores[0])
        let vector = try d.stores[1].snapshot.vector()

        let report = try await d.stores[2].compact()
        #expect(report.baseline == second.prefix)
        #expect(report.waitingFor.isEmpty && report.passedOverDevices.isEmpty)
        #expect(report.removedBaselines == 1)
        let after = try await Self.logs(d, d.stores[0])
        // Exactly the logs the second baseline covers went.
        #expect(report.removedLogs == before.filter { $0.last <= (vector[$0.device] ?? 0) }.count)
        #expect(report.removedLogs > 0)
        #expect(after.allSatisfy { $0.last > (vector[$0.device] ?? 0) })
        #expect(try await Self.baselines(d, d.stores[0]) == [second.prefix])
        #expect(first.prefix != second.prefix)

        // Nobody puts them back, and nobody misses them.
        for store in d.stores {
            #expect(try await store.repairOwnLogs().isEmpty)
            let findings = try await store.scrub(recheck: [], bytes: 1 << 30)
            #expect(findings.missing.isEmpty && findings.damaged.isEmpty)
        }
        #expect(try await Self.logs(d, d.stores[0]).count == after.count)

        // The devices go on; a device that joins now starts from the baseline and agrees.
        try await BaselineTests.randomSaves(d, &rng, rounds: 6)
        try await d.add()
        try await d.syncAll()
        #expect(try await d.hashes().count == 1)
    }

    /// Each device's outbox drops the bodies of its saves the compaction
    /// covers and keeps the rest: its saves after the compaction still go
    /// back into the container from it when the container loses them.
    @Test func theOutboxKeepsTheBodiesAfterTheCompactionOnly() async throws {
        let d = try await TestDevices(2, schema: Self.schema)
        var rng = SeededRandom(seed: 11)
        try await BaselineTests.randomSaves(d, &rng, rounds: 10)
        try await d.syncAll()
        _ = try await d.stores[0].publishBaseline(partBytes: 1024)
        try await d.syncAll()
        let vector = try d.stores[0].snapshot.vector()
        let report = try await d.stores[1].compact()
        #expect(report.removedLogs > 0)
        try await BaselineTests.randomSaves(d, &rng, rounds: 4)
        try await d.syncAll()
        for store in d.stores {
            let covered = vector[store.deviceID] ?? 0
            #expect(covered > 0)
            let rows = try await store.read { db in
                try Row.fetchAll(db, sql: "SELECT sequence, length(body), log_last FROM _chronicle_outbox ORDER BY sequence")
                    .map { (sequence: $0[0] as Int64, bytes: $0[1] as Int64, last: $0[2] as Int64?) }
            }
            #expect(rows.filter { $0.sequence <= covered }.allSatisfy { $0.bytes == 0 }, "the bodies the compaction covers went")
            #expect(rows.contains { $0.sequence <= covered })
            #expect(rows.filter { $0.sequence > covered }.allSatisfy { $0.bytes > 0 }, "the later ones stay")
            #expect(rows.contains { $0.sequence > covered })
        }
        // The container loses device 0's later logs: it puts them back from what its outbox kept.
        let store = d.stores[0]
        let later = try await d.container.listAll(prefix: ContainerLayout.logPrefix(store: store.storeID, device: store.deviceID))
        #expect(!later.isEmpty)
        for blob in later { try await d.container.delete(blob.name) }
        #expect(try await store.repairOwnLogs().count == later.count)
        try await d.add()
        try await d.syncAll()
        #expect(try await d.hashes().count == 1)
    }

    @Test func aDeviceThatReportedWithinTheRetentionHoldsCompactionBackAndOneAwayLongerCatchesUpFromTheBaseline() async throws {
        let d = try await TestDevices(3, schema: Self.schema)
        var rng = SeededRandom(seed: 11)
        try await BaselineTests.randomSaves(d, &rng, rounds: 4)
        try await d.syncAll()
        // Device 3 goes away; the others save on.
        let away = d.stores[2]
        let others = Array(d.stores[0..<2])
        for _ in 0..<10 {
            try await others[0].write { tx in tx.insert("Note", ["title": .string("from device 1")]) }
            try await others[1].write { tx in tx.insert("Note", ["title": .string("from device 2")]) }
            for s in others { try await s.sync() }
        }
        for s in others { try await s.sync() }
        _ = try await others[0].publishBaseline(partBytes: 1024)
        for s in others { try await s.sync() }

        // Device 3 reported a moment ago: nothing goes.
        let waiting = try await others[1].compact(retention: .seconds(3_600))
        #expect(waiting.waitingFor == [away.deviceID])
        #expect(waiting.removedLogs == 0)

        // Two hours later it has still not synced, but saved while away.
        d.clock.advance(byMilliseconds: 2 * 3_600_000)
        try await away.write { tx in tx.insert("Note", ["title": .string("saved while away")]) }
        for s in others { try await s.sync() }
        let compacted = try await others[1].compact(retention: .seconds(3_600))
        #expect(compacted.passedOverDevices == [away.deviceID])
        #expect(compacted.removedLogs > 0)
        // Every log of devices 1 and 2 that device 3 lacks is gone.
        let left = try await Self.logs(d, away).filter { $0.device != away.deviceID }
        #expect(left.isEmpty)

        // It comes back: applies the baseline, uploads what it saved, and agrees.
        let back = try await away.sync()
        #expect(back.imported.failures.isEmpty && back.imported.gaps.isEmpty)
        try await d.syncAll()
        #expect(try await d.hashes().count == 1)
        #expect(try await d.count("SELECT COUNT(*) FROM Note WHERE title = 'saved while away'", on: 0) == 1)
        #expect(try await d.count("SELECT COUNT(*) FROM Note WHERE title = 'from device 1'", on: 2) == 10)
        let findings = try await away.scrub(recheck: [], bytes: 1 << 30)
        #expect(findings.missing.isEmpty)
    }

    /// A device that started from a baseline a later compaction removed
    /// holds what that baseline held, not what the newer one holds: when
    /// the newer one is damaged, it must not stand in for it (its own
    /// baseline would cover less, and the compacted saves would be gone
    /// for every device). The device that made the newer one does.
    @Test func aDeviceThatStartedFromARemovedBaselineDoesNotStandInForTheNewerOne() async throws {
        let d = try await TestDevices(1, schema: Self.schema)
        let maker = d.stores[0]
        try await maker.write { tx in tx.insert("Note", ["title": .string("before the first baseline")]) }
        try await maker.sync()
        _ = try await maker.publishBaseline()
        // A new device starts from it, then goes away.
        let away = try await d.add()
        try await away.sync()
        #expect(try await d.count("SELECT COUNT(*) FROM Note", on: 1) == 1)
        // The maker saves on, publishes a newer baseline and compacts,
        // passing over the device away longer than the retention.
        d.clock.advance(byMilliseconds: 2 * 3_600_000)
        for i in 0..<5 {
            try await maker.write { tx in tx.insert("Note", ["title": .string("later \(i)")]) }
            try await maker.sync()
        }
        let newer = try await maker.publishBaseline()
        let compacted = try await maker.compact(retention: .seconds(3_600))
        #expect(compacted.passedOverDevices == [away.deviceID] && compacted.removedLogs > 0 && compacted.removedBaselines == 1)
        // The newer baseline is damaged: the compacted saves are only there
        // and on the maker.
        let parts = try await d.container.listAll(prefix: newer.prefix)
        for part in parts {
            var bytes = try await d.container.get(part.name)
            bytes[bytes.count - 3] ^= 0xFF
            try await d.container.delete(part.name)
            try await d.container.put(part.name, bytes)
        }
        d.clock.advance(byMilliseconds: 3_600_000)
        _ = try await away.sync()
        // The device away left it as it was: its parts, and the marker naming it.
        #expect(try await d.container.listAll(prefix: newer.prefix).map(\.name) == parts.map(\.name))
        let marker = try await d.container.readMarker(ContainerLayout.compaction(store: maker.storeID), as: CompactionHorizon.self)
        #expect(marker?.payload.baseline == newer.prefix)
        // The maker stands in for it, and the device away catches up.
        _ = try await maker.sync()
        try await d.syncAll()
        #expect(try await d.hashes().count == 1)
        #expect(try await d.count("SELECT COUNT(*) FROM Note WHERE title LIKE 'later %'", on: 1) == 5)
    }

    /// A container put back from an older copy holds an older compaction
    /// marker and baseline, and lacks the logs a later compaction removed
    /// and the baseline that stood for them. A device that saw the later
    /// marker and holds all it covered publishes a baseline and writes the
    /// marker again; a device joining then gets every save.
    @Test func aCompactionMarkerThatWentBackIsWrittenAgainByADeviceThatSawTheNewerOne() async throws {
        let d = try await TestDevices(2, schema: Self.schema)
        let (a, b) = (d.stores[0], d.stores[1])
        let markerName = ContainerLayout.compaction(store: a.storeID)
        func saveAndCompact(_ label: String) async throws -> (prefix: String, parts: [(ContainerName, [UInt8])], marker: [UInt8]) {
            for i in 0..<3 {
                try await a.write { tx in tx.insert("Note", ["title": .string("\(label) a \(i)")]) }
                try await b.write { tx in tx.insert("Note", ["title": .string("\(label) b \(i)")]) }
                try await d.syncAll()
            }
            let published = try await a.publishBaseline()
            #expect(try await a.compact(retention: .seconds(3_600)).removedLogs > 0)
            try await d.syncAll()
            var parts: [(ContainerName, [UInt8])] = []
            for blob in try await d.container.listAll(prefix: published.prefix) { parts.append((blob.name, try await d.container.get(blob.name))) }
            return (published.prefix, parts, try await d.container.readMarker(markerName)!.bytes)
        }
        let older = try await saveAndCompact("first")
        let newer = try await saveAndCompact("second")
        // The container goes back to its older copy: the older marker and
        // baseline, without the newer baseline (the logs it stood for were
        // removed, and the older copy's logs of that time are gone too).
        for blob in try await d.container.listAll(prefix: newer.prefix) { try await d.container.delete(blob.name) }
        for (name, bytes) in older.parts where try await d.container.list(prefix: name.rawValue, after: nil, limit: 1).isEmpty {
            try await d.container.put(name, bytes)
        }
        let current = try await d.container.readMarker(markerName)!
        _ = try await d.container.replaceMarker(markerName, older.marker, expected: current.version)

        _ = try await b.sync()
        let marker = try await d.container.readMarker(markerName, as: CompactionHorizon.self)!.payload
        let newerVector = try CompactionHorizon(markerBytes: newer.marker).vector
        #expect(newerVector.allSatisfy { (marker.vector[$0.key] ?? 0) >= $0.value })
        // A device joining gets every save.
        try await d.add()
        try await d.syncAll()
        #expect(try await d.hashes().count == 1)
        #expect(try await d.count("SELECT COUNT(*) FROM Note", on: 2) == 12)
    }

    /// Two devices; the second goes away for two hours while the first saves
    /// 200 notes, publishes a baseline of many parts and compacts (passing
    /// the device away over).
    static func compactedWhileADeviceWasAway() async throws -> (TestDevices, Store, (prefix: String, parts: Int, records: Int)) {
        let d = try await TestDevices(2, schema: Self.schema)
        let (maker, away) = (d.stores[0], d.stores[1])
        try await d.syncAll()
        d.clock.advance(byMilliseconds: 2 * 3_600_000)
        try await maker.write { tx in
            for i in 0..<200 { tx.insert("Note", ["title": .string("note \(i) saved while a device was away")]) }
        }
        try await maker.sync()
        let published = try await maker.publishBaseline(partBytes: 1024)
        #expect(published.parts > 3)
        #expect(try await maker.compact(retention: .seconds(3_600)).passedOverDevices == [away.deviceID])
        return (d, maker, published)
    }

    /// The last part of the marker's baseline, the one marked final, is
    /// read at every check (with the first): a baseline of many parts whose
    /// last one is lost or cut short is replaced at the next check, not
    /// after a check per part.
    @Test(arguments: ["delete", "truncate"])
    func aLostOrShortLastPartOfTheMarkersBaselineIsReplacedAtTheNextCheck(damage: String) async throws {
        let (d, maker, published) = try await Self.compactedWhileADeviceWasAway()
        let last = try await d.container.listAll(prefix: published.prefix).map(\.name).max { $0.rawValue < $1.rawValue }!
        if damage == "delete" {
            try await d.container.delete(last)
        } else {
            let bytes = try await d.container.get(last)
            try await d.container.delete(last)
            try await d.container.put(last, Array(bytes.prefix(bytes.count / 2)))
        }
        // One check later (ten minutes), the maker has put it back whole
        // (the same state: the same name), and the device away catches up.
        d.clock.advance(byMilliseconds: 11 * 60_000)
        _ = try await maker.sync()
        try await d.syncAll()
        #expect(try await d.hashes().count == 1)
        #expect(try await d.count("SELECT COUNT(*) FROM Note WHERE title LIKE 'note % saved while a device was away'", on: 1) == 200)
    }

    /// A middle part of the marker's baseline rots. The baseline check reads
    /// one middle part per ten minutes, in turn; a compaction reads them all
    /// and finds it first. The part it found is read at the next sync, and
    /// the maker puts it back before a device that was away needs it.
    @Test func aDamagedPartACompactionFindsIsCheckedAtTheNextSync() async throws {
        let (d, maker, published) = try await Self.compactedWhileADeviceWasAway()
        _ = try await maker.sync()
        let parts = try await d.container.listAll(prefix: published.prefix).map(\.name).sorted { $0.rawValue < $1.rawValue }
        let middle = parts[parts.count / 2]
        var bytes = try await d.container.get(middle)
        bytes[bytes.count - 3] ^= 0x10
        try await d.container.delete(middle)
        try await d.container.put(middle, bytes)
        #expect(try await maker.compact(retention: .seconds(3_600)).passedOverBaselines == [parts[0].rawValue])
        // A minute later, well within the check's interval.
        d.clock.advance(byMilliseconds: 60_000)
        _ = try await maker.sync()
        try await d.syncAll()
        #expect(try await d.hashes().count == 1)
        #expect(try await d.count("SELECT COUNT(*) FROM Note WHERE title LIKE 'note % saved while a device was away'", on: 1) == 200)
    }

    /// A device whose clock ran years ahead reported how far it applied
    /// with that date, then went away: its report does not hold compaction
    /// back until that date. It is passed over, like a device away longer
    /// than the retention period, and catches up from the baseline.
    @Test func aReportDatedFarAheadDoesNotHoldCompactionBack() async throws {
        let d = try await TestDevices(2, schema: Self.schema)
        let (maker, ahead) = (d.stores[0], d.stores[1])
        try await d.syncAll()
        let fiveYears: UInt64 = 5 * 365 * 86_400_000
        let name = ContainerLayout.appliedReport(store: maker.storeID, device: ahead.deviceID)
        let report = AppliedReport(device: ahead.deviceID, milliseconds: d.clock.nowMilliseconds() + fiveYears, vector: [:])
        if let current = try await d.container.readMarker(name) {
            _ = try await d.container.replaceMarker(name, report, expected: current.version)
        } else {
            _ = try await d.container.createMarker(name, report)
        }
        for i in 0..<5 {
            try await maker.write { tx in tx.insert("Note", ["title": .string("later \(i)")]) }
            try await maker.sync()
        }
        _ = try await maker.publishBaseline()
        let compacted = try await maker.compact(retention: .seconds(3_600))
        #expect(compacted.passedOverDevices == [ahead.deviceID])
        #expect(compacted.removedLogs > 0)
        try await d.syncAll()
        #expect(try await d.hashes().count == 1)
    }

    @Test func withoutABaselineNothingIsRemoved() async throws {
        let d = try await TestDevices(2, schema: Self.schema)
        var rng = SeededRandom(seed: 3)
        try await BaselineTests.randomSaves(d, &rng, rounds: 4)
        try await d.syncAll()
        let count = try await Self.logs(d, d.stores[0]).count
        let report = try await d.stores[0].compact()
        #expect(report.baseline == nil && report.removedLogs == 0)
        #expect(try await Self.logs(d, d.stores[0]).count == count)
    }

    @Test func aDamagedNewestBaselineOrADeletedStoreIsNotCompacted() async throws {
        let d = try await TestDevices(2, schema: Self.schema)
        var rng = SeededRandom(seed: 5)
        try await BaselineTests.randomSaves(d, &rng, rounds: 6)
        try await d.syncAll()
        let published = try await d.stores[0].publishBaseline(partBytes: 1024)
        try await d.syncAll()
        let count = try await Self.logs(d, d.stores[0]).count
        // One bit of one part flipped.
        let part = try #require(try await d.blobs(under: published.prefix).first)
        let file = d.container.root.appendingPathComponent("blobs/\(part.rawValue)")
        var bytes = try Data(contentsOf: file)
        bytes[bytes.count - 3] ^= 0x10
        try bytes.write(to: file)
        let report = try await d.stores[1].compact()
        #expect(report.baseline == nil && report.removedLogs == 0)
        #expect(report.passedOverBaselines == [part.rawValue])
        #expect(try await Self.logs(d, d.stores[0]).count == count)
        #expect(try await d.container.readMarker(ContainerLayout.compaction(store: d.stores[0].storeID)) == nil)

        // A store deleted on purpose is left as it is.
        _ = try await d.container.createMarker(ContainerLayout.tombstone(store: d.stores[0].storeID),
                                               Array(#"{"device": "\#(d.stores[0].deviceID)", "milliseconds": 1}"#.utf8))
        let error = await #expect(throws: ChronicleError.self) { try await d.stores[1].compact() }
        #expect(error?.code == .unavailable)
        #expect(try await Self.logs(d, d.stores[0]).count == count)
    }

    /// Each part of a baseline verifies alone: parts swapped, one copied in
    /// from an older baseline or another store, one missing or one more
    /// after the final part make a baseline that `verify` reports, that a
    /// compaction passes over (its logs stay), and that a new device does
    /// not start from.
    @Test(arguments: ["swapped", "older", "missing", "extra", "other store"])
    func aBaselineWhosePartsDoNotBelongTogetherIsReportedAndNotTrusted(damage: String) async throws {
        let d = try await TestDevices(2, schema: Self.schema)
        var rng = SeededRandom(seed: 13)
        try await BaselineTests.randomSaves(d, &rng, rounds: 8)
        try await d.syncAll()
        let older = try await d.stores[0].publishBaseline(partBytes: 1024)
        try await BaselineTests.randomSaves(d, &rng, rounds: 8)
        try await d.syncAll()
        let newer = try await d.stores[0].publishBaseline(partBytes: 1024)
        try await d.syncAll()
        let parts = try await d.blobs(under: newer.prefix).sorted { $0.rawValue < $1.rawValue }
        #expect(parts.count >= 4)
        let blobs = d.container.root.appendingPathComponent("blobs")
        func file(_ name: ContainerName) -> URL { blobs.appendingPathComponent(name.rawValue) }
        let fm = FileManager.default
        switch damage {
        case "swapped":
            try fm.moveItem(at: file(parts[1]), to: file(parts[1]).appendingPathExtension("x"))
            try fm.moveItem(at: file(parts[2]), to: file(parts[1]))
            try fm.moveItem(at: file(parts[1]).appendingPathExtension("x"), to: file(parts[2]))
        case "older":
            let olderPart = try #require(try await d.blobs(under: older.prefix).sorted { $0.rawValue < $1.rawValue }.dropFirst().first)
            try fm.removeItem(at: file(parts[1]))
            try fm.copyItem(at: file(olderPart), to: file(parts[1]))
        case "missing":
            try fm.removeItem(at: file(parts[1]))
        case "extra":
            let last = try #require(ContainerLayout.parseBaselinePart(parts[parts.count - 1]))
            let extra = ContainerLayout.baselinePart(store: last.store, clock: last.clock, device: last.device, vector: last.vector, part: last.part + 1)
            try fm.copyItem(at: file(parts[parts.count - 1]), to: file(extra))
        default:
            // Another store's baseline part, under this baseline's name.
            let other = try await TestDevices(1, schema: Self.schema)
            try await BaselineTests.randomSaves(other, &rng, rounds: 8)
            let published = try await other.stores[0].publishBaseline(partBytes: 1024)
            let foreign = try #require(try await other.blobs(under: published.prefix).min { $0.rawValue < $1.rawValue })
            try fm.removeItem(at: file(parts[0]))
            try fm.copyItem(at: other.container.root.appendingPathComponent("blobs").appendingPathComponent(foreign.rawValue), to: file(parts[0]))
        }
        let verification = try await ContainerVerification(of: d.container, decoder: LogDecoder(schema: Self.schema))
        #expect(!verification.passed)
        #expect(verification.problems.contains { $0.name.hasPrefix(newer.prefix) && $0.error.code == .malformedBody })

        // The compaction takes the older, whole baseline: the logs after
        // its vector stay, those the broken one covers beyond it included.
        let first = try await d.container.get(try #require(try await d.blobs(under: older.prefix).min { $0.rawValue < $1.rawValue }), maxBytes: 1 << 26)
        let olderVector = try LogDecoder(schema: Self.schema).open(first).baselineVector()
        let before = try await Self.logs(d, d.stores[0])
        let report = try await d.stores[1].compact()
        #expect(report.baseline == older.prefix)
        // (One with a part missing is no whole baseline: not even a candidate.)
        #expect(report.passedOverBaselines == (damage == "missing" ? [] : [parts[0].rawValue]))
        let left = try await Self.logs(d, d.stores[0])
        #expect(left.count == before.filter { $0.last > (olderVector[$0.device] ?? 0) }.count)
        #expect(left.count < before.count)
        // A device that joins gets every record.
        try await d.add()
        try await d.syncAll()
        #expect(try await d.hashes().count == 1)
    }
}

/// What the container can lose besides compacted logs: the marker and its
/// baseline (a wipe), or logs nobody puts back, that a baseline still covers.
@Suite struct CompactionRecoveryTests {
    @Test func aCompactionMarkerTheContainerLostIsWrittenAgainByADeviceThatHoldsWhatItCovered() async throws {
        let d = try await TestDevices(3, schema: CompactionTests.schema)
        var rng = SeededRandom(seed: 13)
        try await BaselineTests.randomSaves(d, &rng, rounds: 4)
        try await d.syncAll()
        let away = d.stores[2]
        for _ in 0..<6 {
            try await d.stores[0].write { tx in tx.insert("Note", ["title": .string("while 3 was away")]) }
            for s in d.stores[0..<2] { try await s.sync() }
        }
        _ = try await d.stores[1].publishBaseline(partBytes: 1024)
        for s in d.stores[0..<2] { try await s.sync() }
        d.clock.advance(byMilliseconds: 2 * 3_600_000)
        for s in d.stores[0..<2] { try await s.sync() }
        #expect(try await d.stores[0].compact(retention: .seconds(3_600)).removedLogs > 0)
        for s in d.stores[0..<2] { try await s.sync() }

        // The container loses the marker and every baseline.
        let store = d.stores[0].storeID
        try await d.container.deleteMarker(ContainerLayout.compaction(store: store), expected: nil)
        for blob in try await d.container.listAll(prefix: ContainerLayout.baselinesPrefix(store: store)) { try await d.container.delete(blob.name) }

        // A device that had applied everything puts a baseline and the marker back.
        d.clock.advance(byMilliseconds: 1_000)
        try await d.stores[1].sync()
        let marker = try await d.container.readMarker(ContainerLayout.compaction(store: store), as: CompactionHorizon.self)
        #expect(marker != nil)
        #expect(try await !CompactionTests.baselines(d, d.stores[0]).isEmpty)

        // The device that was away catches up from it.
        let back = try await away.sync()
        #expect(back.imported.gaps.isEmpty && back.imported.failures.isEmpty)
        try await d.syncAll()
        #expect(try await d.hashes().count == 1)
        #expect(try await d.count("SELECT COUNT(*) FROM Note WHERE title = 'while 3 was away'", on: 2) == 6)
    }

    /// The device that compacted is one that holds all the marker covers:
    /// should the container lose the marker before that device syncs again,
    /// it writes it again.
    @Test func theDeviceThatCompactedWritesTheMarkerAgainIfTheContainerLosesIt() async throws {
        let d = try await TestDevices(2, schema: CompactionTests.schema)
        for i in 0..<4 {
            try await d.stores[0].write { tx in tx.insert("Note", ["title": .string("note \(i)")]) }
            try await d.syncAll()
        }
        _ = try await d.stores[1].publishBaseline(partBytes: 1024)
        try await d.syncAll()
        d.clock.advance(byMilliseconds: 1_000)
        #expect(try await d.stores[1].compact(retention: .seconds(3_600)).removedLogs > 0)
        let store = d.stores[1].storeID
        try await d.container.deleteMarker(ContainerLayout.compaction(store: store), expected: nil)
        for blob in try await d.container.listAll(prefix: ContainerLayout.baselinesPrefix(store: store)) { try await d.container.delete(blob.name) }
        try await d.stores[1].sync()
        #expect(try await d.container.readMarker(ContainerLayout.compaction(store: store), as: CompactionHorizon.self) != nil)
        #expect(try await !CompactionTests.baselines(d, d.stores[1]).isEmpty)
        // A new device starts from it, and has every note.
        let fresh = try await d.add()
        try await fresh.sync()
        #expect(try await d.count("SELECT COUNT(*) FROM Note", on: 2) == 4)
    }

    /// A device (a seeding one, say) whose logs are all gone from the
    /// container, and whose files are gone too, left its saves in the
    /// baseline it published: a device that never applied them takes them
    /// from there, though no gap shows (no log of that device is listed).
    @Test func theSavesOfADeviceWhoseLogsAreAllGoneComeFromItsBaseline() async throws {
        let d = try await TestDevices(3, schema: CompactionTests.schema)
        try await d.stores[2].write { tx in tx.insert("Note", ["title": .string("from 3")]) }
        try await d.stores[2].sync()
        try await d.stores[1].sync()
        let gone = d.stores[0]
        // A seeding device: its baseline holds its own saves alone.
        for i in 0..<3 { try await gone.write { tx in tx.insert("Note", ["title": .string("only in its baseline \(i)")]) } }
        _ = try await gone.publishBaseline(partBytes: 1024)
        try await gone.close()
        for blob in try await d.container.listAll(prefix: ContainerLayout.logPrefix(store: gone.storeID, device: gone.deviceID)) {
            try await d.container.delete(blob.name)
        }
        // Looked for at most once per baseline wait (60 s).
        d.clock.advance(byMilliseconds: 61_000)
        let report = try await d.stores[1].sync()
        #expect(report.imported.failures.isEmpty)
        #expect(try await d.count("SELECT COUNT(*) FROM Note WHERE title LIKE 'only in its baseline %'", on: 1) == 3)
        #expect(try await d.count("SELECT COUNT(*) FROM Note", on: 1) == 4)
    }

    @Test func aGapNoMarkerExplainsIsHealedFromABaselineOnceItHasLasted() async throws {
        let d = try await TestDevices(3, schema: CompactionTests.schema)
        try await d.stores[0].write { tx in tx.insert("Note", ["title": .string("first")]) }
        try await d.syncAll()
        for i in 0..<4 {
            try await d.stores[0].write { tx in tx.insert("Note", ["title": .string("later \(i)")]) }
            try await d.stores[0].sync()
        }
        try await d.stores[1].sync()
        _ = try await d.stores[1].publishBaseline(partBytes: 1024)
        // Device 1's later logs but the last are lost, and device 1 is gone
        // for good: nobody puts them back.
        try await d.stores[0].close()
        let logs = try await CompactionTests.logs(d, d.stores[0]).filter { $0.device == d.stores[0].deviceID }.sorted { $0.first < $1.first }
        for log in logs.dropFirst().dropLast() {
            try await d.container.delete(ContainerLayout.log(store: d.stores[1].storeID, device: log.device, first: log.first, last: log.last))
        }
        // Device 3 meets the gap, waits for it to fill, then takes the baseline.
        let first = try await d.stores[2].sync()
        #expect(!first.imported.gaps.isEmpty)
        d.clock.advance(byMilliseconds: 61_000)
        let healed = try await d.stores[2].sync()
        #expect(healed.imported.gaps.isEmpty)
        #expect(try await d.count("SELECT COUNT(*) FROM Note WHERE title LIKE 'later %'", on: 2) == 4)
        #expect(try await d.stores[1].stateHash() == d.stores[2].stateHash())
    }
}

/// Markers others may write, and compactions at the same moment.
@Suite struct CompactionMarkerTests {
    @Test func anUnreadableCompactionMarkerStopsNobodyAndIsWrittenAgain() async throws {
        let d = try await TestDevices(2, schema: CompactionTests.schema)
        var rng = SeededRandom(seed: 21)
        try await BaselineTests.randomSaves(d, &rng, rounds: 6)
        try await d.syncAll()
        _ = try await d.stores[0].publishBaseline(partBytes: 1024)
        try await d.syncAll()
        #expect(try await d.stores[1].compact().removedLogs > 0)
        try await d.syncAll()
        let name = ContainerLayout.compaction(store: d.stores[0].storeID)
        for garbage in ["", "not json", #"{"baseline": "x", "device": "nope", "milliseconds": -1, "vector": {}}"#] {
            let marker = try #require(try await d.container.readMarker(name))
            _ = try await d.container.replaceMarker(name, Array(garbage.utf8), expected: marker.version)
            d.clock.advance(byMilliseconds: 601_000)
            try await BaselineTests.randomSaves(d, &rng, rounds: 2)
            // Every device syncs; one that holds what the marker covered writes it again.
            for store in d.stores {
                let report = try await store.sync()
                #expect(report.imported.failures.isEmpty)
            }
            let rewritten = try await d.container.readMarker(name, as: CompactionHorizon.self)
            #expect(rewritten != nil, "after \(garbage.isEmpty ? "an empty marker" : garbage)")
        }
        try await d.syncAll()
        #expect(try await d.hashes().count == 1)
    }

    @Test func twoCompactionsAtOnceBothEndWell() async throws {
        let d = try await TestDevices(3, schema: CompactionTests.schema)
        var rng = SeededRandom(seed: 23)
        try await BaselineTests.randomSaves(d, &rng, rounds: 6)
        try await d.syncAll()
        _ = try await d.stores[0].publishBaseline(partBytes: 1024)
        try await d.syncAll()
        let (a, b) = (d.stores[1], d.stores[2])
        async let first = a.compact()
        async let second = b.compact()
        let reports = try await [first, second]
        #expect(reports.allSatisfy { $0.baseline != nil })
        #expect(reports.map(\.removedLogs).reduce(0, +) > 0)
        try await BaselineTests.randomSaves(d, &rng, rounds: 2)
        try await d.add()
        try await d.syncAll()
        #expect(try await d.hashes().count == 1)
    }

    @Test func theHealthRecordFollowsABoundedNumberOfLogs() {
        var followed: [String: UInt64] = [:]
        for i in 0..<1_000 { followed["log \(i)"] = UInt64(10_000 - i) }
        let kept = StoreManager.bounded(followed)
        #expect(kept.count == StoreManager.followedLogsLimit)
        // The ones followed longest stay: they are the ones a verdict waits on.
        #expect(kept.values.max()! < followed.values.sorted()[StoreManager.followedLogsLimit])
        #expect(StoreManager.bounded(["a": 1]) == ["a": 1])
    }
}
