import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB

/// A bulk import of an external feed into one entity, with upsert by a
/// unique key; see ``StoreContext/importRecords(_:total:options:progress:)``.
public struct BulkImport: Sendable, Hashable {
    /// What an import does with an item it cannot read.
    public enum OnMalformed: String, Sendable, Hashable, CaseIterable {
        /// Report it (``Summary/malformed``) and go on without it.
        case skip
        /// Stop the import before the batch holding it: that batch and
        /// the ones after it are not written (``Summary/stoppedAt``).
        case stop
    }

    /// The entity the records go to.
    public var entity: String
    /// The attribute that tells new records from existing ones. The entity
    /// must declare it unique on its own, so that one value names one
    /// record on every device.
    public var upsertKey: String
    /// How many malformed items a summary lists (``Summary/malformed``).
    public static let listedProblems = 10_000

    /// Items per batch; each batch is one save (one transaction: an upload
    /// may put several in one log, and every device applies each whole).
    public var batchSize: Int
    /// What to do with an item that cannot be read.
    public var onMalformed: OnMalformed

    /// An import into `entity` by `upsertKey`, in batches of `batchSize`.
    public init(entity: String, upsertKey: String, batchSize: Int = 1_000, onMalformed: OnMalformed = .skip) {
        self.entity = entity
        self.upsertKey = upsertKey
        self.batchSize = batchSize
        self.onMalformed = onMalformed
    }

    /// One item of a feed: a record's values, or why it cannot be read.
    public struct Item: Sendable, Hashable {
        /// Where the item is in its feed ("feature 12, line 40, column 5").
        public var position: String
        /// The values by attribute name; the upsert key among them.
        public var values: [String: Value]
        /// Why the item cannot be imported; nil for a good item.
        public var problem: String?

        /// A good item.
        public static func record(_ values: [String: Value], at position: String) -> Item {
            Item(position: position, values: values, problem: nil)
        }

        /// An item that cannot be imported, and why.
        public static func malformed(_ problem: String, at position: String) -> Item {
            Item(position: position, values: [:], problem: problem)
        }
    }

    /// An item that was not imported.
    public struct Problem: Sendable, Hashable, CustomStringConvertible {
        /// Where it is in the feed.
        public var position: String
        /// What is wrong with it.
        public var reason: String

        public var description: String { "\(position): \(reason)" }
    }

    /// Where an import is: reported after each batch is saved.
    public struct Progress: Sendable, Hashable {
        /// Items read so far, malformed ones included.
        public var processed: Int
        /// Items in the feed, when known.
        public var total: Int?
        /// Records inserted so far (items of one batch with the same key
        /// are one record).
        public var inserted: Int
        /// Records updated so far: stored before, with an attribute that differed.
        public var updated: Int
        /// Records found as the feed has them, which wrote nothing.
        public var unchanged: Int
        /// Malformed items skipped so far.
        public var skipped: Int
        /// Items folded into an earlier item of their batch with the same
        /// key (one record with it, counted there), so far. With
        /// ``inserted``, ``updated``, ``unchanged`` and ``skipped``, every
        /// item processed is counted once.
        public var folded: Int = 0
        /// Batches saved, each one transaction (a batch that changed nothing
    /// saves nothing).
        public var batches: Int
    }

    /// What an import did. Every batch it reports is saved whole; nothing
    /// of a batch it does not report is.
    public struct Summary: Sendable {
        /// The counts at the end.
        public var progress: Progress
        /// Malformed items skipped (under ``OnMalformed/skip``), in feed
        /// order: the first ``BulkImport/listedProblems`` of them
        /// (``Progress/skipped`` counts them all), so that a feed of
        /// millions of bad items does not take as many problems' memory.
        public var malformed: [Problem]
        /// The malformed item the import stopped at (under ``OnMalformed/stop``).
        public var stoppedAt: Problem?
        /// Whether the task was cancelled: the import stopped after the
        /// last whole batch.
        public var cancelled: Bool

