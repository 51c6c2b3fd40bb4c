import ChronicleContainer
import ChronicleCore
import Foundation

/// A store's transaction logs and baselines as portable JSON, and back
/// into a container: every save every device made, with its sequence,
/// clock and changes, in a form another program reads without Chronicle
/// (see `docs/portable-json.md`, which holds its JSON Schema). Values take
/// the forms of ``PortableExport``, each with its type's name beside it,
/// so a log reads without its schema.
///
/// Where ``PortableExport`` keeps a store's visible state, this keeps its
/// history: imported into a container, the logs are encoded again under
/// the names they had, and a device that syncs there builds the state
/// they built (the same state hash).
///
/// ```swift
/// let json = try await PortableLogs.export(store: storeID, from: folder)
/// let report = try await PortableLogs.import(json, into: server)
/// ```
public enum PortableLogs {
    /// The document's `format`.
    public static let format = "chronicle-logs"
    /// The document's `version`, this build's.
    public static let version = 1
    /// The largest document `chronicle import-logs` reads (256 MiB): a
    /// document is read whole, and takes about 25 times its size in memory
    /// while it is checked.
    public static let maxDocumentBytes = 256 << 20

    /// Where an export or an import stands: after each log, the logs
    /// processed so far and the total; one last value with `ended` set (and
    /// the error, if one stopped it).
    public struct Progress: Sendable {
        /// Logs and baseline parts (and, importing, schema records) handled so far.
        public var processed = 0
        /// How many there are in all.
        public var total = 0
        /// Importing: how many were written (the rest were there already, or conflict).
        public var written = 0
        /// Importing: how many the container already held, with the same content.
        public var alreadyThere = 0
        /// Importing: names the container holds with other content, or logs
        /// of the container that overlap an imported log's sequences under
        /// another name; left as they are, the imported log not written.
        public var conflicts: [String] = []
        /// Exporting: entries under the store's logs and baselines whose
        /// names are not a log's or a baseline part's (the container passes
        /// them over too); not exported.
        public var foreign: [String] = []
        /// Whether this is the last value.
        public var ended = false
        /// What stopped it, on the last value, if anything did.
        public var error: ChronicleError?

        /// Creates an empty progress.
        public init() {}
    }

    // MARK: - Export

    /// The logs and baseline parts of `store` in `container`, and the
    /// schemas the store recorded there, as a portable JSON document
    /// (pretty-printed, keys sorted: equal contents give equal bytes).
    ///
    /// Every log is verified first (header and body checksums, the body
    /// against its schema when the container records it).
    ///
    /// - Throws: ``ChronicleError/Code/notFound`` when the container holds
    ///   nothing of `store`; the decoder's error, naming the log, for a log that does
    ///   not verify (nothing is exported: an export that left out a damaged
    ///   log would not rebuild the store); what the container throws.
    public static func export(store: StoreID, from container: any Container,
                              progress: @Sendable (Progress) -> Void = { _ in }) async throws -> Data {
        var state = Progress()
        do {
            let schemas = try await recordedSchemas(of: store, in: container)
            var blobs = try await container.listAll(prefix: ContainerLayout.logsPrefix(store: store))
            blobs += try await container.listAll(prefix: ContainerLayout.baselinesPrefix(store: store))
            if blobs.isEmpty, schemas.isEmpty, try await container.listMarkers(prefix: "\(store)/", after: nil, limit: 1).isEmpty {
                throw ChronicleError(.notFound, "the container holds no store \(store) (`chronicle inspect` lists its stores)")
            }
            state.total = blobs.count
            progress(state)
            var logs: [JSONValue] = []
            let limits = DecodingLimits()
            // The store's compression dictionaries: logs read with them, and
            // carried in the export so that an import writes the same bytes.
            let dictionaries = try await container.publishedDictionaries(store: store).found
            var used = Set<UInt32>()
            for blob in blobs {
                try Task.checkCancellation()
                defer {
                    state.processed += 1
                    progress(state)
                }
                let log = ContainerLayout.parseLog(blob.name)
                let part = ContainerLayout.parseBaselinePart(blob.name)
                guard log != nil || part != nil else {
                    state.foreign.append(blob.name.rawValue)
                    continue
                }
                let bytes = try await container.get(blob.name, maxBytes: limits.maxLogBytes)
                let decoded: DecodedLog
                do {
                    let header = try LogDecoder(schema: nil).header(of: bytes, name: blob.name)
                    decoded = try await LogDecoder(schema: schemas[header.schemaHash], limits: limits, dictionaries: dictionaries.map(\.dictionary))
                        .decode(bytes, name: blob.name, fetchingFrom: container)
                    if header.dictionaryID != 0 { used.insert(header.dictionaryID) }
                } catch let error as ChronicleError {
                    throw ChronicleError(error.code, "\(blob.name): \(error.message)", underlying: error)
                }
                try checkName(blob.name, of: decoded, store: store)
                logs.append(json(decoded, name: blob.name))
            }
            var root: [String: JSONValue] = [
                "format": .string(format), "version": .int(Int64(version)), "store": .string(store.description),
                "schemas": .array(schemas.values.sorted { $0.hash < $1.hash }.map(\.jsonValue)), "logs": .array(logs),
            ]
            let carried = dictionaries.filter { used.contains($0.dictionary.id) }
            if !carried.isEmpty {
                root["dictionaries"] = .array(carried.map { d in
                    .object(["id": .string(d.dictionary.id.paddedHex), "created": .int(Int64(clamping: d.created)),
                             "bytes": .string(Data(d.dictionary.bytes).base64EncodedString())])
                })
            }
            if let account = try await container.readMarker(ContainerLayout.account, as: AccountToken.self) {
                root["account"] = .string(account.payload.token)
            }
            if let pointer = try await container.readMarker(ContainerLayout.activeStore, as: ActiveStorePointer.self) {
                root["active"] = .bool(pointer.payload.store == store)
            }
            try Task.checkCancellation()
            let data = try encode(.object(root))
            try Task.checkCancellation()
            state.ended = true
            progress(state)
            return data
        } catch let error as ChronicleError {
            state.ended = true
            state.error = error
            progress(state)
            throw error
        }
    }

