import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB

/// Copies records from one store into another as ordinary saves of the
/// destination: the local store into the cloud store when the cloud is
/// turned on, the cloud store into the local store when it is left.
///
/// Records keep their IDs, which makes a copy idempotent: run again after an
/// interruption, it finds what it already copied. A record whose unique key
/// a visible record of the destination already has is not copied: references
/// to it point at the destination's record. References to records not yet
/// copied are set by updates once their targets exist, so a copy streams in
/// batches whatever the order of the schema's entities.
struct RecordCopy {
    /// What to do with a record the destination already holds.
    enum Existing {
        /// Keep the destination's version.
        case keep
        /// Give it the source's values.
        case overwrite
        /// Give it the source's value of each field the source wrote later
        /// than the destination did (the merge's own rule, per field): a
        /// store merged into another carries the edits it made after the
        /// destination got the record, and keeps the destination's newer
        /// ones. Needs a store source (its versions).
        case newer
    }

    let schema: Schema
    let batchSize: Int
    let existing: Existing
    /// Only these records (and the records they refer to that the
    /// destination lacks); nil for every record. A selected record the
    /// source no longer has is deleted from the destination when
    /// ``existing`` is ``Existing/overwrite``.
    var only: Set<RecordID>? = nil
    /// For records the destination holds, the fields to overwrite (with
    /// ``Existing/overwrite``); a record not named here gets every field
    /// that differs.
    var fields: [RecordID: Set<String>] = [:]
    /// The newest clock the source had seen, for a source of rows read
    /// earlier (a store source gives its own): the destination's clock moves
    /// past it first, so every copied value is newer than its original.
    var sourceClock: HybridTimestamp? = nil
    /// Selected records the source holds as duplicates merged into another
    /// record of the same unique key, and that record
    /// (``Snapshot/survivors(of:)``): the survivor is copied in their place
    /// (they are not deletions), and the report maps them to it.
    var survivors: [RecordID: RecordID] = [:]
    /// Writes of the source that are copies of the destination's own
    /// records (the source's saves with these clocks, made when the cloud
    /// store was migrated into it): ``Existing/newer`` never counts them as
    /// the source's edits. The destination had those values, or replaced
    /// them since (a delete or an edit made before the copy but uploaded
    /// after it), and a copy must not undo that.
    var copies: [ClosedRange<HybridTimestamp>] = []
    /// For a carry of selected records (``only``, ``Existing/overwrite``):
    /// the records among them the source deleted, each with the saves that
    /// make it, whole (``Snapshot/history(of:_:)``). One the destination
    /// does not know yet gets those saves, at their own clocks: another
    /// copy of the source's folder may bring the record there later
    /// (carrying its own copy, made before the delete), and the delete must
    /// win over it as it would in a sync.
    var deletedHistories: [RecordID: (entity: String, saves: [Transaction])] = [:]

    /// Where records come from: a store, or rows read from one earlier
    /// (``extract(from:only:)``), for a store that cannot stay open.
    enum Source: Sendable {
        case store(Store)
        case rows([RecordID: SourceRow])
    }

    /// A source record as read: its values, and the stored form of each of
    /// its unique keys' fields.
    struct SourceRow: Sendable {
        var entity: Int
        var id: RecordID
        var values: [String: Value]
        var keys: [[DatabaseValue]]
    }

    /// What the destination has of a source record.
    enum Found: Sendable {
        /// The destination has it, with these values.
        case present([String: Value])
        case deleted, absent
    }

    func run(from store: Store, into destination: Store) async throws -> StoreManager.MergeReport {
        try await run(from: .store(store), into: destination)
    }

    /// The rows of `only` (or, for a duplicate, of the record it was merged
    /// into: see ``survivors``) and of every record they refer to, transitively.
    static func extract(from store: Store, schema: Schema, only: Set<RecordID>) async throws -> [RecordID: SourceRow] {
        let copy = RecordCopy(schema: schema, batchSize: 1, existing: .keep, only: only)
        var result: [RecordID: SourceRow] = [:]
        var wanted = only.union(try store.snapshot.survivors(of: only).values)
        while !wanted.isEmpty {
            let rows = try await copy.read(.store(store), wanted: wanted, excluding: Set(result.keys))
            var next: Set<RecordID> = []
            for row in rows {
                result[row.id] = row
                for case .reference(let id) in row.values.values where result[id] == nil { next.insert(id) }
            }
            wanted = next.subtracting(result.keys)
        }
        return result
    }