        /// Whether every item was read and saved.
        public var isComplete: Bool { stoppedAt == nil && !cancelled }
    }
}

extension StoreContext {
    /// Imports a feed into one entity: each item's record is inserted, or,
    /// when a record with the same upsert key exists, updated with the
    /// attributes that differ (an item the same as what is stored writes
    /// nothing).
    ///
    /// Items go in batches of ``BulkImport/batchSize``: new versus existing
    /// is decided for a whole batch with one query, and each batch is one
    /// save, one transaction, written whole or not at all. Saves go
    /// through the store's writer, and reach the main context as they
    /// commit; the main context's reads never wait for them. Call it on a
    /// background context, from a task of its own:
    ///
    /// ```swift
    /// let importer = store.newBackgroundContext()
    /// let summary = try await importer.importRecords(feed.items(for: schema.entity(named: "Quake")!, requiring: "code"),
    ///                                                options: BulkImport(entity: "Quake", upsertKey: "code")) { progress in
    ///     print("\(progress.processed) of \(progress.total ?? 0)")
    /// }
    /// ```
    ///
    /// Cancelling the task stops the import after the batch being saved;
    /// ``BulkImport/Summary/cancelled`` says so.
    ///
    /// - Parameters:
    ///   - items: the feed's items, in order.
    ///   - total: how many items there are, for progress; by default
    ///     `items.count` for a collection.
    ///   - progress: called after each batch is saved.
    /// - Throws: ``ChronicleError/Code/unknownEntity`` or
    ///   ``ChronicleError/Code/unknownAttribute`` for names the schema
    ///   lacks; ``ChronicleError/Code/misuse`` for an upsert key the entity
    ///   does not declare unique on its own, a batch size below 1, or a
    ///   context that is not a store's (a child or scratch context);
    ///   ``ChronicleError/Code/readOnlyContext`` for a read-only one; the
    ///   save's error for a batch the store refuses (a value of the wrong
    ///   type, another unique key taken), naming the batch's first and last
    ///   items. Batches saved before it stay saved.
    public func importRecords<Items: Sequence<BulkImport.Item>>(
        _ items: Items, total: Int? = nil, options: BulkImport,
        progress: (@Sendable (BulkImport.Progress) -> Void)? = nil
    ) async throws -> BulkImport.Summary {
        guard parent == nil else {
            throw ChronicleError(.misuse, "a \(kind.rawValue) context cannot import: import on a background context of the store")
        }
        try state.withLock { try checkWritable($0) }
        guard options.batchSize >= 1 else {
            throw ChronicleError(.misuse, "an import's batch size must be at least 1, not \(options.batchSize)")
        }
        let entity = try checkedEntity(options.entity)
        guard let keyField = entity.field(named: options.upsertKey) else {
            throw ChronicleError(.unknownAttribute, "\(entity.name) has no attribute \(options.upsertKey) to upsert by")
        }
        guard entity.uniqueConstraints.contains([keyField.name]) else {
            throw ChronicleError(.misuse, "\(entity.name).\(keyField.name) is not unique on its own: declare it unique in the schema to upsert by it")
        }
        let fields = Dictionary(entity.fields.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let keyIndex = entity.fieldIndex(named: keyField.name)!
        let reader = Store.ItemReader(entity: entity, key: keyIndex)
        var state = BulkImport.Progress(processed: 0, total: total ?? (items as? any Collection)?.count, inserted: 0, updated: 0,
                                        unchanged: 0, skipped: 0, batches: 0)
        // Malformed items with their place in the feed, to list them in order.
        var malformed: [(index: Int, problem: BulkImport.Problem)] = []
        var batchIndices: [Int] = []
        // The batch being read: its records prepared (one per key) as its
        // items arrive.
        var batch = Store.PreparedBatch(entity: entity, key: keyField.name, capacity: min(options.batchSize, 10_000))
        var read = 0
        var reported = 0
        var stoppedAt: BulkImport.Problem?
        func flush() async throws {
            guard !batch.isEmpty else { return }
            let outcome: Store.UpsertOutcome
            do {
                outcome = try await store.upsert(batch.finished(), stopAtProblem: options.onMalformed == .stop)
            } catch let error as ChronicleError where state.batches > 0 {
                throw ChronicleError(error.code, "\(error.message) (the \(state.batches) batch\(state.batches == 1 ? "" : "es") saved before it, through item \(reported), stay saved)",
                                     underlying: error.underlying)
            }
            let indices = batchIndices
            batch.removeAll()
            batchIndices.removeAll(keepingCapacity: true)
            if outcome.stopped {
                stoppedAt = outcome.problems.first?.problem
                return
            }
            malformed += outcome.problems.map { (indices[$0.offset], $0.problem) }
            Self.bound(&malformed)
            state.skipped += outcome.problems.count
            state.processed = read
            state.inserted += outcome.inserted
            state.updated += outcome.updated
            state.unchanged += outcome.unchanged
            state.folded += outcome.folded
            state.batches += outcome.inserted + outcome.updated > 0 ? 1 : 0
            reported = read
            progress?(state)
        }
        for item in items {
            if Task.isCancelled {
                return BulkImport.Summary(progress: state, malformed: Self.ordered(malformed), stoppedAt: nil, cancelled: true)
            }
            read += 1
            if item.problem == nil, batch.append(reading: item, with: reader) {
                batchIndices.append(read - 1)
                if batch.count == options.batchSize {
                    try await flush()
                    if let stoppedAt { return BulkImport.Summary(progress: state, malformed: Self.ordered(malformed), stoppedAt: stoppedAt, cancelled: false) }
                }
                continue
            }
            if let reason = item.problem ?? Self.problem(of: item, entity: entity, fields: fields, key: keyField) {
                let problem = BulkImport.Problem(position: item.position, reason: reason)
                if options.onMalformed == .stop {
                    return BulkImport.Summary(progress: state, malformed: Self.ordered(malformed), stoppedAt: problem, cancelled: false)
                }
                malformed.append((read - 1, problem))
                Self.bound(&malformed)
                state.skipped += 1
                continue
            }
            batch.append(item)
            batchIndices.append(read - 1)
            if batch.count == options.batchSize {
                try await flush()
                if let stoppedAt { return BulkImport.Summary(progress: state, malformed: Self.ordered(malformed), stoppedAt: stoppedAt, cancelled: false) }
            }
        }
        if Task.isCancelled {
            return BulkImport.Summary(progress: state, malformed: Self.ordered(malformed), stoppedAt: nil, cancelled: true)
        }
        try await flush()
        if let stoppedAt { return BulkImport.Summary(progress: state, malformed: Self.ordered(malformed), stoppedAt: stoppedAt, cancelled: false) }
        state.processed = read
        if reported != read { progress?(state) }
        return BulkImport.Summary(progress: state, malformed: Self.ordered(malformed), stoppedAt: nil, cancelled: false)
    }

    /// Problems in the order of their items in the feed: the first
    /// ``BulkImport/listedProblems``.
    private static func ordered(_ problems: [(index: Int, problem: BulkImport.Problem)]) -> [BulkImport.Problem] {
        problems.sorted { $0.index < $1.index }.prefix(BulkImport.listedProblems).map(\.problem)
    }

    /// `problems` cut to the first ``BulkImport/listedProblems`` in feed
    /// order once it holds twice as many.
    private static func bound(_ problems: inout [(index: Int, problem: BulkImport.Problem)]) {
        guard problems.count > 2 * BulkImport.listedProblems else { return }
        problems.sort { $0.index < $1.index }
        problems.removeLast(problems.count - BulkImport.listedProblems)
    }

    /// Why a good-looking item cannot be imported: a missing key, a name
    /// the entity lacks, a value of the wrong type or a null for a required
    /// attribute.
    private static func problem(of item: BulkImport.Item, entity: Entity, fields: [String: Field], key: Field) -> String? {
        guard let value = item.values[key.name], !value.isNull else {
            return "no \(key.name), the key to import by"
        }
        func problem(_ name: String, _ value: Value, _ field: Field?) -> String? {
            guard let field else { return "\(entity.name) has no attribute \(name)" }
            if !field.accepts(value) {
                return value.isNull ? "\(name) is required, and null here" : "\(name) is \(field.kind.withArticle), not \(value)"
            }
            if case .string(let text) = value, text.holdsNUL {
                return "\(name) holds the character U+0000, which a save refuses (keep such bytes in a data attribute)"
            }
            return nil
        }
        // Most items have none: sorted (to name the first by name) only then.
        guard item.values.contains(where: { problem($0.key, $0.value, fields[$0.key]) != nil }) else { return nil }
        for (name, value) in item.values.sorted(by: { $0.key < $1.key }) {
            if let problem = problem(name, value, fields[name]) { return problem }
        }
        return nil
    }
}

extension Store {
    /// Saves one batch of an import as one transaction: records whose key
    /// is stored are updated with what differs, others inserted. Items of
    /// the batch with the same key are one record: their values folded in
    /// order. Keys are compared byte for byte, as SQLite's unique index
    /// compares them (two spellings of "café" are two keys).
    ///
    /// Which keys are stored is read inside the save's own transaction, so
    /// a sync importing the same keys meanwhile cannot make the save clash.
    ///
    /// A record that would be inserted without a value for a required
    /// attribute (one with no default) is a problem: left out, or, when
    /// `stopAtProblem`, nothing of the batch is saved.
    func upsert(_ prepared: PreparedBatch, stopAtProblem: Bool) throws -> UpsertOutcome {
        let (entity, key, batch, records) = (prepared.entity, prepared.key, prepared.items, prepared.records)
        let requiredIndices = entity.fields.indices.filter { !entity.fields[$0].isOptional && entity.fields[$0].defaultValue == nil }
        let required = requiredIndices.map { entity.fields[$0].name }
        var outcome = UpsertOutcome()
        outcome.folded = batch.count - records.count
        do {
            _ = try writeAtomically { tx, db in
                tx.expectedInserts = records.count
                let stored = try Self.stored(records.map(\.key), of: entity, key: key, db)
                var problems: [(offset: Int, problem: BulkImport.Problem)] = []
                if !required.isEmpty {
                    for i in records.indices where stored.isEmpty || stored[records[i].exact] == nil {
                        let missing = records[i].row.map { start in requiredIndices.first { prepared.rows[start + $0].isNull }.map { entity.fields[$0].name } }
                            ?? required.first(where: { records[i].values[$0] == nil })
                        if let missing {
                            let offset = records[i].offset
                            problems.append((offset, BulkImport.Problem(position: batch[offset].position, reason: "\(missing) is required, and a new \(entity.name) needs it")))
                        }
                    }
                }
                problems += try Self.otherKeyClashes(records, in: batch, stored: stored, entity: entity, key: key,
                                                     skipping: Set(problems.map(\.offset)), db)
                problems.sort { $0.offset < $1.offset }
                outcome.problems = problems
                if stopAtProblem, !problems.isEmpty {
                    // Nothing of the batch: no change is made.
                    outcome.stopped = true
                    return
                }
                let refused = Set(problems.map(\.offset))
                // A feed's new records, every one new: their rows as read.
                if stored.isEmpty, refused.isEmpty, prepared.rowsInOrder {
                    tx.insertNew(entity, rows: prepared.rows, count: records.count)
                    outcome.inserted = records.count
                    return
                }
                let width = entity.fields.count
                for i in records.indices where refused.isEmpty || !refused.contains(records[i].offset) {
                    if !stored.isEmpty, let (id, old) = stored[records[i].exact] {
                        let changed = records[i].values.filter { !StoreContext.same(old[$0.key], $0.value) }
                        if changed.isEmpty {
                            outcome.unchanged += 1
                        } else {
                            tx.update(entity.name, id: id, changed)
                            outcome.updated += 1
                        }
                        continue
                    }
                    if let start = records[i].row {
                        tx.insertNew(entity, row: prepared.rows[start ..< start + width])
                    } else {
                        tx.insertNew(entity.name, records[i].values)
                    }
                    outcome.inserted += 1
                }
            }
        } catch let error as ChronicleError {
            let range = batch.count == 1 ? batch[0].position : "\(batch[0].position) to \(batch[batch.count - 1].position)"
            let advice = error.code == .sizeOverCap ? "; import in smaller batches" : ""
            throw ChronicleError(error.code, "the batch from \(range) was not saved: \(error.message)\(advice)", underlying: error.underlying)
        }
        return outcome
    }

