import CSQLite
import ChronicleCore
import Foundation
import GRDB

extension Snapshot {
    /// The uncompressed body size a baseline part aims at: well under the
    /// decoder's 64 MiB cap, and small enough that one part's records (as
    /// Swift values, a few times their encoded size) stay modest in memory.
    @usableFromInline package static let baselinePartBytes = 4 << 20

    /// One encoded part of a baseline, as ``BaselineExport/nextPart()``
    /// hands it out.
    package struct BaselinePart: Sendable {
        /// The snapshot's clock when the baseline was made; with ``device``
        /// it names the baseline (see `ContainerLayout.baselinePart`).
        package var clock: HybridTimestamp
        /// The device that made it.
        package var device: DeviceID
        /// The part's number, from 1.
        package var number: UInt64
        /// Whether it is the last part.
        package var isFinal: Bool
        /// The records in it.
        package var records: Int
        /// The encoded log.
        package var bytes: [UInt8]
    }

    /// What an applied baseline covered.
    package struct BaselineSummary: Sendable, Hashable {
        /// The newest version in it.
        package var clock: HybridTimestamp
        /// The device that made it.
        package var device: DeviceID
        /// The per-device sequence vector it covers.
        package var vector: [DeviceID: UInt64]
        /// How many parts it has.
        package var parts: Int
        /// How many record states it holds.
        package var records: Int
    }

    /// Starts writing the snapshot's whole state (every record's merge state
    /// and the sequence vector) as a baseline. The export reads a database
    /// snapshot taken now: saves and imports running meanwhile are not in
    /// it, and need not wait for it. Call ``BaselineExport/nextPart()``
    /// until it returns nil; memory holds one part, whatever the store's size.
    ///
    /// Pending saves of this device are included (its own vector entry covers
    /// them): a device starting from the baseline has them, and skips their
    /// logs when they arrive.
    ///
    /// - Parameter partBytes: the uncompressed body size after which a part
    ///   is closed.
    /// - Throws: ``ChronicleError/Code/database`` if the database cannot be read.
    /// - Precondition: `partBytes` is at least 1 KiB.
    /// - Parameter store: the store the baseline is for, when not this
    ///   snapshot's own (a new store seeded from this snapshot's state).
    package func baselineExport(partBytes: Int = Snapshot.baselinePartBytes, for store: StoreID? = nil,
                                publisher: DeviceID? = nil) throws -> BaselineExport {
        precondition(partBytes >= 1024, "a baseline part needs at least 1 KiB, not \(partBytes) bytes")
        do {
            return try BaselineExport(self, snapshot: pool.makeSnapshot(), partBytes: partBytes, store: store ?? storeID,
                                      publisher: publisher ?? deviceID)
        } catch {
            throw ChronicleError.sqlite(error, .database, "cannot start a baseline export")
        }
    }

    /// Writes a baseline of the snapshot's state; see ``baselineExport(partBytes:)``.
    package final class BaselineExport {
        private let owner: Snapshot
        private let database: DatabaseSnapshot
        private var writer: BaselineWriter
        private var scan: RecordStateScan
        private var done = false

        /// The snapshot's clock when the export began; with the device, it
        /// names the baseline.
        package var clock: HybridTimestamp { writer.clock }
        /// The sequence vector the baseline covers.
        package var vector: [DeviceID: UInt64] { writer.vector }

        init(_ owner: Snapshot, snapshot database: DatabaseSnapshot, partBytes: Int, store: StoreID, publisher: DeviceID) throws {
            self.owner = owner
            self.database = database
            scan = RecordStateScan(schema: owner.schema)
            let (vector, hlc) = try database.read { db in
                var vector: [DeviceID: UInt64] = [:]
                for row in try Row.fetchAll(db, sql: "SELECT device, sequence FROM _chronicle_vector") {
                    vector[DeviceID(row[0] as RecordID)] = UInt64(row[1] as Int64)
                }
                return (vector, try owner.lastClock(db))
            }
            writer = BaselineWriter(encoder: LogEncoder(storeID: store), schemaHash: owner.schema.hash, vector: vector,
                                    clock: hlc, device: publisher,
                                    partBytes: partBytes)
        }

        /// The next part, or nil once the final part was returned.
        ///
        /// - Throws: ``ChronicleError/Code/database`` if a stored state
        ///   cannot be read.
        package func nextPart() throws -> BaselinePart? {
            guard !done else { return nil }
            do {
                let part = try database.read { db in try fill(db) }
                if part.isFinal { done = true }
                return part
            } catch {
                throw ChronicleError.sqlite(error, .database, "exporting a baseline failed")
            }
        }

        /// Reads states after the cursor until a part is full or none are left.
        private func fill(_ db: Database) throws -> BaselinePart {
            var full: BaselinePart?
            let entities = owner.schema.entities
            try scan.read(db) { entity, id, state in
                full = try writer.add(entities[entity], id, state)
                return full == nil
            }
            return try full ?? writer.flush(final: true)
        }
    }

