import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Synchronization

/// A workspace of records over a ``Store``: it reads records, holds the
/// changes made to them in memory, and saves those changes together, as
/// one transaction log, or into its parent context.
///
/// Four kinds, after the contexts of a Core Data stack:
///
/// - The **main context** (``Store/mainContext``) is the read side of an
///   app's UI. It reads on the snapshot's read-only connections, so it
///   never waits behind a save or an import, and it can be made read-only
///   (``isReadOnly``). Its merge policy favours the store.
/// - A **background context** (``Store/newBackgroundContext(mergePolicy:)``)
///   is for imports and other work off the UI: it saves through the
///   store's writer, and its changes win per attribute.
/// - A **child context** (``newChildContext(mergePolicy:)``) is an edit
///   session: saving it pushes its changes into its parent, all or
///   nothing, and only saving the parent (up to a context of the store)
///   writes them, as one log. Dropping it discards its changes. Children nest.
/// - A **scratch context** (``newScratchContext()``) is a child whose
///   changes are never saved anywhere.
///
/// Changes saved by any context, and other devices' saves imported by a
/// sync, reach the contexts of the store (main and background) as they
/// commit: the records a context holds are refreshed, and nothing else is
/// loaded (``automaticallyMergesChanges``, ``changes()``). A record changed
/// both in a context and underneath it is settled by the context's
/// ``MergePolicy``, when the change arrives and again when it saves.
///
/// ```swift
/// let main = store.mainContext
/// var note = try await main.fetch(Note.self, id: id)!
/// note.title = "Groceries for Sunday"
/// try await main.update(note)
/// try await main.save()                 // one transaction log
///
/// let editor = main.newChildContext()   // an edit sheet
/// try await editor.update("Note", id: id, ["pinned": true])
/// try await editor.save()               // into main; nothing written yet
/// try await main.save()
/// ```
///
/// A context is safe to use from any task or actor, the main actor
/// included: reads and changes take a lock for a moment, and only saves of
/// the store's contexts wait for the store.
///
/// Queries (``fetchAll(_:where:arguments:orderedBy:)``) run on the store's
/// committed records and show this context's changes to the records they
/// return (a record deleted in the context is left out); records inserted
/// in the context and not saved yet are reached by their ID until they are
/// saved. Observations (``observe(_:)``) follow what is committed.
public final class StoreContext: Sendable {
    /// What a context is for; see ``StoreContext``.
    public enum Kind: String, Sendable, Hashable {
        /// The store's main context.
        case main
        /// A background (importer) context.
        case background
        /// A child (creator) context.
        case child
        /// A scratch context, never saved.
        case scratch
    }

    /// What a context's save did.
    public struct SaveResult: Sendable {
        /// The records written: inserted, updated or deleted.
        public var savedRecords: Int
        /// Conflicts the merge policy settled, each the way the policy
        /// says (never any under ``MergePolicy/error``, which refuses the
        /// save instead).
        public var resolved: [MergeConflict]
    }

    /// What changed in a context without a change of its own: records it
    /// holds, refreshed by an automatic merge or by a child's save.
    public struct Change: Sendable {
        /// Records that now show different values.
        public var refreshed: Set<RecordReference>
        /// Records that were deleted underneath and are no longer held.
        public var removed: Set<RecordReference>
        /// Changes the context's merge policy dropped in favour of what was
        /// underneath.
        public var dropped: [MergeConflict]
    }

    /// What the context is.
    public let kind: Kind
    /// The store it reads and saves to, through its parents.
    public let store: Store
    /// The context a child or scratch context saves into; nil for the
    /// store's contexts.
    public let parent: StoreContext?

    /// A record as this context holds it.
    struct Entry: Sendable, Equatable {
        /// What the context read (or last merged): the base of its changes.
        /// Nil for a record inserted in this context.
        var base: [String: Value]?
        /// Attributes changed in this context.
        var changed: [String: Value] = [:]
        /// Stored values of attributes that changed underneath and that
        /// the context also changed, kept apart from the base under
        /// ``MergePolicy/error`` so that the save still finds the conflict:
        /// what the context shows once it drops its own change.
        var underneath: [String: Value] = [:]
        /// Deleted in this context.
        var deleted = false
        /// When the record was first changed, to save in that order; 0 when unchanged.
        var order: UInt64 = 0
        /// The record as the context last handed it out as a typed record:
        /// what ``StoreContext/update(_:)-(R)`` compares a record with, so
        /// that a field the app did not change (and that changed
        /// underneath since) is not written back.
        var delivered: [String: Value]?
        /// Deleted underneath while the context changed it, kept under
        /// ``MergePolicy/error`` for the save to report: a rollback drops it.
        var gone = false