    /// Reads an import's items against their entity: what a new record of
    /// each would store, checked field by field. Built once per import.
    struct ItemReader {
        private let names: [String]
        /// Each name's length in UTF-8 bytes, compared before the name.
        private let lengths: [Int]
        /// Field index by name, for entities too wide to search in turn.
        private let byName: [String: Int]?
        private let checks: AttributeChecks
        private let defaults: [Value]
        /// The index of the upsert key's field.
        let key: Int

        /// Above this many fields a name is looked up by hash, below it by
        /// comparing names in turn: an item's names are read from the item
        /// (no hashing of each field's name against its dictionary).
        private static let searchedFields = 24

        init(entity: Entity, key: Int) {
            names = entity.fields.map(\.name)
            lengths = names.map(\.utf8.count)
            byName = names.count > Self.searchedFields
                ? Dictionary(names.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first }) : nil
            checks = AttributeChecks(entity)
            defaults = entity.fields.map { $0.defaultValue ?? .null }
            self.key = key
        }

        /// The index of the field called `name`, looked for from `hint` on.
        private func field(named name: String, from hint: Int) -> Int? {
            if let byName { return byName[name] }
            let length = name.utf8.count
            var f = hint
            for _ in names.indices {
                if f == names.count { f = 0 }
                if lengths[f] == length, names[f] == name { return f }
                f += 1
            }
            return nil
        }

