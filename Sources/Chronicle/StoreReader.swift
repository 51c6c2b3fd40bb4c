import ChronicleCore
import GRDB
import Synchronization

/// Read-only GRDB access to a ``Store``'s snapshot: ``Store/reader``.
///
/// Every read runs on one of the snapshot's read-only connections, beside
/// the store's saves and imports, never queued behind them. Use it for
/// GRDB's requests and `ValueObservation`:
///
/// ```swift
/// let titles = ValueObservation.tracking { db in
///     try String.fetchAll(db, sql: "SELECT title FROM Note ORDER BY title")
/// }
/// for try await value in titles.values(in: store.reader) { show(value) }
/// ```
///
/// An observation fires after every local save and every import of other
/// devices' logs that changes the rows it reads. When the device moves to
/// a new ID (``Store/IdentityChange``), the store opens a new snapshot:
/// every observation started here moves to it and delivers a fresh value
/// read from it, and then goes on as before. When the store is closed,
/// every observation fails with ``ChronicleError/Code/closed``, and reads
/// throw it. An observation started after that fails at once: those of
/// ``Store/observe(_:)`` and ``Store/observeAll(_:where:arguments:orderedBy:)``
/// with ``ChronicleError/Code/closed``; a `ValueObservation` of the app's
/// with the error its fetch meets on an empty database.
///
/// Nothing can write through it: an observation that asks for write access
/// (`requiresWriteAccess`) reads like any other, and SQLite refuses a
/// statement that writes on a read-only connection. ``close()`` does
/// nothing: ``Store/close()`` closes the database.
public final class StoreReader: DatabaseReader {
    private struct Observation {
        var start: @Sendable (DatabasePool) -> AnyDatabaseCancellable
        var cancellable: AnyDatabaseCancellable?
    }

    private struct State {
        var pool: DatabasePool
        var closed = false
        var generation = 0
        var observations: [UInt64: Observation] = [:]
        var nextID: UInt64 = 0
    }

    // Mutex makes the reader safe to share across tasks.
    private let state: Mutex<State>
    private let closing = Atomic<Bool>(false)

    init(_ pool: DatabasePool) {
        state = Mutex(State(pool: pool))
    }

    /// The configuration of the snapshot's database.
    public var configuration: Configuration { state.withLock { $0.pool.configuration } }

    /// The path of the snapshot's database file.
    public var path: String { state.withLock { $0.pool.path } }

    /// Does nothing: the store owns its database (see ``Store/close()``).
    public func close() throws {}

    public func interrupt() {
        state.withLock { $0.pool }.interrupt()
    }

    @_disfavoredOverload
    public func read<T>(_ value: (Database) throws -> T) throws -> T {
        try guarded { try $0.read(value) }
    }

    public func read<T: Sendable>(_ value: @Sendable (Database) throws -> T) async throws -> T {
        let pool = try openPool()
        do {
            return try await pool.read(value)
        } catch {
            throw closedError(orRethrow: error)
        }
    }

    public func asyncRead(_ value: @escaping @Sendable (Result<Database, any Error>) -> Void) {
        do {
            try openPool().asyncRead(value)
        } catch {
            value(.failure(error))
        }
    }

    @_disfavoredOverload
    public func unsafeRead<T>(_ value: (Database) throws -> T) throws -> T {
        try guarded { try $0.unsafeRead(value) }
    }

    public func unsafeRead<T: Sendable>(_ value: @Sendable (Database) throws -> T) async throws -> T {
        let pool = try openPool()
        do {
            return try await pool.unsafeRead(value)
        } catch {
            throw closedError(orRethrow: error)
        }
    }

    public func asyncUnsafeRead(_ value: @escaping @Sendable (Result<Database, any Error>) -> Void) {
        do {
            try openPool().asyncUnsafeRead(value)
        } catch {
            value(.failure(error))
        }
    }

    public func unsafeReentrantRead<T>(_ value: (Database) throws -> T) throws -> T {
        try guarded { try $0.unsafeReentrantRead(value) }
    }