    func run(from source: Source, into destination: Store) async throws -> StoreManager.MergeReport {
        var report = StoreManager.MergeReport()
        switch source {
        case .store(let store): try destination.snapshot.observe(try store.snapshot.latestClock())
        case .rows: if let sourceClock { try destination.snapshot.observe(sourceClock) }
        }
        // Which destination record stands for each source one: itself, or
        // the destination's record of the same unique key.
        var target: [RecordID: RecordID] = [:]
        // Destination records there before the copy; source records the destination deleted.
        var inDestination: Set<RecordID> = []
        var deleted: Set<RecordID> = []
        var inserts: [SourceRow] = []
        var updates: [(entity: String, id: RecordID, values: [String: Value])] = []
        // Records the destination holds but does not show, to which the
        // source wrote later (``Existing/newer``).
        var hidden: [(entity: String, id: RecordID, values: [String: Value])] = []
        // With ``Existing/newer``: the version of each field the source
        // wrote, to write it there with (see ``adopt(_:versions:into:report:)``).
        var sourceVersions: [RecordID: [String: Version]] = [:]
        // The source's deletes the destination lacks, first: the records it
        // deleted are not among those copied (see ``Snapshot/deletes(missingIn:)``),
        // and a key they held is free again for a record copied below.
        var deletes: [(entity: String, id: RecordID)] = []
        if existing == .newer, only == nil, case .store(let store) = source {
            let missing = try store.snapshot.deletes(missingIn: destination.snapshot,
                                                     mergedInto: try store.snapshot.merged(into: destination.snapshot.storeID))
            if !missing.original.isEmpty {
                _ = try destination.snapshot.adopt(missing.original)
                report.deleted += missing.original.reduce(0) { $0 + $1.changes.count }
                report.transactions += missing.original.count
            }
            try await Self.delete(missing.seen, from: destination, report: &report)
        }
        var survivors = self.survivors
        if case .store(let store) = source, let only { survivors.merge(try store.snapshot.survivors(of: only)) { a, _ in a } }
        var wanted = only.map { $0.union(survivors.values) }
        var seen: Set<RecordID> = []
        while true {
            let rows = try await read(source, wanted: wanted, excluding: seen)
            if rows.isEmpty { break }
            for row in rows { seen.insert(row.id) }
            // By ID only: the records copied under another ID (their
            // unique key's) are found once this copy's own updates and
            // deletes have moved keys away (below).
            let found = try await lookUp(rows, in: destination)
            for (row, found) in zip(rows, found) {
                switch found {
                case .present(let current):
                    target[row.id] = row.id
                    inDestination.insert(row.id)
                    report.alreadyPresent += 1
                    // Records brought along only because a selected one refers to them keep the destination's version.
                    if existing == .overwrite, only?.contains(row.id) ?? true {
                        // Only what differs: an unchanged field keeps its version.
                        let allowed = fields[row.id]
                        var changed = row.values.filter { name, value in
                            if let allowed, !allowed.contains(name) { return false }
                            if case .reference(let r) = value, case .reference(let c)? = current[name] { return r != c }
                            return current[name] != value
                        }
                        // In a carry of selected records (a device leaving
                        // a deleted store), a field the source wrote later
                        // with the value the destination already shows is
                        // carried too: the write's version, not only its
                        // value, decides later merges against other
                        // devices' writes.
                        if only != nil, case .store(let store) = source {
                            let entity = schema.entities[row.entity].name
                            let written = try store.snapshot.recordVersions(entity: entity, id: row.id)?.fields ?? [:]
                            let held = try destination.snapshot.recordVersions(entity: entity, id: row.id)?.fields ?? [:]
                            for (name, value) in row.values where changed[name] == nil && (allowed?.contains(name) ?? true) {
                                if let version = written[name], held[name].map({ $0 < version }) ?? true { changed[name] = value }
                            }
                        }
                        if !changed.isEmpty { updates.append((schema.entities[row.entity].name, row.id, changed)) }
                    } else if existing == .newer, case .store(let store) = source {
                        let changed = try newerFields(of: row, in: store, than: destination, visible: true, versions: &sourceVersions)
                        if !changed.isEmpty { updates.append((schema.entities[row.entity].name, row.id, changed)) }
                    }
                case .deleted:
                    report.alreadyPresent += 1
                    // The destination does not show it (deleted, or merged
                    // into a record of the same unique key), but the source
                    // wrote fields after that: as a sync would, those writes
                    // bring it back, or move it out of the key it shared.
                    if existing == .newer, case .store(let store) = source {
                        let changed = try newerFields(of: row, in: store, than: destination, visible: false, versions: &sourceVersions)
                        if !changed.isEmpty {
                            hidden.append((schema.entities[row.entity].name, row.id, changed))
                            continue
                        }
                    }
                    deleted.insert(row.id)
                case .absent:
                    target[row.id] = row.id
                    inserts.append(row)
                }
            }
            guard wanted != nil else { break }
            // A selection brings along what it refers to and the destination lacks.
            var next: Set<RecordID> = []
            for row in rows {
                for case .reference(let id) in row.values.values where !seen.contains(id) { next.insert(id) }
            }
            if next.isEmpty { break }
            wanted = next
        }
        // Inserts, with the references whose targets exist by then; the
        // rest as updates afterwards.
        var deferred: [(entity: String, id: RecordID, values: [String: Value])] = []
        func resolve(_ values: inout [String: Value], later: inout [String: Value], available: (RecordID) -> Bool) {
            for (name, value) in values {
                guard case .reference(let referenced) = value else { continue }
                guard let resolved = target[referenced], !deleted.contains(referenced) else {
                    // The destination deleted what it refers to (or the
                    // source holds a reference to nothing): the deletion stands.
                    if !inDestination.contains(referenced) { values[name] = Value.null }
                    continue
                }
                if available(resolved) {
                    values[name] = .reference(resolved)
                } else {
                    later[name] = .reference(resolved)
                    values[name] = Value.null
                }
            }
        }
        // Those first, so that the records copied next can refer to the
        // ones they bring back. A save refuses changes of records it does
        // not show, so each is kept as a sync keeps a change; references
        // to records not copied yet are set once they are.
        var hiddenLater: [(entity: String, id: RecordID, values: [String: Value])] = []
        var revivals: [(entity: String, id: RecordID, values: [String: Value])] = []
        for record in hidden {
            var values = record.values
            var later: [String: Value] = [:]
            resolve(&values, later: &later) { inDestination.contains($0) }
            revivals.append((record.entity, record.id, values))
            if !later.isEmpty { hiddenLater.append((record.entity, record.id, later)) }
        }
        try Self.adopt(revivals, versions: sourceVersions, into: destination, report: &report)
        let revived = hidden
        let shown = try await destination.read { db in
            try revived.filter { record in
                try Bool.fetchOne(db, sql: "SELECT 1 FROM \(record.entity.quotedDatabaseIdentifier) WHERE id = ?", arguments: [record.id]) ?? false
            }.map(\.id)
        }
        for record in hidden {
            if shown.contains(record.id) {
                target[record.id] = record.id
                inDestination.insert(record.id)
            } else {
                // Still not shown (its key is still another record's, or
                // the delete came later for the fields it did not write).
                deleted.insert(record.id)
            }
        }
        // The updates of records the destination holds, but for their
        // references (set below, once every target is copied), before the
        // records the destination lacks are matched by unique key: a key
        // the source moved off a record (a rename while the cloud was off)
        // is free again for the record the source gave it to.
        var referenceUpdates: [(entity: String, id: RecordID, values: [String: Value])] = []
        var early: [(entity: String, id: RecordID, values: [String: Value])] = []
        for update in updates {
            let references = update.values.filter { if case .reference = $0.value { true } else { false } }
            if !references.isEmpty { referenceUpdates.append((update.entity, update.id, references)) }
            let plain = update.values.filter { if case .reference = $0.value { false } else { true } }
            if !plain.isEmpty { early.append((update.entity, update.id, plain)) }
        }
        if existing == .newer {
            // Each field with the version the source wrote it with, as a
            // sync would carry it: the merge is then right even against
            // writes of other devices this copy has not seen yet (a merge
            // while the container is away), and moves of keys between
            // records settle as a sync settles them, in any number.
            try Self.adopt(early, versions: sourceVersions, into: destination, report: &report)
        } else {
            try await Self.update(early, into: destination, batchSize: batchSize, report: &report)
        }
        var unmatched: [SourceRow] = []
        var merged: [(entity: String, id: RecordID, values: [String: Value])] = []
        var mergedVersions: [RecordID: [String: Version]] = [:]
        for (row, other) in zip(inserts, try await lookUpKeys(inserts, in: destination)) {
            guard let other else { unmatched.append(row); continue }
            target[row.id] = other
            inDestination.insert(other)
            report.deduplicated += 1
            report.duplicates[row.id] = other
            // As a sync shows two records of one key (merge.md, rule 4): the
            // record that stays shows the newer value of each field that
            // is neither a key nor a reference.
            if existing == .newer, case .store(let store) = source,
               let (values, versions) = try newerValues(of: row, in: store, over: other, of: destination) {
                merged.append((schema.entities[row.entity].name, other, values))
                mergedVersions[other] = versions
            }
        }
        try Self.adopt(merged, versions: mergedVersions, into: destination, report: &report)
        inserts = unmatched
        for start in stride(from: 0, to: inserts.count, by: batchSize) {
            let batch = inserts[start..<min(inserts.count, start + batchSize)]
            let batchIDs = Set(batch.map(\.id))
            var records: [(entity: String, id: RecordID, values: [String: Value])] = []
            for row in batch {
                var values = row.values
                var later: [String: Value] = [:]
                resolve(&values, later: &later) { inDestination.contains($0) || batchIDs.contains($0) }
                if !later.isEmpty { deferred.append((schema.entities[row.entity].name, row.id, later)) }
                records.append((schema.entities[row.entity].name, row.id, values))
            }
            let toSave = records
            try await destination.write { tx in
                for record in toSave { _ = tx.insert(record.entity, record.values, id: record.id) }
            }
            inDestination.formUnion(batchIDs)
            report.copied += batch.count
            report.transactions += 1
        }
        for update in referenceUpdates {
            var values = update.values
            var later: [String: Value] = [:]
            resolve(&values, later: &later) { inDestination.contains($0) }
            deferred.append((update.entity, update.id, values.merging(later) { _, l in l }))
        }
        for record in hiddenLater {
            var values = record.values
            var later: [String: Value] = [:]
            resolve(&values, later: &later) { inDestination.contains($0) }
            guard !values.isEmpty else { continue }
            try Self.keep(Change(.update, entity: record.entity, recordID: record.id, values: Self.fieldValues(values)), in: destination)
            report.transactions += 1
        }
        // Selected records the source deleted.
        for (duplicate, survivor) in survivors { report.duplicates[duplicate] = target[survivor] ?? survivor }
        if existing == .overwrite, let only {
            let gone = only.subtracting(seen).subtracting(survivors.keys)
            if !gone.isEmpty {
                // Those the destination holds, shown or hidden (a cascade of
                // a delete there hides a record; the delete is kept, so the
                // record stays deleted if what hides it comes back).
                deletes = try await destination.read { db in
                    var result: [(entity: String, id: RecordID)] = []
                    for (index, entity) in schema.entities.enumerated() {
                        for id in gone {
                            let shown = try Bool.fetchOne(db, sql: "SELECT 1 FROM \(entity.name.quotedDatabaseIdentifier) WHERE id = ?", arguments: [id]) ?? false
                            let held = try shown || (Bool.fetchOne(db, sql: "SELECT 1 FROM _chronicle_records WHERE entity = ? AND id = ?", arguments: [index, id]) ?? false)
                            if held { result.append((entity.name, id)) }
                        }
                    }
                    return result
                }
                // A record the source store knows nothing of was never
                // deleted there: it never applied the save that made it (a
                // seed it had not imported yet, whose log it puts back), and
                // the destination's copy is the one there is.
                if case .store(let store) = source {
                    deletes = try deletes.filter { try store.snapshot.recordVersions(entity: $0.entity, id: $0.id) != nil }
                }
                // The source's deletes of records the destination does not
                // know: kept at their own clocks.
                let held = Set(deletes.map(\.id))
                let snapshot = destination.snapshot
                var histories: [Transaction] = []
                for id in gone.subtracting(held).sorted() {
                    guard let record = deletedHistories[id], !record.saves.isEmpty,
                          try snapshot.recordVersions(entity: record.entity, id: id) == nil else { continue }
                    histories += record.saves
                    report.deleted += 1
                }
                // One write for all of them, each record's saves in clock order.
                if !histories.isEmpty {
                    report.transactions += try snapshot.adopt(histories.sorted { $0.clock < $1.clock }).count
                }
            }
        }
        try await Self.update(deferred, into: destination, batchSize: batchSize, report: &report)
        try await Self.delete(deletes, from: destination, report: &report)
        return report
    }