        var hasChanges: Bool { deleted || base == nil || !changed.isEmpty }

        /// What the context shows; nil once deleted.
        var view: [String: Value]? {
            if deleted { return nil }
            return stored.merging(changed) { _, new in new }
        }

        /// What is underneath, as far as the context knows.
        var stored: [String: Value] {
            (base ?? [:]).merging(underneath) { _, new in new }
        }
    }

    struct State {
        var entries: [RecordReference: Entry] = [:]
        var nextOrder: UInt64 = 1
        var mergePolicy: MergePolicy
        var isReadOnly = false
        var automaticallyMerges: Bool
        var ids: RecordIDGenerator
        /// Counts the store's commits seen, so a read that raced one is
        /// not kept as what the context holds.
        var epoch: UInt64 = 0
        /// Records a save under way is writing.
        var saving: Set<RecordReference> = []
        var subscribers: [UInt64: AsyncStream<Change>.Continuation] = [:]
        var nextSubscriber: UInt64 = 0

        mutating func stamp() -> UInt64 {
            defer { nextOrder += 1 }
            return nextOrder
        }

        /// Sets attributes of the held record `key`: a value equal to what
        /// was read (and not changed underneath since) is no change.
        mutating func change(_ key: RecordReference, _ values: [String: Value]) {
            guard var entry = entries[key] else { return }
            for (name, value) in values {
                if let base = entry.base, StoreContext.same(base[name], value), entry.underneath[name] == nil {
                    entry.changed[name] = nil
                } else {
                    entry.changed[name] = value
                }
            }
            if entry.order == 0, entry.hasChanges { entry.order = stamp() }
            entries[key] = entry
        }

        /// Deletes the held record `key`. One inserted here is forgotten,
        /// unless a save under way is inserting it: then the next save
        /// deletes it.
        mutating func delete(_ key: RecordReference) {
            guard var entry = entries[key] else { return }
            if entry.base == nil {
                guard saving.contains(key) else {
                    entries[key] = nil
                    return
                }
                entry.base = entry.changed
            }
            entry.deleted = true
            entry.changed = [:]
            if entry.order == 0 { entry.order = stamp() }
            entries[key] = entry
        }
    }

    let state: Mutex<State>
    /// One save at a time.
    let saving = AsyncGate()
    /// The store's listener for this context, removed when it goes.
    private let listener: Mutex<UInt64?> = Mutex(nil)

    init(kind: Kind, store: Store, parent: StoreContext?, mergePolicy: MergePolicy, seed: UInt64) {
        self.kind = kind
        self.store = store
        self.parent = parent
        self.state = Mutex(State(mergePolicy: mergePolicy, automaticallyMerges: parent == nil, ids: RecordIDGenerator(seed: seed)))
        if parent == nil {
            let id = store.listen { [weak self] events in self?.storeDidChange(events) }
            listener.withLock { $0 = id }
        }
    }

    deinit {
        if let id = listener.withLock({ $0 }) { store.stopListening(id) }
        for continuation in state.withLock({ $0.subscribers.values }) { continuation.finish() }
    }

    // MARK: Options

    /// How a record changed both here and underneath is settled; see ``MergePolicy``.
    public var mergePolicy: MergePolicy {
        get { state.withLock { $0.mergePolicy } }
        set { state.withLock { $0.mergePolicy = newValue } }
    }

    /// Whether changes and saves are refused
    /// (``ChronicleError/Code/readOnlyContext``). False unless set; a
    /// scratch context takes changes, and refuses only saves.
    public var isReadOnly: Bool {
        get { state.withLock { $0.isReadOnly } }
        set { state.withLock { $0.isReadOnly = newValue } }
    }

    /// Whether the records this context holds are refreshed as saves and
    /// imports commit in the store (true by default for the store's
    /// contexts; a child context reads its parent's records as they are
    /// when it first reads them and never merges automatically).
    /// Turned off, the context keeps showing what it read, and its
    /// saves settle what changed underneath by its merge policy.
    public var automaticallyMergesChanges: Bool {
        get { state.withLock { $0.automaticallyMerges } }
        set { state.withLock { $0.automaticallyMerges = newValue && parent == nil } }
    }

