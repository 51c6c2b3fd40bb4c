/// What it takes to bring a store's data from one version of its schema to
/// a later one: the steps, each either declared (Chronicle does it by
/// itself) or one that needs the app's code, and the mapping of entities
/// and fields that reads an earlier version's snapshot, logs and baselines
/// as the later version's.
///
/// Declared steps: an entity added; an attribute added with a default or
/// as optional, or an optional to-one relationship added; an attribute
/// made optional; an entity, attribute or to-one renamed (the later
/// version names the earlier name in `renamedFrom`); a default changed; a
/// unique constraint or an index added or removed. Anything else (an
/// entity or field removed, a type changed, a field made required, a
/// relationship's destination or delete rule changed) changes what earlier
/// data means, and Chronicle does not guess: it needs the app's code, a
/// ``SchemaConversion``, and without one refuses with
/// ``ChronicleError/Code/unsupportedMigration`` naming the step.
///
/// ```swift
/// let migration = try SchemaMigration(from: v1, to: v2)
/// for step in migration.steps { print(step) }
/// ```
///
/// See `docs/schema-evolution.md`.
public struct SchemaMigration: Sendable {
    /// One difference between two versions of a schema.
    public enum Step: Sendable, Hashable, CustomStringConvertible {
        /// A new entity: its table starts empty.
        case addEntity(String)
        /// An entity renamed.
        case renameEntity(from: String, to: String)
        /// A new attribute or to-one relationship; earlier records read its
        /// default (or null).
        case addField(entity: String, field: String, default: Value?)
        /// A field renamed.
        case renameField(entity: String, from: String, to: String)
        /// A field that was required is optional.
        case makeOptional(entity: String, field: String)
        /// A field's default changed: inserts that give no value get the
        /// new one, and earlier records that never had a value show it.
        case changeDefault(entity: String, field: String)
        /// A new unique constraint: earlier records that share a key are
        /// merged as two devices' inserts of one key are.
        case addUnique(entity: String, fields: [String])
        /// A unique constraint removed: records it merged show again.
        case removeUnique(entity: String, fields: [String])
        /// A new index.
        case addIndex(entity: String, fields: [String])
        /// An index removed.
        case removeIndex(entity: String, fields: [String])
        /// An entity removed, with its records.
        case removeEntity(String)
        /// A field removed, with its values.
        case removeField(entity: String, field: String)
        /// A field whose kind changed (another type, an attribute that became
        /// a relationship, a relationship to another entity).
        case changeKind(entity: String, field: String, from: String, to: String)
        /// A field that was optional is required.
        case makeRequired(entity: String, field: String)
        /// A required field added without a default: earlier records have
        /// no value for it, and no app code can give them one. Give it a
        /// default (or make it optional).
        case addRequiredField(entity: String, field: String)

        /// Whether Chronicle cannot do this step by itself: it changes what
        /// earlier data means, and needs a ``SchemaConversion``.
        public var needsAppCode: Bool {
            switch self {
            case .addEntity, .renameEntity, .addField, .renameField, .makeOptional, .changeDefault, .addUnique,
                 .removeUnique, .addIndex, .removeIndex:
                return false
            case .removeEntity, .removeField, .changeKind, .makeRequired, .addRequiredField:
                return true
            }
        }

        public var description: String {
            switch self {
            case .addEntity(let e): return "add entity \(e)"
            case .renameEntity(let from, let to): return "rename entity \(from) to \(to)"
            case .addField(let e, let f, let d): return "add \(e).\(f)" + (d.map { " (earlier records read \($0))" } ?? " (earlier records read null)")
            case .renameField(let e, let from, let to): return "rename \(e).\(from) to \(e).\(to)"
            case .makeOptional(let e, let f): return "make \(e).\(f) optional"
            case .changeDefault(let e, let f): return "change the default of \(e).\(f)"
            case .addUnique(let e, let fs): return "add unique constraint \(e)(\(fs.joined(separator: ", "))); records sharing a key are merged"
            case .removeUnique(let e, let fs): return "remove unique constraint \(e)(\(fs.joined(separator: ", ")))"
            case .addIndex(let e, let fs): return "add index \(e)(\(fs.joined(separator: ", ")))"
            case .removeIndex(let e, let fs): return "remove index \(e)(\(fs.joined(separator: ", ")))"
            case .removeEntity(let e): return "remove entity \(e) and its records"
            case .removeField(let e, let f): return "remove \(e).\(f) and its values"
            case .changeKind(let e, let f, let from, let to): return "change \(e).\(f) from \(from) to \(to)"
            case .makeRequired(let e, let f): return "make \(e).\(f) required"
            case .addRequiredField(let e, let f): return "add required \(e).\(f), which has no default: give it one (earlier records need a value)"
            }
        }
    }

