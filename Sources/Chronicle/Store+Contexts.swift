import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB

/// What a store keeps of its contexts.
struct ContextRegistry {
    /// Held until the store closes (the context holds the store too).
    var main: StoreContext?
    var contexts: UInt64 = 0
}

extension Store {
    /// The store's main context: the read side for UI code (see
    /// ``StoreContext``): always the same one, so that its options (``StoreContext/isReadOnly``,
    /// ``StoreContext/mergePolicy``) hold for the store's life. Its merge
    /// policy is ``MergePolicy/storeTrumps``.
    public nonisolated var mainContext: StoreContext {
        if let main = contexts.withLock({ $0.main }) { return main }
        let created = StoreContext(kind: .main, store: self, parent: nil, mergePolicy: .storeTrumps, seed: nextContextSeed())
        // A closed store's context only reports that it is closed.
        if isClosed { return created }
        return contexts.withLock { registry in
            if let main = registry.main { return main }
            registry.main = created
            return created
        }
    }

    /// A new background (importer) context: for imports and other work off
    /// the UI. Its saves go through the store's writer and reach the main
    /// context as they commit.
    ///
    /// - Parameter mergePolicy: by default the context's values win, per attribute.
    public nonisolated func newBackgroundContext(mergePolicy: MergePolicy = .memoryTrumps) -> StoreContext {
        StoreContext(kind: .background, store: self, parent: nil, mergePolicy: mergePolicy, seed: nextContextSeed())
    }

    /// A seed for a new context's record IDs, drawn from the store's seed.
    nonisolated func nextContextSeed() -> UInt64 {
        let n = contexts.withLock { registry in
            registry.contexts += 1
            return registry.contexts
        }
        var random = SeededRandom(seed: configuration.seed ^ 0xC0_17E7_0000 ^ n)
        return random.next()
    }

    // MARK: What contexts need of the store

    /// Calls `body` with the record events of every save and import as it
    /// commits, on the task that committed it. Returns a token for
    /// ``stopListening(_:)``.
    package nonisolated func listen(_ body: @escaping @Sendable ([RecordEvent]) -> Void) -> UInt64 {
        hub.listen(body)
    }

    package nonisolated func stopListening(_ token: UInt64) {
        hub.stopListening(token)
    }

    /// A record's committed values, or nil.
    nonisolated func storedValues(_ key: RecordReference) async throws -> [String: Value]? {
        try await values(of: key.entity, id: key.id)
    }

    /// The committed values of `keys` that exist, read at once.
    nonisolated func storedValuesNow(_ keys: [RecordReference]) throws -> [RecordReference: [String: Value]] {
        let schema = configuration.schema
        return try reader.read { db in
            var rows: [RecordReference: [String: Value]] = [:]
            for (name, group) in Dictionary(grouping: keys, by: \.entity) {
                guard let entity = schema.entity(named: name) else { continue }
                for (id, values) in try Store.records(db, of: entity, where: "id", in: group.map(\.id.databaseValue)) {
                    rows[RecordReference(entity.name, id)] = values
                }
            }
            return rows
        }
    }

    /// The records of `entity` whose `column` holds one of `values`, read on
    /// `db` in chunks small enough for SQLite's limit on arguments.
    static func records(_ db: Database, of entity: Entity, where column: String, in values: [DatabaseValue]) throws -> [(RecordID, [String: Value])] {
        var found: [(RecordID, [String: Value])] = []
        for start in stride(from: 0, to: values.count, by: 500) {
            let chunk = values[start..<min(start + 500, values.count)]
            let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
            let sql = "SELECT * FROM \(entity.name.quotedDatabaseIdentifier) WHERE \(column.quotedDatabaseIdentifier) IN (\(marks))"
            for row in try Row.fetchAll(db, sql: sql, arguments: StatementArguments(Array(chunk))) {
                guard let id = RecordID.fromDatabaseValue(row["id"]) else { continue }
                found.append((id, try Store.values(row, entity: entity)))
            }
        }
        return found
    }

    /// Saves a context's changes as one transaction: each record settled
    /// over what is stored now by `policy`, all or nothing. Returns the
    /// records as stored after it.
    func saveContext(_ pending: [StoreContext.Pending], policy: MergePolicy) throws -> StoreContext.Outcome {
        let schema = configuration.schema
        var rows: [RecordReference: [String: Value]] = [:]
        // Compared and saved in one SQLite transaction: nothing (a sync's
        // import included) commits between the comparison and the save.
        let (counts, _) = try writeAtomically({ tx, _ -> (Int, [MergeConflict]) in
            var refused: [MergeConflict] = []
            var resolved: [MergeConflict] = []
            var saved = 0
            for item in pending {
                let current = try tx.currentRow(item.key.entity, item.key.id)
                let resolution = StoreContext.resolve(item.key, item.entry, current: current, policy: policy)
                if resolution.refused, let conflict = resolution.conflict {
                    refused.append(conflict)
                    continue
                }
                if let conflict = resolution.conflict { resolved.append(conflict) }
                switch resolution.write {
                case .insert(let values):
                    tx.insert(item.key.entity, values, id: item.key.id)
                case .update(let values) where !values.isEmpty:
                    tx.update(item.key.entity, id: item.key.id, values)
                case .delete:
                    tx.delete(item.key.entity, id: item.key.id)
                case .update, nil:
                    continue
                }
                saved += 1
            }
            if !refused.isEmpty { throw StoreContext.refusal(refused) }
            return (saved, resolved)
        }, finish: { db in
            // The records as this save leaves them: the contexts' new base.
            for item in pending {
                if let row = try Store.row(db, schema: schema, entity: item.key.entity, id: item.key.id) { rows[item.key] = row }
            }
        })
        if counts.0 == 0 {
            // Nothing was written: the records as they are now.
            rows = try storedValuesNow(pending.map(\.key))
        }
        return StoreContext.Outcome(saved: counts.0, resolved: counts.1, rows: rows)
    }
}