    /// Whether the context holds changes not saved yet.
    public var hasChanges: Bool {
        state.withLock { $0.entries.values.contains { $0.hasChanges } }
    }

    /// The records the context holds (read, or changed), sorted.
    public var registeredRecords: [RecordReference] {
        state.withLock { $0.entries.keys.sorted() }
    }

    /// The records with changes not saved yet, in the order they were first changed.
    public var changedRecords: [RecordReference] {
        state.withLock { $0.entries.filter { $0.value.hasChanges }.sorted { $0.value.order < $1.value.order }.map(\.key) }
    }

    // MARK: Contexts

    /// A child context: an edit session whose ``save()`` pushes its changes
    /// into this context, all or nothing.
    ///
    /// - Parameter mergePolicy: how the child settles records this context
    ///   changed since the child read them; by default the child's values win.
    public func newChildContext(mergePolicy: MergePolicy = .memoryTrumps) -> StoreContext {
        StoreContext(kind: .child, store: store, parent: self, mergePolicy: mergePolicy, seed: nextSeed())
    }

    /// A scratch context: a child of this context for changes that are
    /// never saved (its ``save()`` throws ``ChronicleError/Code/readOnlyContext``).
    public func newScratchContext() -> StoreContext {
        StoreContext(kind: .scratch, store: store, parent: self, mergePolicy: .memoryTrumps, seed: nextSeed())
    }

    private func nextSeed() -> UInt64 { store.nextContextSeed() }

    // MARK: Reading

    /// The values of a record as this context shows them, or nil if it
    /// does not exist here (or was deleted in this context).
    ///
    /// A record the context does not hold yet is read from its parent (the
    /// store's committed records, for the store's contexts) and held from
    /// then on.
    public func values(of entity: String, id: RecordID) async throws -> [String: Value]? {
        let entity = try checkedEntity(entity)
        return try await view(RecordReference(entity.name, id))
    }

    /// A record of a Codable type as this context shows it, or nil.
    public func fetch<R: ChronicleRecord>(_ type: R.Type, id: RecordID) async throws -> R? {
        let entity = try checkedEntity(R.entityName)
        let key = RecordReference(entity.name, id)
        guard let values = try await view(key) else { return nil }
        let record = try RecordCoding.record(R.self, id: id, values: values, entity: entity)
        delivered(key, values)
        return record
    }

    /// Notes what the app was handed for a record.
    private func delivered(_ key: RecordReference, _ values: [String: Value]) {
        state.withLock { s in s.entries[key]?.delivered = values }
    }

    /// The records of a Codable type, filtered and ordered, as this context
    /// shows them (see ``StoreContext`` for what queries see). The records
    /// returned are held by the context from then on.
    ///
    /// - Parameters:
    ///   - filter: an SQL condition on the entity's fields, with its
    ///     `arguments`; nil for every record.
    ///   - order: the fields to order by, then the record ID.
    ///   - limit: the most records to read from the store; nil for all.
    public func fetchAll<R: ChronicleRecord>(_ type: R.Type, where filter: String? = nil, arguments: StatementArguments = [],
                                             orderedBy order: [RecordOrder] = [], limit: Int? = nil) async throws -> [R] {
        let entity = try checkedEntity(R.entityName)
        let sql = try Store.recordSQL(entity, filter: filter, order: order, limit: limit)
        var attempt = 0
        while true {
            attempt += 1
            let epoch = root.state.withLock { $0.epoch }
            let arguments = arguments
            let rows = try await store.reader.read { db in
                try Row.fetchAll(db, sql: sql, arguments: arguments).map { row -> (RecordID, [String: Value]) in
                    guard let id = RecordID.fromDatabaseValue(row["id"]) else {
                        throw ChronicleError(.database, "a \(entity.name) row has no valid record ID")
                    }
                    return (id, try Store.values(row, entity: entity))
                }
            }
            // A commit between the query and now: what the query read may
            // be older than what an automatic merge just refreshed.
            if root.state.withLock({ $0.epoch }) != epoch, attempt < 3 { continue }
            var records: [R] = []
            records.reserveCapacity(rows.count)
            for (id, stored) in rows {
                let key = RecordReference(entity.name, id)
                guard let values = adopt(key, stored: stored) else { continue }
                records.append(try RecordCoding.record(R.self, id: id, values: values, entity: entity))
                delivered(key, values)
            }
            return records
        }
    }

