import ChronicleCore

/// Where things live in a container. Names sort the way they should be read:
/// a device's logs by sequence, because sequences are zero-padded hex.
///
/// ```
/// blobs/<store>/logs/<device>/<first seq >> 10, 12 hex>/<first seq, 16 hex>-<last seq, 16 hex>.chlog
/// blobs/<store>/baselines/<HLC, 16 hex>-<device>-<vector digest, 16 hex>/<part, 8 hex>.chbase
/// markers/active-store
/// markers/<store>/devices/<device>
/// markers/<store>/corruption/<device>
/// markers/<store>/schemas/<schema hash, 16 hex>
/// markers/<store>/dictionaries/<dictionary ID, 8 hex>
/// markers/<store>/election
/// ```
///
/// See `docs/container-layout.md`.
public enum ContainerLayout {
    /// The marker naming the active store; it holds an ``ActiveStorePointer``.
    public static let activeStore = try! ContainerName("active-store")

    /// The marker naming the account the container belongs to; it holds an
    /// ``AccountToken``. Written by the first device that needs it.
    public static let account = try! ContainerName("account")

    /// The prefix whose children (``Container/listChildren(prefix:)``) are
    /// the stores that have blobs in the container.
    public static let storesPrefix = ""

    /// How a log's name ends.
    public static let logExtension = ".chlog"

    /// How a baseline part's name ends.
    public static let baselinePartExtension = ".chbase"

    /// The prefix of every log of `device` in `store`.
    public static func logPrefix(store: StoreID, device: DeviceID) -> String {
        "\(logsPrefix(store: store))\(device)/"
    }

    /// The prefix of every log in `store`.
    public static func logsPrefix(store: StoreID) -> String { "\(store)/logs/" }

    /// Sequences per shard directory: a listing after a cursor reads only the
    /// shards at or after it, so its cost does not grow with history.
    public static let sequencesPerShard: UInt64 = 1 << 10

    /// The most sequences one log may hold. A container refuses a log name
    /// spanning more, so a log overlapping `first` starts in `first`'s shard
    /// or the one before it: the overlap check of a put reads at most three
    /// shard folders. The outbox groups far fewer (see `Snapshot.nextUpload`).
    public static let maxSequencesPerLog: UInt64 = sequencesPerShard

    /// The name of the log holding `first...last` of `device`.
    public static func log(store: StoreID, device: DeviceID, first: UInt64, last: UInt64) -> ContainerName {
        try! ContainerName("\(logShardPrefix(store: store, device: device, shard: first / sequencesPerShard))\(hex16(first))-\(hex16(last))\(logExtension)")
    }

    /// The folder of `device`'s logs whose first sequence divided by
    /// ``sequencesPerShard`` is `shard`.
    public static func logShardPrefix(store: StoreID, device: DeviceID, shard: UInt64) -> String {
        "\(logPrefix(store: store, device: device))\(hex16(shard).suffix(12))/"
    }

    /// Whether `name` is where the layout keeps a blob (a log or a baseline
    /// part) or a marker: a folder at such a name is not Chronicle's.
    public static func namesAFile(_ name: ContainerName, marker: Bool) -> Bool {
        if !marker { return parseLog(name) != nil || parseBaselinePart(name) != nil }
        if name == activeStore || name == account { return true }
        let parts = name.rawValue.split(separator: "/")
        guard parts.count >= 2, StoreID(string: String(parts[0])) != nil else { return false }
        if parts.count == 2 { return ["election", "tombstone", "superseded", "tentative", "origin"].contains(parts[1]) }
        if parts.count == 3, parts[1] == "schemas" { return parseSchemaHash(name) != nil }
        if parts.count == 3, parts[1] == "dictionaries" { return parseDictionaryID(name) != nil }
        return parts.count == 3 && (parts[1] == "devices" || parts[1] == "corruption") && DeviceID(string: String(parts[2])) != nil
    }