    /// Deletes records from `destination`, one save each: deleting a record
    /// can remove others by cascade (a folder its notes), and a delete of a
    /// record already gone is moot.
    private static func delete(_ deletes: [(entity: String, id: RecordID)], from destination: Store,
                               report: inout StoreManager.MergeReport) async throws {
        for d in deletes {
            do {
                try await destination.write { tx in tx.delete(d.entity, id: d.id) }
                report.deleted += 1
                report.transactions += 1
            } catch let error as ChronicleError where error.code == .recordNotFound {
                // Hidden there by now (a cascade of a delete carried just
                // before it: the folder of a deleted note): the delete is
                // kept as a sync keeps it, so that the record stays deleted
                // if what hides it comes back. One the destination never
                // knew is moot.
                guard try destination.snapshot.recordVersions(entity: d.entity, id: d.id) != nil else { continue }
                try keep(Change(.delete, entity: d.entity, recordID: d.id, values: []), in: destination)
                report.deleted += 1
                report.transactions += 1
            }
        }
    }

    /// Writes updates in saves of `batchSize`; a batch that would give two
    /// records one unique key is written one update at a time.
    private static func update(_ updates: [(entity: String, id: RecordID, values: [String: Value])], into destination: Store,
                               batchSize: Int, report: inout StoreManager.MergeReport) async throws {
        for start in stride(from: 0, to: updates.count, by: batchSize) {
            let batch = Array(updates[start..<min(updates.count, start + batchSize)])
            do {
                try await destination.write { tx in
                    for update in batch { tx.update(update.entity, id: update.id, update.values) }
                }
                report.transactions += 1
            } catch let error as ChronicleError where error.code == .uniqueViolation {
                for update in batch { try await Self.update(update, into: destination, report: &report) }
            }
        }
    }