    /// The earlier version.
    public let source: Schema
    /// The later version.
    public let target: Schema
    /// What changes, entity by entity in the later version's order, then
    /// what the earlier version had that the later one lacks.
    public let steps: [Step]
    /// For each entity of ``source`` (by index), its index in ``target``.
    package let entityMap: [Int?]
    /// For each entity of ``source``, each field's index in its ``target``
    /// entity.
    package let fieldMap: [[Int?]]
    /// For each entity of ``target`` (by index), the conversion of each
    /// field's earlier values, where the app gave one.
    private let converters: [[Int: @Sendable (Value) -> Value]]

    /// The steps that need the app's code and have none among the
    /// conversions given.
    public let missingAppCode: [Step]

    /// Compares two versions of a schema.
    ///
    /// - Parameter conversions: the app's code for steps Chronicle cannot
    ///   do by itself; those whose version is after `source`'s and at most
    ///   `target`'s apply.
    /// - Throws: ``ChronicleError/Code/schemaMismatch`` if `target` is not a
    ///   later version of `source` (a lower or equal version number with
    ///   another hash: a schema that changed must get a new version number).
    public init(from source: Schema, to target: Schema, conversions: [SchemaConversion] = []) throws(ChronicleError) {
        guard target.version > source.version || target.hash == source.hash else {
            if target.version == source.version {
                throw ChronicleError(.schemaMismatch, "the schema changed but kept version \(source.version) (hash \(source.hashString), now \(target.hashString)): give the changed schema a higher version number")
            }
            throw ChronicleError(.schemaMismatch, "schema version \(target.version) is not later than version \(source.version): a migration goes from an earlier version to a later one")
        }
        self.source = source
        self.target = target
        var steps: [Step] = []
        var entityMap = [Int?](repeating: nil, count: source.entities.count)
        var fieldMap = source.entities.map { [Int?](repeating: nil, count: $0.fields.count) }
        let oldEntityIndex = Self.match(target.entities.map { ($0.name, $0.renamedFrom) }, in: source.entities.map { ($0.name, $0.renamedFrom) },
                                        from: source.version)
        for (n, entity) in target.entities.enumerated() {
            guard let o = oldEntityIndex[n] else {
                steps.append(.addEntity(entity.name))
                continue
            }
            entityMap[o] = n
            let old = source.entities[o]
            if old.name != entity.name { steps.append(.renameEntity(from: old.name, to: entity.name)) }
            let oldFieldIndex = Self.match(entity.fields.map { ($0.name, $0.renamedFrom) }, in: old.fields.map { ($0.name, $0.renamedFrom) },
                                           from: source.version)
            for (nf, field) in entity.fields.enumerated() {
                guard let of = oldFieldIndex[nf] else {
                    if field.isOptional || field.defaultValue != nil {
                        steps.append(.addField(entity: entity.name, field: field.name, default: field.defaultValue))
                    } else {
                        steps.append(.addRequiredField(entity: entity.name, field: field.name))
                    }
                    continue
                }
                fieldMap[o][of] = nf
                let was = old.fields[of]
                if was.name != field.name { steps.append(.renameField(entity: entity.name, from: was.name, to: field.name)) }
                let kinds = (Self.kindName(was.kind, mapping: source, to: target, entityMap: { oldEntityIndex.firstIndex(of: $0) }),
                             Self.kindName(field.kind, mapping: nil, to: target, entityMap: { _ in nil }))
                if kinds.0 != kinds.1 {
                    steps.append(.changeKind(entity: entity.name, field: field.name, from: kinds.0, to: kinds.1))
                }
                if was.isOptional && !field.isOptional { steps.append(.makeRequired(entity: entity.name, field: field.name)) }
                if !was.isOptional && field.isOptional { steps.append(.makeOptional(entity: entity.name, field: field.name)) }
                if was.defaultValue != field.defaultValue { steps.append(.changeDefault(entity: entity.name, field: field.name)) }
            }
            for (of, field) in old.fields.enumerated() where fieldMap[o][of] == nil {
                steps.append(.removeField(entity: entity.name, field: field.name))
            }
            // Constraints and indexes, compared by the later version's names.
            func renamed(_ group: [String]) -> [String] {
                group.map { name in old.fieldIndex(named: name).flatMap { fieldMap[o][$0] }.map { entity.fields[$0].name } ?? name }
            }
            let oldUnique = old.uniqueConstraints.map(renamed), oldIndexes = old.indexes.map(renamed)
            for key in entity.uniqueConstraints where !Self.contains(oldUnique, key) {
                steps.append(.addUnique(entity: entity.name, fields: key))
            }
            for key in oldUnique where !Self.contains(entity.uniqueConstraints, key) {
                steps.append(.removeUnique(entity: entity.name, fields: key))
            }
            for index in entity.indexes where !oldIndexes.contains(index) {
                steps.append(.addIndex(entity: entity.name, fields: index))
            }
            for index in oldIndexes where !entity.indexes.contains(index) {
                steps.append(.removeIndex(entity: entity.name, fields: index))
            }
        }
        for (o, entity) in source.entities.enumerated() where entityMap[o] == nil {
            steps.append(.removeEntity(entity.name))
        }
        self.steps = steps
        self.entityMap = entityMap
        self.fieldMap = fieldMap
        // The app's code, for the steps that need it.
        let applicable = conversions.filter { source.version < $0.version && $0.version <= target.version }
        var converters = target.entities.map { _ in [Int: @Sendable (Value) -> Value]() }
        var missing: [Step] = []
        for step in steps where step.needsAppCode {
            switch step {
            case .changeKind(let e, let f, _, _), .makeRequired(let e, let f):
                if let n = target.entityIndex(named: e), let nf = target.entities[n].fieldIndex(named: f),
                   let convert = applicable.lazy.compactMap({ $0.converter(entity: e, field: f) }).first {
                    converters[n][nf] = convert
                } else {
                    missing.append(step)
                }
            case .removeField(let e, let f):
                let earlierEntity = target.entityIndex(named: e).flatMap { n in entityMap.firstIndex(of: n) }.map { source.entities[$0].name }
                if !applicable.contains(where: { $0.drops(entity: [e, earlierEntity].compactMap { $0 }, field: f) }) { missing.append(step) }
            case .removeEntity(let e):
                if !applicable.contains(where: { $0.drops(entity: [e], field: nil) }) { missing.append(step) }
            default:
                missing.append(step)
            }
        }
        self.converters = converters
        self.missingAppCode = missing
    }