    /// Two logs of one device whose sequence ranges overlap: two writers
    /// used one device ID (a copied device folder), and readers would mix
    /// their saves. Containers refuse the second on put; this finds any
    /// that arrived otherwise (a sync service, a person).
    public struct LogOverlap: Sendable, Hashable {
        /// The log that starts first (or the shorter, on a tie).
        public var earlier: ContainerName
        /// The log whose range overlaps it.
        public var later: ContainerName
    }

    /// The overlapping pairs among `names` (other names are ignored): each
    /// log is paired with the earlier log of its device that reaches
    /// furthest, so n logs give at most n - 1 pairs.
    public static func overlappingLogs(_ names: [ContainerName]) -> [LogOverlap] {
        var scan = LogOverlapScan()
        return names.sorted().compactMap { scan.next($0) }
    }

    /// Finds overlapping logs in a listing, one name at a time, in name
    /// order: a device's logs sort by first then last sequence, so an
    /// overlap shows as a log starting at or before the furthest sequence
    /// an earlier log of its device reached. Holds one device at a time.
    ///
    /// It also collects ``gaps``: sequences of a device that no log holds
    /// although a later log of that device is there. Chronicle never
    /// removes a log, and a device uploads its logs in order, so a gap is a
    /// lost log, or one a sync service has not delivered yet.
    public struct LogOverlapScan: Sendable {
        private var device: String?
        private var reach: (last: UInt64, name: ContainerName)?
        /// The gaps met so far, in name order.
        public private(set) var gaps: [LogGap] = []

        /// Creates a scan.
        public init() {}

        /// The overlap `name` makes with an earlier log, if it is a log and
        /// makes one. Names must come in order.
        public mutating func next(_ name: ContainerName) -> LogOverlap? {
            guard let parsed = parseLog(name) else { return nil }
            let prefix = logPrefix(store: parsed.store, device: parsed.device)
            if prefix != device {
                device = prefix
                reach = nil
            }
            var overlap: LogOverlap?
            if let reach, parsed.first <= reach.last { overlap = LogOverlap(earlier: reach.name, later: name) }
            let expected = (reach?.last ?? 0) + 1
            if parsed.first > expected { gaps.append(LogGap(device: parsed.device, missing: expected...(parsed.first - 1), next: name)) }
            if reach == nil || parsed.last > reach!.last { reach = (parsed.last, name) }
            return overlap
        }
    }

    /// Sequences of one device that no log holds, before the log `next`.
    public struct LogGap: Sendable, Hashable {
        /// The device.
        public var device: DeviceID
        /// The sequences no log holds.
        public var missing: ClosedRange<UInt64>
        /// The first log after them.
        public var next: ContainerName
    }

    /// The prefix of the baselines of `store`.
    public static func baselinesPrefix(store: StoreID) -> String { "\(store)/baselines/" }

    /// The folder of the baseline `device` made when its clock was at
    /// `clock` and its sequence vector hashed to `vector` (see
    /// ``vectorDigest(_:schemaHash:)``): baselines sort by clock, so the newest is listed
    /// last, and two baselines of one device with different contents never
    /// share a folder (an import of older logs changes the state but not the
    /// clock; it always changes the vector).
    public static func baselinePrefix(store: StoreID, clock: HybridTimestamp, device: DeviceID, vector: UInt64) -> String {
        "\(baselinesPrefix(store: store))\(hex16(clock.rawValue))-\(device)-\(hex16(vector))/"
    }

    /// The name of part `part` (from 1) of a baseline.
    public static func baselinePart(store: StoreID, clock: HybridTimestamp, device: DeviceID, vector: UInt64, part: UInt64) -> ContainerName {
        try! ContainerName("\(baselinePrefix(store: store, clock: clock, device: device, vector: vector))\(String(hex16(part).suffix(8)))\(baselinePartExtension)")
    }