    /// Observes what `fetch` reads from the store's committed records; see
    /// ``Store/observe(_:)``.
    public func observe<T: Sendable>(_ fetch: @escaping @Sendable (Database) throws -> T) -> AsyncValueObservation<T> {
        store.observe(fetch)
    }

    /// Observes what `fetch` reads from the store's committed records,
    /// without delivering a value equal to the one before; see
    /// ``Store/observe(_:)``.
    public func observe<T: Sendable & Equatable>(_ fetch: @escaping @Sendable (Database) throws -> T) -> AsyncValueObservation<T> {
        store.observe(fetch)
    }

    /// Observes the committed records of a Codable type; see
    /// ``Store/observeAll(_:where:arguments:orderedBy:)``.
    public func observeAll<R: ChronicleRecord>(_ type: R.Type, where filter: String? = nil, arguments: StatementArguments = [],
                                               orderedBy order: [RecordOrder] = []) throws -> AsyncValueObservation<[R]> {
        try store.observeAll(R.self, where: filter, arguments: arguments, orderedBy: order)
    }

    /// What this context shows for `key`, reading it from the parent (and
    /// holding it) if it holds nothing yet.
    func view(_ key: RecordReference) async throws -> [String: Value]? {
        if let entry = state.withLock({ $0.entries[key] }) { return entry.view }
        var attempt = 0
        while true {
            attempt += 1
            let epoch = root.state.withLock { $0.epoch }
            let loaded: [String: Value]?
            if let parent {
                loaded = try await parent.view(key)
            } else {
                loaded = try await store.storedValues(key)
            }
            if root.state.withLock({ $0.epoch }) != epoch, attempt < 3 { continue }
            return state.withLock { s in
                if let entry = s.entries[key] { return entry.view }
                guard let loaded else { return nil }
                s.entries[key] = Entry(base: loaded)
                return loaded
            }
        }
    }

    /// What this context shows for `key`, given the store's `stored`
    /// values: what the nearest context holding it shows, else `stored`;
    /// held from then on along the way.
    private func adopt(_ key: RecordReference, stored: [String: Value]) -> [String: Value]? {
        if let entry = state.withLock({ $0.entries[key] }) { return entry.view }
        let seen: [String: Value]? = if let parent { parent.adopt(key, stored: stored) } else { stored }
        guard let seen else { return nil }
        return state.withLock { s in
            if let entry = s.entries[key] { return entry.view }
            s.entries[key] = Entry(base: seen)
            return seen
        }
    }

    /// The context of the store at the top of this one's parents.
    var root: StoreContext { parent?.root ?? self }

    func checkedEntity(_ name: String) throws -> Entity {
        guard let entity = store.configuration.schema.entity(named: name) else {
            throw ChronicleError(.unknownEntity, "no entity named \(name)")
        }
        return entity
    }

    // MARK: Changing

    /// Inserts a record of `entity` in this context; fields left out get
    /// their defaults when it is saved to the store. Returns its ID.
    @discardableResult
    public func insert(_ entity: String, _ values: [String: Value], id: RecordID? = nil) throws -> RecordID {
        let entity = try checkedEntity(entity)
        try checkFields(values.keys, of: entity)
        return try state.withLock { s in
            try checkWritable(s)
            let id = id ?? s.ids.next(milliseconds: store.configuration.clock.nowMilliseconds())
            let key = RecordReference(entity.name, id)
            guard s.entries[key] == nil else {
                throw ChronicleError(.recordExists, "this context already holds \(key)")
            }
            s.entries[key] = Entry(base: nil, changed: values, order: s.stamp())
            return id
        }
    }

    /// Inserts a record of `entity` from plain Swift values (see
    /// ``ChronicleValueConvertible``); nil stores null.
    @discardableResult @_disfavoredOverload
    public func insert(_ entity: String, _ values: [String: (any ChronicleValueConvertible)?], id: RecordID? = nil) throws -> RecordID {
        try insert(entity, Self.converted(values), id: id)
    }