    /// Writes one update; one that gives a record the unique key of another
    /// record of the destination (a rename there that the source saw, and
    /// the destination made a record of that name since) is kept as a sync
    /// keeps it: merged, the two records become duplicates and one is shown.
    /// A save would refuse it, and the copy (a deletion's carry, say) would
    /// then fail at every attempt.
    private static func update(_ update: (entity: String, id: RecordID, values: [String: Value]), into destination: Store,
                               report: inout StoreManager.MergeReport) async throws {
        do {
            try await destination.write { tx in tx.update(update.entity, id: update.id, update.values) }
        } catch let error as ChronicleError where error.code == .uniqueViolation || error.code == .recordNotFound {
            // Or hidden by now (merged into a record of the same key by an
            // update kept just before it): kept the same way.
            try keep(Change(.update, entity: update.entity, recordID: update.id, values: fieldValues(update.values)), in: destination)
        }
        report.transactions += 1
    }

    private static func fieldValues(_ values: [String: Value]) -> [FieldValue] {
        values.sorted { $0.key < $1.key }.map { FieldValue($0.key, $0.value) }
    }

    /// The source's values of the fields of `row` that the source wrote
    /// later than the destination did (the merge's rule, per field). A newer
    /// write of the same value counts too: it wins over writes the
    /// destination got meanwhile. For a record the destination does not
    /// show (`visible` false), none unless one was written after the
    /// destination's delete of it, if any.
    private func newerFields(of row: SourceRow, in source: Store, than destination: Store, visible: Bool,
                             versions: inout [RecordID: [String: Version]]) throws -> [String: Value] {
        let name = schema.entities[row.entity].name
        let written = try source.snapshot.recordVersions(entity: name, id: row.id)?.fields ?? [:]
        versions[row.id] = written
        let held = try destination.snapshot.recordVersions(entity: name, id: row.id)
        let own = source.snapshot.deviceID
        let changed = row.values.filter { field, _ in
            guard let source = written[field] else { return false }
            if isCopy(source, own: own) { return false }
            if let there = held?.fields[field], there >= source { return false }
            return true
        }
        // Written before the delete, they would not bring it back: a
        // delete beats every earlier write.
        guard let deleted = held?.deleteVersion, !visible else { return changed }
        return changed.keys.contains { written[$0].map { $0 > deleted } ?? false } ? changed : [:]
    }