    /// Applies a baseline part by part, in order: each part's record states
    /// are joined into the snapshot's (like a log's changes, so applying a
    /// baseline twice, or to a snapshot that has some of its logs already,
    /// changes nothing more) in one SQLite transaction per part. The
    /// sequence vector moves to the baseline's with the final part, so a
    /// device stopped midway starts the baseline again, and meanwhile every
    /// record state it holds is still a join of real writes.
    ///
    /// ```swift
    /// var application = snapshot.baselineApplication()
    /// for bytes in parts { _ = try application.apply(try decoder.open(bytes)) }
    /// ```
    package func baselineApplication() -> BaselineApplication { BaselineApplication(snapshot: self) }

    /// Applies the parts of one baseline; see ``Snapshot/baselineApplication()``.
    package struct BaselineApplication: Sendable {
        let snapshot: Snapshot
        /// Part 1's device; every later part must share it and the vector.
        private var device: DeviceID?
        private var vector: [DeviceID: UInt64] = [:]
        private var maxClock = HybridTimestamp.zero
        private var records = 0
        /// The number of the part expected next.
        package private(set) var nextPart: UInt64 = 1
        /// The summary, once the final part is applied.
        package private(set) var summary: BaselineSummary?

        init(snapshot: Snapshot) { self.snapshot = snapshot }

        /// Applies the next part and returns the change events it caused.
        ///
        /// - Throws: ``ChronicleError/Code/malformedBody`` for a log that is
        ///   not a baseline part, a part after the final one, a part out of
        ///   order, or one whose device or vector differs from part 1's;
        ///   ``ChronicleError/Code/storeMismatch`` for another store;
        ///   ``ChronicleError/Code/schemaMismatch`` for another schema;
        ///   ``ChronicleError/Code/applyFailed`` if it cannot be applied.
        ///   Nothing of a part that throws is applied.
        package mutating func apply(_ log: VerifiedLog) throws -> [RecordEvent] {
            let header = log.header
            guard header.kind == .baseline else {
                throw ChronicleError(.malformedBody, "a baseline is made of baseline parts, not a \(header.kind) log")
            }
            if let summary {
                throw ChronicleError(.malformedBody, "baseline part \(header.baselinePart) follows part \(summary.parts), which was marked final")
            }
            guard header.storeID == snapshot.storeID else {
                throw ChronicleError(.storeMismatch, "baseline part of store \(header.storeID); this snapshot is of \(snapshot.storeID)")
            }
            guard header.schemaHash == snapshot.schema.hash else {
                throw ChronicleError(.schemaMismatch, "baseline part written for schema \(header.schemaHash.paddedHex); this snapshot uses \(snapshot.schema.hashString)")
            }
            guard log.schema?.hash == snapshot.schema.hash else {
                throw ChronicleError(.schemaMismatch, "baseline part was read without this snapshot's schema (\(snapshot.schema.hashString)); read it with a decoder of that schema")
            }
            guard header.baselinePart == nextPart else {
                throw ChronicleError(.malformedBody, "expected baseline part \(nextPart), got part \(header.baselinePart)")
            }
            let partVector = try log.baselineVector()
            if let device {
                guard header.deviceID == device, partVector == vector else {
                    throw ChronicleError(.malformedBody, "baseline part \(header.baselinePart) does not belong with part 1: its device or vector differs")
                }
            }
            let final = header.isFinalBaselinePart
            let clock = max(maxClock, header.maxClock)
            let (events, count) = try snapshot.applyBaselinePart(log, final: final, vector: partVector, maxClock: clock)
            if device == nil {
                device = header.deviceID
                vector = partVector
            }
            maxClock = clock
            records += count
            nextPart += 1
            if final {
                summary = BaselineSummary(clock: maxClock, device: header.deviceID, vector: vector, parts: Int(header.baselinePart), records: records)
            }
            return events
        }
    }

    /// Joins one part's states in one SQLite transaction; with the final
    /// part, also moves the vector and the clock. Returns the change events
    /// and the number of record states the part held.
    fileprivate func applyBaselinePart(_ log: VerifiedLog, final: Bool, vector: [DeviceID: UInt64],
                                       maxClock: HybridTimestamp) throws -> (events: [RecordEvent], records: Int) {
        do {
            return try pool.write { db in
                var visitor = BaselineApplyVisitor(engine: MergeEngine(db: db, schema: schema, sql: entitySQL, origin: .imported))
                try log.walkBaseline(&visitor)
                try visitor.engine.settle()
                if final {
                    for (device, sequence) in vector where sequence > (try appliedSequence(db, device)) {
                        try setApplied(db, device, sequence: sequence, clock: maxClock)
                    }
                    try db.execute(sql: "UPDATE _chronicle_identity SET value = max(value, ?) WHERE key = 'hlc'",
                                   arguments: [Int64(bitPattern: maxClock.adoptable.rawValue)])
                }
                try notifyObservers(of: visitor.engine.events, db)
                try crashInjector?.check(.importBeforeCommit)
                return (visitor.engine.events, visitor.records)
            }
        } catch {
            throw ChronicleError.sqlite(error, .applyFailed, "applying a baseline part failed; nothing of it was applied")
        }
    }
}

