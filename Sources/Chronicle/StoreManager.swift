import ChronicleContainer
import ChronicleCore
import Foundation
import GRDB
import Synchronization

/// Owns which store is loaded on this device, the **local store** or the
/// **cloud store**, and hands the app the loaded ``Store``.
///
/// - The local store is this device's own: nothing is uploaded, nothing is
///   imported. An app works in it while the user keeps the cloud off.
/// - The cloud store is the container's active store, synced with every
///   other device.
///
/// Whether the cloud is on is a per-device choice, kept in the manager's
/// folder, so the next launch loads the same store. Turning it on brings
/// the local store's records into the cloud store (see
/// ``LocalDataPolicy``); turning it off goes back to the local store as the
/// device left it. Nothing is deleted by a toggle.
///
/// ```swift
/// let manager = try await StoreManager.open(StoreManager.Configuration(
///     store: Store.Configuration(schema: schema, directory: appSupport, container: container)))
/// let store = try await manager.store        // the local store at first
/// try await manager.setCloudEnabled(true)   // now the cloud store, holding the local records too
/// ```
///
/// While nothing is loaded (during a switch, or after a failed load),
/// ``store`` and every operation that needs a store throw
/// ``ChronicleError/Code/storeNotLoaded``.
///
/// The manager's folder (``Configuration/store``'s `directory`) holds:
///
/// ```
/// <folder>/chronicle.lock      held while a manager has the folder open
/// <folder>/manager.json        {"cloudEnabled": ..., "mergePending": ...}
/// <folder>/cloud/              the cloud store's device folder
/// <folder>/local/device/       the local store's device folder
/// <folder>/local/container/    the local store's own container, which no other device sees
/// ```
public actor StoreManager {
    /// How to open a manager.
    public struct Configuration: Sendable {
        /// The cloud store's configuration. Its `directory` is the manager's
        /// folder (see ``StoreManager``); its `container` the shared one.
        /// The local store takes the same schema, clock and durability.
        public var store: Store.Configuration
        /// Whether the cloud is on when the folder is new (afterwards the
        /// folder's own choice wins). Off by default, as a user would expect
        /// of an app that has not been asked yet.
        public var cloudEnabledByDefault: Bool
        /// How many records one transaction of a merge carries.
        public var mergeBatchSize: Int

        /// Creates a configuration.
        public init(store: Store.Configuration, cloudEnabledByDefault: Bool = false, mergeBatchSize: Int = 500) {
            self.store = store
            self.cloudEnabledByDefault = cloudEnabledByDefault
            self.mergeBatchSize = max(1, mergeBatchSize)
        }
    }

    /// Which of the two stores.
    public enum Kind: String, Sendable, Hashable, Codable {
        /// The device-only store.
        case local
        /// The container's active store.
        case cloud
    }

    /// What becomes of the local store's records when the cloud is turned on.
    public enum LocalDataPolicy: String, Sendable, Hashable {
        /// The local records enter the cloud store as ordinary saves of
        /// this device (the default). A record whose unique key the cloud
        /// store already has is not copied: references to it are pointed at
        /// the cloud's record. Records the cloud store already holds, or
        /// held and deleted, keep the cloud's version. The merge is
        /// resumable: if it is interrupted, the next load finishes it.
        case merge
        /// The local records stay in the local store only.
        case useCloud
    }

    /// What happened, for an app that shows it or reacts to it.
    public enum Event: Sendable {
        /// A store is about to load; ``StoreManager/store`` throws
        /// ``ChronicleError/Code/storeNotLoaded`` until it has.
        case willLoad(Kind)
        /// A store is loaded and ready.
        case didLoad(Kind, StoreID)
        /// Loading failed; nothing is loaded. The error says why.
        case failedLoading(Kind, ChronicleError)
        /// The loaded store was closed (a switch, or ``StoreManager/close()``).
        case didUnload(Kind)
        /// Local records were merged into the cloud store.
        case mergedLocalData(MergeReport)
    }

    /// What a merge of the local store into the cloud store did.
    public struct MergeReport: Sendable, Hashable {
        /// Records saved into the cloud store.
        public var copied = 0
        /// Local records whose unique key the cloud store already had; the
        /// cloud's record stands for them.
        public var deduplicated = 0
        /// Local records the cloud store already held (an earlier merge) or
        /// had deleted.
        public var alreadyPresent = 0
        /// Transactions the merge saved.
        public var transactions = 0
    }

    /// What the manager keeps in `manager.json`.
    struct State: Codable, Equatable {
        var cloudEnabled: Bool
        /// The cloud was turned on with ``LocalDataPolicy/merge`` and the
        /// merge has not finished.
        var mergePending: Bool
    }

    static let stateFile = "manager.json"
    static let stateFileLimit = 64 * 1024

    /// The manager's configuration.
    public nonisolated let configuration: Configuration
    private let folder: DeviceFolder
    private var state: State
    private var loaded: (kind: Kind, store: Store)?
    private let continuations = EventContinuations<Event>()

    private init(configuration: Configuration, folder: DeviceFolder, state: State) {
        self.configuration = configuration
        self.folder = folder
        self.state = state
    }

    /// Locks the manager's folder and loads the store its persisted choice
    /// names (the cloud store if the cloud is on, else the local store).
    ///
    /// A merge that an earlier run began and did not finish is finished
    /// first.
    ///
    /// - Throws: ``ChronicleError/Code/deviceInUse`` if another manager
    ///   holds the folder. A failure to load the store itself does not
    ///   throw: the manager opens with nothing loaded (see ``Event/failedLoading(_:_:)``),
    ///   and ``reload()`` tries again.
    public static func open(_ configuration: Configuration) async throws -> StoreManager {
        let directory = configuration.store.directory
        let folder = try await DeviceFolder(directory, wait: configuration.store.lockWait)
        do {
            let path = directory.appendingPathComponent(stateFile).path
            let state: State
            if let bytes = try DeviceFolder.readSmallFile(path, limit: stateFileLimit, holding: "the store manager's state") {
                do {
                    state = try JSONDecoder().decode(State.self, from: Data(bytes))
                } catch {
                    throw ChronicleError(.invalidValue, "\(path) is not a store manager's state file", underlying: error)
                }
            } else {
                state = State(cloudEnabled: configuration.cloudEnabledByDefault, mergePending: false)
                try write(state, in: folder)
            }
            let manager = StoreManager(configuration: configuration, folder: folder, state: state)
            await manager.loadChosen()
            return manager
        } catch {
            folder.release()
            throw error
        }
    }

    /// Whether this device uses the cloud store (persisted).
    public var cloudEnabled: Bool { state.cloudEnabled }

    /// Which store is loaded, or nil while none is.
    public var loadedKind: Kind? { loaded?.kind }

    /// The loaded store.
    ///
    /// - Throws: ``ChronicleError/Code/storeNotLoaded`` while none is.
    public var store: Store {
        get throws {
            guard let loaded else {
                throw ChronicleError(.storeNotLoaded, "no store is loaded (a switch is under way, the last load failed, or the manager is closed)")
            }
            return loaded.store
        }
    }

    /// Lifecycle events from now on. Each call returns an independent stream.
    public nonisolated func events() -> AsyncStream<Event> {
        continuations.subscribe()
    }

    /// Turns the cloud on or off for this device, and loads the other store.
    ///
    /// Turning it on with ``LocalDataPolicy/merge`` copies the local
    /// store's records into the cloud store (see ``LocalDataPolicy``). The
    /// choice is persisted before anything else happens, so a crash during
    /// the switch ends, at the next ``open(_:)``, in the store chosen, with
    /// the merge finished. Setting the current value reloads nothing.
    ///
    /// - Throws: whatever loading the chosen store throws (the manager is
    ///   then left with nothing loaded; ``reload()`` tries again).
    @discardableResult
    public func setCloudEnabled(_ enabled: Bool, localData: LocalDataPolicy = .merge) async throws -> MergeReport? {
        guard enabled != state.cloudEnabled || loaded == nil else { return nil }
        var next = state
        next.cloudEnabled = enabled
        next.mergePending = enabled && localData == .merge
        try await unload()
        try Self.write(next, in: folder)
        state = next
        return try await load(next)
    }

    /// Closes the loaded store and loads the chosen one again (after a
    /// failed load, for instance).
    @discardableResult
    public func reload() async throws -> MergeReport? {
        try await unload()
        return try await load(state)
    }

    /// Closes the loaded store, ends the event streams and lets go of the
    /// folder. The manager cannot be used afterwards.
    public func close() async throws {
        defer {
            continuations.finish()
            folder.release()
        }
        try await unload()
    }

    // MARK: Loading

    /// Loads what `state` names; on failure, publishes it and leaves nothing loaded.
    private func loadChosen() async {
        _ = try? await load(state)
    }

    private func load(_ state: State) async throws -> MergeReport? {
        let kind: Kind = state.cloudEnabled ? .cloud : .local
        continuations.publish(.willLoad(kind))
        do {
            let store = try await Store.open(configuration(for: kind))
            loaded = (kind, store)
            var report: MergeReport?
            if kind == .cloud, state.mergePending {
                report = try await mergeLocalData(into: store)
                self.state.mergePending = false
                try Self.write(self.state, in: folder)
                continuations.publish(.mergedLocalData(report!))
            }
            continuations.publish(.didLoad(kind, store.storeID))
            return report
        } catch {
            let failure = (error as? ChronicleError)
                ?? ChronicleError(.io, "cannot load the \(kind.rawValue) store: \(error)", underlying: error)
            if let open = loaded?.store {
                try? await open.close()
            }
            loaded = nil
            continuations.publish(.failedLoading(kind, failure))
            throw failure
        }
    }

    private func unload() async throws {
        guard let current = loaded else { return }
        loaded = nil
        try await current.store.close()
        continuations.publish(.didUnload(current.kind))
    }

    /// The configuration of one of the two stores.
    func configuration(for kind: Kind) throws -> Store.Configuration {
        var config = configuration.store
        let root = configuration.store.directory
        switch kind {
        case .cloud:
            config.directory = root.appendingPathComponent("cloud")
        case .local:
            let local = root.appendingPathComponent("local")
            config.directory = local.appendingPathComponent("device")
            config.container = try DirectoryContainer(root: local.appendingPathComponent("container"), create: true)
            config.knownStore = nil
        }
        return config
    }

    private static func write(_ state: State, in folder: DeviceFolder) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data: Data
        do { data = try encoder.encode(state) } catch { throw ChronicleError(.invalidValue, "cannot encode the manager's state", underlying: error) }
        try DeviceFolder.writeAtomically(Array(data), to: folder.url.appendingPathComponent(stateFile).path, directory: folder.url.path)
    }

    // MARK: Merging local data

    /// Copies the local store's records into `cloud`, in batches of
    /// ``Configuration/mergeBatchSize`` records.
    ///
    /// Records keep their IDs, which makes the merge idempotent: a record
    /// the cloud store already has (from an interrupted merge, or an
    /// earlier one), or had and deleted, is left alone. A record whose
    /// unique key a visible cloud record already has is not copied, and
    /// references to it point at that record. References to records not yet
    /// copied are set by updates once their targets exist.
    private func mergeLocalData(into cloud: Store) async throws -> MergeReport {
        // Import what other devices have first, so a local record whose
        // unique key the cloud already has is recognised here. Offline, the
        // merge goes ahead: de-duplication on import settles such records
        // the same way once the devices meet (see docs/merge.md).
        do {
            _ = try await cloud.sync()
        } catch {
            configuration.store.logger.notice("merging local data before the cloud store could be synced", metadata: ["chronicle.error": "\(error)"])
        }
        let local = try await Store.open(configuration(for: .local))
        do {
            let report = try await LocalDataMerge(schema: configuration.store.schema, batchSize: configuration.mergeBatchSize)
                .run(from: local, into: cloud)
            try await local.close()
            return report
        } catch {
            try? await local.close()
            throw error
        }
    }
}