    /// The migration from `source` to `target` through the versions
    /// between them that `known` holds, one version at a time: each
    /// version's renames and conversions apply to the version before it, as
    /// on a device that upgraded through each. Without versions between
    /// them, or when a step through them needs app code the direct one does
    /// not, the direct migration.
    ///
    /// - Throws: as ``init(from:to:conversions:)``.
    public static func through(_ known: [Schema], from source: Schema, to target: Schema,
                               conversions: [SchemaConversion] = []) throws(ChronicleError) -> SchemaMigration {
        let direct = try SchemaMigration(from: source, to: target, conversions: conversions)
        // One schema per version between them (two of one version say nothing about the path).
        var byVersion: [Int: [Schema]] = [:]
        for schema in known where source.version < schema.version && schema.version < target.version {
            byVersion[schema.version, default: []].append(schema)
        }
        var between: [Schema] = []
        for (_, schemas) in byVersion where Set(schemas.map(\.hash)).count == 1 { between.append(schemas[0]) }
        between.sort { $0.version < $1.version }
        guard !between.isEmpty else { return direct }
        var hops: [SchemaMigration] = []
        var from = source
        for next in between + [target] {
            guard let hop = try? SchemaMigration(from: from, to: next, conversions: conversions) else { return direct }
            hops.append(hop)
            from = next
        }
        guard hops.allSatisfy(\.isComplete) || !direct.isComplete else { return direct }
        return SchemaMigration(chaining: hops)
    }