    /// Whether a write of the source (whose own device is `own`) is one of
    /// its ``copies`` of the destination's records.
    private func isCopy(_ version: Version, own: DeviceID) -> Bool {
        version.device == own && copies.contains { $0.contains(version.clock) }
    }

    /// The values of `row`'s fields that are neither keys nor references
    /// and that the source wrote later than `destination` wrote those of
    /// `other` (the record of the same key the row was matched to), with
    /// their versions; nil for none.
    private func newerValues(of row: SourceRow, in source: Store, over other: RecordID,
                             of destination: Store) throws -> (values: [String: Value], versions: [String: Version])? {
        let entity = schema.entities[row.entity]
        let keyFields = Set(entity.uniqueConstraints.joined())
        let written = try source.snapshot.recordVersions(entity: entity.name, id: row.id)?.fields ?? [:]
        let held = try destination.snapshot.recordVersions(entity: entity.name, id: other)?.fields ?? [:]
        let own = source.snapshot.deviceID
        var values: [String: Value] = [:]
        var versions: [String: Version] = [:]
        for (name, value) in row.values where !keyFields.contains(name) {
            guard let field = entity.field(named: name), case .attribute = field.kind, let version = written[name] else { continue }
            if isCopy(version, own: own) { continue }
            if let there = held[name], there >= version { continue }
            values[name] = value
            versions[name] = version
        }
        return values.isEmpty ? nil : (values, versions)
    }