/// The copy behind ``StoreManager/LocalDataPolicy/merge``.
struct LocalDataMerge {
    let schema: Schema
    let batchSize: Int

    /// What the cloud store has of a local record.
    enum Found: Sendable {
        case present, deleted, absent
        case sameKey(RecordID)
    }

    /// A local record as read: its values, and the stored form of each of
    /// its unique keys' fields.
    struct LocalRow: Sendable {
        var id: RecordID
        var values: [String: Value]
        var keys: [[DatabaseValue]]
    }

    /// One local record to copy.
    struct Pending: Sendable {
        var entity: String
        var id: RecordID
        var values: [String: Value]
    }

    func run(from local: Store, into cloud: Store) async throws -> StoreManager.MergeReport {
        var report = StoreManager.MergeReport()
        // Which cloud record stands for each local one: itself, or the
        // cloud's record of the same unique key.
        var target: [RecordID: RecordID] = [:]
        // Cloud records there before the merge, and local records the cloud deleted.
        var inCloud: Set<RecordID> = []
        var deleted: Set<RecordID> = []
        var pending: [Pending] = []
        for (index, entity) in schema.entities.enumerated() {
            let rows: [LocalRow] = try await local.read { db in
                try Row.fetchAll(db, sql: "SELECT * FROM \(Self.quoted(entity.name)) ORDER BY id").map { row in
                    LocalRow(id: row["id"], values: try Store.values(row, entity: entity),
                             keys: entity.uniqueConstraints.map { $0.map { row[$0] as DatabaseValue } })
                }
            }
            let found: [Found] = try await cloud.read { db in
                try rows.map { row in
                    if try Bool.fetchOne(db, sql: "SELECT 1 FROM \(Self.quoted(entity.name)) WHERE id = ?", arguments: [row.id]) ?? false {
                        return .present
                    }
                    if try Bool.fetchOne(db, sql: "SELECT 1 FROM _chronicle_records WHERE entity = ? AND id = ?", arguments: [index, row.id]) ?? false {
                        return .deleted
                    }
                    return try Self.sameKey(db, entity: entity, keys: row.keys).map(Found.sameKey) ?? .absent
                }
            }
            for (row, found) in zip(rows, found) {
                let id = row.id
                switch found {
                case .present:
                    target[id] = id
                    inCloud.insert(id)
                    report.alreadyPresent += 1
                case .deleted:
                    deleted.insert(id)
                    report.alreadyPresent += 1
                case .sameKey(let existing):
                    target[id] = existing
                    inCloud.insert(existing)
                    report.deduplicated += 1
                case .absent:
                    target[id] = id
                    pending.append(Pending(entity: entity.name, id: id, values: row.values))
                }
            }
        }
        // Inserts, with the references whose targets exist by then; the
        // rest as updates afterwards.
        var deferred: [(entity: String, id: RecordID, values: [String: Value])] = []
        for start in stride(from: 0, to: pending.count, by: batchSize) {
            let batch = Array(pending[start..<min(pending.count, start + batchSize)])
            let batchIDs = Set(batch.map(\.id))
            var inserts: [Pending] = []
            for var record in batch {
                var later: [String: Value] = [:]
                for (name, value) in record.values {
                    guard case .reference(let referenced) = value else { continue }
                    guard let resolved = target[referenced], !deleted.contains(referenced) else {
                        // The cloud deleted what it refers to: the deletion stands.
                        record.values[name] = Value.null
                        continue
                    }
                    if inCloud.contains(resolved) || batchIDs.contains(resolved) {
                        record.values[name] = .reference(resolved)
                    } else {
                        later[name] = .reference(resolved)
                        record.values[name] = Value.null
                    }
                }
                if !later.isEmpty { deferred.append((record.entity, record.id, later)) }
                inserts.append(record)
            }
            let toSave = inserts
            try await cloud.write { tx in
                for record in toSave { _ = tx.insert(record.entity, record.values, id: record.id) }
            }
            inCloud.formUnion(batchIDs)
            report.copied += batch.count
            report.transactions += 1
        }
        for start in stride(from: 0, to: deferred.count, by: batchSize) {
            let batch = Array(deferred[start..<min(deferred.count, start + batchSize)])
            try await cloud.write { tx in
                for update in batch { tx.update(update.entity, id: update.id, update.values) }
            }
            report.transactions += 1
        }
        return report
    }

