import ChronicleCore
import Foundation
import GRDB

extension Snapshot {
    /// What applying a log did.
    public enum ApplyOutcome: Sendable, Hashable {
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
    public func apply(_ log: VerifiedLog, name: String) throws -> ApplyOutcome {
        let header = log.header
        guard header.storeID == storeID else {
            throw ChronicleError(.storeMismatch, "log \(name) belongs to store \(header.storeID), this snapshot to \(storeID)")
        }
        guard header.kind == .transactions else {
            throw ChronicleError(.misuse, "apply takes transaction logs; \(name) is a \(header.kind)")
        }
        do {
            return try pool.write { db in
                let applied = try appliedSequence(db, header.deviceID)
                if header.lastSequence <= applied { return .alreadyApplied }
                if header.firstSequence > applied + 1 { return .gap(expected: applied + 1, found: header.firstSequence) }
                var visitor = ApplyVisitor(engine: MergeEngine(db: db, schema: schema, sql: entitySQL, origin: .imported),
                                           device: header.deviceID, skipThrough: applied)
                try log.walk(&visitor)
                try visitor.engine.settle()
                try setApplied(db, header.deviceID, sequence: header.lastSequence, clock: header.maxClock)
                let hlc = try Int64.fetchOne(db, sql: "SELECT value FROM _chronicle_identity WHERE key = 'hlc'") ?? 0
                if header.maxClock.rawValue > UInt64(bitPattern: hlc) {
                    try db.execute(sql: "UPDATE _chronicle_identity SET value = ? WHERE key = 'hlc'", arguments: [Int64(bitPattern: header.maxClock.rawValue)])
                }
                try db.execute(sql: "INSERT OR REPLACE INTO _chronicle_ledger (name, device, first, last, bytes) VALUES (?, ?, ?, ?, ?)",
                               arguments: [name, header.deviceID.rawValue, Int64(header.firstSequence), Int64(header.lastSequence), header.totalLength])
                try db.execute(sql: "DELETE FROM _chronicle_failures WHERE name = ?", arguments: [name])
                try crashInjector?.check(.importBeforeCommit)
                return .applied(transactions: visitor.transactions, events: visitor.engine.events)
            }
        } catch let error as ChronicleError {
            throw error
        } catch {
            throw ChronicleError(.applyFailed, "applying \(name) failed; nothing was applied: \(error)")
        }
    }

    /// Records that importing `name` failed, for `chronicle inspect` and the
    /// health monitor. Returns how many times it has failed.
    @discardableResult
    public func recordFailure(name: String, error: ChronicleError) throws -> Int {
        try pool.write { db in
            try db.execute(sql: """
                INSERT INTO _chronicle_failures (name, code, message, attempts) VALUES (?, ?, ?, 1)
                ON CONFLICT(name) DO UPDATE SET code = excluded.code, message = excluded.message, attempts = attempts + 1
                """, arguments: [name, error.code.name, error.message])
            return try Int.fetchOne(db, sql: "SELECT attempts FROM _chronicle_failures WHERE name = ?", arguments: [name]) ?? 1
        }
    }

    /// Logs whose import failed, with the last error and the attempt count.
    public func failures() throws -> [(name: String, code: String, message: String, attempts: Int)] {
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
        values.removeAll(keepingCapacity: true)
    }

    mutating func value(field: Int?, fieldName: @autoclosure () -> String, _ raw: RawValue) {
        if !skipping { values.append((field ?? 0, raw.value)) }
    }

    mutating func endChange() throws(ChronicleError) {
        guard !skipping else { return }
        do {
            try engine.apply(kind, entity: entity, id: recordID, values: values, version: version)
        } catch let error as ChronicleError {
            throw error
        } catch {
            throw ChronicleError(.applyFailed, "applying a change to \(recordID) failed: \(error)")
        }
    }
}