    /// Saves `updates` in `destination` the way a sync applies them, each
    /// field with the clock the source wrote it with (`versions`, by record
    /// and field name): one save of the destination's own per original save
    /// (see ``Snapshot/adopt(_:)``). A field with no known version is kept
    /// as ``keep(_:in:)`` keeps a change.
    private static func adopt(_ updates: [(entity: String, id: RecordID, values: [String: Value])], versions: [RecordID: [String: Version]],
                              into destination: Store, report: inout StoreManager.MergeReport) throws {
        var origins: [Version: [Change]] = [:]
        for update in updates {
            var byOrigin: [Version: [FieldValue]] = [:]
            var unknown: [FieldValue] = []
            for (name, value) in update.values.sorted(by: { $0.key < $1.key }) {
                if let v = versions[update.id]?[name] {
                    byOrigin[v, default: []].append(FieldValue(name, value))
                } else {
                    unknown.append(FieldValue(name, value))
                }
            }
            for (origin, fields) in byOrigin {
                origins[origin, default: []].append(Change(.update, entity: update.entity, recordID: update.id, values: fields))
            }
            if !unknown.isEmpty {
                try keep(Change(.update, entity: update.entity, recordID: update.id, values: unknown), in: destination)
                report.transactions += 1
            }
        }
        guard !origins.isEmpty else { return }
        let snapshot = destination.snapshot
        let saves = Snapshot.saves(origins, schemaHash: snapshot.schema.hash)
        _ = try snapshot.adopt(saves)
        report.transactions += saves.count
    }

