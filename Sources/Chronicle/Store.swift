import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A Chronicle store on one device: the public API.
///
/// ```swift
/// let store = try await Store.open(Store.Configuration(
///     schema: schema, deviceID: deviceID,
///     directory: appSupport.appendingPathComponent("chronicle"),
///     container: try DirectoryContainer(root: sharedFolder),
///     logger: Logger(label: "app.chronicle")))   // optional
/// let id = try await store.write { tx in
///     tx.insert("Book", ["title": "The Dispossessed", "pages": 387])
/// }
/// try await store.sync()
/// let titles = try await store.read { db in try String.fetchAll(db, sql: "SELECT title FROM Book") }
/// try await store.close()
/// ```
///
/// Every save is validated, applied to the local snapshot and appended to the
/// outbox in one SQLite transaction: once `write` returns, the save survives a
/// crash. ``sync(progress:)`` uploads the outbox and imports other devices' logs.
/// Reads see the snapshot through read-only connections, so nothing can write
/// around Chronicle.
///
/// Everything an app calls takes `@Sendable` closures and returns `Sendable`
/// values, so a `@MainActor` view model calls it directly. Reads
/// (``read(_:)``, ``fetchAll(_:)``, ``fetch(_:id:)``, ``values(of:id:)``,
/// ``reader``) do not queue behind the store's actor: they run on the
/// snapshot's read-only connections, beside a save or a sync in progress.
/// After ``close()``, every call throws ``ChronicleError/Code/closed``.
public actor Store {
    /// How to open a store.
    public struct Configuration: Sendable {
        /// The data model.
        public var schema: Schema
        /// The device's ID when its folder is new; nil draws one. The ID is
        /// kept in the folder (`device.json`) from then on, and the folder's
        /// ID wins: if the device's files ever go back in time (restored
        /// from an older copy, copied to a second machine, a lost snapshot),
        /// the store continues under a new ID it records there (see
        /// ``Store/deviceID``). Naming an ID the folder never had is a
        /// ``ChronicleError/Code/storeMismatch``.
        public var deviceID: DeviceID?
        /// The device's own folder, for its snapshot files.
        public var directory: URL
        /// The shared container.
        public var container: any Container
        /// The wall clock: read for timestamps, and slept on between
        /// automatic syncs (injected so tests and simulations can drive it).
        public var clock: any PhysicalClock
        /// Where diagnostics go; nil (the default) logs nothing.
        public var logger: Logger?
        /// How hard commits push data to disk.
        public var durability: Durability
        /// Bounds for decoding logs from the container.
        public var limits: DecodingLimits
        /// Earlier versions of ``schema`` whose logs this device reads
        /// (devices still on an older app version write them), each
        /// migrated to ``schema`` by declaration (see ``SchemaMigration``).
        /// A snapshot migrated from an earlier version knows that version
        /// by itself; a device that never had one needs it here. A log of a
        /// version this device does not know waits, not applied, as a
        /// newer app version's does.
        public var earlierSchemas: [Schema] = []
        /// The app's code for schema changes Chronicle cannot make by
        /// itself (a field whose type changed, a field removed): see
        /// ``SchemaConversion``. Used when the snapshot migrates and when
        /// earlier versions' logs are read.
        public var schemaConversions: [SchemaConversion] = []
        /// Automatic compaction: once the store has taken
        /// ``AutomaticCompaction/saves`` saves since its last compaction, a
        /// device that a sync left up to date, with nothing to upload,
        /// publishes a baseline and compacts with it, so that the container
        /// holds the newest baseline and the logs after it rather than the
        /// whole history. nil: only explicit ``Store/publishBaseline(partBytes:)``
        /// and ``Store/compact(retention:)``. See `docs/compaction.md`.
        public var automaticCompaction: AutomaticCompaction? = AutomaticCompaction()
        /// Seeds the random part of new record IDs and device IDs (a random
        /// seed in production; simulations fix it to replay a run).
        package var seed: UInt64
        /// The store this device last used, if known. If the container has
        /// lost its active-store pointer (a wiped or reset container), the
        /// device puts this one back instead of starting a new store.
        package var knownStore: StoreID?
        /// Crash points for simulations; nil in production.
        package var crashInjector: CrashInjector?
        /// How long ``Store/open(_:)`` waits for another process (or another
        /// open store in this one) to let go of the device folder before it
        /// throws ``ChronicleError/Code/deviceInUse``.
        package var lockWait: Duration = .zero
        /// How long a device that has imported nothing yet waits for the
        /// store's newest baseline to be complete before it falls back to an
        /// older baseline or to the logs.
        package var baselineWait: Duration = .seconds(60)
        /// The snapshot is known to be damaged (SQLite said so while it was
        /// in use): opening keeps it aside and starts afresh under a new
        /// device ID, saving again its saves not uploaded yet.
        package var snapshotDamaged = false
        /// Opened by a ``StoreManager`` for one of its stores, in a folder
        /// inside its own. Any other open of such a folder is refused.
        package var openedByManager = false
        /// How often a device that syncs says again how far it has applied
        /// when nothing new arrived (it says so at once when something did).
        /// ``Store/compact(retention:)`` takes a retention of at least twice
        /// this: a device that syncs is never taken for one that is away.
        package var appliedReportRefresh: Duration = .seconds(600)
        /// How many saves a device makes before it trains the store's
        /// compression dictionary, when the store has none.
        package var dictionaryTrainingSaves = Replayer.defaultDictionaryTrainingSaves
        /// How often an upload looks for a newer compression dictionary.
        package var dictionaryListingInterval = Replayer.defaultDictionaryListingInterval

        /// Creates a configuration with sensible defaults: the system clock,
        /// no logging, full durability and 64 MiB log bodies.
        public init(
            schema: Schema, deviceID: DeviceID? = nil, directory: URL, container: any Container,
            clock: any PhysicalClock = SystemClock(), logger: Logger? = nil, durability: Durability = .full,
            limits: DecodingLimits = DecodingLimits()
        ) {
            self.init(schema: schema, deviceID: deviceID, directory: directory, container: container, clock: clock,
                      seed: UInt64.random(in: 0...UInt64.max), logger: logger, durability: durability, limits: limits)
        }

        /// Creates a configuration with the hooks tests and simulations use:
        /// a fixed seed, a known store, crash points, a wait for the lock.
        package init(
            schema: Schema, deviceID: DeviceID? = nil, directory: URL, container: any Container,
            clock: any PhysicalClock = SystemClock(), seed: UInt64,
            logger: Logger? = nil, durability: Durability = .full, limits: DecodingLimits = DecodingLimits(),
            knownStore: StoreID? = nil, crashInjector: CrashInjector? = nil, lockWait: Duration = .zero
        ) {
            self.lockWait = lockWait
            self.knownStore = knownStore
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

        /// A decoder for logs of ``schema`` and of ``earlierSchemas``.
        package var decoder: LogDecoder {
            let migrations = earlierSchemas.compactMap { s -> SchemaMigration? in
                guard s.version < schema.version,
                      let m = try? SchemaMigration.through(earlierSchemas, from: s, to: schema, conversions: schemaConversions), m.isComplete
                else { return nil }
                return m
            }
            return LogDecoder(schema: schema, limits: limits, earlier: migrations)
        }

        /// The logger, or one that drops everything.
        var log: Logger { logger ?? Self.silent }

        private static let silent = Logger(label: "chronicle") { _ in SwiftLogNoOpLogHandler() }
    }

    /// When a device publishes a baseline and compacts by itself (see
    /// ``Configuration/automaticCompaction``).
    public struct AutomaticCompaction: Sendable, Hashable {
        /// How many saves, of every device, the store takes after its last
        /// compaction before a device compacts again. Each device waits for
        /// up to a quarter more, a share of its own, so that devices do not
        /// all publish a baseline at once.
        public var saves: Int
        /// The retention period of the compaction: a device that has not
        /// said how far it has applied for this long is not waited for (see
        /// ``Store/compact(retention:)``).
        public var retention: Duration

        /// Compacts every 10,000 saves with a 30-day retention by default.
        public init(saves: Int = 10_000, retention: Duration = .seconds(30 * 86_400)) {
            self.saves = saves
            self.retention = retention
        }
    }

    /// What one ``sync(progress:)`` did.
    public struct SyncReport: Sendable {
        /// Logs uploaded.
        public var uploadedLogs: Int
        /// What the import pass did.
        public var imported: ImportReport
        /// This device's own logs put back because the container lacked them
        /// or held them damaged.
        public var repairedLogs: [ContainerName] = []
        /// Set when this sync found the device's files behind the container
        /// and moved the device to a new ID.
        public var identityChange: IdentityChange?
        /// The compaction this sync made by itself (see
        /// ``Configuration/automaticCompaction``), if it made one.
        public var compaction: CompactionReport?

        /// How the sync ended, from best to worst.
        public enum Status: String, Sendable {
            /// Everything visible was imported and every save uploaded.
            case upToDate
            /// Something is not visible yet (a log of another device, a
            /// baseline being written): a later sync may bring it.
            case waiting
            /// Some log failed in a way a later sync will not clear by
            /// itself: see ``ImportReport/permanentFailures``.
            case failed
        }

        /// How the sync ended.
        public var status: Status {
            if !imported.permanentFailures.isEmpty { return .failed }
            return imported.isWaiting ? .waiting : .upToDate
        }
    }

    /// A move of this device to a new ID, because the container held
    /// history under its old ID that its files did not (see ``deviceID``).
    public struct IdentityChange: Sendable, Hashable {
        /// One carried-over save: the sequence it had under the old ID and
        /// the one it has now.
        public struct CarriedSave: Sendable, Hashable {
            /// Its sequence under ``IdentityChange/previous``.
            public var old: UInt64
            /// Its sequence under ``IdentityChange/current``.
            public var new: UInt64
            /// Its clock, which it keeps.
            public var clock: HybridTimestamp
        }
        /// The ID given up.
        public var previous: DeviceID
        /// The ID the device has now.
        public var current: DeviceID
        /// What was found.
        public var reason: String
        /// The acknowledged saves the container lacked, saved again under
        /// the new ID with their original clocks, in order.
        public var carriedOver: [CarriedSave]
        /// Logs the new ID's snapshot imported from the container when it
        /// was built.
        public var importedLogs = 0
        /// Transactions in those logs.
        public var importedTransactions = 0
        /// Saves the new ID made of other devices' writes that the old
        /// snapshot held and the container no longer had (a container and
        /// their owner's files both put back from older copies), each with
        /// the clock of the write it keeps.
        public var keptSaves = 0
    }

    /// The configuration the store was opened with.
    public nonisolated let configuration: Configuration
    /// The active store's ID.
    public nonisolated let storeID: StoreID
    /// The device's snapshot. It is replaced when the device moves to a new ID.
    package nonisolated var snapshot: Snapshot { current.withLock { $0 } }
    /// This device's ID: the one in its folder, which changes only if the
    /// device's files are found behind the container (see ``IdentityChange``).
    public nonisolated var deviceID: DeviceID { snapshot.deviceID }

    /// The migration opening did: set when the device's snapshot was of an
    /// earlier version of the schema and migrated in place (see
    /// `docs/schema-evolution.md`); nil otherwise.
    public nonisolated var schemaMigration: SchemaMigration? { snapshot.migrated }
    /// The moves to a new ID this store made since it was opened, oldest first.
    public private(set) var identityChanges: [IdentityChange] = []
    /// Read-only GRDB access to the snapshot, for GRDB requests and
    /// `ValueObservation` (see ``StoreReader``): observations follow the
    /// device to a new snapshot when it moves to a new ID, and fail with
    /// ``ChronicleError/Code/closed`` when the store closes.
    public nonisolated let reader: StoreReader

    /// How syncing goes (see ``syncStatus``).
    public struct SyncStatus: Sendable {
        /// Whether a sync (automatic or not) is running now.
        public var isSyncing = false
        /// The report of the newest sync that finished, if any did.
        public var lastReport: SyncReport?
        /// The error of the newest sync if it failed; nil once one succeeds.
        public var lastError: ChronicleError?
        /// How many automatic syncs have finished (succeeded or failed).
        public var automaticSyncs = 0
        /// Whether automatic syncing is on (``startAutomaticSync(every:)``).
        public var isAutomatic = false
    }

    /// How syncing goes: whether a sync is running, the last result and the
    /// last error, of automatic syncs and of calls to ``sync(progress:)`` alike.
    public nonisolated var syncStatus: SyncStatus {
        lifecycle.withLock { state in
            var status = state.sync
            status.isSyncing = state.syncsRunning > 0
            return status
        }
    }

    private struct Lifecycle {
        var closed = false
        var syncsRunning = 0
        var sync = SyncStatus()
    }

    private let lifecycle = Mutex(Lifecycle())
    /// Operations under way (syncs, uploads, imports), which ``close()`` waits for.
    private var operations = 0
    private var idleWaiters: [CheckedContinuation<Void, Never>] = []
    private var closeTask: Task<Void, any Error>?
    private let current: Mutex<Snapshot>
    private let folder: DeviceFolder
    private var replayer: Replayer
    private var ids: RecordIDGenerator
    let hub: EventHub
    /// The main context while anything holds it, and seeds for new contexts.
    let contexts = Mutex(ContextRegistry())
    private var syncTask: Task<Void, Never>?
    /// Whether the container's history of this device was checked against its files.
    private var historyChecked = false
    /// A move to a new ID under way, which syncs wait for.
    private var identityTask: Task<IdentityChange, any Error>?
    /// Draws new device IDs and incarnations.
    private var random: SeededRandom

    private init(configuration: Configuration, storeID: StoreID, snapshot: Snapshot, folder: DeviceFolder) throws {
        self.configuration = configuration
        self.storeID = storeID
        self.current = Mutex(snapshot)
        self.folder = folder
        self.hub = EventHub()
        self.reader = StoreReader(snapshot.databasePool)
        var random = SeededRandom(seed: configuration.seed ^ 0x1DE4_717F_0F_DE71CE)
        self.replayer = try Self.makeReplayer(snapshot, configuration: configuration, hub: hub, random: &random)
        self.random = random
        self.ids = RecordIDGenerator(seed: configuration.seed)
    }

    private static func makeReplayer(_ snapshot: Snapshot, configuration: Configuration, hub: EventHub, random: inout SeededRandom) throws -> Replayer {
        var replayer = Replayer(snapshot: snapshot, container: configuration.container,
                                limits: configuration.limits, logger: configuration.log)
        // Subscribers see imported changes as each batch commits.
        replayer.eventSink = { [hub] events in hub.publish(events) }
        replayer.clock = configuration.clock
        replayer.baselineWait = configuration.baselineWait
        replayer.missingEndCheckInterval = configuration.appliedReportRefresh
        replayer.dictionaryTrainingSaves = configuration.dictionaryTrainingSaves
        replayer.dictionaryListingInterval = configuration.dictionaryListingInterval
        replayer.incarnation = try snapshot.incarnation(orStore: random.next())
        return replayer
    }

    /// Opens the container's active store on this device, creating the
    /// store (and the active-store pointer) if the container has none.
    ///
    /// The device folder is locked for as long as the store is open: a
    /// second process, or a second `Store` in this one, gets
    /// ``ChronicleError/Code/deviceInUse`` (after the configured wait for the lock).
    /// A folder opened for the first time gets its `device.json` (the
    /// device's ID) before anything else, so concurrent first opens agree on
    /// one ID. A snapshot SQLite reports as damaged is moved to the folder's
    /// `retired/` and the device continues under a new ID, rebuilt from the
    /// container.
    public static func open(_ configuration: Configuration) async throws -> Store {
        try await open(configuration, exactly: nil)
    }

    /// Opens `exactly` this store when it is given, whatever the container's
    /// active-store pointer says (a ``StoreManager`` reading the unsaved
    /// changes of a store deleted on purpose); else as ``open(_:)``.
    static func open(_ configuration: Configuration, exactly wanted: StoreID?) async throws -> Store {
        var configuration = configuration
        if !configuration.openedByManager, let manager = DeviceFolder.managingFolder(of: configuration.directory) {
            throw ChronicleError(.invalidValue, "\(configuration.directory.path) is one of the stores the store manager of \(manager.path) keeps (its local or fallback store, say): open that folder with a store manager instead; opened on its own with another container, its local-only records would reach that container")
        }
        let folder = try await DeviceFolder(configuration.directory, wait: configuration.lockWait)
        do {
            var random = SeededRandom(seed: configuration.seed ^ 0xF01D_E2DE_71CE_0001)
            var identity: DeviceFolder.Identity
            if let existing = try folder.readIdentity() {
                identity = existing
                if let wanted = configuration.deviceID, wanted != identity.device, !(identity.retired ?? []).contains(wanted) {
                    throw ChronicleError(.storeMismatch, "the device folder \(folder.url.path) belongs to device \(identity.device), not \(wanted)")
                }
            } else if let recovered = folder.identityFromSnapshots() {
                // device.json was lost; the snapshots still say who this device is.
                identity = recovered
                configuration.log.notice("device.json was missing; restored it from the folder's snapshot", metadata: ["chronicle.device": "\(recovered.device)"])
                try folder.writeIdentity(identity)
            } else {
                // The ID is on disk before anything is created under it.
                identity = DeviceFolder.Identity(device: configuration.deviceID ?? .drawn(&random), store: nil, retired: nil)
                try folder.writeIdentity(identity)
            }
            let storeID: StoreID
            if let wanted {
                storeID = wanted
            } else {
                // The store device.json names counts only while this folder
                // has a copy of it: a device that left a store (deleted on
                // purpose, say) must not put it back if the container lost
                // the marks of its deletion.
                let copy = identity.store.flatMap { FileManager.default.fileExists(atPath: folder.snapshotPath($0)) ? $0 : nil }
                storeID = try await activeStore(in: configuration.container, seed: configuration.seed, clock: configuration.clock,
                                                known: configuration.knownStore ?? copy)
            }
            try finishIdentitySwitch(folder, store: storeID, identity: identity)
            let path = folder.snapshotPath(storeID)
            let snapshot: Snapshot
            // A snapshot written under an ID this folder later gave up for
            // another store (its copy of that store was deleted and rebuilt)
            // keeps that ID: in this store it was never retired.
            var device = identity.device
            if let owner = try? Snapshot.identity(at: path).device, owner != device, (identity.retired ?? []).contains(owner) {
                device = owner
            }
            /// Keeps the damaged file aside and starts afresh under a new ID,
            /// saving again the saves `salvaged` from it (not uploaded yet).
            func startAfresh(after error: any Error, salvaged: [Transaction]) throws -> Snapshot {
                let retired = try folder.retire(path, device: identity.device, reason: "damaged")
                configuration.log.error("snapshot is damaged; moved aside, continuing under a new device ID", metadata: [
                    "chronicle.snapshot": "\(retired)", "chronicle.error": "\(error)", "chronicle.salvaged": "\(salvaged.count)",
                ])
                identity.retired = (identity.retired ?? []) + [identity.device]
                identity.device = .drawn(&random)
                identity.store = storeID
                try folder.writeIdentity(identity)
                let fresh = try openSnapshot(path, storeID: storeID, device: identity.device, configuration)
                do {
                    _ = try fresh.adopt(salvaged)
                } catch {
                    try? fresh.close()
                    throw error
                }
                return fresh
            }
            // What a damaged file held that the container lacks is read back
            // where its pages still read; the file is kept aside.
            func salvaged() -> [Transaction] {
                Snapshot.salvagePendingUploads(at: path, device: device, schema: configuration.schema,
                                               earlier: Array(configuration.decoder.earlier.values), storeID: storeID)
            }
            // A snapshot keeps its records' fields, and its entities, by
            // their place in the schema it was made with. The same schema
            // declared in another order (the same hash: order is no part of
            // it) would read them in the wrong places, so the store works
            // in the snapshot's order; names are what the app uses.
            let stored = try? Snapshot.identity(at: path).schema
            if let stored, stored.hash == configuration.schema.hash, stored != configuration.schema {
                configuration.log.info("the schema is declared in another order than the snapshot's; the snapshot's order is kept")
                configuration.schema = stored
            }
            if configuration.snapshotDamaged, FileManager.default.fileExists(atPath: path) {
                snapshot = try startAfresh(after: ChronicleError(.databaseCorrupt, "SQLite reported the snapshot damaged while it was in use"),
                                           salvaged: salvaged())
            } else {
                // A snapshot of an earlier schema version migrates through
                // the versions between, those the store records included.
                var recorded: [Schema] = []
                if let stored, stored.version < configuration.schema.version {
                    recorded = await Replayer.recordedSchemas(in: configuration.container, store: storeID,
                                                              skipping: Set(configuration.earlierSchemas.map(\.hash)))
                }
                do {
                    snapshot = try openSnapshot(path, storeID: storeID, device: device, configuration, also: recorded)
                } catch let error as ChronicleError where Self.isDamage(error) {
                    snapshot = try startAfresh(after: error, salvaged: salvaged())
                }
            }
            if identity.store != storeID {
                identity.store = storeID
                try folder.writeIdentity(identity)
            }
            let store: Store
            do {
                store = try Store(configuration: configuration, storeID: storeID, snapshot: snapshot, folder: folder)
            } catch where Self.isCorruption(error) {
                // The file opened, but a page SQLite reads first is damaged.
                try? snapshot.close()
                store = try Store(configuration: configuration, storeID: storeID, snapshot: try startAfresh(after: error, salvaged: salvaged()), folder: folder)
            }
            configuration.log.info("opened store", metadata: [
                "chronicle.store": "\(storeID)", "chronicle.device": "\(identity.device)",
            ])
            return store
        } catch {
            folder.release()
            throw error
        }
    }

    /// Opens a snapshot; `knowing` adds earlier schema versions to the
    /// app's (those the snapshot it replaces knew).
    private static func openSnapshot(_ path: String, storeID: StoreID, device: DeviceID, _ configuration: Configuration,
                                     knowing: [SchemaMigration] = [], also recorded: [Schema] = []) throws -> Snapshot {
        try Snapshot(path: path, schema: configuration.schema, storeID: storeID, deviceID: device,
                     durability: configuration.durability, earlierSchemas: configuration.earlierSchemas + knowing.map(\.source) + recorded,
                     conversions: configuration.schemaConversions,
                     crashInjector: configuration.crashInjector)
    }

    /// Whether `error` is SQLite's report of a damaged database file,
    /// wrapped or not.
    package static func isCorruption(_ error: any Error) -> Bool {
        if let error = error as? ChronicleError { return isDamage(error) }
        guard let db = error as? DatabaseError else { return false }
        return db.resultCode == .SQLITE_CORRUPT || db.resultCode == .SQLITE_NOTADB
    }

    /// Whether opening a snapshot failed because its file is damaged (not,
    /// say, unreadable for lack of permission).
    private static func isDamage(_ error: ChronicleError) -> Bool {
        // SQLite's own verdict on the file, not a bad value Chronicle read from it.
        error.code == .databaseCorrupt && error.underlying(as: DatabaseError.self) != nil
    }

    /// Completes a move to a new device ID that a crash interrupted: once
    /// `device.json` names the new ID, the snapshot built for it replaces
    /// the old one; before that, the half-built one is thrown away (the old
    /// snapshot still holds every save, and the move starts again).
    private static func finishIdentitySwitch(_ folder: DeviceFolder, store: StoreID, identity: DeviceFolder.Identity) throws {
        let next = folder.nextSnapshotPath(store)
        guard FileManager.default.fileExists(atPath: next) else { return }
        let built = try? Snapshot.identity(at: next)
        guard let built, built.device == identity.device, built.store == store else {
            DeviceFolder.removeSnapshotFiles(next)
            return
        }
        let path = folder.snapshotPath(store)
        if FileManager.default.fileExists(atPath: path) {
            let old = try? Snapshot.identity(at: path)
            try folder.retire(path, device: old?.device, reason: "superseded")
        }
        try moveSnapshot(from: next, to: path)
        DeviceFolder.syncDirectory(folder.url.path)
    }

    private static func moveSnapshot(from source: String, to target: String) throws {
        for suffix in ["-wal", "-shm", ""] where FileManager.default.fileExists(atPath: source + suffix) {
            guard rename(source + suffix, target + suffix) == 0 else {
                throw ChronicleError.system("cannot move \(source + suffix) to \(target + suffix)", errno: errno)
            }
        }
    }

    /// Repairs an active-store pointer whose content cannot be read (a sync
    /// service that truncated it, a stray write): it names `known` again if
    /// this device knows a store that was neither deleted nor replaced, and
    /// is removed otherwise, as a lost pointer is, which the devices put
    /// back. Every device then agrees again: a store it names that is not
    /// theirs is merged as any two active stores are. Returns whether it did.
    @discardableResult
    package static func repairUnreadablePointer(in container: any Container, known: StoreID?, log: Logger?) async throws -> Bool {
        let marker: Marker?
        do {
            marker = try await container.readMarker(ContainerLayout.activeStore)
        } catch let error as ChronicleError where !error.code.isTransient && error.code != .foreignEntry {
            // Not even a marker (too short for its version, say): it goes,
            // as a lost pointer does, and the devices put theirs back.
            try await container.deleteMarker(ContainerLayout.activeStore, expected: nil)
            log?.warning("the container's active-store pointer could not be read; removed it", metadata: ["chronicle.error": "\(error)"])
            return true
        }
        guard let marker, (try? ActiveStorePointer(markerBytes: marker.bytes)) == nil else { return false }
        do {
            if let known, try await !isWithdrawnOrTentative(known, in: container) {
                _ = try await container.replaceMarker(ContainerLayout.activeStore, ActiveStorePointer(store: known), expected: marker.version)
            } else {
                try await container.deleteMarker(ContainerLayout.activeStore, expected: marker.version)
            }
        } catch let error as ChronicleError where error.code == .markerConflict || error.code == .notFound {
            // Another device repaired it first.
        }
        log?.warning("the container's active-store pointer could not be read; repaired it", metadata: [
            "chronicle.store": "\(known.map { "\($0)" } ?? "none")", "chronicle.marker": "\(ContainerLayout.activeStore)",
        ])
        return true
    }

    /// The store the container's active-store pointer names; creates one if none.
    package static func activeStore(in container: any Container, seed: UInt64, clock: any PhysicalClock = SystemClock(),
                                   known: StoreID? = nil) async throws -> StoreID {
        do {
            return try await activeStoreChecking(in: container, seed: seed, clock: clock, known: known)
        } catch let error as ChronicleError where error.code.isTransient && known != nil {
            // The container stopped answering part-way (a server that went
            // down between two reads): an offline start, like one that
            // could not read the pointer at all.
            return known!
        }
    }

    private static func activeStoreChecking(in container: any Container, seed: UInt64, clock: any PhysicalClock,
                                            known: StoreID?) async throws -> StoreID {
        do {
            try await repairUnreadablePointer(in: container, known: known, log: nil)
        } catch let error as ChronicleError where error.code.isTransient && known != nil {
            return known!
        }
        let marker: Marker?
        do {
            marker = try await container.readMarker(ContainerLayout.activeStore)
        } catch let error as ChronicleError where error.code.isTransient && known != nil {
            // Offline start: a device that knows its store opens it without the container.
            return known!
        }
        if let marker {
            let store = try ActiveStorePointer(markerBytes: marker.bytes).store
            guard try await container.readMarker(ContainerLayout.tombstone(store: store)) != nil else { return store }
            // A deletion that stopped between its tombstone and the pointer: finish it.
            do {
                try await container.deleteMarker(ContainerLayout.activeStore, expected: marker.version)
            } catch let error as ChronicleError where error.code == .markerConflict || error.code == .notFound {
                // Another device moved the pointer first: start over with theirs.
            }
            return try await activeStore(in: container, seed: seed, clock: clock, known: nil)
        }
        var known = known
        if let store = known, try await isWithdrawnOrTentative(store, in: container) {
            // Deleted on purpose, or replaced by a rebuild: never put it back.
            if try await container.readMarker(ContainerLayout.tombstone(store: store)) != nil {
                // Deleted while this device was opening it: no new store
                // either. The device leaves the deleted one (a store
                // manager carries its unsynced saves to its local store).
                throw ChronicleError(.markerConflict, "the store \(store) this device used was deleted everywhere, and the container names no other")
            }
            known = nil
        }
        var random = SeededRandom(seed: seed ^ 0x5354_4F52_4549_4453)
        var generator = RecordIDGenerator(seed: random.next())
        if known == nil { try HybridTimestamp.checkPhysical(clock.nowMilliseconds(), doing: "making a store") }
        var candidate = known ?? StoreID(generator.next(milliseconds: clock.nowMilliseconds()))
        if known == nil {
            // No pointer, but stores in the container (the pointer was lost,
            // or a sync service has not delivered it yet): never start an
            // empty store beside them. Stores deleted on purpose, or still
        // being seeded, do not count.
            var stores: [StoreID] = []
            for store in try await container.listChildren(prefix: ContainerLayout.storesPrefix).compactMap(StoreID.init(string:)) {
                if try await !isWithdrawnOrTentative(store, in: container) { stores.append(store) }
            }
            if stores.count == 1 {
                candidate = stores[0]
            } else if stores.count > 1 {
                throw ChronicleError(.storeMismatch, "the container has no active-store pointer but holds \(stores.count) stores (\(stores.map(\.description).joined(separator: ", "))); "
                    + "open a device that knows its store, or restore the pointer (markers/active-store)")
            }
        }
        do {
            _ = try await container.createMarker(ContainerLayout.activeStore, ActiveStorePointer(store: candidate))
            return candidate
        } catch let error as ChronicleError where error.code.isTransient && known != nil {
            return known!
        } catch let error as ChronicleError where error.code == .markerConflict {
            // Another device created it first: use theirs.
            guard let marker = try await container.readMarker(ContainerLayout.activeStore) else { throw error }
            return try ActiveStorePointer(markerBytes: marker.bytes).store
        }
    }

    /// Whether `store` was deleted on purpose, replaced by a rebuild, or is
    /// still being seeded (see ``StoreManager``): not a store to join.
    static func isWithdrawnOrTentative(_ store: StoreID, in container: any Container) async throws -> Bool {
        if try await container.readMarker(ContainerLayout.tombstone(store: store)) != nil { return true }
        if try await container.readMarker(ContainerLayout.supersession(store: store)) != nil { return true }
        return try await container.readMarker(ContainerLayout.tentative(store: store)) != nil
    }

    // MARK: Writing

    /// Runs `body` to collect changes, then saves them as one transaction.
    ///
    /// - Returns: what `body` returned.
    /// - Throws: what `body` throws, or a ``ChronicleError`` from validation
    ///   (nothing is saved then), among them ``ChronicleError/Code/sizeOverCap``
    ///   for a save whose log would be larger than ``Configuration/limits``
    ///   lets any device read.
    ///   After ``close()``, ``ChronicleError/Code/closed``.
    @discardableResult
    public func write<T: Sendable>(_ body: @Sendable (inout WriteTransaction) throws -> T) throws -> T {
        try writeReporting(body).value
    }

    /// Like ``write(_:)``, and also returns what the save did (its sequence,
    /// clock and events), or nil when `body` made no changes. `progress`
    /// is told how many of the changes are applied, and of how many, as
    /// the save goes (see ``Snapshot/save(_:physicalMilliseconds:maxBodyBytes:progress:)``).
    package func writeReporting<T: Sendable>(_ body: @Sendable (inout WriteTransaction) throws -> T,
                                             progress: (@Sendable (_ applied: Int, _ of: Int) -> Void)? = nil) throws -> (value: T, save: Snapshot.SaveResult?) {
        try checkOpen()
        let now = configuration.clock.nowMilliseconds()
        let snapshot = self.snapshot
        var tx = WriteTransaction(schema: configuration.schema, ids: ids, milliseconds: now) { entity, id in
            try Store.row(snapshot, entity: entity, id: id)
        }
        let result = try body(&tx)
        ids = tx.generator
        let changes = try tx.checkedChanges()
        guard !changes.isEmpty else { return (result, nil) }
        let saved = try snapshot.save(changes, physicalMilliseconds: now, maxBodyBytes: configuration.limits.maxBodyBytes, progress: progress)
        hub.publish(saved.events)
        return (result, saved)
    }

    /// Like ``writeReporting(_:)``, but `body` runs inside the save's own
    /// SQLite transaction, with its database: what it reads there (and the
    /// transaction's `currentRow`) is what the save applies to, with no
    /// commit in between, not even a sync's import, which commits off the
    /// store's actor. `finish` runs after the changes are applied, before
    /// the commit.
    func writeAtomically<T>(_ body: (inout WriteTransaction, Database) throws -> T,
                            finish: (Database) throws -> Void = { _ in }) throws -> (value: T, save: Snapshot.SaveResult?) {
        try checkOpen()
        let now = configuration.clock.nowMilliseconds()
        let schema = configuration.schema
        var generator = ids
        var result: T?
        let saved = try snapshot.save(physicalMilliseconds: now, maxBodyBytes: configuration.limits.maxBodyBytes, building: { db in
            var tx = WriteTransaction(schema: schema, ids: generator, milliseconds: now) { entity, id in
                try Store.row(db, schema: schema, entity: entity, id: id)
            }
            result = try body(&tx, db)
            generator = tx.generator
            return (try tx.checkedChanges(), tx.inserts)
        }, finish: finish)
        ids = generator
        if let saved { hub.publish(saved.events) }
        return (result!, saved)
    }

    /// A record's values, read on `db`, or nil.
    static func row(_ db: Database, schema: Schema, entity name: String, id: RecordID) throws -> [String: Value]? {
        guard let entity = schema.entity(named: name) else {
            throw ChronicleError(.unknownEntity, "no entity named \(name)")
        }
        return try Row.fetchOne(db, sql: "SELECT * FROM \(entity.name.quotedDatabaseIdentifier) WHERE id = ?", arguments: [id]).map { try values($0, entity: entity) }
    }

    // MARK: Reading

    /// Runs `body` on a read-only connection to the snapshot, beside any
    /// save or sync in progress (not on the store's actor).
    ///
    /// - Throws: what `body` throws; ``ChronicleError/Code/closed`` after ``close()``.
    public nonisolated func read<T: Sendable>(_ body: @Sendable (Database) throws -> T) async throws -> T {
        try await reader.read(body)
    }

    /// All records of a Codable type, in ID order.
    public nonisolated func fetchAll<R: ChronicleRecord>(_ type: R.Type) async throws -> [R] {
        let entity = try Self.entity(of: R.self, configuration.schema)
        return try await reader.read { db in
            try RecordCoding.records(R.self, entity: entity, cursor: Row.fetchCursor(db, sql: "SELECT * FROM \"\(entity.name)\" ORDER BY id"))
        }
    }

    /// One record of a Codable type, or nil.
    public nonisolated func fetch<R: ChronicleRecord>(_ type: R.Type, id: RecordID) async throws -> R? {
        let entity = try Self.entity(of: R.self, configuration.schema)
        return try await reader.read { db in
            try RecordCoding.records(R.self, entity: entity, cursor: Row.fetchCursor(db, sql: "SELECT * FROM \"\(entity.name)\" WHERE id = ?", arguments: [id])).first
        }
    }

    /// The values of one visible record, or nil.
    public nonisolated func values(of entity: String, id: RecordID) async throws -> [String: Value]? {
        guard let entity = configuration.schema.entity(named: entity) else {
            throw ChronicleError(.unknownEntity, "no entity named \(entity)")
        }
        return try await reader.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM \"\(entity.name)\" WHERE id = ?", arguments: [id]).map { try Store.values($0, entity: entity) }
        }
    }

    static func entity<R: ChronicleRecord>(of type: R.Type, _ schema: Schema) throws -> Entity {
        guard let entity = schema.entity(named: R.entityName) else {
            throw ChronicleError(.unknownEntity, "no entity named \(R.entityName)")
        }
        return entity
    }

    static func row(_ snapshot: Snapshot, entity name: String, id: RecordID) throws -> [String: Value]? {
        try snapshot.read { db in try row(db, schema: snapshot.schema, entity: name, id: id) }
    }

    static func values(_ row: Row, entity: Entity) throws -> [String: Value] {
        var values: [String: Value] = [:]
        for field in entity.fields {
            values[field.name] = try Value(databaseValue: row[field.name] as DatabaseValue, field: field)
        }
        return values
    }

    /// The canonical hash of everything visible: two devices that show the
    /// same records, fields and values have the same hash.
    public func stateHash() throws -> String {
        try checkOpen()
        return try snapshot.stateHash()
    }

    // MARK: Sync

    /// Uploads pending saves, puts back this device's own logs that the
    /// container lacks or holds damaged (a bounded window per sync, so every
    /// log is checked over successive syncs), then imports what other
    /// devices wrote. See ``SyncReport/status`` for how it ended.
    ///
    /// If the container holds history under this device's ID that its files
    /// did not write (they were restored from an older copy, copied to a
    /// second machine, or lost), the device first moves to a new ID: see
    /// ``SyncReport/identityChange``. No sequence number is ever written twice.
    ///
    /// - Parameter progress: told how far the upload and the import have
    ///   got, after each log uploaded, baseline part applied and batch of
    ///   logs imported (from the sync's task: keep it short).
    /// - Throws: `CancellationError` if the task is cancelled: the sync
    ///   stops between logs (each log is imported or uploaded whole, or not
    ///   at all), the snapshot keeps what was done, and the next sync goes
    ///   on from there. ``ChronicleError/Code/closed`` after ``close()``.
    @discardableResult
    public func sync(progress: (@Sendable (SyncProgress) -> Void)? = nil) async throws -> SyncReport {
        try beginOperation()
        defer { endOperation() }
        lifecycle.withLock { $0.syncsRunning += 1 }
        defer { lifecycle.withLock { $0.syncsRunning -= 1 } }
        do {
            let report = try await performSync(progress: progress)
            lifecycle.withLock { state in
                state.sync.lastReport = report
                state.sync.lastError = nil
            }
            return report
        } catch let error as ChronicleError {
            lifecycle.withLock { $0.sync.lastError = error }
            throw error
        }
    }

    private func performSync(progress: (@Sendable (SyncProgress) -> Void)?) async throws -> SyncReport {
        try Task.checkCancellation()
        // Earlier schema versions the store records, before anything reads
        // its logs (this device's own history included).
        await replayer.learnRecordedSchemas()
        let change = try await ensureOwnHistory()
        let uploaded = try await uploadMovingIfNeeded(progress: progress)
        try Task.checkCancellation()
        pruneRetiredSnapshots()
        // A repair that fails (a foreign entry where one of this device's
        // logs belongs, an outage) does not keep the device from importing:
        // it is reported with the import's failures.
        var repairFailure: ImportReport.Failure?
        var repaired: [ContainerName] = []
        do {
            repaired = try await repairWindow()
        } catch let error as ChronicleError where error.code != .simulatedCrash {
            configuration.log.warning("repairing own logs failed", metadata: ["chronicle.error": "\(error)"])
            repairFailure = ImportReport.Failure(name: ContainerLayout.logPrefix(store: storeID, device: deviceID), device: deviceID, error: error)
        }
        try Task.checkCancellation()
        var imported = try await replayer(reporting: progress).importOnce()
        if let repairFailure { imported.failures.append(repairFailure) }
        // This copy holds another version of a save the container compacted:
        // it is built again from the container, keeping what it held.
        var apart: IdentityChange?
        if let reason = imported.historyApart {
            apart = try await moveToNewIdentity(reason: reason)
        }
        if let prefix = imported.baselinePrefix { try snapshot.setHeldBaseline(prefix) }
        try await republishLostBaseline()
        // How far this device has applied, for compaction to wait for it.
        do {
            try await replayer.reportApplied(refresh: configuration.appliedReportRefresh.milliseconds)
        } catch let error as ChronicleError where error.code != .simulatedCrash {
            configuration.log.info("could not report how far this device has applied; the next sync tries again", metadata: ["chronicle.error": "\(error)"])
        }
        // The baselines that hold saves no log may hold: the compaction's
        // written again if the container lost it, then a part at a time.
        do {
            if let replacement = try await replayer.restoreLostCompaction(known: imported.compactionMarker), try snapshot.heldBaseline() != nil {
                try snapshot.setHeldBaseline(replacement)
            }
            if let replacement = try await replayer.checkBaselines(interval: configuration.appliedReportRefresh.milliseconds),
               try snapshot.heldBaseline() != nil {
                try snapshot.setHeldBaseline(replacement)
            }
        } catch let error as ChronicleError where error.code != .simulatedCrash {
            configuration.log.warning("could not check the store's baselines", metadata: ["chronicle.error": "\(error)"])
        }
        // The outbox keeps what the container keeps: the saves after the
        // newest compaction.
        do {
            try await replayer.pruneCompactedOutbox(known: imported.compactionMarker)
        } catch let error as ChronicleError where error.code != .simulatedCrash {
            configuration.log.notice("could not drop the outbox bodies the compaction covers; the next sync tries again", metadata: ["chronicle.error": "\(error)"])
        }
        // What the move to a new ID imported counts as this sync's import.
        for moved in [change, uploaded.change, apart].compactMap({ $0 }) {
            imported.appliedLogs += moved.importedLogs
            imported.appliedTransactions += moved.importedTransactions
        }
        var compaction: CompactionReport?
        if apart == nil {
            do {
                compaction = try await compactIfDue(after: imported)
            } catch let error as ChronicleError where error.code != .simulatedCrash {
                configuration.log.notice("automatic compaction failed; a later sync tries again", metadata: ["chronicle.error": "\(error)"])
            }
        }
        return SyncReport(uploadedLogs: uploaded.count, imported: imported, repairedLogs: repaired,
                          identityChange: apart ?? uploaded.change ?? change, compaction: compaction)
    }

    /// Publishes a baseline, and compacts with it at a later sync, when the
    /// store has taken enough saves since its last compaction
    /// (``Configuration/automaticCompaction``), after a sync that left this
    /// device up to date with nothing to upload. The two steps are an
    /// applied-report interval apart at least: a baseline holds this
    /// device's newest saves, which the other devices apply at their next
    /// sync, and compaction waits for every device that reports.
    private func compactIfDue(after imported: ImportReport) async throws -> CompactionReport? {
        guard let policy = configuration.automaticCompaction, policy.saves > 0,
              imported.failures.isEmpty, imported.gaps.isEmpty, !imported.isWaiting, imported.held.isEmpty,
              try snapshot.pendingUploadCount() == 0 else { return nil }
        // The marker as the import read it, if it did: no read more per sync.
        let horizon: CompactionHorizon?
        if case .some(let marker) = imported.compactionMarker {
            horizon = try marker.map { marker throws(ChronicleError) in try CompactionHorizon(markerBytes: marker.bytes) }
        } else {
            horizon = try await replayer.compactionHorizon()
        }
        let vector = try snapshot.vector()
        var since: UInt64 = 0
        for (device, sequence) in vector { since &+= sequence &- min(sequence, horizon?.vector[device] ?? 0) }
        // Each device's own share of a quarter more: the first to reach its
        // threshold publishes, and the others then count from its compaction.
        let share = UInt64(truncatingIfNeeded: deviceID.rawValue.low ^ deviceID.rawValue.high) % UInt64(max(1, policy.saves / 4))
        guard since >= UInt64(policy.saves) + share else { return nil }
        let now = configuration.clock.nowMilliseconds()
        if let tried = try snapshot.metadata("auto_compaction_tried_at").flatMap(UInt64.init),
           now >= tried, now - tried < configuration.appliedReportRefresh.milliseconds { return nil }
        try snapshot.setMetadata("auto_compaction_tried_at", String(now))
        // The baseline this device published at an earlier try, while it is
        // there and the store has not compacted with it: compact now.
        if let pending = try snapshot.metadata("auto_compaction_baseline"), pending != horizon?.baseline,
           try await !configuration.container.list(prefix: pending, after: nil, limit: 1).isEmpty {
            let retention = max(policy.retention, configuration.appliedReportRefresh * 2)
            let report = try await replayer.compact(retention: min(retention, .seconds(1 << 40)).milliseconds)
            configuration.log.info("compacted by itself", metadata: [
                "chronicle.baseline": "\(report.baseline ?? "none")", "chronicle.removedLogs": "\(report.removedLogs)",
                "chronicle.waitingFor": "\(report.waitingFor.map(\.description).joined(separator: ","))",
            ])
            return report
        }
        let baseline = try await replayer.publishBaseline()
        if try snapshot.heldBaseline() != nil { try snapshot.setHeldBaseline(baseline.prefix) }
        try snapshot.setMetadata("auto_compaction_baseline", baseline.prefix)
        configuration.log.info("published a baseline to compact with at a later sync", metadata: ["chronicle.baseline": "\(baseline.prefix)"])
        return nil
    }

    /// A baseline can hold saves that no device keeps as logs: a store's
    /// first records, saved by a seeding device that is gone, or a rebuilt
    /// store's whole past. If the container lost the baseline this snapshot
    /// started from (or last published), this device publishes its own, so
    /// that a device joining later still gets that content.
    private func republishLostBaseline() async throws {
        guard let prefix = try snapshot.heldBaseline() else { return }
        do {
            guard try await configuration.container.list(prefix: prefix, after: nil, limit: 1).isEmpty else { return }
            // Removed by compaction, which keeps a newer one that holds it
            // all. This device holds that one's content too once it has
            // applied all it covers; until then it keeps naming the old one
            // (it must not stand in for the newer one, whose saves it lacks).
            if let horizon = try await replayer.compactionHorizon(), horizon.baseline != prefix,
               try await !configuration.container.list(prefix: horizon.baseline, after: nil, limit: 1).isEmpty {
                let vector = try snapshot.vector()
                if horizon.vector.allSatisfy({ (vector[$0.key] ?? 0) >= $0.value }) { try snapshot.setHeldBaseline(horizon.baseline) }
                return
            }
            configuration.log.notice("the baseline this device holds content from is gone from the container; publishing one", metadata: ["chronicle.baseline": "\(prefix)"])
            let published = try await replayer.publishBaseline()
            try snapshot.setHeldBaseline(published.prefix)
        } catch let error as ChronicleError where error.code.isTransient {
            // Checked again at the next sync.
        }
    }

    /// Uploads pending saves only.
    @discardableResult
    public func upload() async throws -> Int {
        try beginOperation()
        defer { endOperation() }
        _ = try await ensureOwnHistory()
        return try await uploadMovingIfNeeded().count
    }

    /// Checks every one of this device's own logs in the container (and the
    /// logs of its earlier IDs whose bodies it keeps) and puts back those
    /// missing or damaged. ``sync(progress:)`` does the same a bounded window at a
    /// time.
    @discardableResult
    public func repairOwnLogs() async throws -> [ContainerName] {
        try beginOperation()
        defer { endOperation() }
        _ = try await ensureOwnHistory()
        var repaired = try await replayer.repairOwnLogs()
        for inherited in try snapshot.inheritedDevices() {
            var cursor: ContainerName?
            repeat {
                let pass = try await replayer.repairInheritedLogs(of: inherited, from: cursor, budget: Replayer.RepairBudget(listed: 512, verifiedBytes: .max))
                repaired += pass.repaired
                cursor = pass.next
            } while cursor != nil
        }
        return repaired
    }

    /// This device's saves that the container does not hold as made: never
    /// uploaded, or in a log that is missing or no longer verifies.
    package func savesNotInContainer() async throws -> [Transaction] {
        try beginOperation()
        defer { endOperation() }
        return try await savesMissingFromContainer(snapshot).0
    }

    /// Applies, whole, logs a scrub found overlapping what this device
    /// applied of their device (see ``Replayer/applyStraddling(_:)``).
    @discardableResult
    package func applyStraddling(_ names: [ContainerName]) async throws -> Int {
        try beginOperation()
        defer { endOperation() }
        guard !names.isEmpty else { return 0 }
        return try await replayer.applyStraddling(names).appliedLogs
    }

    /// Builds this device's copy of the store again from the container (its
    /// newest intact baseline, then the logs), under a new device ID, and
    /// saves into it again, with their original clocks, this device's saves
    /// the container lacks. The health monitor does this when an import
    /// keeps failing, before it calls the store corrupted: a damaged local
    /// snapshot, or a copy that went wrong, is mended this way.
    ///
    /// - Parameter passingOver: for each device, a sequence that a baseline
    ///   to start from must not cover (see ``Replayer/passOverBaselinesCovering``).
    package func rebuildLocalCopy(reason: String, passingOver: [DeviceID: UInt64] = [:]) async throws -> IdentityChange {
        try beginOperation()
        defer { endOperation() }
        return try await moveToNewIdentity(reason: reason, passingOver: passingOver)
    }

    /// Saves in this store, as this device's own and with their original
    /// clocks, the writes that the copy of store `store` at `path` holds and
    /// this store lacks (see ``Snapshot/carryWrites(into:)``). A device that moves into
    /// a store rebuilt from another device's copy does this from its copy of
    /// the store it left: the rebuilt store's vector may say it holds a save
    /// that it holds another version of (that device's files went back in
    /// time, and saved again under the same sequences), and the rebuilder's
    /// copy may have gone back in time itself.
    ///
    /// - Returns: how many saves it made.
    package func keepWrites(fromCopyAt path: String, of store: StoreID, device: DeviceID) throws -> Int {
        try beginOperation()
        defer { endOperation() }
        let old = try Self.openSnapshot(path, storeID: store, device: device, configuration)
        defer { try? old.close() }
        let kept = try old.carryWrites(into: snapshot)
        if let error = kept.unreadable {
            configuration.log.error("could not read all of the copy of the store this device left; the writes the new store lacks may not all be kept",
                                    metadata: ["chronicle.error": "\(error)"])
        }
        if kept.saves > 0 {
            configuration.log.warning("saved again writes that the store this device moved to does not hold",
                                      metadata: ["chronicle.saves": "\(kept.saves)"])
        }
        return kept.saves
    }

    /// Writes this device's state as a baseline of the store, so that a new
    /// device starts from it (one SQLite transaction per part) instead of
    /// replaying every log. Pending saves are uploaded first, so the baseline
    /// covers only saves other devices can also get as logs.
    ///
    /// - Parameter partBytes: the uncompressed body size each part aims at
    ///   (4 MiB by default).
    /// - Returns: the container folder of the baseline's parts, how many
    ///   parts it has, and how many records.
    @discardableResult
    public func publishBaseline(partBytes: Int = Snapshot.baselinePartBytes) async throws -> (prefix: String, parts: Int, records: Int) {
        try beginOperation()
        defer { endOperation() }
        _ = try await ensureOwnHistory()
        _ = try await uploadMovingIfNeeded()
        let published = try await replayer.publishBaseline(partBytes: partBytes)
        if try snapshot.heldBaseline() != nil { try snapshot.setHeldBaseline(published.prefix) }
        return published
    }

    /// Removes from the container the logs that the store's newest complete
    /// baseline covers, and the baselines older than it, once every device
    /// that reported within `retention` has applied that much. The container
    /// then holds the newest baseline and the logs after it; a device that
    /// comes back after longer than `retention` applies the baseline and
    /// goes on from there, and its saves not uploaded yet are uploaded as
    /// usual. See `docs/compaction.md`.
    ///
    /// Publish a baseline first (``publishBaseline(partBytes:)``): without
    /// one, nothing is removed. When a device that reported within
    /// `retention` has not applied the baseline's logs yet, nothing is removed
    /// either (``CompactionReport/waitingFor`` names it): compact
    /// again after it has synced.
    ///
    /// - Parameter retention: how long a device may go without syncing and
    ///   still be waited for (30 days by default; at least 20 minutes, since
    ///   a device that syncs says how far it has applied every 10 minutes).
    /// A baseline that does not verify is passed over for the one before it
    /// (``CompactionReport/passedOverBaselines`` names it).
    ///
    /// - Throws: ``ChronicleError/Code/unavailable`` if the store was deleted
    ///   or rebuilt; the container's errors.
    @discardableResult
    public func compact(retention: Duration = .seconds(30 * 86_400)) async throws -> CompactionReport {
        try beginOperation()
        defer { endOperation() }
        guard retention >= configuration.appliedReportRefresh * 2 else {
            throw ChronicleError(.invalidValue, "a retention period of \(retention) is too short: devices that sync say how far they have applied every \(configuration.appliedReportRefresh), so it must be at least \(configuration.appliedReportRefresh * 2)")
        }
        _ = try await ensureOwnHistory()
        // Clamped (a thousand centuries) so that no duration overflows the milliseconds.
        return try await replayer.compact(retention: min(retention, .seconds(1 << 40)).milliseconds)
    }

    /// Publishes this store's whole state as a baseline of another store,
    /// into `container` (a new store seeded from this one; see
    /// ``StoreManager/SeedStrategy/fileCopy``, or a rebuild). The baseline's
    /// vector names this store's devices. It is published as `publisher`'s
    /// (this device's by default); a device never applies its own baselines,
    /// so a rebuild publishes under an ID of its own that this device, too,
    /// starts the new store from.
    func publishBaseline(for store: StoreID, into container: any Container, publisher publisherID: DeviceID? = nil) async throws {
        try beginOperation()
        defer { endOperation() }
        var publisher = Replayer(snapshot: snapshot, container: container, limits: configuration.limits, logger: configuration.log)
        publisher.clock = configuration.clock
        _ = try await publisher.publishBaseline(for: store, publisher: publisherID)
    }

    /// Removes the snapshots of this device's earlier IDs once every save
    /// they handed over is uploaded (damaged ones, whose saves could not be
    /// read, stay for a person to look at).
    private func pruneRetiredSnapshots() {
        guard (try? snapshot.pendingUploadCount()) == 0 else { return }
        for path in folder.retiredSnapshots(of: storeID) where path.contains("-superseded") {
            DeviceFolder.removeSnapshotFiles(path)
        }
    }

    /// One bounded scrub pass (see ``Replayer/scrubLogs(from:budget:recheck:recheckMissing:)``),
    /// from the cursor kept in the snapshot, re-reading `recheck` and
    /// looking again for the logs of `recheckMissing` too.
    package func scrub(recheck: [String], recheckMissing: [String] = [], bytes: Int = 1 << 20) async throws -> Replayer.ScrubFindings {
        try beginOperation()
        defer { endOperation() }
        let cursor = try snapshot.metadata("scrub_cursor").flatMap { try? ContainerName($0) }
        let findings = try await replayer.scrubLogs(from: cursor, budget: Replayer.RepairBudget(listed: 256, verifiedBytes: max(1, bytes)),
                                                    recheck: recheck.compactMap { try? ContainerName($0) }, recheckMissing: recheckMissing)
        try snapshot.setMetadata("scrub_cursor", findings.next?.rawValue)
        return findings
    }

    /// Where the next bounded repair pass starts, kept in the snapshot so
    /// that one-shot processes (the CLI) still cover every log over time.
    private func repairWindow() async throws -> [ContainerName] {
        var repaired: [ContainerName] = []
        do {
            repaired += try await repairPass(key: "repair_cursor") { cursor in
                try await self.replayer.repairOwnLogs(from: cursor, budget: Replayer.RepairBudget())
            }
            // Earlier IDs of this device: only it holds their bodies.
            for inherited in try snapshot.inheritedDevices() {
                repaired += try await repairPass(key: "repair_cursor.\(inherited)") { cursor in
                    try await self.replayer.repairInheritedLogs(of: inherited, from: cursor, budget: Replayer.RepairBudget())
                }
            }
        } catch let error as ChronicleError where error.code == .identityConflict {
            let change = try await moveToNewIdentity(reason: error.message)
            configuration.log.notice("moved to a new device ID while repairing", metadata: ["chronicle.device": "\(change.current)"])
        }
        return repaired
    }

    /// One bounded pass from the cursor kept under `key`; moves the cursor on.
    private func repairPass(key: String, _ pass: (ContainerName?) async throws -> (repaired: [ContainerName], next: ContainerName?)) async throws -> [ContainerName] {
        let cursor = try snapshot.metadata(key).flatMap { try? ContainerName($0) }
        let result = try await pass(cursor)
        try snapshot.setMetadata(key, result.next?.rawValue)
        return result.repaired
    }

    /// Uploads; if the container turns out to hold other saves under this
    /// device's sequences, moves to a new ID and uploads under it.
    private func uploadMovingIfNeeded(progress: (@Sendable (SyncProgress) -> Void)? = nil) async throws -> (count: Int, change: IdentityChange?) {
        do {
            return (try await replayer(reporting: progress).upload(), nil)
        } catch let error as ChronicleError where error.code == .identityConflict {
            let change = try await moveToNewIdentity(reason: error.message)
            return (try await replayer(reporting: progress).upload(), change)
        }
    }

    /// The replayer, telling `progress` how far it has got (a copy: a
    /// concurrent sync keeps its own).
    private func replayer(reporting progress: (@Sendable (SyncProgress) -> Void)?) -> Replayer {
        var copy = replayer
        copy.progress = progress
        return copy
    }

    /// Checks once per open store (and after every move) that the
    /// container's history of this device's ID is this snapshot's own.
    /// A container that does not answer leaves the check for the next sync:
    /// nothing is uploaded before it passes.
    private func ensureOwnHistory() async throws -> IdentityChange? {
        if let identityTask { return try await identityTask.value }
        guard !historyChecked else { return nil }
        guard let reason = try await replayer.foreignHistory() else {
            historyChecked = true
            return nil
        }
        return try await moveToNewIdentity(reason: reason)
    }

    /// Moves this device to a new ID: builds a snapshot for the new ID from
    /// the container, carries over every acknowledged save of the old ID
    /// that the container lacks (same clock and changes, new sequence),
    /// then makes it the device's snapshot. The old snapshot is kept in the
    /// folder's `retired/` until the carried saves are uploaded.
    ///
    /// Crash-safe: `device.json` naming the new ID is the commit point.
    /// Before it, the old snapshot is still the device's and the move starts
    /// again at the next sync; after it, ``open(_:)`` finishes the swap.
    private func moveToNewIdentity(reason: String, passingOver: [DeviceID: UInt64] = [:]) async throws -> IdentityChange {
        if let identityTask { return try await identityTask.value }
        let task = Task { try await self.performMove(reason: reason, passingOver: passingOver) }
        identityTask = task
        defer { identityTask = nil }
        return try await task.value
    }

    private func performMove(reason: String, passingOver: [DeviceID: UInt64]) async throws -> IdentityChange {
        let old = snapshot
        let newID = DeviceID.drawn(&random)
        configuration.log.warning("building this device's copy of the store again under a new device ID", metadata: [
            "chronicle.device": "\(old.deviceID)", "chronicle.newDevice": "\(newID)", "chronicle.reason": "\(reason)",
        ])
        let nextPath = folder.nextSnapshotPath(storeID)
        DeviceFolder.removeSnapshotFiles(nextPath)
        let next = try Self.openSnapshot(nextPath, storeID: storeID, device: newID, configuration, knowing: old.earlier)
        var mapping: [IdentityChange.CarriedSave] = []
        var importedLogs = 0
        var importedTransactions = 0
        var keptWrites = 0
        do {
            // Its logs that are only damaged or missing go back first: they
            // are its own, and other devices would stop at them for good.
            let putBack = try await replayer.repairOwnLogsPassingOverOthers()
            if !putBack.isEmpty {
                configuration.log.notice("put back own logs before moving to a new ID", metadata: ["chronicle.logs": "\(putBack.count)"])
            }
            // What of the old ID's saves the container lacks.
            var (carried, through, ours) = try await savesMissingFromContainer(old)
            // Everything the container holds, the old ID's logs included.
            var builder = Replayer(snapshot: next, container: configuration.container, limits: configuration.limits, logger: configuration.log)
            builder.clock = configuration.clock
            builder.baselineWait = .zero
            builder.passOverBaselinesCovering = passingOver
            // What the container adds to what the app saw is news to it.
            builder.eventSink = { [hub] events in hub.publish(events) }
            let built = try await builder.importOnce()
            // The baseline it started from, if any: what a rebuild from this
            // copy, or a republish when the container loses it, looks for.
            if let prefix = built.baselinePrefix { try next.setHeldBaseline(prefix) }
            importedLogs = built.appliedLogs
            importedTransactions = built.appliedTransactions
            // The old ID's logs that only the container holds: the new ID
            // keeps their bodies too, to put them back after a wipe.
            let orphans = try await logsOnlyInContainer(of: old.deviceID, besides: ours)
            // From here on nothing awaits: saves made on the old snapshot
            // while the container was read are carried too.
            let own = try old.ownSequence()
            if own > through, let later = try old.ownTransactions(first: through + 1, last: own) {
                carried += later
                through = own
            }
            let clocks = Dictionary(carried.map { ($0.sequence, $0.clock) }, uniquingKeysWith: { a, _ in a })
            try next.inherit(from: old, groups: ours)
            try next.inherit(logs: orphans, of: old.deviceID)
            mapping = try next.adopt(carried).map { IdentityChange.CarriedSave(old: $0.old, new: $0.new, clock: clocks[$0.old] ?? .zero) }
            // Other devices' saves the old copy applied and the container
            // no longer has (it went back to an older copy, and so did
            // their owner's files): saved again from here, or they would
            // be lost with the old copy.
            let kept = try old.carryWrites(into: next)
            keptWrites = kept.saves
            if let error = kept.unreadable {
                // A damaged old copy (the reason for some rebuilds) cannot
                // stop the move: it would fail again at every sync.
                configuration.log.error("could not read all of the old copy of the store; the other devices' saves it held that the container lacks may not be carried",
                                        metadata: ["chronicle.error": "\(error)"])
            }
            if keptWrites > 0 {
                configuration.log.warning("saved again other devices' saves that this device held and the container no longer has",
                                          metadata: ["chronicle.saves": "\(keptWrites)"])
            }
            try next.close()
            var identity = try folder.readIdentity() ?? DeviceFolder.Identity(device: old.deviceID, store: storeID, retired: nil)
            identity.retired = (identity.retired ?? []) + [old.deviceID]
            identity.device = newID
            identity.store = storeID
            try folder.writeIdentity(identity)
        } catch {
            try? next.close()
            DeviceFolder.removeSnapshotFiles(nextPath)
            throw error
        }
        // Committed: swap the files and carry on with the new snapshot.
        // Observations leave the old database before it closes, and start
        // again on the new one.
        reader.detachObservations()
        try? old.close()
        try Self.finishIdentitySwitch(folder, store: storeID, identity: DeviceFolder.Identity(device: newID, store: storeID, retired: nil))
        let fresh = try Self.openSnapshot(folder.snapshotPath(storeID), storeID: storeID, device: newID, configuration, knowing: old.earlier)
        current.withLock { $0 = fresh }
        reader.switchTo(fresh.databasePool)
        replayer = try Self.makeReplayer(fresh, configuration: configuration, hub: hub, random: &random)
        historyChecked = true
        let change = IdentityChange(previous: old.deviceID, current: newID, reason: reason, carriedOver: mapping,
                                    importedLogs: importedLogs, importedTransactions: importedTransactions, keptSaves: keptWrites)
        identityChanges.append(change)
        return change
    }

    /// Keeps in `snapshot` the store's published compression dictionaries,
    /// before reading logs that may be compressed against them. One that
    /// cannot be read leaves its logs unread, as any unreadable log.
    private func keepPublishedDictionaries(in snapshot: Snapshot) async {
        guard let published = try? await configuration.container.publishedDictionaries(store: storeID).found else { return }
        for d in published { try? snapshot.keep(d) }
    }

    /// The old ID's saves (through its newest) that the container does not
    /// hold as they were made: a log of the old ID with the same name the
    /// outbox uploaded holds them; any other log of the old ID is read and
    /// compared save by save. Returns them in order, and the newest sequence
    /// considered.
    private func savesMissingFromContainer(_ old: Snapshot) async throws -> ([Transaction], UInt64, [(first: UInt64, last: UInt64)]) {
        let own = try old.ownSequence()
        guard own > 0 else { return ([], 0, []) }
        let device = old.deviceID
        let uploaded = Set(try old.uploadedGroups().map { "\($0.0)-\($0.1)" })
        await keepPublishedDictionaries(in: old)
        let decoder = old.decoder(limits: configuration.limits)
        // Logs under a compaction's baseline count for nothing: other devices
        // pass over them, and the saves they hold may be another copy's.
        let compacted = try await configuration.container.readMarker(ContainerLayout.compaction(store: storeID), as: CompactionHorizon.self)?
            .payload.vector[device] ?? 0
        var present = IndexSet()
        // Logs the container holds exactly as these files wrote them: the
        // new snapshot keeps their bodies, to put them back if need be.
        var ours: [(first: UInt64, last: UInt64)] = []
        for blob in try await configuration.container.listAll(prefix: ContainerLayout.logPrefix(store: storeID, device: device)) {
            guard let parsed = ContainerLayout.parseLog(blob.name), parsed.device == device, parsed.first <= own, parsed.last > compacted else { continue }
            let last = min(parsed.last, own)
            let read = try? decoder.open(try await configuration.container.get(blob.name, maxBytes: decoder.limits.maxLogBytes), name: blob.name)
            if uploaded.contains("\(parsed.first)-\(parsed.last)") {
                // Only if it verifies: the new snapshot imports these logs,
                // and one that is damaged (its owner unable to put it back)
                // would leave its saves nowhere. Those are carried instead.
                guard read != nil else { continue }
                // And only if it holds these saves: an upload that never
                // arrived leaves the name free, and another copy of these
                // files may have put its own saves there since.
                if parsed.last <= own, let stored = try? read?.transactions(),
                   let mine = try old.ownTransactions(first: parsed.first, last: parsed.last), stored == mine {
                    present.insert(integersIn: Int(parsed.first)...Int(last))
                    ours.append((parsed.first, parsed.last))
                    continue
                }
            }
            guard let stored = try? read?.transactions(),
                  let mine = try old.ownTransactions(first: parsed.first, last: last) else { continue }
            let theirs = Dictionary(stored.map { ($0.sequence, $0) }, uniquingKeysWith: { a, _ in a })
            for t in mine where theirs[t.sequence] == t { present.insert(Int(t.sequence)) }
            if parsed.last <= own, mine.allSatisfy({ theirs[$0.sequence] == $0 }) { ours.append((parsed.first, parsed.last)) }
        }
        // Only what other devices can reach counts: they take a device's
        // logs in sequence order from the compaction's horizon and stop at
        // the first sequence the container lacks (or holds another copy's
        // save at), so these saves after it reach nobody under the old ID.
        var reach = Int(compacted) + 1
        while reach <= Int(own), present.contains(reach) { reach += 1 }
        if reach <= Int(own) { present.remove(integersIn: reach...Int(own)) }
        var missing: [Transaction] = []
        var gaps = IndexSet(integersIn: 1...Int(own))
        gaps.subtract(present)
        // A gap may hold sequences these files imported rather than saved
        // (another copy's logs of the same ID): carry the saves they made.
        for range in gaps.rangeView {
            missing += try old.ownTransactions(within: UInt64(range.lowerBound), UInt64(range.upperBound - 1))
        }
        return (missing, own, ours)
    }

    /// Keeps again the bodies of `devices`' logs (a seeding device, an
    /// earlier ID: see ``Snapshot/inherit(logs:of:)``) that this snapshot
    /// no longer holds, from the container, while it still has them: files
    /// that went back in time (a lost `-wal`, a restored copy) lose what
    /// they kept, and a wiped container would then lose those saves for
    /// every device that does not start from a baseline.
    ///
    /// - Returns: how many logs it kept again.
    @discardableResult
    package func keepLogs(of devices: [DeviceID]) async throws -> Int {
        try beginOperation()
        defer { endOperation() }
        var kept = 0
        for device in devices where device != snapshot.deviceID {
            let held = try snapshot.inheritedGroups(of: device).map { (first: $0.0, last: $0.1) }
            let missing = try await logsOnlyInContainer(of: device, besides: held)
            try snapshot.inherit(logs: missing, of: device)
            kept += missing.count
        }
        return kept
    }

    /// The logs of `device` in the container, other than `besides`, that
    /// verify: what its files uploaded and no longer hold. Logs that do not
    /// verify are left to the importers' failure reports.
    private func logsOnlyInContainer(of device: DeviceID, besides: [(first: UInt64, last: UInt64)]) async throws -> [(first: UInt64, last: UInt64, transactions: [Transaction])] {
        let known = Set(besides.map { "\($0.first)-\($0.last)" })
        await keepPublishedDictionaries(in: snapshot)
        let decoder = snapshot.decoder(limits: configuration.limits)
        var logs: [(first: UInt64, last: UInt64, transactions: [Transaction])] = []
        for blob in try await configuration.container.listAll(prefix: ContainerLayout.logPrefix(store: storeID, device: device)) {
            guard let parsed = ContainerLayout.parseLog(blob.name), parsed.device == device,
                  !known.contains("\(parsed.first)-\(parsed.last)"),
                  let bytes = try? await configuration.container.get(blob.name, maxBytes: decoder.limits.maxLogBytes),
                  let verified = try? decoder.open(bytes, name: blob.name),
                  verified.header.deviceID == device,
                  var transactions = try? verified.transactions(),
                  transactions.map(\.sequence) == Array(parsed.first...parsed.last) else { continue }
            // Kept as the container holds it: a log of an earlier schema
            // version in that version's terms, to be put back as it was.
            if let header = try? decoder.header(of: bytes, name: blob.name), header.schemaHash != snapshot.schema.hash,
               let source = snapshot.earlier.first(where: { $0.source.hash == header.schemaHash })?.source {
                guard let original = try? LogDecoder(schema: source, limits: decoder.limits).open(bytes, name: blob.name).transactions() else { continue }
                transactions = original
            }
            logs.append((parsed.first, parsed.last, transactions))
        }
        return logs
    }

    /// Imports other devices' logs only.
    ///
    /// - Throws: `CancellationError` if the task is cancelled (between logs,
    ///   as ``sync(progress:)``); ``ChronicleError/Code/closed`` after ``close()``.
    @discardableResult
    public func importLogs() async throws -> ImportReport {
        try beginOperation()
        defer { endOperation() }
        return try await replayer.importOnce()
    }

    /// Starts syncing now and then every `interval` (slept on
    /// ``Configuration/clock``) until ``stopAutomaticSync()`` or
    /// ``close()``. Each sync's result is published to the
    /// ``changes(bufferLimit:)`` streams (``StoreEvent/synced(_:)``,
    /// ``StoreEvent/syncFailed(_:)``) and kept in ``syncStatus``; a failed
    /// sync is tried again at the next tick.
    ///
    /// A container that tells when another device writes to it (a
    /// PostgreSQL container, through LISTEN/NOTIFY) wakes the loop at
    /// once; the interval is then the fallback.
    ///
    /// - Throws: ``ChronicleError/Code/closed`` after ``close()``.
    public func startAutomaticSync(every interval: Duration) throws {
        try checkOpen()
        syncTask?.cancel()
        lifecycle.withLock { $0.sync.isAutomatic = true }
        let clock = configuration.clock
        let container = configuration.container
        let wake = SyncWake()
        syncTask = Task { [weak self] in
            let listener = Task {
                guard let changes = await container.changes() else { return }
                for await _ in changes { wake.signal() }
            }
            defer { listener.cancel() }
            while !Task.isCancelled {
                guard await Self.automaticSync(self) else { return }
                let slept = await wake.sleep { try await clock.sleep(for: interval) }
                if !slept { return }
            }
        }
    }

    /// Cuts the automatic sync loop's sleep short when the container says
    /// another device wrote to it; a wake that comes during a sync makes
    /// the next sleep end at once.
    private final class SyncWake: Sendable {
        private let state = Mutex<(pending: Bool, sleeper: Task<Void, any Error>?)>((false, nil))

        func signal() {
            let sleeper = state.withLock { s in
                s.pending = true
                return s.sleeper
            }
            sleeper?.cancel()
        }

        /// Sleeps with `sleep` unless woken; false if the loop's own task
        /// was cancelled.
        func sleep(_ sleep: @escaping @Sendable () async throws -> Void) async -> Bool {
            let sleeper = Task { try await sleep() }
            let woken = state.withLock { s in
                defer { s.pending = false }
                s.sleeper = s.pending ? nil : sleeper
                return s.pending
            }
            if woken { sleeper.cancel() }
            await withTaskCancellationHandler {
                _ = try? await sleeper.value
            } onCancel: {
                sleeper.cancel()
            }
            state.withLock { s in
                s.sleeper = nil
            }
            return !Task.isCancelled
        }
    }

    /// One automatic sync; false once the store is gone.
    private static func automaticSync(_ store: Store?) async -> Bool {
        guard let store else { return false }
        await store.runAutomaticSync()
        return true
    }

    private func runAutomaticSync() async {
        do {
            let report = try await sync()
            hub.publish(sync: .synced(report))
        } catch is CancellationError {
            return
        } catch let error as ChronicleError where error.code == .closed {
            return
        } catch {
            let failure = error as? ChronicleError ?? ChronicleError(.io, "automatic sync failed: \(error)", underlying: error)
            configuration.log.warning("automatic sync failed", metadata: ["chronicle.error": "\(failure)"])
            hub.publish(sync: .syncFailed(failure))
        }
        lifecycle.withLock { $0.sync.automaticSyncs += 1 }
    }

    /// Stops the automatic sync loop (a sync under way finishes).
    public func stopAutomaticSync() {
        syncTask?.cancel()
        syncTask = nil
        lifecycle.withLock { $0.sync.isAutomatic = false }
    }

    // MARK: Observation

    /// Every event from now on: each record change, local or imported
    /// (``StoreEvent/record(_:)``), and each automatic sync's result. Each
    /// call returns an independent stream, which ends when the store closes
    /// (after the events it still holds).
    ///
    /// A consumer that falls behind loses nothing silently: the stream
    /// buffers at most `bufferLimit` events, and the record events that do
    /// not fit are replaced by one ``StoreEvent/refetch(entities:)`` naming
    /// their entities, delivered after the buffered events. (One import of
    /// 10,000 logs can make hundreds of thousands of events.)
    ///
    /// - Parameter bufferLimit: the most events held for this stream; at least 1.
    /// - Throws: ``ChronicleError/Code/closed`` after ``close()``.
    public nonisolated func changes(bufferLimit: Int = 10_000) throws -> AsyncStream<StoreEvent> {
        try checkOpen()
        guard let stream = hub.subscribe(bufferLimit: bufferLimit) else { throw StoreReader.closedError() }
        return stream
    }

    // MARK: Closing

    /// Closes the store: stops automatic syncing, waits for the syncs,
    /// uploads and imports under way to finish, ends every
    /// ``changes(bufferLimit:)`` stream and every observation on
    /// ``reader``, closes the snapshot and lets go of the device folder.
    ///
    /// Every call after it (a read, a save, a sync, ``changes(bufferLimit:)``,
    /// ``startAutomaticSync(every:)``) throws ``ChronicleError/Code/closed``.
    /// Closing again waits for the first close and does nothing more.
    ///
    /// - Throws: ``ChronicleError/Code/database`` if SQLite refuses to
    ///   close the database.
    public func close() async throws {
        if let closeTask { return try await closeTask.value }
        lifecycle.withLock { state in
            state.closed = true
            state.sync.isAutomatic = false
        }
        let automatic = syncTask
        syncTask = nil
        automatic?.cancel()
        let task = Task { try await self.finishClosing(after: automatic) }
        closeTask = task
        try await task.value
    }

    private func finishClosing(after automatic: Task<Void, Never>?) async throws {
        await automatic?.value
        while operations > 0 {
            await withCheckedContinuation { idleWaiters.append($0) }
        }
        hub.finish()
        // The main context and the store hold each other until now.
        contexts.withLock { $0.main = nil }
        await reader.closeObservations()
        defer { folder.release() }
        try snapshot.close()
    }

    /// Throws ``ChronicleError/Code/closed`` once ``close()`` has begun.
    nonisolated var isClosed: Bool { lifecycle.withLock { $0.closed } }

    nonisolated func checkOpen() throws {
        if lifecycle.withLock({ $0.closed }) { throw StoreReader.closedError() }
    }

    private func beginOperation() throws {
        try checkOpen()
        operations += 1
    }

    private func endOperation() {
        operations -= 1
        guard operations == 0 else { return }
        let waiters = idleWaiters
        idleWaiters = []
        for waiter in waiters { waiter.resume() }
    }
}

extension Store.Configuration {
    /// This configuration with ``baselineWait`` set to `wait`.
    package func waitingForBaselines(_ wait: Duration) -> Self {
        var copy = self
        copy.baselineWait = wait
        return copy
    }
}
