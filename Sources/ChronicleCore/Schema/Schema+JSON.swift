import Foundation

extension Schema {
    /// Loads a schema from its JSON form (see `docs/values.md`):
    ///
    /// ```json
    /// {"version": 1, "entities": [
    ///   {"name": "Author",
    ///    "attributes": [{"name": "name", "type": "string"}],
    ///    "relationships": [{"name": "books", "toMany": true, "destination": "Book", "inverse": "author"}],
    ///    "unique": [["name"]]},
    ///   {"name": "Book",
    ///    "attributes": [{"name": "title", "type": "string"},
    ///                   {"name": "pages", "type": "int64", "optional": true}],
    ///    "relationships": [{"name": "author", "destination": "Author", "inverse": "books",
    ///                       "deleteRule": "cascade"}]}
    /// ]}
    /// ```
    ///
    /// `version` is the app's version number of this model (an integer from
    /// 1 on); it is part of the schema's ``hash``.
    ///
    /// - Throws: ``ChronicleError/Code/schemaSyntax`` with the line and column
    ///   for text that is not JSON (a key given twice included);
    ///   ``ChronicleError/Code/invalidSchema`` with the line and column and
    ///   the field path (`entities[1].attributes[0].type`) for JSON that is
    ///   not a valid schema.
    public init(json data: Data) throws(ChronicleError) {
        let (root, positions) = try JSONValue.parseWithPositions(data, code: .schemaSyntax)
        let reader = SchemaJSONReader(positions: positions)
        let (version, entities) = try reader.read(root)
        try self.init(version: version, entities: entities, locate: reader.locate)
    }

    /// The versions a schema file may give: the app's version number of its
    /// model, from 1 on.
    static let versionRange = 1...Int(Int32.max)

    /// The largest schema file ``init(contentsOf:)`` reads.
    public static let maxFileBytes = 16 << 20

    /// Loads a schema from a JSON file: a regular file (symbolic links are
    /// followed) of at most ``maxFileBytes``.
    ///
    /// - Throws: ``ChronicleError/Code/io`` for a path that is not a regular
    ///   file (a folder, a FIFO, a device such as `/dev/zero`: refused before
    ///   reading, so a FIFO no one writes to is not waited on) or cannot be
    ///   read; ``ChronicleError/Code/notFound`` for a missing file;
    ///   ``ChronicleError/Code/sizeOverCap`` for a larger one; and the
    ///   errors of ``init(json:)``, after the file's name.
    public init(contentsOf url: URL) throws(ChronicleError) {
        let data: Data
        do {
            let values = try url.resourceValues(forKeys: [.isRegularFileKey, .fileSizeKey])
            guard values.isRegularFile == true else {
                throw ChronicleError(.io, "schema file \(url.path) is not a regular file")
            }
            guard (values.fileSize ?? 0) <= Self.maxFileBytes else {
                throw ChronicleError(.sizeOverCap, "schema file \(url.path) is larger than \(Self.maxFileBytes >> 20) MiB")
            }
            data = try Data(contentsOf: url)
        } catch {
            throw ChronicleError.file("cannot read schema file \(url.path)", error)
        }
        do {
            try self.init(json: data)
        } catch {
            throw ChronicleError(error.code, "\(url.lastPathComponent): \(error.message)", underlying: error)
        }
    }

    /// Earlier names as the JSON form writes them: a name, or an object
    /// with its last version.
    private static func json(_ names: [EarlierName]) -> JSONValue {
        .array(names.map { n in
            n.lastVersion.map { .object(["name": .string(n.name), "version": .int(Int64($0))]) } ?? .string(n.name)
        })
    }

    /// The JSON form of the schema, readable by ``init(json:)``.
    package var jsonValue: JSONValue {
        .object([
            "version": .int(Int64(version)),
            "entities": .array(entities.map { e in
                var o: [String: JSONValue] = [
                    "name": .string(e.name),
                    "attributes": .array(e.attributes.map { a in
                        var ao: [String: JSONValue] = ["name": .string(a.name), "type": .string(a.type.rawValue)]
                        if a.isOptional { ao["optional"] = .bool(true) }
                        if let d = a.defaultValue { ao["default"] = d.json }
                        if !a.renamedFrom.isEmpty { ao["renamedFrom"] = Self.json(a.renamedFrom) }
                        return .object(ao)
                    }),
                ]
                if !e.relationships.isEmpty {
                    o["relationships"] = .array(e.relationships.map { r in
                        var ro: [String: JSONValue] = ["name": .string(r.name), "destination": .string(r.destination)]
                        if r.isToMany { ro["toMany"] = .bool(true) }
                        if let inv = r.inverse { ro["inverse"] = .string(inv) }
                        if !r.isToMany {
                            ro["deleteRule"] = .string(r.deleteRule.rawValue)
                            if !r.isOptional { ro["optional"] = .bool(false) }
                            if !r.renamedFrom.isEmpty { ro["renamedFrom"] = Self.json(r.renamedFrom) }
                        }
                        return .object(ro)
                    })
                }
                if !e.uniqueConstraints.isEmpty {
                    o["unique"] = .array(e.uniqueConstraints.map { .array($0.map { .string($0) }) })
                }
                if !e.indexes.isEmpty {
                    o["indexes"] = .array(e.indexes.map { .array($0.map { .string($0) }) })
                }
                if !e.renamedFrom.isEmpty { o["renamedFrom"] = Self.json(e.renamedFrom) }
                return .object(o)
            }),
        ])
    }
}

