import ChronicleContainer
import ChronicleCore
import Foundation
import GRDB

extension Snapshot {
    /// The saves to upload next, as one log.
    package struct UploadPlan: Sendable, Hashable {
        /// The first sequence in the log.
        package var first: UInt64
        /// The last sequence.
        package var last: UInt64
        /// The pre-encoded transactions.
        package var transactions: [LogEncoder.EncodedTransaction]
    }

    /// The next group of saved-but-not-uploaded transactions, at most
    /// `maxTransactions` or about `maxBytes` of body.
    ///
    /// The grouping is recorded before it is returned, so a retry after a
    /// crash uploads the same log under the same name with the same bytes:
    /// no two logs ever overlap.
    package func nextUpload(maxTransactions: Int = 256, maxBytes: Int = 4 << 20) throws -> UploadPlan? {
        try pool.write { db in
            var rows = try Row.fetchAll(db, sql: """
                SELECT sequence, clock, body, schema_hash FROM _chronicle_outbox
                WHERE uploaded = 0 AND log_first IS NOT NULL
                AND log_first = (SELECT MIN(log_first) FROM _chronicle_outbox WHERE uploaded = 0 AND log_first IS NOT NULL)
                ORDER BY sequence
                """)
            if rows.isEmpty {
                rows = []
                var bytes = 0
                let cursor = try Row.fetchCursor(db, sql: "SELECT sequence, clock, body, schema_hash FROM _chronicle_outbox WHERE uploaded = 0 ORDER BY sequence")
                while let row = try cursor.next(), rows.count < maxTransactions, rows.isEmpty || bytes + (row[2] as Data).count <= maxBytes {
                    bytes += (row[2] as Data).count
                    rows.append(row.copy())
                }
                guard let first = rows.first, let last = rows.last else { return nil }
                try db.execute(sql: "UPDATE _chronicle_outbox SET log_first = ?, log_last = ? WHERE sequence BETWEEN ? AND ?",
                               arguments: [first[0] as Int64, last[0] as Int64, first[0] as Int64, last[0] as Int64])
            }
            let transactions = rows.map(Self.encoded)
            return UploadPlan(first: transactions.first!.sequence, last: transactions.last!.sequence, transactions: transactions)
        }
    }

    /// An outbox (or kept) row, `sequence, clock, body[, schema_hash]`, as
    /// an encoded transaction.
    static func encoded(_ row: Row) -> LogEncoder.EncodedTransaction {
        LogEncoder.EncodedTransaction(sequence: UInt64(row[0] as Int64), clock: HybridTimestamp(rawValue: UInt64(bitPattern: row[1] as Int64)),
                                      body: [UInt8](row[2] as Data),
                                      schemaHash: row.count > 3 ? (row[3] as Int64?).map { UInt64(bitPattern: $0) } : nil)
    }

    /// Marks a planned log as stored in the container, at `milliseconds`
    /// (this device's clock, since 1970).
    package func markUploaded(_ plan: UploadPlan, at milliseconds: UInt64) throws {
        try pool.write { db in
            try db.execute(sql: "UPDATE _chronicle_outbox SET uploaded = 1, uploaded_at = ? WHERE sequence BETWEEN ? AND ?",
                           arguments: [Int64(clamping: milliseconds), Int64(plan.first), Int64(plan.last)])
        }
    }