    /// Sets some attributes of a record in this context; the others keep
    /// their values.
    ///
    /// - Throws: ``ChronicleError/Code/recordNotFound`` if the record does
    ///   not exist here.
    public func update(_ entity: String, id: RecordID, _ values: [String: Value]) async throws {
        let entity = try checkedEntity(entity)
        try checkFields(values.keys, of: entity)
        try state.withLock { try checkWritable($0) }
        let key = RecordReference(entity.name, id)
        guard try await view(key) != nil else {
            throw ChronicleError(.recordNotFound, "no \(key) in this context")
        }
        try held(key) { s in s.change(key, values) }
    }

    /// Sets some attributes of a record from plain Swift values.
    @_disfavoredOverload
    public func update(_ entity: String, id: RecordID, _ values: [String: (any ChronicleValueConvertible)?]) async throws {
        try await update(entity, id: id, Self.converted(values))
    }

    /// Deletes a record in this context. A record inserted in this context
    /// and not saved is simply forgotten.
    ///
    /// - Throws: ``ChronicleError/Code/recordNotFound`` if the record does
    ///   not exist here.
    public func delete(_ entity: String, id: RecordID) async throws {
        let entity = try checkedEntity(entity)
        try state.withLock { try checkWritable($0) }
        let key = RecordReference(entity.name, id)
        guard try await view(key) != nil else {
            throw ChronicleError(.recordNotFound, "no \(key) in this context")
        }
        try held(key) { s in s.delete(key) }
    }

    /// Changes the held record `key` under the lock, if the context is
    /// writable and still shows it.
    private func held(_ key: RecordReference, _ body: (inout State) -> Void) throws {
        try state.withLock { s in
            try checkWritable(s)
            guard let entry = s.entries[key], !entry.deleted else {
                throw ChronicleError(.recordNotFound, "no \(key) in this context")
            }
            body(&s)
        }
    }

    /// Inserts a Codable record: every field its type declares (see
    /// ``ChronicleRecord``).
    public func insert<R: ChronicleRecord>(_ record: R) throws {
        let entity = try checkedEntity(R.entityName)
        try insert(entity.name, RecordCoding.values(of: record, entity: entity), id: record.id)
    }

    /// Changes a Codable record: the fields its type declares that differ
    /// from the copy this context last handed out (by ``fetch(_:id:)`` or
    /// ``fetchAll(_:where:arguments:orderedBy:limit:)``), or, for a record it
    /// never handed out, from what it shows. A field that changed
    /// underneath since that copy was made, and that the app left as it
    /// was, keeps its new value. An older copy (fetched before the last
    /// one) may hold values that went stale since: update it with
    /// ``update(_:from:)``, giving the copy it started from.
    public func update<R: ChronicleRecord>(_ record: R) async throws {
        let entity = try checkedEntity(R.entityName)
        let new = try RecordCoding.values(of: record, entity: entity)
        let key = RecordReference(entity.name, record.id)
        guard try await view(key) != nil else {
            throw ChronicleError(.recordNotFound, "no \(key) in this context")
        }
        let handed = state.withLock { $0.entries[key]?.delivered }
        let changes = handed.map { handed in new.filter { !Self.same(handed[$0.key], $0.value) } } ?? new
        try await update(entity.name, id: record.id, changes)
        // The app holds this version now.
        state.withLock { s in
            guard handed != nil, s.entries[key] != nil else { return }
            let now = (s.entries[key]?.delivered ?? [:]).merging(new) { _, value in value }
            s.entries[key]?.delivered = now
        }
    }

    /// Changes a Codable record: the fields that differ between `record`
    /// and `original`, the copy the app started from. The one to use when
    /// the app holds copies of a record from different moments (a list
    /// and a detail view): a field the app did not change is never written,
    /// whatever changed underneath since either copy was made.
    ///
    /// ```swift
    /// var draft = original
    /// draft.title = "Groceries for Sunday"
    /// try await context.update(draft, from: original)
    /// ```
    public func update<R: ChronicleRecord>(_ record: R, from original: R) async throws {
        let entity = try checkedEntity(R.entityName)
        guard record.id == original.id else {
            throw ChronicleError(.misuse, "update(_:from:) compares two copies of one record, not \(original.id) and \(record.id)")
        }
        let new = try RecordCoding.values(of: record, entity: entity)
        let old = try RecordCoding.values(of: original, entity: entity)
        try await update(entity.name, id: record.id, new.filter { !Self.same(old[$0.key], $0.value) })
    }