        /// Appends to `rows` one value per field, in field order, defaults
        /// filled in: the item's record, should it be new. Appends nothing
        /// and returns false when the item has a problem
        /// (``StoreContext/problem(of:entity:fields:key:)`` names it) or
        /// its values are not all plain attributes: a missing or null key,
        /// a value naming no field, of another type than its field's, a
        /// null for a required one, or text holding U+0000.
        func append(_ item: BulkImport.Item, to rows: inout [Value]) -> Bool {
            let start = rows.count
            rows.append(contentsOf: defaults)
            var hasKey = false
            // Items of a feed tend to list their names in one order: the
            // search for the next name starts after the last one found.
            var hint = 0
            for (name, value) in item.values {
                guard let f = field(named: name, from: hint), checks.fits(value, at: f), f != key || !value.isNull else {
                    rows.removeLast(rows.count - start)
                    return false
                }
                rows[start + f] = value
                if f == key { hasKey = true }
                hint = f + 1
            }
            guard hasKey else {
                rows.removeLast(rows.count - start)
                return false
            }
            return true
        }

    }

    /// One record of an import batch: the values of its items with one
    /// key, folded in order, and the place of its first item in the batch.
    struct PendingRecord: Sendable {
        let exact: ExactKey
        let key: Value
        var values: [String: Value]
        let offset: Int
        /// For a new record: where its row starts in the batch's
        /// ``PreparedBatch/rows`` (one value per field, in field order,
        /// defaults filled in); nil when a value names no field (the save
        /// says so).
        var row: Int? = nil
    }

