import CSQLite
import ChronicleCore
import Foundation
import GRDB

extension Snapshot {
    /// What applying a log did.
    package enum ApplyOutcome: Sendable, Hashable {
        /// The log's new transactions were applied.
        case applied(transactions: Int, events: [RecordEvent])
        /// Everything in it was already applied.
        case alreadyApplied
        /// It starts after a sequence not yet applied: an earlier log is missing.
        case gap(expected: UInt64, found: UInt64)
    }

    /// Applies a verified transactions log: its transactions after the ones
    /// already applied, the sequence vector and the ledger, in one SQLite
    /// transaction. Applying it again changes nothing.
    ///
    /// - Throws: ``ChronicleError/Code/storeMismatch`` for a log of another
    ///   store; ``ChronicleError/Code/applyFailed`` if it cannot be applied
    ///   (nothing is then written).
    package func apply(_ log: VerifiedLog, name: String) throws -> ApplyOutcome {
        let result = try apply([(log, name)])
        if let failure = result.failure { throw failure.error }
        return result.outcomes[0]
    }

    /// What applying a batch of logs did.
    package struct BatchOutcome: Sendable {
        /// The outcome of each log applied, in order.
        package var outcomes: [ApplyOutcome]
        /// The log that failed, if one did; it and the logs after it were not applied.
        package var failure: (index: Int, error: ChronicleError)?
    }

    /// Applies logs in order in one SQLite transaction, each inside its own
    /// savepoint, so every log is still all or nothing: a log that fails is
    /// rolled back alone, the logs before it are kept, and the batch stops
    /// there (as it does at a gap). One commit for many logs is what makes a
    /// replay of thousands of small logs fast.
    ///
    /// - Throws: only if the transaction itself cannot be committed (nothing
    ///   is then applied) or a simulated crash was injected.
    ///
    /// A log named in `whole` is applied whole even where it starts at or
    /// before the sequence its device has applied: another copy of that
    /// device's files cut its saves into other logs, or made other saves
    /// under those sequences, and the merge takes in what differs (what is
    /// the same changes nothing).
    package func apply(_ logs: [(log: VerifiedLog, name: String)], whole: Set<String> = []) throws -> BatchOutcome {
        var result = BatchOutcome(outcomes: [], failure: nil)
        guard !logs.isEmpty else { return result }
        do {
            try write(logs, whole: whole, into: &result)
        } catch {
            // The transaction itself failed (a full disk, an I/O error at
            // commit): SQLite rolled all of it back. When a log's failure
            // made SQLite abort the whole transaction (a full disk does),
            // GRDB reports the abort: the log's failure is the cause.
            let what = "applying \(logs.count) logs from \(logs[0].name) failed; none of them was applied"
            if let cause = result.failure?.error, (error as? DatabaseError)?.resultCode == .SQLITE_ABORT {
                throw ChronicleError(cause.code, "\(what): \(cause.message)", underlying: cause)
            }
            throw ChronicleError.sqlite(error, .applyFailed, what)
        }
        return result
    }

    /// The largest log body (uncompressed) whose savepoint keeps the pages
    /// it changes in memory (see ``write(_:whole:into:)``).
    static let inMemorySavepointBodyBytes = 256 << 10

    private func write(_ logs: [(log: VerifiedLog, name: String)], whole: Set<String>, into result: inout BatchOutcome) throws {
        // A savepoint keeps the earlier version of every page its log
        // changes, to roll the log back alone. SQLite keeps that in memory
        // up to 64 KiB and in a temporary file past it, which a log of a
        // hundred changes of a large store passes: each log then wrote its
        // pages to that file, a fifth of a replay's time. In memory, the
        // copy is dropped when the log's savepoint is released, so it holds
        // one log's pages at most: kept there for logs up to 256 KiB
        // (thousands of changes); a batch holding a larger one keeps the
        // file, so that no log can make the process hold a large part of
        // the store in memory.
        // Only for the batch: the setting also keeps SQLite's other
        // temporary data in memory (the sorts of an index built when a
        // store upgrades, say), which must not be.
        let inMemory = logs.allSatisfy { $0.log.body.count <= Self.inMemorySavepointBodyBytes }
        try pool.writeWithoutTransaction { db in
            if inMemory { try db.execute(sql: "PRAGMA temp_store = MEMORY") }
            defer {
                // Outside a transaction, as here, the setting cannot fail
                // to change back.
                if inMemory { try? db.execute(sql: "PRAGMA temp_store = DEFAULT") }
            }
            try db.inTransaction {
                try write(logs, whole: whole, into: &result, db)
                return .commit
            }
        }
    }