    /// The schemas `store` records in `container`, by hash.
    private static func recordedSchemas(of store: StoreID, in container: any Container) async throws -> [UInt64: Schema] {
        var schemas: [UInt64: Schema] = [:]
        for name in try await container.listMarkers(prefix: ContainerLayout.schemasPrefix(store: store)) {
            guard let hash = ContainerLayout.parseSchemaHash(name), let marker = try await container.readMarker(name),
                  let schema = try? Schema(json: Data(marker.bytes)), schema.hash == hash
            else { continue }  // A damaged record: its logs are checked without it, as devices read them.
            schemas[hash] = schema
        }
        return schemas
    }

    /// Throws when a log's header says other than its name: a log that
    /// would import under another name, or not at all.
    private static func checkName(_ name: ContainerName, of log: DecodedLog, store: StoreID) throws(ChronicleError) {
        let header = log.header
        let expected: Bool
        if let parsed = ContainerLayout.parseLog(name) {
            expected = header.kind == .transactions && parsed.device == header.deviceID
                && parsed.first == header.firstSequence && parsed.last == header.lastSequence
        } else if let parsed = ContainerLayout.parseBaselinePart(name), case .baseline(_, let baseline) = log {
            expected = parsed.device == header.deviceID && parsed.part == header.baselinePart
                && ContainerLayout.digestNames(parsed.vector, vector: baseline.vector, schemaHash: header.schemaHash)
        } else {
            expected = false
        }
        guard expected, header.storeID == store else {
            throw ChronicleError(.malformedBody, "\(name): its header (\(header.kind) of store \(header.storeID), device \(header.deviceID), "
                + "\(header.firstSequence)–\(header.lastSequence)) does not match its name")
        }
    }

    private static func json(_ log: DecodedLog, name: ContainerName) -> JSONValue {
        let header = log.header
        var o: [String: JSONValue] = [
            "name": .string(name.rawValue), "device": .string(header.deviceID.description),
            "schemaHash": .string(header.schemaHash.paddedHex), "formatVersion": .int(Int64(header.version)),
        ]
        if header.dictionaryID != 0 { o["dictionary"] = .string(header.dictionaryID.paddedHex) }
        switch log {
        case .transactions(_, let transactions):
            o["kind"] = .string("transactions")
            o["transactions"] = .array(transactions.map { t in
                .object([
                    "sequence": .int(Int64(t.sequence)), "clock": .string(t.clock.description),
                    "changes": .array(t.changes.map { change in
                        var c: [String: JSONValue] = [
                            "kind": .string(change.kind.description), "entity": .string(change.entity),
                            "id": .string(change.recordID.description),
                        ]
                        if change.kind != .delete {
                            c["values"] = .array(change.values.map { .array([.string($0.name), .string($0.value.portableTypeName), $0.value.portableJSON]) })
                        }
                        return .object(c)
                    }),
                ])
            })
        case .baseline(_, let baseline):
            o["kind"] = .string("baseline")
            o["part"] = .int(Int64(header.baselinePart))
            o["final"] = .bool(header.isFinalBaselinePart)
            o["vector"] = .object(Dictionary(uniqueKeysWithValues: baseline.vector.map { ($0.key.description, .int(Int64($0.value))) }))
            o["records"] = .array(baseline.records.map { r in
                var record: [String: JSONValue] = [
                    "entity": .string(r.entity), "id": .string(r.recordID.description), "inserted": .bool(r.inserted),
                    "fields": .array(r.fields.map {
                        .array([.string($0.name), .string($0.value.portableTypeName), $0.value.portableJSON, .string($0.version.description)])
                    }),
                ]
                if let deleted = r.deleteVersion { record["deleted"] = .string(deleted.description) }
                return .object(record)
            })
        }
        return .object(o)
    }