    /// A digest of a sequence vector, for baseline names: XXH64 of each
    /// device ID and sequence in device order, then of `schemaHash` if given.
    ///
    /// Baselines are named with the schema too: after an app upgrade a
    /// device that saved nothing since its last baseline has the same clock
    /// and vector, and its new baseline (in the new schema) must not take
    /// the old one's name. Baselines named by the vector alone (published
    /// before) stay valid: readers accept either digest.
    public static func vectorDigest(_ vector: [DeviceID: UInt64], schemaHash: UInt64? = nil) -> UInt64 {
        var w = ByteWriter()
        for (device, sequence) in vector.sorted(by: { $0.key < $1.key }) where sequence > 0 {
            w.writeRecordID(device.rawValue)
            w.writeUInt64(sequence)
        }
        if let schemaHash { w.writeUInt64(schemaHash) }
        return w.withUnsafeBytes { XXH64.hash($0) }
    }

    /// Whether `digest`, from a baseline part's name, names `vector` in
    /// the schema `schemaHash` (either form of ``vectorDigest(_:schemaHash:)``).
    public static func digestNames(_ digest: UInt64, vector: [DeviceID: UInt64], schemaHash: UInt64) -> Bool {
        digest == vectorDigest(vector, schemaHash: schemaHash) || digest == vectorDigest(vector)
    }

    /// A baseline part's name taken apart.
    public struct ParsedBaselinePart: Sendable, Hashable {
        /// The store.
        public var store: StoreID
        /// The clock that names the baseline.
        public var clock: HybridTimestamp
        /// The device that made it.
        public var device: DeviceID
        /// The digest of its vector.
        public var vector: UInt64
        /// The part's number, from 1.
        public var part: UInt64
    }

    /// Parses a name made by ``baselinePart(store:clock:device:vector:part:)``,
    /// or gives nil.
    public static func parseBaselinePart(_ name: ContainerName) -> ParsedBaselinePart? {
        let parts = name.rawValue.split(separator: "/")
        guard parts.count == 4, parts[1] == "baselines", let store = StoreID(string: String(parts[0])) else { return nil }
        let folder = parts[2].utf8
        guard folder.count == 16 + 1 + 36 + 1 + 16, parts[2].dropFirst(16).first == "-", parts[2].dropFirst(53).first == "-",
              let clock = UInt64(parts[2].prefix(16), radix: 16),
              let device = DeviceID(string: String(parts[2].dropFirst(17).prefix(36))),
              let vector = UInt64(parts[2].suffix(16), radix: 16),
              parts[3].count == 8 + baselinePartExtension.count, parts[3].hasSuffix(baselinePartExtension),
              let part = UInt64(parts[3].prefix(8), radix: 16), part >= 1
        else { return nil }
        let parsed = ParsedBaselinePart(store: store, clock: HybridTimestamp(rawValue: clock), device: device, vector: vector, part: part)
        guard name == baselinePart(store: store, clock: parsed.clock, device: device, vector: vector, part: part) else { return nil }
        return parsed
    }

    /// A device's registration marker.
    public static func deviceRegistration(store: StoreID, device: DeviceID) -> ContainerName {
        try! ContainerName("\(deviceRegistrationsPrefix(store: store))\(device)")
    }

    /// The prefix of the registration markers of `store`'s devices.
    public static func deviceRegistrationsPrefix(store: StoreID) -> String { "\(store)/devices/" }

    /// A device's corruption mark.
    public static func corruptionMark(store: StoreID, device: DeviceID) -> ContainerName {
        try! ContainerName("\(store)/corruption/\(device)")
    }

    /// The prefix of `store`'s corruption marks.
    public static func corruptionMarksPrefix(store: StoreID) -> String { "\(store)/corruption/" }

    /// The record of one schema version that `store`'s logs or baselines
    /// use: the schema's JSON, under its hash. A device that meets a log
    /// of a schema it does not know reads it here, and reads the log
    /// through a migration if it is an earlier version of its own.
    public static func schema(store: StoreID, hash: UInt64) -> ContainerName {
        try! ContainerName("\(schemasPrefix(store: store))\(hex16(hash))")
    }

    /// The prefix of `store`'s schema records.
    public static func schemasPrefix(store: StoreID) -> String { "\(store)/schemas/" }

    /// A compression dictionary `store`'s logs are compressed against,
    /// under its ID (8 hex digits): published once, never changed. See
    /// `docs/log-format.md`, "The store's dictionary".
    public static func dictionary(store: StoreID, id: UInt32) -> ContainerName {
        try! ContainerName("\(dictionariesPrefix(store: store))\(id.paddedHex)")
    }