/// Walks a parsed JSON schema, keeping the path for error messages.
private struct SchemaJSONReader {
    /// Where each value is in the file, by path, for messages.
    var positions: [String: JSONPosition]

    func read(_ root: JSONValue) throws(ChronicleError) -> (Int, [Entity]) {
        let o = try object(root, "(root)")
        try checkKeys(o, allowed: ["version", "entities"], "(root)")
        guard case .int(let version)? = o["version"] else { throw fail("version", "must be an integer") }
        guard Schema.versionRange.contains(Int(clamping: version)) else {
            throw fail("version", "\(version) is not a version: give the app's version number of this model, from 1 to \(Schema.versionRange.upperBound)")
        }
        guard case .array(let list)? = o["entities"] else { throw fail("entities", "must be an array of entities") }
        var entities: [Entity] = []
        for (i, item) in list.enumerated() {
            entities.append(try entity(item, "entities[\(i)]"))
        }
        return (Int(version), entities)
    }

    private func entity(_ json: JSONValue, _ path: String) throws(ChronicleError) -> Entity {
        let o = try object(json, path)
        try checkKeys(o, allowed: ["name", "attributes", "relationships", "unique", "indexes", "renamedFrom"], path)
        let name = try string(o["name"], "\(path).name")
        var attributes: [Attribute] = []
        for (j, a) in try array(o["attributes"] ?? .array([]), "\(path).attributes").enumerated() {
            attributes.append(try attribute(a, "\(path).attributes[\(j)]"))
        }
        var relationships: [Relationship] = []
        for (j, r) in try array(o["relationships"] ?? .array([]), "\(path).relationships").enumerated() {
            relationships.append(try relationship(r, "\(path).relationships[\(j)]"))
        }
        return Entity(name, attributes: attributes, relationships: relationships,
                      unique: try fieldGroups(o["unique"], "\(path).unique"),
                      indexes: try fieldGroups(o["indexes"], "\(path).indexes"),
                      renamedFrom: try earlierNames(o["renamedFrom"], "\(path).renamedFrom"))
    }

    /// A list of field lists (unique constraints, indexes).
    private func fieldGroups(_ json: JSONValue?, _ path: String) throws(ChronicleError) -> [[String]] {
        var groups: [[String]] = []
        for (j, u) in try array(json ?? .array([]), path).enumerated() {
            var key: [String] = []
            for (k, f) in try array(u, "\(path)[\(j)]").enumerated() {
                key.append(try string(f, "\(path)[\(j)][\(k)]"))
            }
            groups.append(key)
        }
        return groups
    }

    /// `renamedFrom`: one earlier name, or a list of them, each a name (in
    /// the previous version) or `{"name": ..., "version": last version}`.
    private func earlierNames(_ json: JSONValue?, _ path: String) throws(ChronicleError) -> [EarlierName] {
        guard let json else { return [] }
        switch json {
        case .string, .object: return [try earlierName(json, path)]
        case .array(let list):
            var names: [EarlierName] = []
            for (k, item) in list.enumerated() { names.append(try earlierName(item, "\(path)[\(k)]")) }
            return names
        default:
            throw fail(path, "expected a name, {\"name\", \"version\"}, or an array of them, found \(json.kindName)")
        }
    }

    /// One earlier name: a string, or `{"name", "version"}`.
    private func earlierName(_ json: JSONValue, _ path: String) throws(ChronicleError) -> EarlierName {
        guard case .object(let o) = json else { return EarlierName(try string(json, path)) }
        try checkKeys(o, allowed: ["name", "version"], path)
        guard case .int(let version)? = o["version"], Schema.versionRange.contains(Int(clamping: version)) else {
            throw fail("\(path).version", "must be the last schema version that used the name, from \(Schema.versionRange.lowerBound) to \(Schema.versionRange.upperBound)")
        }
        return EarlierName(try string(o["name"], "\(path).name"), lastVersion: Int(version))
    }