    private func write(_ logs: [(log: VerifiedLog, name: String)], whole: Set<String>, into result: inout BatchOutcome, _ db: Database) throws {
        for (index, (log, name)) in logs.enumerated() {
            do {
                var outcome = ApplyOutcome.alreadyApplied
                try db.inSavepoint {
                    outcome = try applyOne(log, name: name, whole: whole.contains(name), db)
                    return .commit
                }
                result.outcomes.append(outcome)
                if case .gap = outcome { break }
            } catch {
                result.failure = (index, ChronicleError.sqlite(error, .applyFailed, "applying \(name) failed; nothing of it was applied"))
                break
            }
        }
        let events = result.outcomes.flatMap { outcome -> [RecordEvent] in
            if case .applied(_, let events) = outcome { events } else { [] }
        }
        try notifyObservers(of: events, db)
        if result.outcomes.contains(where: { if case .applied = $0 { true } else { false } }) {
            try crashInjector?.check(.importBeforeCommit)
        }
    }

    private func applyOne(_ log: VerifiedLog, name: String, whole: Bool = false, _ db: Database) throws -> ApplyOutcome {
        let header = log.header
        guard header.storeID == storeID else {
            throw ChronicleError(.storeMismatch, "log \(name) belongs to store \(header.storeID), this snapshot to \(storeID)")
        }
        guard header.kind == .transactions else {
            throw ChronicleError(.malformedBody, "\(name) holds a \(header.kind) log where a transactions log belongs")
        }
        let applied = try appliedSequence(db, header.deviceID)
        if header.lastSequence <= applied { return .alreadyApplied }
        if header.firstSequence > applied + 1 { return .gap(expected: applied + 1, found: header.firstSequence) }
        var visitor = ApplyVisitor(engine: MergeEngine(db: db, schema: schema, sql: entitySQL, origin: .imported),
                                   device: header.deviceID, skipThrough: whole ? min(applied, header.firstSequence &- 1) : applied)
        try log.walk(&visitor)
        try visitor.engine.settle()
        try setApplied(db, header.deviceID, sequence: header.lastSequence, clock: header.maxClock)
        // Per-log bookkeeping, bound through the C API like the merge
        // engine's statements: GRDB's arguments cost more than these writes.
        let adopted = header.maxClock.adoptable
        if adopted > (try storedClock(db)) {
            try db.run(db.cachedStatement(sql: "UPDATE _chronicle_identity SET value = ?1 WHERE key = 'hlc'").sqliteStatement) {
                $0.bind(Int64(bitPattern: adopted.rawValue))
            }
        }
        try db.run(db.cachedStatement(sql: "INSERT OR REPLACE INTO _chronicle_ledger (name, device, first, last, bytes, checksum) VALUES (?, ?, ?, ?, ?, ?)").sqliteStatement) {
            $0.bind(name); $0.bind(header.deviceID.rawValue)
            $0.bind(Int64(header.firstSequence)); $0.bind(Int64(header.lastSequence)); $0.bind(log.storedLength)
            $0.bind(Int64(bitPattern: log.storedChecksum))
        }
        try db.run(db.cachedStatement(sql: "DELETE FROM _chronicle_failures WHERE name = ?").sqliteStatement) { $0.bind(name) }
        return .applied(transactions: visitor.transactions, events: visitor.engine.events)
    }

    /// A log this snapshot applied, as its ledger keeps it.
    package struct AppliedLog: Sendable, Hashable {
        /// The log's name in the container.
        package var name: String
        /// The device that wrote it, and the sequences it held.
        package var device: DeviceID
        package var first: UInt64
        package var last: UInt64
        /// The blob's length and body checksum as applied (nil: applied
        /// before the ledger kept checksums).
        package var bytes: Int
        package var checksum: UInt64?
    }