    /// The prefix of `store`'s compression dictionaries.
    public static func dictionariesPrefix(store: StoreID) -> String { "\(store)/dictionaries/" }

    /// The ID a dictionary's marker is named by, if `name` is one.
    public static func parseDictionaryID(_ name: ContainerName) -> UInt32? {
        let parts = name.rawValue.split(separator: "/")
        guard parts.count == 3, parts[1] == "dictionaries", parts[2].count == 8, StoreID(string: String(parts[0])) != nil,
              let id = UInt32(parts[2], radix: 16), id != 0, name == dictionary(store: StoreID(string: String(parts[0]))!, id: id)
        else { return nil }
        return id
    }

    /// The schema hash a schema record is named by, if `name` is one.
    public static func parseSchemaHash(_ name: ContainerName) -> UInt64? {
        let parts = name.rawValue.split(separator: "/")
        guard parts.count == 3, parts[1] == "schemas", parts[2].count == 16,
              parts[2].allSatisfy({ $0.isHexDigit && !$0.isUppercase }) else { return nil }
        return UInt64(parts[2], radix: 16)
    }

    /// The election lease of `store` (see ``ElectionLease``).
    public static func election(store: StoreID) -> ContainerName {
        try! ContainerName("\(store)/election")
    }

    /// A device's candidacy to rebuild `store`, where exclusive create is
    /// not reliable (see ``RebuildCandidacy``).
    public static func candidacy(store: StoreID, device: DeviceID) -> ContainerName {
        try! ContainerName("\(candidaciesPrefix(store: store))\(device)")
    }

    /// The prefix of `store`'s candidacies.
    public static func candidaciesPrefix(store: StoreID) -> String { "\(store)/candidates/" }

    /// The tombstone of `store`: it was deleted on purpose, through
    /// Chronicle, and devices that still use it fall back to their local
    /// store instead of putting its logs back (see ``StoreTombstone``).
    public static func tombstone(store: StoreID) -> ContainerName {
        try! ContainerName("\(store)/tombstone")
    }

    /// Marks `store` as being seeded: until the active-store pointer names
    /// it, devices looking for a store ignore it (it holds a ``TentativeStore``).
    public static func tentative(store: StoreID) -> ContainerName {
        try! ContainerName("\(store)/tentative")
    }

    /// Marks `store` as starting from a baseline, which holds saves no log
    /// has: a device that has imported nothing waits for it (it holds a
    /// ``StoreOrigin``).
    public static func origin(store: StoreID) -> ContainerName {
        try! ContainerName("\(store)/origin")
    }

    /// The supersession of `store`: it was rebuilt as another store, which
    /// every device moves to (see ``StoreSupersession``).
    public static func supersession(store: StoreID) -> ContainerName {
        try! ContainerName("\(store)/superseded")
    }

    /// A device's applied report in `store` (see ``AppliedReport``).
    public static func appliedReport(store: StoreID, device: DeviceID) -> ContainerName {
        try! ContainerName("\(appliedReportsPrefix(store: store))\(device)")
    }

    /// The prefix of `store`'s applied reports.
    public static func appliedReportsPrefix(store: StoreID) -> String { "\(store)/applied/" }

    /// The compaction marker of `store` (see ``CompactionHorizon``).
    public static func compaction(store: StoreID) -> ContainerName {
        try! ContainerName("\(store)/compaction")
    }

    /// Whether `name` is a marker Chronicle writes: the active-store pointer,
    /// a device's registration, corruption mark or candidacy, a store's
    /// election lease or tombstone.
    public static func isReservedMarker(_ name: ContainerName) -> Bool {
        if name == activeStore || name == account { return true }
        if parseSchemaHash(name) != nil { return true }
        let parts = name.rawValue.split(separator: "/", omittingEmptySubsequences: false)
        guard let first = parts.first, let store = StoreID(string: String(first)) else { return false }
        if parts.count == 2 {
            return name == election(store: store) || name == tombstone(store: store) || name == supersession(store: store)
                || name == tentative(store: store) || name == origin(store: store) || name == compaction(store: store)
        }
        guard parts.count == 3, let device = DeviceID(string: String(parts[2])) else { return false }
        return name == deviceRegistration(store: store, device: device) || name == corruptionMark(store: store, device: device)
            || name == candidacy(store: store, device: device) || name == appliedReport(store: store, device: device)
    }