    /// The composition of consecutive migrations.
    private init(chaining hops: [SchemaMigration]) {
        let first = hops[0]
        source = first.source
        target = hops[hops.count - 1].target
        steps = hops.flatMap(\.steps)
        missingAppCode = hops.flatMap(\.missingAppCode)
        var entityMap = first.entityMap
        var fieldMap = first.fieldMap
        // Per source field, the chain of conversions its values go through.
        var chains: [[[@Sendable (Value) -> Value]]] = []
        for o in first.source.entities.indices {
            var perField: [[@Sendable (Value) -> Value]] = []
            for f in first.source.entities[o].fields.indices {
                if let n = first.entityMap[o], let nf = first.fieldMap[o][f], let c = first.converters[n][nf] { perField.append([c]) } else { perField.append([]) }
            }
            chains.append(perField)
        }
        for hop in hops.dropFirst() {
            for o in entityMap.indices {
                guard let mid = entityMap[o], let n = hop.entityMap[mid] else {
                    entityMap[o] = nil
                    fieldMap[o] = fieldMap[o].map { _ in nil }
                    continue
                }
                for f in fieldMap[o].indices {
                    guard let midField = fieldMap[o][f], let nf = hop.fieldMap[mid][midField] else {
                        fieldMap[o][f] = nil
                        continue
                    }
                    if let c = hop.converters[n][nf] { chains[o][f].append(c) }
                    fieldMap[o][f] = nf
                }
                entityMap[o] = n
            }
        }
        var converters = hops[hops.count - 1].target.entities.map { _ in [Int: @Sendable (Value) -> Value]() }
        for o in entityMap.indices {
            guard let n = entityMap[o] else { continue }
            for f in fieldMap[o].indices {
                guard let nf = fieldMap[o][f], !chains[o][f].isEmpty else { continue }
                let chain = chains[o][f]
                converters[n][nf] = { value in chain.reduce(value) { $1($0) } }
            }
        }
        self.entityMap = entityMap
        self.fieldMap = fieldMap
        self.converters = converters
    }

    /// Whether every step is declared or has the app's code.
    public var isComplete: Bool { missingAppCode.isEmpty }

    /// Throws unless every step is declared or has the app's code.
    ///
    /// - Throws: ``ChronicleError/Code/unsupportedMigration`` naming the
    ///   first step that needs the app's code and has none.
    public func requireComplete() throws(ChronicleError) {
        guard let first = missingAppCode.first else { return }
        let more = missingAppCode.count > 1 ? " (and \(missingAppCode.count - 1) more: \(missingAppCode.dropFirst().map(\.description).joined(separator: "; ")))" : ""
        let how: String
        if case .addRequiredField = first {
            how = "cannot \(first)"
        } else {
            how = "cannot \(first) without the app's code (a SchemaConversion)"
        }
        throw ChronicleError(.unsupportedMigration, "schema version \(source.version) to \(target.version): \(how)\(more)\(renameHint); see docs/schema-evolution.md")
    }

    /// A field removed and one added of the same kind in one entity may be
    /// a rename that forgot its `renamedFrom`.
    private var renameHint: String {
        for step in steps {
            guard case .removeField(let e, let removed) = step,
                  let n = target.entityIndex(named: e), let o = entityMap.firstIndex(of: n),
                  let was = source.entities[o].field(named: removed) else { continue }
            for other in steps {
                switch other {
                case .addField(e, let added, _), .addRequiredField(e, let added):
                    if target.entities[n].field(named: added)?.kind == was.kind {
                        return " (if \(e).\(removed) was renamed \(added), say so: \"renamedFrom\": \"\(removed)\" on \(added))"
                    }
                default: break
                }
            }
        }
        return ""
    }

    /// An earlier version's value of a field, as the later version holds
    /// it: converted by the app's code where it gave some.
    ///
    /// - Throws: ``ChronicleError/Code/schemaMismatch`` if the converted
    ///   value does not fit the field (the conversion is wrong): what needs
    ///   it waits, as a log of an unknown version does, and is not taken
    ///   for a corruption.
    package func convert(_ value: Value, entity n: Int, field nf: Int) throws(ChronicleError) -> Value {
        guard let convert = converters[n][nf] else { return value }
        let converted = convert(value)
        let field = target.entities[n].fields[nf]
        guard field.accepts(converted) else {
            throw ChronicleError(.schemaMismatch, "the conversion of \(target.entities[n].name).\(field.name) to schema version \(target.version) gave \(converted), which is not \(field.kind.withArticle)\(field.isOptional ? "" : " (required)")")
        }
        return converted
    }