    public func _add<Reducer: ValueReducer>(
        observation: ValueObservation<Reducer>,
        scheduling scheduler: some ValueObservationScheduler,
        onChange: @escaping @Sendable (Reducer.Value) -> Void
    ) -> AnyDatabaseCancellable {
        var observation = observation
        // Reads only, on the read-only connections.
        observation.requiresWriteAccess = false
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        // A value fetched while the store closes ends the observation with
        // the store's error (``closeObservations()`` makes every one fetch).
        let guarded = observation
            .handleEvents(didFail: { [weak self] _ in self?.forget(id) })
            .map { [weak self] value in
                if self?.closing.load(ordering: .acquiring) ?? true {
                    throw ChronicleError(.closed, "the store was closed; this observation ended")
                }
                return value
            }
        let start: @Sendable (DatabasePool) -> AnyDatabaseCancellable = { pool in
            pool._add(observation: guarded, scheduling: scheduler, onChange: onChange)
        }
        let (pool, generation, closed) = state.withLock { state in
            if !state.closed { state.observations[id] = Observation(start: start, cancellable: nil) }
            return (state.pool, state.generation, state.closed)
        }
        if closed {
            // Started after close: run it on an empty database, where
            // Chronicle's observations (``Store/observe(_:)``) fail with the
            // store's error at their first fetch.
            guard let empty = try? DatabaseQueue() else { return AnyDatabaseCancellable {} }
            return empty._add(observation: guarded, scheduling: scheduler, onChange: onChange)
        }
        // Started outside the lock: an immediate scheduler calls `onChange` here.
        attach(id, start(pool), generation: generation)
        return AnyDatabaseCancellable { [weak self] in
            self?.forget(id)?.cancel()
        }
    }

    /// `fetch`, failing with ``ChronicleError/Code/closed`` once the store
    /// begins to close. An observation that drops values equal to the one
    /// before (`removeDuplicates`) delivers nothing when the store's
    /// closing makes it fetch an unchanged value, so only a failing fetch
    /// ends it.
    func endingAtClose<T>(_ fetch: @escaping @Sendable (Database) throws -> T) -> @Sendable (Database) throws -> T {
        { [self] db in
            if closing.load(ordering: .acquiring) { throw ChronicleError(.closed, "the store was closed; this observation ended") }
            return try fetch(db)
        }
    }

    // MARK: The store's side

    /// Moves every observation to `pool` (the device's new snapshot); each
    /// delivers a value read from it.
    func switchTo(_ pool: DatabasePool) {
        let (old, starts, generation) = state.withLock { state in
            state.pool = pool
            state.generation += 1
            let old = state.observations.values.compactMap(\.cancellable)
            for id in state.observations.keys { state.observations[id]?.cancellable = nil }
            return (old, state.observations.map { ($0.key, $0.value.start) }, state.generation)
        }
        for cancellable in old { cancellable.cancel() }
        for (id, start) in starts { attach(id, start(pool), generation: generation) }
    }

    /// Lets the detached observations (before a move) stop watching the old
    /// snapshot, whose database is about to close.
    func detachObservations() {
        let old = state.withLock { state in
            state.generation += 1
            let old = state.observations.values.compactMap(\.cancellable)
            for id in state.observations.keys { state.observations[id]?.cancellable = nil }
            return old
        }
        for cancellable in old { cancellable.cancel() }
    }

    /// Ends every observation with ``ChronicleError/Code/closed`` and makes
    /// every later read throw it. Waits (a bounded time) for the
    /// observations to have ended, before the database closes.
    func closeObservations() async {
        closing.store(true, ordering: .releasing)
        let (pool, waiting) = state.withLock { state in
            state.closed = true
            return (state.pool, !state.observations.isEmpty)
        }
        guard waiting else { return }
        // Every observation fetches again, and its guard ends it.
        try? await pool.write { db in try db.notifyChanges(in: .fullDatabase) }
        let deadline = ContinuousClock.now.advanced(by: .seconds(2))
        while state.withLock({ !$0.observations.isEmpty }), ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(1))
        }
        let left = state.withLock { state in
            defer { state.observations.removeAll() }
            return state.observations.values.compactMap(\.cancellable)
        }
        for cancellable in left { cancellable.cancel() }
    }

    // MARK: Helpers

    private func attach(_ id: UInt64, _ cancellable: AnyDatabaseCancellable, generation: Int) {
        let kept = state.withLock { state in
            guard state.generation == generation, state.observations[id] != nil else { return false }
            state.observations[id]?.cancellable = cancellable
            return true
        }
        // Cancelled meanwhile, or moved to another snapshot (which started it there).
        if !kept { cancellable.cancel() }
    }

    @discardableResult
    private func forget(_ id: UInt64) -> AnyDatabaseCancellable? {
        state.withLock { $0.observations.removeValue(forKey: id)?.cancellable }
    }

    private func openPool() throws -> DatabasePool {
        try state.withLock { state in
            guard !state.closed else { throw Self.closedError() }
            return state.pool
        }
    }

    private func guarded<T>(_ body: (DatabasePool) throws -> T) throws -> T {
        let pool = try openPool()
        do {
            return try body(pool)
        } catch {
            throw closedError(orRethrow: error)
        }
    }

    /// The store's error if it was closed meanwhile (GRDB then reports its
    /// connection closed), else `error`.
    private func closedError(orRethrow error: any Error) -> any Error {
        state.withLock { $0.closed } ? Self.closedError() : error
    }

    static func closedError() -> ChronicleError {
        ChronicleError(.closed, "the store is closed")
    }
}