    /// This device's saves it uploaded at or after `milliseconds` (by its
    /// clock). A store deleted on purpose never held them if the deletion
    /// came first: a device that did not see the tombstone (a sync service
    /// lost it for a while) uploaded them into a store already deleted.
    package func ownTransactions(uploadedSince milliseconds: UInt64) throws -> [Transaction] {
        let encoded = try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT sequence, clock, body, schema_hash FROM _chronicle_outbox WHERE uploaded_at >= ? AND length(body) > 0 ORDER BY sequence",
                             arguments: [Int64(clamping: milliseconds)]).map(Self.encoded)
        }
        return try transactions(encoded, device: deviceID)
    }

    /// The outbox rows ``pruneOutbox(through:)`` empties (one argument: the sequence).
    private static let prunableBodies = "uploaded = 1 AND log_last IS NOT NULL AND log_last <= ? AND length(body) > 0"

    /// Whether ``pruneOutbox(through:)`` would drop anything.
    package func hasPrunableOutboxBodies(through sequence: UInt64) throws -> Bool {
        guard sequence > 0 else { return false }
        return try pool.read { db in
            try Bool.fetchOne(db, sql: "SELECT 1 FROM _chronicle_outbox WHERE \(Self.prunableBodies) LIMIT 1", arguments: [Int64(clamping: sequence)]) ?? false
        }
    }

    /// Drops the bodies of this device's uploaded saves through sequence
    /// `sequence`, which a compaction covers: the container removed their
    /// logs for a baseline that holds them, nothing puts those logs back,
    /// and a move to a new ID passes over them. Each save keeps its row
    /// (its clock says which save the compaction covered). So the outbox,
    /// like the container, holds the saves after the newest compaction.
    ///
    /// - Returns: how many bodies went, and their bytes.
    @discardableResult
    package func pruneOutbox(through sequence: UInt64) throws -> (saves: Int, bytes: Int) {
        guard sequence > 0 else { return (0, 0) }
        let covered = Self.prunableBodies
        do {
            return try pool.write { db in
                let bound = Int64(clamping: sequence)
                let row = try Row.fetchOne(db, sql: "SELECT COUNT(*), COALESCE(SUM(length(body)), 0) FROM _chronicle_outbox WHERE \(covered)",
                                           arguments: [bound])
                let saves: Int = row?[0] ?? 0
                guard saves > 0 else { return (0, 0) }
                try db.execute(sql: "UPDATE _chronicle_outbox SET body = x'' WHERE \(covered)", arguments: [bound])
                return (saves, row?[1] ?? 0)
            }
        } catch let error as ChronicleError {
            throw error
        } catch {
            throw ChronicleError.sqlite(error, .database, "dropping the outbox's compacted bodies failed")
        }
    }

    /// Notes that this device is putting back its log (or an earlier ID's)
    /// at `name`, at `milliseconds` (this device's clock). Noted before the
    /// put: a device leaving a store deleted on purpose carries the saves
    /// of every log it put back after the deletion (the store did not hold
    /// them then), and a crash must not let it forget one.
    package func notePutBack(_ name: ContainerName, at milliseconds: UInt64) throws {
        try pool.write { db in
            try db.execute(sql: "CREATE TABLE IF NOT EXISTS _chronicle_put_back (name TEXT PRIMARY KEY NOT NULL, milliseconds INTEGER NOT NULL) WITHOUT ROWID")
            try db.execute(sql: "INSERT OR REPLACE INTO _chronicle_put_back (name, milliseconds) VALUES (?, ?)",
                           arguments: [name.rawValue, Int64(clamping: milliseconds)])
        }
    }

    /// The logs this device put back at or after `milliseconds` (see
    /// ``notePutBack(_:at:)``).
    package func logsPutBack(since milliseconds: UInt64) throws -> [ContainerName] {
        try pool.read { db in
            guard try db.tableExists("_chronicle_put_back") else { return [] }
            return try String.fetchAll(db, sql: "SELECT name FROM _chronicle_put_back WHERE milliseconds >= ? ORDER BY name",
                                       arguments: [Int64(clamping: milliseconds)]).compactMap { try? ContainerName($0) }
        }
    }

    /// Adds the column that keeps when each save was uploaded to an outbox
    /// made before it existed.
    static func addUploadedAtColumn(_ db: Database) throws {
        guard try db.tableExists("_chronicle_outbox"), !(try db.columns(in: "_chronicle_outbox").contains { $0.name == "uploaded_at" }) else { return }
        try db.execute(sql: "ALTER TABLE _chronicle_outbox ADD COLUMN uploaded_at INTEGER")
    }

    /// The outbox's transactions `first...last`, or nil if any is missing.
    package func outboxTransactions(first: UInt64, last: UInt64) throws -> [LogEncoder.EncodedTransaction]? {
        let rows = try outboxTransactions(presentIn: first, last)
        return rows.count == Int(last - first + 1) ? rows : nil
    }

    /// The outbox's bodies with sequences in `first...last`, in order,
    /// whichever of them it holds.
    package func outboxTransactions(presentIn first: UInt64, _ last: UInt64) throws -> [LogEncoder.EncodedTransaction] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT sequence, clock, body, schema_hash FROM _chronicle_outbox WHERE sequence BETWEEN ? AND ? AND length(body) > 0 ORDER BY sequence",
                             arguments: [Int64(first), Int64(last)]).map(Self.encoded)
        }
    }

    /// This device's saves made at `clock` or later, uploaded or not, in order.
    package func ownTransactions(since clock: HybridTimestamp) throws -> [Transaction] {
        let encoded = try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT sequence, clock, body, schema_hash FROM _chronicle_outbox WHERE clock >= ? AND length(body) > 0 ORDER BY sequence",
                             arguments: [Int64(bitPattern: clock.rawValue)]).map(Self.encoded)
        }
        return try transactions(encoded, device: deviceID)
    }

    /// The sequence ranges of the logs the outbox has uploaded.
    package func uploadedGroups() throws -> [(UInt64, UInt64)] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT DISTINCT log_first, log_last FROM _chronicle_outbox WHERE uploaded = 1 AND log_first IS NOT NULL ORDER BY log_first")
                .map { (UInt64($0[0] as Int64), UInt64($0[1] as Int64)) }
        }
    }

    /// How many saves are not yet uploaded.
    package func pendingUploadCount() throws -> Int {
        try pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM _chronicle_outbox WHERE uploaded = 0") ?? 0 }
    }

    /// This device's saves that are not yet in the container, and those
    /// from sequence `from` on if it is given, decoded, in sequence order.
    public func pendingUploadTransactions(alsoFrom from: UInt64? = nil) throws -> [Transaction] {
        let encoded = try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT sequence, clock, body, schema_hash FROM _chronicle_outbox WHERE (uploaded = 0 OR sequence >= ?) AND length(body) > 0 ORDER BY sequence",
                             arguments: [from.map { Int64(bitPattern: $0) } ?? Int64.max]).map(Self.encoded)
        }
        return try transactions(encoded, device: deviceID)
    }

    /// The saves not yet uploaded that can still be read from a snapshot
    /// file SQLite reports damaged (its other pages may be whole): read
    /// through a read-only connection of its own, row by row where the
    /// whole table does not read. Empty if nothing reads.
    package static func salvagePendingUploads(at path: String, device: DeviceID, schema: Schema, earlier: [SchemaMigration] = [],
                                              storeID: StoreID) -> [Transaction] {
        var config = Configuration()
        config.readonly = true
        guard (try? requireRegularFiles(path)) != nil, let queue = try? DatabaseQueue(path: path, configuration: config) else { return [] }
        defer { try? queue.close() }
        // A snapshot made before the outbox kept each save's schema has no such column.
        let columns = (try? queue.read { db in try db.columns(in: "_chronicle_outbox").map(\.name) })?.contains("schema_hash") == true
            ? "sequence, clock, body, schema_hash" : "sequence, clock, body"
        let rows: [LogEncoder.EncodedTransaction]
        if let all = try? queue.read({ db in try Row.fetchAll(db, sql: "SELECT \(columns) FROM _chronicle_outbox WHERE uploaded = 0 ORDER BY sequence") }) {
            rows = all.map(Self.encoded)
        } else {
            // One by one: a damaged page loses its rows only.
            let sequences = (try? queue.read { db in try Int64.fetchAll(db, sql: "SELECT sequence FROM _chronicle_outbox WHERE uploaded = 0 ORDER BY sequence") }) ?? []
            rows = sequences.compactMap { sequence -> LogEncoder.EncodedTransaction? in
                let row = try? queue.read { db in
                    try Row.fetchOne(db, sql: "SELECT \(columns) FROM _chronicle_outbox WHERE sequence = ?", arguments: [sequence])
                }
                guard let found = row ?? nil else { return nil }
                return Self.encoded(found)
            }
        }
        // Each on its own: one that does not decode is left out, not the rest.
        return rows.flatMap { (try? transactions([$0], device: device, schema: schema, earlier: earlier, storeID: storeID)) ?? [] }
    }

    /// The sequence of this device's oldest save not yet in the container,
    /// or the next sequence if every save is there.
    public func firstPendingUploadSequence() throws -> UInt64 {
        try pool.read { db in
            UInt64(try Int64.fetchOne(db, sql: """
                SELECT COALESCE(MIN(sequence), (SELECT COALESCE(MAX(sequence), 0) + 1 FROM _chronicle_outbox))
                FROM _chronicle_outbox WHERE uploaded = 0
                """) ?? 1)
        }
    }
}