    /// Deletes a Codable record.
    public func delete<R: ChronicleRecord>(_ record: R) async throws {
        try await delete(R.entityName, id: record.id)
    }

    /// Deletes the record of type `R` with ID `id`.
    public func delete<R: ChronicleRecord>(_ type: R.Type, id: RecordID) async throws {
        try await delete(R.entityName, id: id)
    }

    /// Discards every change not saved yet; the records show what is
    /// stored, as far as the context knows (what it read, and what
    /// automatic merges brought since).
    public func rollback() {
        state.withLock { s in
            for (key, entry) in s.entries {
                if entry.base != nil, !entry.gone { s.entries[key] = Entry(base: entry.stored, delivered: entry.delivered) } else { s.entries[key] = nil }
            }
        }
    }

    /// Discards every change and forgets every record held.
    public func reset() {
        state.withLock { $0.entries.removeAll() }
    }

    /// Shows what the parent (or the store) holds now for `records`,
    /// keeping this context's changes to them; nothing for records not held.
    ///
    /// - Throws: ``ChronicleError/Code/unknownEntity`` for a record of an
    ///   entity the schema lacks.
    public func refresh(_ records: [RecordReference]) async throws {
        for key in records { _ = try checkedEntity(key.entity) }
        for key in records {
            guard state.withLock({ $0.entries[key]?.base != nil }) else { continue }
            let current: [String: Value]?
            if let parent { current = try await parent.view(key) } else { current = try await store.storedValues(key) }
            let change = state.withLock { s in merge(key, current: current, &s, policy: .memoryTrumps) }
            publish(change)
        }
    }

    // MARK: Change stream

    /// A stream of what changed in this context without a change of its
    /// own: records refreshed by automatic merges or by a child's save,
    /// and changes its merge policy dropped. The stream ends when the
    /// context goes.
    public func changes() -> AsyncStream<Change> {
        let (stream, continuation) = AsyncStream<Change>.makeStream(bufferingPolicy: .unbounded)
        let id = state.withLock { s in
            s.nextSubscriber += 1
            s.subscribers[s.nextSubscriber] = continuation
            return s.nextSubscriber
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    func publish(_ change: Change?) {
        guard let change, !(change.refreshed.isEmpty && change.removed.isEmpty && change.dropped.isEmpty) else { return }
        for continuation in state.withLock({ Array($0.subscribers.values) }) { continuation.yield(change) }
    }

    // MARK: Helpers

    func checkWritable(_ s: State) throws {
        if s.isReadOnly {
            throw ChronicleError(.readOnlyContext, "this \(kind.rawValue) context is read-only: it refuses changes and saves")
        }
    }

    private func checkFields(_ names: Dictionary<String, Value>.Keys, of entity: Entity) throws {
        for name in names where entity.field(named: name) == nil {
            throw ChronicleError(.unknownAttribute, "\(entity.name) has no field \(name)")
        }
    }

    static func converted(_ values: [String: (any ChronicleValueConvertible)?]) throws -> [String: Value] {
        var result: [String: Value] = [:]
        for (name, value) in values {
            do {
                result[name] = try value?.chronicleValue() ?? .null
            } catch {
                throw ChronicleError(error.code, "\(name): \(error.message)")
            }
        }
        return result
    }

    /// Whether two values are the same for a save (decimals by value).
    static func same(_ a: Value?, _ b: Value?) -> Bool {
        switch (a, b) {
        case (nil, nil): return true
        case (nil, .some(let v)), (.some(let v), nil): return v.isNull
        case (.some(.decimal(let x)), .some(.decimal(let y))): return x == y
        case (.some(let x), .some(let y)): return x == y
        }
    }
}

/// Lets one task at a time through, in order of arrival.
final class AsyncGate: Sendable {
    private struct State {
        var busy = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    func enter() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let go = state.withLock { s in
                if !s.busy {
                    s.busy = true
                    return true
                }
                s.waiters.append(continuation)
                return false
            }
            if go { continuation.resume() }
        }
    }

    func leave() {
        let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if s.waiters.isEmpty {
                s.busy = false
                return nil
            }
            return s.waiters.removeFirst()
        }
        next?.resume()
    }
}