    /// The visible cloud record sharing one of the local record's unique
    /// keys (none of whose fields is null), if any.
    static func sameKey(_ db: Database, entity: Entity, keys: [[DatabaseValue]]) throws -> RecordID? {
        for (constraint, values) in zip(entity.uniqueConstraints, keys) where !values.contains(where: \.isNull) {
            let condition = constraint.map { "\(quoted($0)) = ?" }.joined(separator: " AND ")
            if let id = try RecordID.fetchOne(db, sql: "SELECT id FROM \(quoted(entity.name)) WHERE \(condition) ORDER BY id LIMIT 1",
                                              arguments: StatementArguments(values)) {
                return id
            }
        }
        return nil
    }

    static func quoted(_ name: String) -> String { "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
}

/// Fans events out to every subscriber, buffering all of them: lifecycle
/// events are few.
final class EventContinuations<Element: Sendable>: Sendable {
    private let continuations = Mutex<[UInt64: AsyncStream<Element>.Continuation]>([:])
    private let nextID = Atomic<UInt64>(0)

    func subscribe() -> AsyncStream<Element> {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self)
        continuation.onTermination = { [weak self] _ in
            _ = self?.continuations.withLock { $0.removeValue(forKey: id) }
        }
        continuations.withLock { $0[id] = continuation }
        return stream
    }

    func publish(_ element: Element) {
        for c in continuations.withLock({ Array($0.values) }) { c.yield(element) }
    }

    func finish() {
        let all = continuations.withLock { s in
            defer { s.removeAll() }
            return Array(s.values)
        }
        for c in all { c.finish() }
    }
}