    /// The earlier version's transaction, as the later version writes it:
    /// entities and fields renamed, values converted, dropped entities and
    /// fields left out. A field the later version added is absent, as in
    /// the earlier log: records read its default. Call only for a complete
    /// migration (``isComplete``).
    package func translate(_ transaction: Transaction) throws(ChronicleError) -> Transaction {
        var t = transaction
        t.schemaHash = target.hash
        t.changes = []
        for change in transaction.changes {
            guard let (o, n) = entity(change.entity) else { continue }
            var c = change
            c.entity = target.entities[n].name
            c.values = []
            for value in change.values {
                guard let field = field(value.name, o, n) else { continue }
                c.values.append(FieldValue(field.name, try convert(value.value, entity: n, field: field.index)))
            }
            // An update left with no field (it changed only dropped ones)
            // changes nothing.
            if c.kind == .update && c.values.isEmpty { continue }
            t.changes.append(c)
        }
        return t
    }

    /// The earlier and later indexes of the earlier version's entity
    /// `name`; nil for one the later version dropped.
    private func entity(_ name: String) -> (Int, Int)? {
        guard let o = source.entityIndex(named: name), let n = entityMap[o] else { return nil }
        return (o, n)
    }

    /// The later index and name of field `name` of earlier entity `o`
    /// (later `n`); nil for one the later version dropped.
    private func field(_ name: String, _ o: Int, _ n: Int) -> (index: Int, name: String)? {
        guard let of = source.entities[o].fieldIndex(named: name), let nf = fieldMap[o][of] else { return nil }
        return (nf, target.entities[n].fields[nf].name)
    }

    /// An earlier version's baseline part, as the later version writes it.
    package func translate(_ baseline: Baseline) throws(ChronicleError) -> Baseline {
        var b = baseline
        b.records = []
        for record in baseline.records {
            guard let (o, n) = entity(record.entity) else { continue }
            var r = record
            r.entity = target.entities[n].name
            r.fields = []
            for f in record.fields {
                guard let field = field(f.name, o, n) else { continue }
                r.fields.append(Baseline.VersionedValue(name: field.name, value: try convert(f.value, entity: n, field: field.index),
                                                        version: f.version))
            }
            b.records.append(r)
        }
        return b
    }

    /// For each later item (its name and earlier names), the index of the
    /// earlier item it continues, in a migration from version `version`.
    ///
    /// The earlier names that apply: those given with a last version at or
    /// after `version`, the one with the smallest first (the item's name
    /// then); and those given without a version (the previous version's
    /// name), unless the earlier item of the same name declares the very
    /// same (a schema file copied forward: the rename was made before
    /// `version`, and is not made again). A rename claims its earlier name
    /// even where a new item took that name (so names can be swapped);
    /// otherwise an item continues the earlier item of its name, if no
    /// rename claimed it and no versioned earlier name says it had another.
    private static func match(_ later: [(name: String, renamedFrom: [EarlierName])], in earlier: [(name: String, renamedFrom: [EarlierName])],
                              from version: Int) -> [Int?] {
        let index = Dictionary(earlier.enumerated().map { ($0.element.name.lowercased(), $0.offset) }, uniquingKeysWith: { a, _ in a })
        var claimed = Set<Int>()
        var result = [Int?](repeating: nil, count: later.count)
        var renamedThen = Set<Int>()
        for (i, item) in later.enumerated() {
            let copied = index[item.name.lowercased()].map { Set(earlier[$0].renamedFrom.filter { $0.lastVersion == nil }.map { $0.name.lowercased() }) } ?? []
            let versioned = item.renamedFrom.filter { ($0.lastVersion ?? 0) >= version }.sorted { $0.lastVersion! < $1.lastVersion! }
            if let then = versioned.first {
                // Its name in `version`: that one, or (absent) it did not exist then.
                renamedThen.insert(i)
                if let o = index[then.name.lowercased()], !claimed.contains(o) {
                    result[i] = o
                    claimed.insert(o)
                }
                continue
            }
            let previous = item.renamedFrom.filter { $0.lastVersion == nil && !copied.contains($0.name.lowercased()) }
            if let o = previous.lazy.compactMap({ index[$0.name.lowercased()] }).first(where: { !claimed.contains($0) }) {
                result[i] = o
                claimed.insert(o)
            }
        }
        for (i, item) in later.enumerated() where result[i] == nil && !renamedThen.contains(i) {
            if let o = index[item.name.lowercased()], !claimed.contains(o) {
                result[i] = o
                claimed.insert(o)
            }
        }
        return result
    }

