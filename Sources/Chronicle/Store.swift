import Foundation
import Logging

/// A Chronicle store on one device: the public API.
///
/// ```swift
/// let store = try await Store.open(Store.Configuration(
///     schema: schema, deviceID: deviceID,
///     directory: appSupport.appendingPathComponent("chronicle"),
///     container: try DirectoryContainer(root: sharedFolder),
///     logger: Logger(label: "app.chronicle")))
/// let id = try await store.write { tx in
///     tx.insert("Book", ["title": "The Dispossessed", "pages": 387])
/// }
/// try await store.sync()
/// let titles = try await store.read { db in try String.fetchAll(db, sql: "SELECT title FROM Book") }
/// ```
///
/// Every save is validated, applied to the local snapshot and appended to the
/// outbox in one SQLite transaction: once `write` returns, the save survives a
/// crash. ``sync()`` uploads the outbox and imports other devices' logs.
/// Reads see the snapshot through read-only connections, so nothing can write
/// around Chronicle.
public actor Store {
    /// How to open a store.
    public struct Configuration: Sendable {
        /// The data model.
        public var schema: Schema
        /// This device's stable ID.
        public var deviceID: DeviceID
        /// The device's own folder, for its snapshot files.
        public var directory: URL
        /// The shared container.
        public var container: any Container
        /// The wall clock (injected so simulations can drive it).
        public var clock: any PhysicalClock
        /// Seeds the random part of new record IDs.
        public var seed: UInt64
        /// Where diagnostics go.
        public var logger: Logger
        /// How hard commits push data to disk.
        public var durability: Snapshot.Durability
        /// Bounds for decoding logs from the container.
        public var limits: DecodingLimits
        /// The store this device last used, if known. If the container has
        /// lost its active-store pointer (a wiped or reset container), the
        /// device puts this one back instead of starting a new store.
        public var knownStore: StoreID?
        /// Crash points for simulations; nil in production.
        public var crashInjector: CrashInjector?

        /// Creates a configuration with sensible defaults: the system clock,
        /// a random seed, full durability and 64 MiB log bodies.
        public init(
            schema: Schema, deviceID: DeviceID, directory: URL, container: any Container,
            clock: any PhysicalClock = SystemClock(), seed: UInt64 = UInt64.random(in: 0...UInt64.max),
            logger: Logger, durability: Snapshot.Durability = .full, limits: DecodingLimits = DecodingLimits(),
            knownStore: StoreID? = nil, crashInjector: CrashInjector? = nil
        ) {
            self.knownStore = knownStore
            self.crashInjector = crashInjector
            self.schema = schema
            self.deviceID = deviceID
            self.directory = directory
            self.container = container
            self.clock = clock
            self.seed = seed
            self.logger = logger
            self.durability = durability
            self.limits = limits
        }
    }

    /// What one ``sync()`` did.
    public struct SyncReport: Sendable {
        /// Logs uploaded.
        public var uploadedLogs: Int
        /// What the import pass did.
        public var imported: ImportReport
    }

    /// The configuration the store was opened with.
    public nonisolated let configuration: Configuration
    /// The active store's ID.
    public nonisolated let storeID: StoreID
    /// The device's snapshot.
    public nonisolated let snapshot: Snapshot
    private let replayer: Replayer
    private var ids: RecordIDGenerator
    private let hub: EventHub
    private var syncTask: Task<Void, Never>?

    private init(configuration: Configuration, storeID: StoreID, snapshot: Snapshot) {
        self.configuration = configuration
        self.storeID = storeID
        self.snapshot = snapshot
        let hub = EventHub()
        self.hub = hub
        var replayer = Replayer(snapshot: snapshot, container: configuration.container,
                                limits: configuration.limits, logger: configuration.logger)
        // Subscribers see imported changes as each batch commits.
        replayer.eventSink = { [hub] events in hub.publish(events) }
        self.replayer = replayer
        self.ids = RecordIDGenerator(seed: configuration.seed)
    }

    /// Opens the container's active store on this device, creating the
    /// store (and the active-store pointer) if the container has none.
    public static func open(_ configuration: Configuration) async throws -> Store {
        let storeID = try await activeStore(in: configuration.container, seed: configuration.seed, clock: configuration.clock,
                                            known: configuration.knownStore)
        do {
            try FileManager.default.createDirectory(at: configuration.directory, withIntermediateDirectories: true)
        } catch {
            throw ChronicleError(.io, "cannot create device directory \(configuration.directory.path): \(error.localizedDescription)")
        }
        let path = configuration.directory.appendingPathComponent("\(storeID).sqlite").path
        let snapshot = try Snapshot(path: path, schema: configuration.schema, storeID: storeID,
                                    deviceID: configuration.deviceID, durability: configuration.durability,
                                    crashInjector: configuration.crashInjector)
        let store = Store(configuration: configuration, storeID: storeID, snapshot: snapshot)
        configuration.logger.info("opened store", metadata: [
            "chronicle.store": "\(storeID)", "chronicle.device": "\(configuration.deviceID)",
        ])
        return store
    }

    /// The store the container's active-store pointer names; creates one if none.
    public static func activeStore(in container: any Container, seed: UInt64, clock: any PhysicalClock = SystemClock(),
                                   known: StoreID? = nil) async throws -> StoreID {
        let marker: Marker?
        do {
            marker = try await container.readMarker(ContainerLayout.activeStore)
        } catch let error as ChronicleError where error.code.isTransient && known != nil {
            // Offline start: a device that knows its store opens it without the container.
            return known!
        }
        if let marker {
            return try parseActiveStore(marker.bytes)
        }
        var random = SeededRandom(seed: seed ^ 0x5354_4F52_4549_4453)
        var generator = RecordIDGenerator(seed: random.next())
        let candidate = known ?? StoreID(generator.next(milliseconds: clock.nowMilliseconds()))
        do {
            _ = try await container.createMarker(ContainerLayout.activeStore, Array("{\"store\":\"\(candidate)\"}".utf8))
            return candidate
        } catch let error as ChronicleError where error.code.isTransient && known != nil {
            return known!
        } catch let error as ChronicleError where error.code == .markerConflict {
            // Another device created it first: use theirs.
            guard let marker = try await container.readMarker(ContainerLayout.activeStore) else { throw error }
            return try parseActiveStore(marker.bytes)
        }
    }

    static func parseActiveStore(_ bytes: [UInt8]) throws -> StoreID {
        guard case .object(let o)? = try? JSONDecoder().decode(JSONValue.self, from: Data(bytes)),
              case .string(let s)? = o["store"], let id = StoreID(string: s)
        else {
            throw ChronicleError(.malformedBody, "the active-store marker is not {\"store\": \"<uuid>\"}")
        }
        return id
    }

    // MARK: Writing

    /// Runs `body` to collect changes, then saves them as one transaction.
    ///
    /// - Returns: what `body` returned.
    /// - Throws: what `body` throws, or a ``ChronicleError`` from validation
    ///   (nothing is saved then).
    @discardableResult
    public func write<T>(_ body: (inout WriteTransaction) throws -> T) throws -> T {
        try writeReporting(body).value
    }

    /// Like ``write(_:)``, and also returns what the save did (its sequence,
    /// clock and events), or nil when `body` made no changes.
    public func writeReporting<T>(_ body: (inout WriteTransaction) throws -> T) throws -> (value: T, save: Snapshot.SaveResult?) {
        let now = configuration.clock.nowMilliseconds()
        let snapshot = self.snapshot
        var tx = WriteTransaction(schema: configuration.schema, ids: ids, milliseconds: now) { entity, id in
            try Store.row(snapshot, entity: entity, id: id)
        }
        let result = try body(&tx)
        ids = tx.generator
        guard !tx.changes.isEmpty else { return (result, nil) }
        let saved = try snapshot.save(tx.changes, physicalMilliseconds: now)
        hub.publish(saved.events)
        return (result, saved)
    }

    // MARK: Reading

    /// Runs `body` on a read-only connection to the snapshot.
    public func read<T>(_ body: (Database) throws -> T) throws -> T {
        try snapshot.read(body)
    }

    /// All records of a Codable type, in ID order.
    public func fetchAll<R: ChronicleRecord>(_ type: R.Type) throws -> [R] {
        guard let entity = configuration.schema.entity(named: R.entityName) else {
            throw ChronicleError(.unknownEntity, "no entity named \(R.entityName)")
        }
        return try snapshot.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM \"\(entity.name)\" ORDER BY id").map { row in
                try RecordCoding.record(R.self, id: row["id"], values: try Store.values(row, entity: entity))
            }
        }
    }

    /// One record of a Codable type, or nil.
    public func fetch<R: ChronicleRecord>(_ type: R.Type, id: RecordID) throws -> R? {
        try Store.row(snapshot, entity: R.entityName, id: id).map { try RecordCoding.record(R.self, id: id, values: $0) }
    }

    /// The values of one visible record, or nil.
    public func values(of entity: String, id: RecordID) throws -> [String: Value]? {
        try Store.row(snapshot, entity: entity, id: id)
    }

    static func row(_ snapshot: Snapshot, entity name: String, id: RecordID) throws -> [String: Value]? {
        guard let entity = snapshot.schema.entity(named: name) else {
            throw ChronicleError(.unknownEntity, "no entity named \(name)")
        }
        return try snapshot.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM \"\(entity.name)\" WHERE id = ?", arguments: [id]).map { try values($0, entity: entity) }
        }
    }

    static func values(_ row: Row, entity: Entity) throws -> [String: Value] {
        var values: [String: Value] = [:]
        for field in entity.fields {
            values[field.name] = try Value(databaseValue: row[field.name] as DatabaseValue, field: field)
        }
        return values
    }

    /// The canonical hash of everything visible (see ``Snapshot/stateHash()``).
    public func stateHash() throws -> String { try snapshot.stateHash() }

    // MARK: Sync

    /// Uploads pending saves, then imports what other devices wrote.
    @discardableResult
    public func sync() async throws -> SyncReport {
        let uploaded = try await replayer.upload()
        let imported = try await replayer.importOnce()
        return SyncReport(uploadedLogs: uploaded, imported: imported)
    }

    /// Uploads pending saves only.
    @discardableResult
    public func upload() async throws -> Int { try await replayer.upload() }

    /// Re-uploads this device's own logs that are damaged in the container
    /// (see ``Replayer/repairOwnLogs()``).
    @discardableResult
    public func repairOwnLogs() async throws -> [ContainerName] { try await replayer.repairOwnLogs() }

    /// Writes this device's state as a baseline of the store, so that a new
    /// device starts from it (one SQLite transaction per part) instead of
    /// replaying every log. Pending saves are uploaded first, so the baseline
    /// covers only saves other devices can also get as logs.
    /// See ``Replayer/publishBaseline(partBytes:)``.
    @discardableResult
    public func publishBaseline(partBytes: Int = Snapshot.baselinePartBytes) async throws -> (prefix: String, parts: Int, records: Int) {
        try await replayer.upload()
        return try await replayer.publishBaseline(partBytes: partBytes)
    }

    /// Imports other devices' logs only.
    @discardableResult
    public func importLogs() async throws -> ImportReport {
        return try await replayer.importOnce()
    }

    /// Starts syncing every `interval` until ``stopAutomaticSync()`` or
    /// ``close()``. Failures are logged and retried at the next tick.
    public func startAutomaticSync(every interval: Duration) {
        syncTask?.cancel()
        let logger = configuration.logger
        syncTask = Task { [weak self] in
            while !Task.isCancelled {
                guard let self else { return }
                do {
                    try await self.sync()
                } catch {
                    logger.warning("automatic sync failed", metadata: ["chronicle.error": "\(error)"])
                }
                try? await Task.sleep(for: interval)
            }
        }
    }

    /// Stops the automatic sync loop.
    public func stopAutomaticSync() {
        syncTask?.cancel()
        syncTask = nil
    }

    // MARK: Observation

    /// Every change the app can see from now on, local or imported. Each call
    /// returns an independent stream; it buffers at most `limit` events.
    public nonisolated func changes(bufferingNewest limit: Int = 10_000) -> AsyncStream<RecordEvent> {
        hub.subscribe(bufferingNewest: limit)
    }

    /// Stops syncing, ends the change streams and closes the snapshot.
    public func close() throws {
        stopAutomaticSync()
        hub.finish()
        try snapshot.close()
    }
}