    /// A log name taken apart, or nil if `name` is not a log name.
    public struct ParsedLogName: Sendable, Hashable {
        /// The store.
        public var store: StoreID
        /// The device.
        public var device: DeviceID
        /// The first sequence.
        public var first: UInt64
        /// The last sequence.
        public var last: UInt64

        /// Creates a parsed name.
        public init(store: StoreID, device: DeviceID, first: UInt64, last: UInt64) {
            self.store = store
            self.device = device
            self.first = first
            self.last = last
        }
    }

    /// Parses a log name made by ``log(store:device:first:last:)``.
    public static func parseLog(_ name: ContainerName) -> ParsedLogName? {
        let parts = name.rawValue.split(separator: "/")
        guard parts.count == 5, parts[1] == "logs",
              let store = StoreID(string: String(parts[0])), let device = DeviceID(string: String(parts[2])),
              parts[4].hasSuffix(logExtension)
        else { return nil }
        let range = parts[4].dropLast(logExtension.count).split(separator: "-")
        guard range.count == 2, range[0].count == 16, range[1].count == 16,
              let first = UInt64(range[0], radix: 16), let last = UInt64(range[1], radix: 16),
              first >= 1, last >= first,
              name == log(store: store, device: device, first: first, last: last)
        else { return nil }
        return ParsedLogName(store: store, device: device, first: first, last: last)
    }

    static func hex16(_ v: UInt64) -> String { v.paddedHex }

    /// What the log named `name` leaves to its name (a version 2 log's
    /// store, device and sequences), or nil when `name` is not a log's.
    /// Pass it to the decoder with the log's bytes.
    package static func location(of name: ContainerName) -> LogLocation? {
        parseLog(name).map { LogLocation(storeID: $0.store, deviceID: $0.device, firstSequence: $0.first, lastSequence: $0.last) }
    }

    /// Where a ``DirectoryContainer`` keeps things below its root folder:
    /// blobs and markers at the paths their names give, under `blobs/` and
    /// `markers/`; temporary files of puts in `tmp/`; beside each marker its
    /// lock file, the marker's name followed by `.lock`.
    public enum Directory {
        /// The folder of blobs.
        public static let blobs = "blobs"
        /// The folder of markers and their lock files.
        public static let markers = "markers"
        /// The folder of temporary files.
        public static let temporary = "tmp"
        /// What follows a marker's name to name its lock file.
        public static let lockSuffix = ".lock"

        /// The path of blob `name` from the root folder.
        public static func blobPath(_ name: ContainerName) -> String { "\(blobs)/\(name)" }

        /// The path of marker `name` from the root folder.
        public static func markerPath(_ name: ContainerName) -> String { "\(markers)/\(name)" }
    }
}

extension LogDecoder {
    /// ``LogDecoder/header(of:at:)`` of the blob named `name` (a log's
    /// name gives what a version 2 header leaves out).
    package func header(of bytes: [UInt8], name: ContainerName) throws(ChronicleError) -> LogHeader {
        try header(of: bytes, at: ContainerLayout.location(of: name))
    }

    /// ``LogDecoder/open(_:at:)`` of the blob named `name`.
    package func open(_ bytes: [UInt8], name: ContainerName) throws(ChronicleError) -> VerifiedLog {
        try open(bytes, at: ContainerLayout.location(of: name))
    }

    /// ``LogDecoder/decode(_:at:)`` of the blob named `name`.
    package func decode(_ bytes: [UInt8], name: ContainerName) throws(ChronicleError) -> DecodedLog {
        try decode(bytes, at: ContainerLayout.location(of: name))
    }
}