    /// An import batch made ready to save as its items are read: its
    /// records, one per key, in the order of their first items.
    struct PreparedBatch: Sendable {
        let entity: Entity
        let key: String
        private(set) var items: [BulkImport.Item] = []
        private(set) var records: [PendingRecord] = []
        /// The rows of new records, one value per field, record after
        /// record; each record's ``PendingRecord/row`` says where its own
        /// starts (a row an item folded away stays unused).
        private(set) var rows: [Value] = []
        /// Whether record `i`'s row is the `i`th of ``rows`` and every row
        /// is a record's: the rows can be saved as they are. Set by
        /// ``finished()``.
        private(set) var rowsInOrder = false
        private var index: [ExactKey: Int] = [:]

        init(entity: Entity, key: String, capacity: Int) {
            self.entity = entity
            self.key = key
            items.reserveCapacity(capacity)
            records.reserveCapacity(capacity)
            rows.reserveCapacity(capacity * entity.fields.count)
            index.reserveCapacity(capacity)
        }

        var count: Int { items.count }
        var isEmpty: Bool { items.isEmpty }

        /// Adds an item whose values are all plain attributes, its row read
        /// by `reader` (``ItemReader/append(_:to:)``); false, adding
        /// nothing, for any other.
        mutating func append(reading item: BulkImport.Item, with reader: ItemReader) -> Bool {
            let start = rows.count
            guard reader.append(item, to: &rows) else { return false }
            append(item, row: start, keyValue: rows[start + reader.key])
            return true
        }