    /// The logs of other devices this snapshot applied (its ledger) whose
    /// names sort after `after` and up to `through` (nil: no bound), in
    /// name order.
    package func appliedLogs(after: String?, through: String?) throws -> [AppliedLog] {
        do {
            return try pool.read { db in
                try Row.fetchAll(db, sql: """
                    SELECT name, device, first, last, bytes, checksum FROM _chronicle_ledger
                    WHERE device <> ? AND name > ? AND (? IS NULL OR name <= ?) ORDER BY name
                    """, arguments: [deviceID.rawValue, after ?? "", through, through])
                    .map { row in
                        AppliedLog(name: row[0], device: DeviceID(row[1] as RecordID), first: UInt64(row[2] as Int64), last: UInt64(row[3] as Int64),
                                   bytes: row[4], checksum: (row[5] as Int64?).map { UInt64(bitPattern: $0) })
                    }
            }
        } catch {
            throw ChronicleError.sqlite(error, .database, "reading the snapshot's applied logs failed")
        }
    }

    /// Records that importing `name` failed, for `chronicle inspect` and the
    /// health monitor. Returns how many times it has failed.
    @discardableResult
    package func recordFailure(name: String, error: ChronicleError) throws -> Int {
        try pool.write { db in
            try db.execute(sql: """
                INSERT INTO _chronicle_failures (name, code, message, attempts) VALUES (?, ?, ?, 1)
                ON CONFLICT(name) DO UPDATE SET code = excluded.code, message = excluded.message, attempts = attempts + 1
                """, arguments: [name, error.code.name, error.message])
            return try Int.fetchOne(db, sql: "SELECT attempts FROM _chronicle_failures WHERE name = ?", arguments: [name]) ?? 1
        }
    }

    /// Logs whose import failed, with the last error and the attempt count.
    package func failures() throws -> [(name: String, code: String, message: String, attempts: Int)] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT name, code, message, attempts FROM _chronicle_failures ORDER BY name").map {
                ($0[0], $0[1], $0[2], $0[3])
            }
        }
    }
}

/// Feeds a walked log into the merge engine.
private struct ApplyVisitor: LogVisitor {
    var engine: MergeEngine
    let device: DeviceID
    let skipThrough: UInt64
    var transactions = 0
    private var skipping = false
    private var version = Version(clock: .zero, device: DeviceID(index: 0))
    private var kind = ChangeKind.insert
    private var entity = 0
    private var recordID = RecordID(high: 0, low: 0)
    private var raw: [(field: Int, value: RawValue)] = []
    private var values: [(field: Int, value: Value)] = []

    init(engine: MergeEngine, device: DeviceID, skipThrough: UInt64) {
        self.engine = engine
        self.device = device
        self.skipThrough = skipThrough
    }

    mutating func beginTransaction(sequence: UInt64, clock: HybridTimestamp, changeCount: Int) {
        skipping = sequence <= skipThrough
        if !skipping { transactions += 1 }
        version = Version(clock: clock, device: device)
    }

    mutating func beginChange(_ kind: ChangeKind, entity: Int?, entityName: @autoclosure () -> String, recordID: RecordID, valueCount: Int) {
        self.kind = kind
        self.entity = entity ?? 0
        self.recordID = recordID
        raw.removeAll(keepingCapacity: true)
    }

    mutating func value(field: Int?, fieldName: @autoclosure () -> String, _ raw: RawValue) {
        // A verified log names only fields the schema has.
        if !skipping { self.raw.append((field ?? 0, raw)) }
    }

    mutating func endChange() throws(ChronicleError) {
        guard !skipping else { return }
        do {
            if kind == .insert, try engine.insertCompact(entity: entity, id: recordID, raw: raw, version: version) { return }
            values.removeAll(keepingCapacity: true)
            for v in raw { values.append((v.field, v.value.value)) }
            try engine.apply(kind, entity: entity, id: recordID, values: values, version: version)
        } catch {
            throw ChronicleError.sqlite(error, .applyFailed, "applying a change to \(recordID) failed")
        }
    }
}