    private func attribute(_ json: JSONValue, _ path: String) throws(ChronicleError) -> Attribute {
        let o = try object(json, path)
        try checkKeys(o, allowed: ["name", "type", "optional", "default", "renamedFrom"], path)
        let name = try string(o["name"], "\(path).name")
        let typeName = try string(o["type"], "\(path).type")
        guard let type = AttributeType(rawValue: typeName) else {
            let known = AttributeType.allCases.map(\.rawValue).joined(separator: ", ")
            throw fail("\(path).type", "unknown type '\(SchemaValidator.shown(typeName))' (one of: \(known))")
        }
        let optional = try bool(o["optional"], "\(path).optional") ?? false
        var defaultValue: Value?
        if let d = o["default"] {
            let field = Field(name: name, kind: .attribute(type), isOptional: true, defaultValue: nil)
            do {
                defaultValue = try Value(json: d, for: field, path: "\(path).default")
            } catch {
                throw ChronicleError(.invalidSchema, locate("\(path).default") + error.message, underlying: error)
            }
        }
        return Attribute(name, type, optional: optional, default: defaultValue,
                         renamedFrom: try earlierNames(o["renamedFrom"], "\(path).renamedFrom"))
    }

    private func relationship(_ json: JSONValue, _ path: String) throws(ChronicleError) -> Relationship {
        let o = try object(json, path)
        try checkKeys(o, allowed: ["name", "destination", "toMany", "inverse", "deleteRule", "optional", "renamedFrom"], path)
        let name = try string(o["name"], "\(path).name")
        let destination = try string(o["destination"], "\(path).destination")
        let toMany = try bool(o["toMany"], "\(path).toMany") ?? false
        let renamedFrom = try earlierNames(o["renamedFrom"], "\(path).renamedFrom")
        if toMany, !renamedFrom.isEmpty {
            throw fail("\(path).renamedFrom", "a to-many relationship is not stored, so it has nothing to rename: give earlier names on its inverse to-one")
        }
        let inverse = try o["inverse"].map { j throws(ChronicleError) in try string(j, "\(path).inverse") }
        if toMany {
            guard let inverse else { throw fail("\(path).inverse", "a to-many relationship needs an inverse") }
            if o["deleteRule"] != nil { throw fail("\(path).deleteRule", "delete rules belong on the to-one side") }
            return .toMany(name, to: destination, inverse: inverse)
        }
        var rule = DeleteRule.nullify
        if let r = o["deleteRule"] {
            let ruleName = try string(r, "\(path).deleteRule")
            guard let parsed = DeleteRule(rawValue: ruleName) else {
                throw fail("\(path).deleteRule", "unknown delete rule '\(SchemaValidator.shown(ruleName))' (nullify, cascade or deny)")
            }
            rule = parsed
        }
        let optional = try bool(o["optional"], "\(path).optional") ?? true
        return .toOne(name, to: destination, inverse: inverse, deleteRule: rule, optional: optional, renamedFrom: renamedFrom)
    }

    private func object(_ json: JSONValue, _ path: String) throws(ChronicleError) -> [String: JSONValue] {
        guard case .object(let o) = json else { throw fail(path, "expected an object, found \(json.kindName)") }
        return o
    }

    private func array(_ json: JSONValue, _ path: String) throws(ChronicleError) -> [JSONValue] {
        guard case .array(let a) = json else { throw fail(path, "expected an array, found \(json.kindName)") }
        return a
    }

    private func string(_ json: JSONValue?, _ path: String) throws(ChronicleError) -> String {
        guard let json else { throw fail(path, "is missing") }
        guard case .string(let s) = json else { throw fail(path, "expected a string, found \(json.kindName)") }
        return s
    }

    private func bool(_ json: JSONValue?, _ path: String) throws(ChronicleError) -> Bool? {
        guard let json else { return nil }
        guard case .bool(let b) = json else { throw fail(path, "expected true or false, found \(json.kindName)") }
        return b
    }

    private func checkKeys(_ o: [String: JSONValue], allowed: Set<String>, _ path: String) throws(ChronicleError) {
        if let unknown = o.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw ChronicleError(.invalidSchema, locate("\(path).\(unknown)") + "\(path).\(SchemaValidator.shown(unknown)): unknown key (allowed: \(allowed.sorted().joined(separator: ", ")))")
        }
    }

    /// An error naming `path` and its line and column (or, for a key that
    /// is missing, those of the object that lacks it).
    private func fail(_ path: String, _ message: String) -> ChronicleError {
        ChronicleError(.invalidSchema, locate(path) + "\(path): \(message)")
    }

    /// "line 3, column 17: " for the value at `path`, or the nearest
    /// enclosing one that is there.
    func locate(_ path: String) -> String {
        var located = path.hasPrefix("(root).") ? String(path.dropFirst("(root).".count)) : path
        while positions[located] == nil, let cut = located.lastIndex(where: { $0 == "." || $0 == "[" }) {
            located = String(located[..<cut])
        }
        return (positions[located] ?? positions["(root)"]).map { "\($0): " } ?? ""
    }
}