        /// Adds an item: a new record, or folded into the record of its key.
        ///
        /// - Parameter row: where the item's row starts in ``rows``, should
        ///   its record be new; nil to make it from its values.
        /// - Parameter keyValue: the item's key value when the caller has
        ///   read it already.
        mutating func append(_ item: BulkImport.Item, row: Int? = nil, keyValue: Value? = nil) {
            let offset = items.count
            items.append(item)
            guard let k = keyValue ?? item.values[key] else { return }
            let exact = ExactKey(k)
            // One hash in the common case: a key new to the batch.
            if let i = index.updateValue(records.count, forKey: exact) {
                index[exact] = i
                records[i].values.merge(item.values) { _, new in new }
                records[i].row = nil
            } else {
                records.append(PendingRecord(exact: exact, key: k, values: item.values, offset: offset, row: row))
            }
        }

        /// The batch with each record's row, should it be new.
        func finished() -> PreparedBatch {
            var done = self
            let width = entity.fields.count
            for i in done.records.indices where done.records[i].row == nil {
                let start = done.rows.count
                var named = 0
                for field in entity.fields {
                    if let value = done.records[i].values[field.name] {
                        done.rows.append(value)
                        named += 1
                    } else {
                        done.rows.append(field.defaultValue ?? .null)
                    }
                }
                if named == done.records[i].values.count {
                    done.records[i].row = start
                } else {
                    done.rows.removeLast(width)
                }
            }
            done.rowsInOrder = done.rows.count == done.records.count * width
                && done.records.indices.allSatisfy { done.records[$0].row == $0 * width }
            return done
        }

        mutating func removeAll() {
            items.removeAll(keepingCapacity: true)
            records.removeAll(keepingCapacity: true)
            rows.removeAll(keepingCapacity: true)
            rowsInOrder = false
            index.removeAll(keepingCapacity: true)
        }
    }