    /// Saves `change` in `destination` the way a sync applies one, without
    /// a save's checks: as a save of its own, newer than everything there.
    private static func keep(_ change: Change, in destination: Store) throws {
        let snapshot = destination.snapshot
        let clock = HybridTimestamp(rawValue: try snapshot.latestClock().rawValue + 1)
        _ = try snapshot.adopt([Transaction(deviceID: snapshot.deviceID, sequence: 0, clock: clock, schemaHash: snapshot.schema.hash, changes: [change])])
    }

    /// The source's visible records: every one (`wanted` nil) or those named.
    private func read(_ source: Source, wanted: Set<RecordID>?, excluding seen: Set<RecordID>) async throws -> [SourceRow] {
        let schema = self.schema
        let store: Store
        switch source {
        case .rows(let rows):
            guard let wanted else { return rows.values.filter { !seen.contains($0.id) }.sorted { ($0.entity, $0.id) < ($1.entity, $1.id) } }
            return wanted.subtracting(seen).compactMap { rows[$0] }.sorted { ($0.entity, $0.id) < ($1.entity, $1.id) }
        case .store(let s):
            store = s
        }
        return try await store.read { db in
            var rows: [SourceRow] = []
            for (index, entity) in schema.entities.enumerated() {
                let keys = entity.uniqueConstraints
                func load(_ row: Row) throws -> SourceRow {
                    SourceRow(entity: index, id: row["id"], values: try Store.values(row, entity: entity),
                              keys: keys.map { $0.map { row[$0] as DatabaseValue } })
                }
                if let wanted {
                    // In chunks: one query per entity and 500 IDs, not one per ID.
                    let ids = Array(wanted.subtracting(seen))
                    for start in stride(from: 0, to: ids.count, by: 500) {
                        let chunk = ids[start..<min(ids.count, start + 500)]
                        let marks = Array(repeating: "?", count: chunk.count).joined(separator: ", ")
                        for row in try Row.fetchAll(db, sql: "SELECT * FROM \(entity.name.quotedDatabaseIdentifier) WHERE id IN (\(marks)) ORDER BY id",
                                                    arguments: StatementArguments(chunk)) {
                            rows.append(try load(row))
                        }
                    }
                } else {
                    for row in try Row.fetchAll(db, sql: "SELECT * FROM \(entity.name.quotedDatabaseIdentifier) ORDER BY id") {
                        rows.append(try load(row))
                    }
                }
            }
            return rows
        }
    }

    private func lookUp(_ rows: [SourceRow], in destination: Store) async throws -> [Found] {
        let schema = self.schema
        return try await destination.read { db in
            try rows.map { row in
                let entity = schema.entities[row.entity]
                if let current = try Row.fetchOne(db, sql: "SELECT * FROM \(entity.name.quotedDatabaseIdentifier) WHERE id = ?", arguments: [row.id]) {
                    return .present(try Store.values(current, entity: entity))
                }
                if try Bool.fetchOne(db, sql: "SELECT 1 FROM _chronicle_records WHERE entity = ? AND id = ?", arguments: [row.entity, row.id]) ?? false {
                    return .deleted
                }
                return .absent
            }
        }
    }

    /// For each row, the visible record of `destination` that holds one of
    /// its unique keys, if any.
    private func lookUpKeys(_ rows: [SourceRow], in destination: Store) async throws -> [RecordID?] {
        let schema = self.schema
        return try await destination.read { db in
            try rows.map { row in try Self.sameKey(db, entity: schema.entities[row.entity], keys: row.keys) }
        }
    }

    /// The visible record sharing one of a record's unique keys (none of
    /// whose fields is null), if any.
    static func sameKey(_ db: Database, entity: Entity, keys: [[DatabaseValue]]) throws -> RecordID? {
        for (constraint, values) in zip(entity.uniqueConstraints, keys) where !values.contains(where: \.isNull) {
            let condition = constraint.map { "\($0.quotedDatabaseIdentifier) = ?" }.joined(separator: " AND ")
            if let id = try RecordID.fetchOne(db, sql: "SELECT id FROM \(entity.name.quotedDatabaseIdentifier) WHERE \(condition) ORDER BY id LIMIT 1",
                                              arguments: StatementArguments(values)) {
                return id
            }
        }
        return nil
    }

}