    /// A field's kind as steps name it; a relationship's destination in the
    /// later version's name when it was renamed.
    private static func kindName(_ kind: Field.Kind, mapping source: Schema?, to target: Schema,
                                 entityMap: (Int) -> Int?) -> String {
        switch kind {
        case .attribute(let type): return "\(type.rawValue) attribute"
        case .reference(let destination, let rule):
            var name = destination
            if let source, let o = source.entityIndex(named: destination), let n = entityMap(o) {
                name = target.entities[n].name
            }
            return "to-one relationship to \(name) (\(rule.rawValue))"
        }
    }

    /// Whether `groups` holds `group` with the same fields in any order.
    private static func contains(_ groups: [[String]], _ group: [String]) -> Bool {
        groups.contains { Set($0) == Set(group) && $0.count == group.count }
    }
}

/// The app's code for a schema change Chronicle cannot make by itself:
/// a field whose values change kind or become required is converted, value
/// by value; a field or an entity that is gone is dropped, on purpose.
///
/// A conversion is a pure function of one value, not an edit of the data:
/// it runs on the snapshot when the device migrates (once, in the
/// migration's transaction) and on every earlier version's log and baseline
/// the device applies afterwards, so every device computes the same value
/// with the same version, whichever order it learns things in, and
/// devices converge.
///
/// ```swift
/// // Version 3 turned Task.priority from a string into a number.
/// let priority = SchemaConversion.convert("Task", "priority", in: 3) { old in
///     guard case .string(let text) = old else { return .int(0) }
///     return .int(Int64(text) ?? 0)
/// }
/// // Version 3 no longer has Task.legacyNotes.
/// let notes = SchemaConversion.drop("Task", field: "legacyNotes", in: 3)
/// ```
public struct SchemaConversion: Sendable {
    private enum Kind: Sendable {
        case convert(@Sendable (Value) -> Value)
        case dropField(String)
        case dropEntity
    }

    /// The schema version that made the change.
    public let version: Int
    /// The entity: for a conversion as `version` names it; for a drop as
    /// the earlier version named it (or as `version` does, for a field).
    public let entity: String
    private let kind: Kind

    /// Converts every earlier value of `entity.field` (as version
    /// `version` names them) that changed kind or became required in that
    /// version. `body` must give a value of the field's new type (null
    /// only if it is optional), and the same value for the same input
    /// every time.
    public static func convert(_ entity: String, _ field: String, in version: Int,
                               _ body: @escaping @Sendable (Value) -> Value) -> SchemaConversion {
        SchemaConversion(version: version, entity: entity, kind: .convert(body), field: field)
    }

    /// Drops the values of a field that version `version` removed.
    public static func drop(_ entity: String, field: String, in version: Int) -> SchemaConversion {
        SchemaConversion(version: version, entity: entity, kind: .dropField(field), field: field)
    }

    /// Drops the records of an entity that version `version` removed.
    public static func drop(entity: String, in version: Int) -> SchemaConversion {
        SchemaConversion(version: version, entity: entity, kind: .dropEntity, field: nil)
    }

    /// The field converted or dropped; nil for an entity dropped.
    public let field: String?

    private init(version: Int, entity: String, kind: Kind, field: String?) {
        self.version = version
        self.entity = entity
        self.kind = kind
        self.field = field
    }

    func converter(entity: String, field: String) -> (@Sendable (Value) -> Value)? {
        guard case .convert(let body) = kind, self.entity.lowercased() == entity.lowercased(),
              self.field?.lowercased() == field.lowercased() else { return nil }
        return body
    }

    func drops(entity names: [String], field: String?) -> Bool {
        guard names.contains(where: { $0.lowercased() == entity.lowercased() }) else { return false }
        switch (kind, field) {
        case (.dropField(let f), let field?): return f.lowercased() == field.lowercased()
        case (.dropEntity, nil): return true
        default: return false
        }
    }
}