/// Feeds a walked baseline part into the merge engine. A record state that
/// one insert wrote whole (inserted, not deleted, every field at one
/// version) is what replaying that insert would leave: it takes the
/// insert's path, its values bound straight from the body, and is stored
/// compact where the insert would be. Any other state is built and joined.
private struct BaselineApplyVisitor: BaselineVisitor {
    var engine: MergeEngine
    private(set) var records = 0
    private var entity = 0
    private var recordID = RecordID(high: 0, low: 0)
    private var inserted = false
    private var deleteVersion: Version?
    private var raw: [(field: Int, value: RawValue)] = []
    private var versions: [Version] = []

    init(engine: MergeEngine) {
        self.engine = engine
    }

    mutating func devices(_ devices: [DeviceID], sequences: [UInt64]) {}

    mutating func beginRecord(entity: Int?, entityName: @autoclosure () -> String, recordID: RecordID,
                              inserted: Bool, deleteVersion: Version?, fieldCount: Int) throws(ChronicleError) {
        // The snapshot's decoder resolves names against its schema: a name
        // the schema lacks was refused by the walk.
        guard let entity else { throw ChronicleError(.unknownEntity, "baseline names entity \(entityName()) without a schema to resolve it") }
        self.entity = entity
        self.recordID = recordID
        self.inserted = inserted
        self.deleteVersion = deleteVersion
        raw.removeAll(keepingCapacity: true)
        versions.removeAll(keepingCapacity: true)
    }

    mutating func value(field: Int?, fieldName: @autoclosure () -> String, _ raw: RawValue, version: Version) throws(ChronicleError) {
        guard let field else { throw ChronicleError(.unknownAttribute, "baseline names field \(fieldName()) without a schema to resolve it") }
        self.raw.append((field, raw))
        versions.append(version)
    }

    mutating func endRecord() throws(ChronicleError) {
        records += 1
        do {
            if inserted, deleteVersion == nil, let version = versions.first, !versions.contains(where: { $0 != version }),
               try engine.insertCompact(entity: entity, id: recordID, raw: raw, version: version) {
                return
            }
            var state = RecordState()
            state.inserted = inserted
            state.deleteVersion = deleteVersion
            state.fields.reserveCapacity(raw.count)
            for (v, version) in zip(raw, versions) { state.fields[v.field] = (v.value.value, version) }
            try engine.merge(state, entity: entity, id: recordID)
        } catch {
            throw ChronicleError.sqlite(error, .applyFailed, "applying the state of \(recordID) failed")
        }
    }
}

/// Collects record states into parts and encodes each as it fills.
struct BaselineWriter {
    let encoder: LogEncoder
    let schemaHash: UInt64
    let vector: [DeviceID: UInt64]
    let clock: HybridTimestamp
    let device: DeviceID
    let partBytes: Int
    private var records: [Baseline.Record] = []
    private var bytes = 0
    private var number: UInt64 = 1

    init(encoder: LogEncoder, schemaHash: UInt64, vector: [DeviceID: UInt64], clock: HybridTimestamp, device: DeviceID, partBytes: Int) {
        self.encoder = encoder
        self.schemaHash = schemaHash
        self.vector = vector
        self.clock = clock
        self.device = device
        self.partBytes = partBytes
    }

    /// Adds a record's state; returns a part once one is full.
    mutating func add(_ entity: Entity, _ id: RecordID, _ state: RecordState) throws -> Snapshot.BaselinePart? {
        var size = 48 + entity.name.utf8.count
        let fields = state.fields.entries.map { entry in
            let name = entity.fields[entry.index].name
            size += 16 + name.utf8.count + entry.value.estimatedSize
            return Baseline.VersionedValue(name: name, value: entry.value, version: entry.version)
        }
        records.append(Baseline.Record(entity: entity.name, recordID: id, inserted: state.inserted,
                                       deleteVersion: state.deleteVersion, fields: fields))
        bytes += size
        return bytes >= partBytes ? try flush(final: false) : nil
    }

    /// Encodes the records collected as the next part.
    mutating func flush(final: Bool) throws -> Snapshot.BaselinePart {
        let encoded = try encoder.encode(Baseline(vector: vector, records: records), part: number, isFinal: final,
                                         deviceID: device, schemaHash: schemaHash)
        let part = Snapshot.BaselinePart(clock: clock, device: device, number: number, isFinal: final, records: records.count, bytes: encoded)
        number += 1
        records.removeAll(keepingCapacity: true)
        bytes = 0
        return part
    }
}