    private static func encode(_ value: JSONValue) throws(ChronicleError) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        do {
            return try encoder.encode(value)
        } catch {
            throw ChronicleError(.io, "cannot write the export as JSON: \(error)", underlying: error)
        }
    }

    // MARK: - Import

    /// One log of a document, encoded again and ready to put.
    struct Encoded: Sendable {
        var name: ContainerName
        var bytes: [UInt8]
        var log: DecodedLog
    }

    /// A log export read and checked, ready to write (see ``import(_:into:progress:)``).
    package struct Prepared: Sendable {
        var store: StoreID
        var schemas: [Schema]
        var logs: [Encoded]
        var account: String?
        var active: Bool
        var dictionaries: [PublishedDictionary] = []
    }

    /// Writes the logs and baseline parts of a portable log export into
    /// `container`, under the names they had, with the schemas the store
    /// recorded; and, where the container has none, its account marker and
    /// (when the store was its container's active one) the active-store
    /// pointer, so the copy is the same account.
    ///
    /// The whole document is read and every log encoded and checked before
    /// anything is written. Resumable and idempotent: a log the container
    /// already holds with the same content is passed over, so an import
    /// interrupted anywhere and run again writes what is left, once.
    /// Nothing the container holds is replaced: a log there with other
    /// content, or one of the same device whose sequences overlap an
    /// imported log's under another name, is reported in
    /// ``Progress/conflicts`` and the imported log is not written.
    ///
    /// - Throws: ``ChronicleError/Code/malformedBody`` for a document that
    ///   is not a log export, naming where; ``ChronicleError/Code/unsupportedVersion``
    ///   for a later format version; ``ChronicleError/Code/typeMismatch``
    ///   for a value not of its named type, or not of its field's type in
    ///   the schema its log names; ``ChronicleError/Code/unknownEntity`` and
    ///   ``ChronicleError/Code/unknownAttribute`` for names that schema
    ///   lacks; what the container throws (after reporting it through
    ///   `progress` with `ended` set). Nothing is written when the document
    ///   does not read.
    public static func `import`(_ data: Data, into container: any Container,
                                progress: @Sendable (Progress) -> Void = { _ in }) async throws -> Progress {
        try await write(try parse(data), into: container, progress: progress)
    }

    /// Reads and checks a log export, encoding every log: all that
    /// ``import(_:into:progress:)`` does before it writes.
    ///
    /// - Throws: `CancellationError` when the task is cancelled (checked
    ///   between logs), and the errors of ``import(_:into:progress:)``.
    package static func parse(_ data: Data) throws -> Prepared {
        let root = try PortableExport.documentRoot(data, format: format, version: version, what: "log export")
        guard case .string(let storeText)? = root["store"], let store = StoreID(string: storeText) else {
            throw ChronicleError(.malformedBody, "store: expected a store ID")
        }
        var schemas: [UInt64: Schema] = [:]
        guard case .array(let schemaList)? = root["schemas"] else { throw ChronicleError(.malformedBody, "schemas: expected an array") }
        for (i, value) in schemaList.enumerated() {
            do {
                let schema = try Schema(json: try encode(value))
                schemas[schema.hash] = schema
            } catch {
                throw ChronicleError(error.code, "schemas[\(i)]: \(error.message)", underlying: error)
            }
        }
        guard case .array(let list)? = root["logs"] else { throw ChronicleError(.malformedBody, "logs: expected an array") }
        var dictionaries: [UInt32: PublishedDictionary] = [:]
        if let value = root["dictionaries"] {
            guard case .array(let entries) = value else { throw ChronicleError(.malformedBody, "dictionaries: expected an array") }
            for (i, entry) in entries.enumerated() {
                guard case .object(let d) = entry, case .string(let idText)? = d["id"], idText.count == 8, let id = UInt32(idText, radix: 16), id != 0,
                      case .int(let created)? = d["created"], created >= 0,
                      case .string(let base64)? = d["bytes"], let bytes = Data(base64Encoded: base64)
                else { throw ChronicleError(.malformedBody, "dictionaries[\(i)]: expected {\"id\": 8 hex digits, \"created\": milliseconds, \"bytes\": base64}") }
                guard CompressionDictionary.identifier(for: Array(bytes)) == id, let dictionary = try? CompressionDictionary(id: id, bytes: Array(bytes)) else {
                    throw ChronicleError(.malformedBody, "dictionaries[\(i)]: its bytes are not those of dictionary \(idText)")
                }
                dictionaries[id] = PublishedDictionary(dictionary: dictionary, created: UInt64(created))
            }
        }
        var encoded: [Encoded] = []
        for (i, value) in list.enumerated() {
            if i % 256 == 255 { try Task.checkCancellation() }
            let path = "logs[\(i)]"
            let log = try decodeLog(value, store: store, path: path)
            // Written as it was: in its format version, against its dictionary.
            var formatVersion = LogEncoder.uploadVersion
            var dictionary: CompressionDictionary?
            if case .object(let o) = value {
                if let given = o["formatVersion"] {
                    guard case .int(let v) = given, v == 1 || v == Int64(LogHeader.versionV2) else {
                        throw ChronicleError(.malformedBody, "\(path).formatVersion: expected 1 or 2")
                    }
                    formatVersion = UInt16(v)
                }
                if let given = o["dictionary"] {
                    guard case .string(let idText) = given, let id = UInt32(idText, radix: 16), let found = dictionaries[id] else {
                        throw ChronicleError(.malformedBody, "\(path).dictionary: expected the ID of one of the export's \"dictionaries\"")
                    }
                    dictionary = found.dictionary
                }
            }
            let encoder = LogEncoder(storeID: store, dictionary: dictionary, version: formatVersion)
            guard let schema = schemas[log.header.schemaHash] else {
                throw ChronicleError(.schemaMismatch, "\(path): written for schema \(log.header.schemaHash.paddedHex), which the export's \"schemas\" do not hold: its changes cannot be checked, and devices could not read it")
            }
            try check(log, against: schema, path: path)
            let givenName: String?
            if case .object(let o) = value, case .string(let text)? = o["name"] { givenName = text } else { givenName = nil }
            do throws(ChronicleError) {
                let bytes: [UInt8]
                let name: ContainerName
                switch log {
                case .transactions(let header, let transactions):
                    bytes = try encoder.encode(transactions)
                    name = ContainerLayout.log(store: store, device: header.deviceID, first: header.firstSequence, last: header.lastSequence)
                case .baseline(let header, let baseline):
                    bytes = try encoder.encode(baseline, part: header.baselinePart, isFinal: header.isFinalBaselinePart,
                                               deviceID: header.deviceID, schemaHash: header.schemaHash)
                    guard let text = givenName, let given = try? ContainerName(text),
                          let parsed = ContainerLayout.parseBaselinePart(given)
                    else { throw ChronicleError(.malformedBody, "name: expected a baseline part's name") }
                    name = given
                    guard parsed.store == store, parsed.device == header.deviceID, parsed.part == header.baselinePart,
                          ContainerLayout.digestNames(parsed.vector, vector: baseline.vector, schemaHash: header.schemaHash)
                    else { throw ChronicleError(.malformedBody, "name: \(given) is not the name of this baseline part (its store, device, part or vector differ)") }
                }
                if let given = givenName, given != name.rawValue {
                    throw ChronicleError(.malformedBody, "name: the log's content names it \(name), not \(given)")
                }
                // The body against the schema it names, as devices will read it.
                let decoded = try LogDecoder(schema: schemas[log.header.schemaHash], dictionaries: dictionary.map { [$0] } ?? []).decode(bytes, name: name)
                encoded.append(Encoded(name: name, bytes: bytes, log: decoded))
            } catch {
                throw ChronicleError(error.code, "\(path): \(error.message)", underlying: error)
            }
        }
        var account: String?
        if let value = root["account"] {
            guard case .string(let token) = value, (1...256).contains(token.utf8.count),
                  token.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0.value < 0x7F })
            else { throw ChronicleError(.malformedBody, "account: expected an account token (1 to 256 printable ASCII characters)") }
            account = token
        }
        let active: Bool
        switch root["active"] {
        case nil: active = false
        case .bool(let b)?: active = b
        case let other?: throw ChronicleError(.malformedBody, "active: expected true or false, found \(other.kindName)")
        }
        var seen: Set<ContainerName> = []
        for (i, log) in encoded.enumerated() where !seen.insert(log.name).inserted {
            throw ChronicleError(.malformedBody, "logs[\(i)]: \(log.name) appears twice")
        }
        try checkSequences(encoded)
        return Prepared(store: store, schemas: schemas.values.sorted { $0.hash < $1.hash }, logs: encoded, account: account, active: active,
                        dictionaries: dictionaries.values.sorted { $1.isNewer(than: $0) })
    }

    /// Refuses logs of one device that overlap, or that leave a gap no
    /// baseline of the document covers: devices would meet two versions of
    /// one save, or wait for a save that never comes (and, after a while,
    /// take the store for damaged).
    private static func checkSequences(_ logs: [Encoded]) throws(ChronicleError) {
        var ranges: [DeviceID: [(first: UInt64, last: UInt64, name: ContainerName)]] = [:]
        // Baselines by folder: the parts present, the final part's number, the vector.
        var baselines: [String: (parts: Set<UInt64>, final: UInt64?, vector: [DeviceID: UInt64])] = [:]
        for log in logs {
            switch log.log {
            case .transactions(let header, _):
                ranges[header.deviceID, default: []].append((header.firstSequence, header.lastSequence, log.name))
            case .baseline(let header, let baseline):
                let folder = String(log.name.rawValue[..<log.name.rawValue.lastIndex(of: "/")!])
                var entry = baselines[folder] ?? ([], nil, baseline.vector)
                entry.parts.insert(header.baselinePart)
                if header.isFinalBaselinePart { entry.final = header.baselinePart }
                baselines[folder] = entry
            }
        }
        // Only a whole baseline (parts 1 to its final one) covers anything:
        // devices start from no other.
        var covered: [DeviceID: UInt64] = [:]
        for entry in baselines.values {
            guard let final = entry.final, entry.parts == Set(1...final) else { continue }
            for (device, sequence) in entry.vector { covered[device] = max(covered[device] ?? 0, sequence) }
        }
        for (device, list) in ranges {
            let sorted = list.sorted { ($0.first, $0.last) < ($1.first, $1.last) }
            var next = 1 + (covered[device] ?? 0)
            var furthest: (last: UInt64, name: ContainerName)?
            for range in sorted {
                if let furthest, range.first <= furthest.last {
                    throw ChronicleError(.malformedBody, "logs: \(range.name) overlaps \(furthest.name) (device \(device)): two writers used one device ID; import the logs of one of them")
                }
                if range.first > next {
                    throw ChronicleError(.malformedBody, "logs: device \(device) has no log of sequence \(next), which \(range.name) follows, and no baseline of the export covers it: devices would wait for it forever")
                }
                next = max(next, range.last + 1)
                furthest = (range.last, range.name)
            }
        }
    }

    /// Checks a log's changes or records against the schema it names, so
    /// that a value of the wrong type or a name the schema lacks is refused
    /// with its place in the document.
    private static func check(_ log: DecodedLog, against schema: Schema, path: String) throws(ChronicleError) {
        func field(_ entityName: String, _ name: String, at: String) throws(ChronicleError) -> Field {
            guard let entity = schema.entity(named: entityName) else {
                throw ChronicleError(.unknownEntity, "\(at): '\(entityName)' is not an entity of schema version \(schema.version) (\(schema.hashString)), which this log names")
            }
            guard let field = entity.field(named: name) else {
                throw ChronicleError(.unknownAttribute, "\(at): '\(name)' is not a field of \(entityName) in schema version \(schema.version) (\(schema.hashString))")
            }
            return field
        }
        func fits(_ value: Value, _ field: Field, _ entityName: String, at: String) throws(ChronicleError) {
            if case .string(let text) = value, text.utf8.contains(0) {
                throw ChronicleError(.invalidValue, "\(at): \(entityName).\(field.name) holds a NUL character, which a save refuses")
            }
            guard !value.isNull, !field.accepts(value) else { return }
            throw ChronicleError(.typeMismatch, "\(at): \(entityName).\(field.name) is \(field.kind.withArticle); the value is a \(value.portableTypeName)")
        }
        switch log {
        case .transactions(_, let transactions):
            for (t, transaction) in transactions.enumerated() {
                for (c, change) in transaction.changes.enumerated() {
                    let at = "\(path).transactions[\(t)].changes[\(c)]"
                    guard schema.entity(named: change.entity) != nil else {
                        throw ChronicleError(.unknownEntity, "\(at).entity: '\(change.entity)' is not an entity of schema version \(schema.version) (\(schema.hashString)), which this log names")
                    }
                    var named: Set<String> = []
                    for (v, value) in change.values.enumerated() {
                        let f = try field(change.entity, value.name, at: "\(at).values[\(v)]")
                        try fits(value.value, f, change.entity, at: "\(at).values[\(v)]")
                        if value.value.isNull && !f.isOptional {
                            throw ChronicleError(.missingValue, "\(at).values[\(v)]: \(change.entity).\(f.name) is required; the log sets it to no value")
                        }
                        guard named.insert(value.name).inserted else {
                            throw ChronicleError(.malformedBody, "\(at).values[\(v)]: \(value.name) is given twice")
                        }
                    }
                    if change.kind == .insert, let entity = schema.entity(named: change.entity) {
                        // What a save refuses, a log must not carry either.
                        for f in entity.fields where !f.isOptional && f.defaultValue == nil {
                            let value = change.values.first { $0.name == f.name }?.value ?? .null
                            if value.isNull {
                                throw ChronicleError(.missingValue, "\(at): an insert of \(change.entity) without its required \(f.name)")
                            }
                        }
                    }
                }
            }
        case .baseline(_, let baseline):
            for (r, record) in baseline.records.enumerated() {
                let at = "\(path).records[\(r)]"
                guard schema.entity(named: record.entity) != nil else {
                    throw ChronicleError(.unknownEntity, "\(at).entity: '\(record.entity)' is not an entity of schema version \(schema.version) (\(schema.hashString)), which this baseline names")
                }
                for (v, value) in record.fields.enumerated() {
                    let f = try field(record.entity, value.name, at: "\(at).fields[\(v)]")
                    try fits(value.value, f, record.entity, at: "\(at).fields[\(v)]")
                }
            }
        }
    }

    /// Writes a checked log export into `container` (see ``import(_:into:progress:)``):
    /// the account first, then the active-store pointer and the schema
    /// records, then the logs, so that a device syncing there meanwhile
    /// takes the copy for the same account and joins the store being
    /// written, not one of its own.
    package static func write(_ prepared: Prepared, into container: any Container,
                              progress: @Sendable (Progress) -> Void = { _ in }) async throws -> Progress {
        let store = prepared.store
        var state = Progress()
        state.total = prepared.schemas.count + prepared.dictionaries.count + prepared.logs.count
        progress(state)
        do {
            if try await container.readMarker(ContainerLayout.tombstone(store: store)) != nil {
                throw ChronicleError(.markerConflict, "the container holds store \(store) deleted on purpose (its tombstone): no device would read these logs; import them into another container, or a store that was not deleted")
            }
            if let account = prepared.account {
                if case .conflict = try await ContainerReplication.carryAccount(try AccountToken(token: account).markerBytes(), into: container) {
                    throw ContainerReplication.otherAccount()
                }
            }
            if prepared.active {
                let pointer = try ActiveStorePointer(store: store).markerBytes()
                var held = try await container.readMarker(ContainerLayout.activeStore)
                if held == nil {
                    do {
                        _ = try await container.createMarker(ContainerLayout.activeStore, pointer)
                    } catch let error as ChronicleError where error.code == .markerConflict {
                        held = try await container.readMarker(ContainerLayout.activeStore)
                    }
                }
                // Another store is the container's active one: devices there
                // would not read these logs.
                if let held, (try? ActiveStorePointer(markerBytes: held.bytes))?.store != store {
                    state.conflicts.append(ContainerLayout.activeStore.rawValue)
                }
            }
            for schema in prepared.schemas {
                try Task.checkCancellation()
                let name = ContainerLayout.schema(store: store, hash: schema.hash)
                if try await container.readMarker(name) != nil {
                    state.alreadyThere += 1
                } else {
                    // The bytes devices write for it: compact JSON, keys sorted.
                    let encoder = JSONEncoder()
                    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
                    let bytes = Array(try encoder.encode(schema.jsonValue))
                    if bytes.count <= Marker.maxBytes, (try? await container.createMarker(name, bytes)) != nil { state.written += 1 }
                }
                state.processed += 1
                progress(state)
            }
            // The compression dictionaries before the logs compressed against
            // them: a damaged copy in the container is put right.
            for d in prepared.dictionaries {
                try Task.checkCancellation()
                defer {
                    state.processed += 1
                    progress(state)
                }
                let name = ContainerLayout.dictionary(store: store, id: d.dictionary.id)
                let bytes = d.dictionary.published(createdAt: d.created)
                if let existing = try await container.readMarker(name) {
                    if (try? CompressionDictionary.readPublished(existing.bytes, id: d.dictionary.id)) == nil {
                        _ = try await container.replaceMarker(name, bytes, expected: existing.version)
                        state.written += 1
                    } else {
                        state.alreadyThere += 1
                    }
                } else {
                    do {
                        _ = try await container.createMarker(name, bytes)
                        state.written += 1
                    } catch let error as ChronicleError where error.code == .markerConflict {
                        state.alreadyThere += 1
                    }
                }
            }
            var held: [ContainerName: Int] = [:]
            for blob in try await container.listAll(prefix: ContainerLayout.logsPrefix(store: store)) { held[blob.name] = blob.size }
            for blob in try await container.listAll(prefix: ContainerLayout.baselinesPrefix(store: store)) { held[blob.name] = blob.size }
            let heldLogs = held.keys.compactMap { name in ContainerLayout.parseLog(name).map { (name, $0) } }
            for item in prepared.logs {
                try Task.checkCancellation()
                defer {
                    state.processed += 1
                    progress(state)
                }
                if held[item.name] != nil {
                    if try await holdsSame(item, in: container) { state.alreadyThere += 1 } else { state.conflicts.append(item.name.rawValue) }
                    continue
                }
                if let log = ContainerLayout.parseLog(item.name),
                   let overlap = heldLogs.first(where: { $0.1.device == log.device && $0.1.first <= log.last && log.first <= $0.1.last }) {
                    state.conflicts.append("\(item.name.rawValue) (overlaps \(overlap.0.rawValue))")
                    continue
                }
                do {
                    try await container.put(item.name, item.bytes)
                    state.written += 1
                } catch let error as ChronicleError where error.code == .blobConflict {
                    if try await holdsSame(item, in: container) { state.alreadyThere += 1 } else { state.conflicts.append(item.name.rawValue) }
                }
            }
        } catch let error as ChronicleError {
            state.ended = true
            state.error = error
            progress(state)
            throw error
        }
        state.ended = true
        progress(state)
        return state
    }

    /// Whether the container's blob under the item's name holds the same
    /// log: the same bytes, or bytes that decode to the same content
    /// (encoded by another build, compressed otherwise).
    private static func holdsSame(_ item: Encoded, in container: any Container) async throws -> Bool {
        let bytes: [UInt8]
        do {
            bytes = try await container.get(item.name, maxBytes: DecodingLimits().maxLogBytes)
        } catch let error as ChronicleError where error.code == .notFound {
            return false  // The put was refused for another log overlapping it.
        }
        if bytes == item.bytes { return true }
        guard let held = try? await LogDecoder(schema: nil).decode(bytes, name: item.name, fetchingFrom: container),
              let ours = try? LogDecoder(schema: nil).decode(item.bytes, name: item.name) else { return false }
        switch (held, ours) {
        case (.transactions(let a, let x), .transactions(let b, let y)): return a.schemaHash == b.schemaHash && x == y
        case (.baseline(let a, let x), .baseline(let b, let y)):
            return a.schemaHash == b.schemaHash && a.baselinePart == b.baselinePart && a.isFinalBaselinePart == b.isFinalBaselinePart && x == y
        default: return false
        }
    }

    /// One entry of `logs`, read back into a decoded log whose header holds
    /// what the encoder needs (device, sequences or part, schema).
    private static func decodeLog(_ value: JSONValue, store: StoreID, path: String) throws(ChronicleError) -> DecodedLog {
        func bad(_ at: String, _ expected: String) -> ChronicleError { ChronicleError(.malformedBody, "\(path)\(at): expected \(expected)") }
        guard case .object(let o) = value else { throw bad("", "an object") }
        guard case .string(let deviceText)? = o["device"], let device = DeviceID(string: deviceText) else { throw bad(".device", "a device ID") }
        guard case .string(let hashText)? = o["schemaHash"], hashText.count == 16, let schemaHash = UInt64(hashText, radix: 16) else {
            throw bad(".schemaHash", "16 hex digits")
        }
        var header = LogHeader(kind: .transactions, flags: [], storeID: store, deviceID: device, firstSequence: 0, lastSequence: 0,
                               minClock: .zero, maxClock: .zero, schemaHash: schemaHash, count: 0, dictionaryID: 0,
                               storedBodyLength: 0, bodyLength: 0, bodyChecksum: 0)
        switch o["kind"] {
        case .string("transactions")?:
            guard case .array(let list)? = o["transactions"], !list.isEmpty else { throw bad(".transactions", "a non-empty array") }
            var transactions: [Transaction] = []
            for (i, item) in list.enumerated() {
                let at = "\(path).transactions[\(i)]"
                guard case .object(let t) = item else { throw ChronicleError(.malformedBody, "\(at): expected an object") }
                guard case .int(let sequence)? = t["sequence"], sequence >= 1 else { throw ChronicleError(.malformedBody, "\(at).sequence: expected a number from 1") }
                if let previous = transactions.last?.sequence, UInt64(sequence) != previous + 1 {
                    throw ChronicleError(.malformedBody, "\(at).sequence: \(sequence) follows \(previous): a log's sequences are consecutive")
                }
                guard case .string(let clockText)? = t["clock"], let clock = parseClock(clockText) else {
                    throw ChronicleError(.malformedBody, "\(at).clock: expected a clock reading \"<milliseconds>.<counter>\", milliseconds at most \(HybridTimestamp.maxMilliseconds) (the year 4199), the counter at most 65535")
                }
                guard case .array(let changeList)? = t["changes"] else { throw ChronicleError(.malformedBody, "\(at).changes: expected an array") }
                var changes: [Change] = []
                for (j, c) in changeList.enumerated() {
                    changes.append(try decodeChange(c, path: "\(at).changes[\(j)]"))
                }
                transactions.append(Transaction(deviceID: device, sequence: UInt64(sequence), clock: clock, schemaHash: schemaHash, changes: changes))
            }
            header.firstSequence = transactions[0].sequence
            header.lastSequence = transactions[transactions.count - 1].sequence
            return .transactions(header, transactions)
        case .string("baseline")?:
            guard case .int(let part)? = o["part"], part >= 1 else { throw bad(".part", "a part number from 1") }
            guard case .bool(let isFinal)? = o["final"] else { throw bad(".final", "true or false") }
            guard case .object(let vectorObject)? = o["vector"] else { throw bad(".vector", "an object of device IDs and sequences") }
            var vector: [DeviceID: UInt64] = [:]
            for (key, value) in vectorObject {
                guard let d = DeviceID(string: key), case .int(let s) = value, s >= 0 else { throw bad(".vector.\(key)", "a device ID and a sequence") }
                vector[d] = UInt64(s)
            }
            guard case .array(let list)? = o["records"] else { throw bad(".records", "an array") }
            var records: [Baseline.Record] = []
            for (i, item) in list.enumerated() {
                let at = "\(path).records[\(i)]"
                guard case .object(let r) = item, case .string(let entity)? = r["entity"],
                      case .string(let idText)? = r["id"], let id = RecordID(string: idText), case .bool(let inserted)? = r["inserted"],
                      case .array(let fieldList)? = r["fields"]
                else { throw ChronicleError(.malformedBody, "\(at): expected {\"entity\", \"id\", \"inserted\", \"fields\"}") }
                var deleteVersion: Version?
                if let d = r["deleted"] {
                    guard case .string(let text) = d, let v = parseVersion(text) else {
                        throw ChronicleError(.malformedBody, "\(at).deleted: expected a version \"<milliseconds>.<counter>@<device>\"")
                    }
                    deleteVersion = v
                }
                var fields: [Baseline.VersionedValue] = []
                for (j, f) in fieldList.enumerated() {
                    let fat = "\(at).fields[\(j)]"
                    guard case .array(let parts) = f, parts.count == 4, case .string(let name) = parts[0], case .string(let type) = parts[1],
                          case .string(let versionText) = parts[3]
                    else { throw ChronicleError(.malformedBody, "\(fat): expected [name, type, value, version]") }
                    guard let version = parseVersion(versionText) else {
                        throw ChronicleError(.malformedBody, "\(fat)[3]: expected a version \"<milliseconds>.<counter>@<device>\"")
                    }
                    fields.append(Baseline.VersionedValue(name: name, value: try Value(portableJSON: parts[2], typeName: type, path: "\(fat)[2]"),
                                                          version: version))
                }
                records.append(Baseline.Record(entity: entity, recordID: id, inserted: inserted, deleteVersion: deleteVersion, fields: fields))
            }
            header.kind = .baseline
            header.firstSequence = UInt64(part)
            header.lastSequence = isFinal ? UInt64(part) : 0
            return .baseline(header, Baseline(vector: vector, records: records))
        default:
            throw bad(".kind", "\"transactions\" or \"baseline\"")
        }
    }

    private static func decodeChange(_ value: JSONValue, path: String) throws(ChronicleError) -> Change {
        guard case .object(let c) = value, case .string(let kindText)? = c["kind"], case .string(let entity)? = c["entity"],
              case .string(let idText)? = c["id"], let id = RecordID(string: idText)
        else { throw ChronicleError(.malformedBody, "\(path): expected {\"kind\", \"entity\", \"id\", \"values\"}") }
        let kind: ChangeKind
        switch kindText {
        case "insert": kind = .insert
        case "update": kind = .update
        case "delete": kind = .delete
        default: throw ChronicleError(.malformedBody, "\(path).kind: expected insert, update or delete, found \"\(kindText)\"")
        }
        var values: [FieldValue] = []
        switch c["values"] {
        case nil: break
        case .array(let list)?:
            if kind == .delete && !list.isEmpty { throw ChronicleError(.malformedBody, "\(path).values: a delete has no values") }
            for (i, item) in list.enumerated() {
                guard case .array(let parts) = item, parts.count == 3, case .string(let name) = parts[0], case .string(let type) = parts[1] else {
                    throw ChronicleError(.malformedBody, "\(path).values[\(i)]: expected [name, type, value]")
                }
                values.append(FieldValue(name, try Value(portableJSON: parts[2], typeName: type, path: "\(path).values[\(i)][2]")))
            }
        case let other?:
            throw ChronicleError(.malformedBody, "\(path).values: expected an array, found \(other.kindName)")
        }
        return Change(kind, entity: entity, recordID: id, values: values)
    }

    /// `"<milliseconds>.<counter>"`, as ``HybridTimestamp/description`` writes it.
    static func parseClock(_ text: String) -> HybridTimestamp? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
              let ms = UInt64(parts[0]), ms <= HybridTimestamp.maxMilliseconds, let counter = UInt16(parts[1])
        else { return nil }
        return HybridTimestamp(milliseconds: ms, counter: counter)
    }

    /// `"<clock>@<device>"`, as ``Version/description`` writes it.
    static func parseVersion(_ text: String) -> Version? {
        let parts = text.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, let clock = parseClock(String(parts[0])), let device = DeviceID(string: String(parts[1])) else { return nil }
        return Version(clock: clock, device: device)
    }
}