    /// The records of a batch that would give a unique key other than the
    /// upsert key to two records: one a stored record already holds, or an
    /// earlier record of the batch takes. A save would refuse the whole
    /// batch for it; the import reports each such item, at its position.
    private static func otherKeyClashes(_ records: [PendingRecord], in batch: [BulkImport.Item],
                                        stored: [ExactKey: (RecordID, [String: Value])], entity: Entity, key: String,
                                        skipping: Set<Int>, _ db: Database) throws -> [(offset: Int, problem: BulkImport.Problem)] {
        let others = entity.uniqueConstraints.filter { $0 != [key] }
        guard !others.isEmpty else { return [] }
        var problems: [(offset: Int, problem: BulkImport.Problem)] = []
        var taken: [Int: Set<[ExactKey]>] = [:]
        // Stored records an earlier record of the batch updates, with their
        // values after it: a key one of them gives up is free for the
        // records after it, as it would be were they saved one by one.
        var updatedEarlier: [RecordID: [String: Value]] = [:]
        for record in records where !skipping.contains(record.offset) {
            let old = stored[record.exact]
            var clashes = false
            defer {
                if !clashes, let old { updatedEarlier[old.0] = old.1.merging(record.values) { _, new in new } }
            }
            for (c, fields) in others.enumerated() {
                // A stored record keeping its key clashes with nothing new.
                if let old, fields.allSatisfy({ record.values[$0] == nil || StoreContext.same(old.1[$0], record.values[$0]) }) { continue }
                let values = fields.map { record.values[$0] ?? old?.1[$0] ?? entity.field(named: $0)?.defaultValue ?? .null }
                // SQL compares no null as equal: such a key clashes with none.
                guard !values.contains(where: \.isNull) else { continue }
                let shown = zip(fields, values).map { "\($0.0) \($0.1)" }.joined(separator: ", ")
                let exact = values.map(ExactKey.init)
                if !taken[c, default: []].insert(exact).inserted {
                    problems.append((record.offset, BulkImport.Problem(position: batch[record.offset].position, reason: "\(shown) is an earlier feature's of the same batch; \(entity.name) keeps it unique")))
                    clashes = true
                    break
                }
                let condition = fields.map { "\($0.quotedDatabaseIdentifier) = ?" }.joined(separator: " AND ")
                let holders = try RecordID.fetchAll(db, sql: "SELECT id FROM \(entity.name.quotedDatabaseIdentifier) WHERE \(condition) LIMIT 2",
                                                    arguments: StatementArguments(values.map(\.databaseValue)))
                let holder = holders.first { id in
                    guard id != old?.0 else { return false }
                    // Given up by an earlier record of the batch.
                    if let after = updatedEarlier[id] {
                        return fields.map { ExactKey(after[$0] ?? .null) } == exact
                    }
                    return true
                }
                if let holder {
                    problems.append((record.offset, BulkImport.Problem(position: batch[record.offset].position, reason: "\(shown) is already \(entity.name) \(holder)'s; \(entity.name) keeps it unique")))
                    clashes = true
                    break
                }
            }
        }
        return problems
    }

    /// The stored records holding `keys`, by key, read on `db`.
    private static func stored(_ keys: [Value], of entity: Entity, key: String, _ db: Database) throws -> [ExactKey: (RecordID, [String: Value])] {
        // Most keys of a feed's new records are stored nowhere: each is
        // looked up on the key's unique index, and only those found are
        // read whole.
        let ids = try db.rowIDs(in: entity.name, where: key, equals: keys)
        let held = zip(keys, ids).compactMap { $1 == nil ? nil : $0.databaseValue }
        guard !held.isEmpty else { return [:] }
        var found: [ExactKey: (RecordID, [String: Value])] = [:]
        for (id, values) in try Store.records(db, of: entity, where: key, in: held) {
            if let k = values[key] { found[ExactKey(k)] = (id, values) }
        }
        return found
    }

    /// A key value compared as SQLite compares it: text byte for byte
    /// (Swift's `String` equality would join two spellings of one word).
    struct ExactKey: Hashable, Sendable {
        private let value: Value

        init(_ value: Value) { self.value = value }

        static func == (a: ExactKey, b: ExactKey) -> Bool {
            if case .string(let x) = a.value, case .string(let y) = b.value { return x.utf8.elementsEqual(y.utf8) }
            if case .string = a.value { return false }
            if case .string = b.value { return false }
            return a.value == b.value
        }

        // Text hashed as one run of bytes, not byte by byte.
        func hash(into hasher: inout Hasher) {
            guard case .string(var text) = value else {
                hasher.combine(1 as UInt8)
                hasher.combine(value)
                return
            }
            hasher.combine(0 as UInt8)
            text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        }
    }

    /// What saving one batch of an import did.
    struct UpsertOutcome: Sendable {
        var inserted = 0
        var updated = 0
        var unchanged = 0
        /// Items folded into an earlier one with the same key.
        var folded = 0
        /// Items left out, by their place in the batch.
        var problems: [(offset: Int, problem: BulkImport.Problem)] = []
        /// Nothing was saved: the first problem stops the import.
        var stopped = false
    }
}
