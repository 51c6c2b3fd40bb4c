/// Checks a schema's internal consistency, naming the first problem found.
struct SchemaValidator {
    let schema: Schema
    /// "line 3, column 17: " for a path such as `entities[0].attributes[1]`,
    /// when the schema comes from a file; "" otherwise.
    var locate: (String) -> String = { _ in "" }

    /// Names of stored columns Chronicle itself uses in every entity table.
    static let reservedFieldNames: Set<String> = ["id", "rowid", "oid", "_rowid_"]

    func validate() throws(ChronicleError) {
        guard !schema.entities.isEmpty else { throw fail("entities", "entities", "a schema needs at least one entity") }
        var seenEntities = Set<String>()
        var earlierEntityNames = Set<String>()
        for (i, entity) in schema.entities.enumerated() {
            let at = "entities[\(i)] (\(Self.shown(entity.name)))"
            for (k, old) in entity.renamedFrom.enumerated() {
                try checkEarlierName(old, current: entity.name, at, "entities[\(i)].renamedFrom[\(k)]", &earlierEntityNames)
            }
        }
        for (i, entity) in schema.entities.enumerated() {
            let path = "entities[\(i)]"
            let at = "\(path) (\(Self.shown(entity.name)))"
            try checkName(entity.name, at, path + ".name")
            // An entity's name names its SQLite table, and SQLite keeps names
            // that start with sqlite_ for itself.
            guard !entity.name.lowercased().hasPrefix("sqlite_") else {
                throw fail(at, path + ".name", "entity name '\(entity.name)' starts with sqlite_, which SQLite keeps for its own tables")
            }
            guard seenEntities.insert(entity.name.lowercased()).inserted else {
                throw fail(at, path + ".name", "entity name '\(entity.name)' is used twice (names are case-insensitive)")
            }
            try validate(entity, at: at, path)
        }
    }

    private func validate(_ entity: Entity, at: String, _ path: String) throws(ChronicleError) {
        var seenFields = Set<String>()
        var earlierFieldNames = Set<String>()
        for (j, a) in entity.attributes.enumerated() {
            let here = "\(at).attributes[\(j)] (\(Self.shown(a.name)))", herePath = "\(path).attributes[\(j)]"
            try checkFieldName(a.name, here, herePath, &seenFields)
            for (k, old) in a.renamedFrom.enumerated() {
                try checkEarlierName(old, current: a.name, here, "\(herePath).renamedFrom[\(k)]", &earlierFieldNames)
            }
            if let d = a.defaultValue {
                let field = Field(name: a.name, kind: .attribute(a.type), isOptional: a.isOptional, defaultValue: d)
                guard field.accepts(d) else {
                    throw fail(here, herePath + ".default", "default value \(d) is not a \(a.type.rawValue)")
                }
                // A save refuses such text (readers of SQLite's text stop at
                // the NUL); a default would write it past that check.
                if case .string(let text) = d, text.utf8.contains(0) {
                    throw fail(here, herePath + ".default", "default value holds the character U+0000, which a save refuses (text read back from SQLite stops at it); keep such bytes in a data attribute")
                }
            }
        }
        for (j, r) in entity.relationships.enumerated() {
            let here = "\(at).relationships[\(j)] (\(Self.shown(r.name)))", herePath = "\(path).relationships[\(j)]"
            try checkFieldName(r.name, here, herePath, &seenFields)
            try validate(r, of: entity, at: here, herePath)
            if r.isToMany, !r.renamedFrom.isEmpty {
                throw fail(here, herePath + ".renamedFrom", "a to-many relationship is not stored, so it has nothing to rename: give earlier names on its inverse to-one")
            }
            for (k, old) in r.renamedFrom.enumerated() {
                try checkEarlierName(old, current: r.name, here, "\(herePath).renamedFrom[\(k)]", &earlierFieldNames)
            }
        }
        for (j, index) in entity.indexes.enumerated() {
            let here = "\(at).indexes[\(j)]", herePath = "\(path).indexes[\(j)]"
            guard !index.isEmpty else { throw fail(here, herePath, "an index needs at least one field") }
            guard Set(index).count == index.count else { throw fail(here, herePath, "an index names a field twice") }
            for (k, name) in index.enumerated() where entity.field(named: name) == nil {
                throw fail(here, "\(herePath)[\(k)]", "'\(Self.shown(name))' is not an attribute or to-one relationship of \(Self.shown(entity.name))")
            }
        }
        for (j, key) in entity.uniqueConstraints.enumerated() {
            let here = "\(at).unique[\(j)]", herePath = "\(path).unique[\(j)]"
            guard !key.isEmpty else { throw fail(here, herePath, "a unique constraint needs at least one field") }
            guard Set(key).count == key.count else { throw fail(here, herePath, "a unique constraint names a field twice") }
            for (k, name) in key.enumerated() where entity.field(named: name) == nil {
                throw fail(here, "\(herePath)[\(k)]", "'\(Self.shown(name))' is not an attribute or to-one relationship of \(Self.shown(entity.name))")
            }
        }
    }

    private func validate(_ r: Relationship, of entity: Entity, at here: String, _ path: String) throws(ChronicleError) {
        guard let destination = schema.entity(named: r.destination) else {
            throw fail(here, path + ".destination", "destination '\(Self.shown(r.destination))' is not an entity")
        }
        if r.isToMany {
            guard let inverseName = r.inverse else {
                throw fail(here, path, "a to-many relationship needs an inverse to-one on \(r.destination)")
            }
            guard let inverse = destination.relationships.first(where: { $0.name == inverseName }),
                  !inverse.isToMany, inverse.destination == entity.name
            else {
                let inverse = destination.relationships.first(where: { $0.name == inverseName })
                let why = if let inverse, !inverse.isToMany, schema.entity(named: inverse.destination) == nil {
                    ": \(r.destination).\(Self.shown(inverseName))'s destination '\(Self.shown(inverse.destination))' is not an entity"
                } else if let inverse, !inverse.isToMany {
                    ": \(r.destination).\(Self.shown(inverseName)) points at \(Self.shown(inverse.destination))"
                } else if inverse != nil {
                    ": \(r.destination).\(Self.shown(inverseName)) is a to-many"
                } else {
                    ": \(r.destination) has no relationship named '\(Self.shown(inverseName))'"
                }
                throw fail(here, path + ".inverse", "inverse '\(Self.shown(inverseName))' must be a to-one from \(r.destination) to \(entity.name)\(why)")
            }
        } else if let inverseName = r.inverse {
            guard let inverse = destination.relationships.first(where: { $0.name == inverseName }),
                  inverse.destination == entity.name
            else {
                throw fail(here, path + ".inverse", "inverse '\(Self.shown(inverseName))' is not a relationship from \(r.destination) to \(entity.name)")
            }
            if !inverse.isToMany && inverse.inverse != r.name {
                throw fail(here, path + ".inverse", "one-to-one inverses must name each other")
            }
        }
    }

    private func checkFieldName(_ name: String, _ at: String, _ path: String, _ seen: inout Set<String>) throws(ChronicleError) {
        try checkName(name, at, path + ".name")
        guard !Self.reservedFieldNames.contains(name.lowercased()) else {
            throw fail(at, path + ".name", "'\(name)' is reserved (Chronicle stores the record ID as column 'id')")
        }
        guard seen.insert(name.lowercased()).inserted else {
            throw fail(at, path + ".name", "field name '\(name)' is used twice (names are case-insensitive)")
        }
    }

    /// An earlier name of an entity or field: a valid name, of an earlier
    /// version, not its current one in the previous version, and claimed
    /// by one entity (or one field of an entity) only for a given version,
    /// so an earlier version's name reads as exactly one thing.
    private func checkEarlierName(_ earlier: EarlierName, current: String, _ at: String, _ path: String,
                                  _ seen: inout Set<String>) throws(ChronicleError) {
        try checkName(earlier.name, at, earlier.lastVersion == nil ? path : path + ".name")
        if let version = earlier.lastVersion, version >= schema.version {
            throw fail(at, path + ".version", "version \(version) is not earlier than this schema's version \(schema.version)")
        }
        guard earlier.name.lowercased() != current.lowercased() || earlier.lastVersion != nil else {
            throw fail(at, path, "'\(earlier.name)' is its current name, not an earlier one")
        }
        let key = "\(earlier.name.lowercased())@\(earlier.lastVersion.map(String.init) ?? "previous")"
        guard seen.insert(key).inserted else {
            throw fail(at, path, "earlier name '\(earlier.name)' is claimed twice for \(earlier.lastVersion.map { "version \($0)" } ?? "the previous version"): an earlier version's '\(earlier.name)' must become one thing")
        }
    }

    /// Names become SQL identifiers: a letter, then letters, digits or `_`.
    private func checkName(_ name: String, _ at: String, _ path: String) throws(ChronicleError) {
        let utf8 = Array(name.utf8)
        func isLetter(_ c: UInt8) -> Bool { (c >= 65 && c <= 90) || (c >= 97 && c <= 122) }
        guard let first = utf8.first, isLetter(first), utf8.count <= Schema.maxNameLength,
              utf8.allSatisfy({ isLetter($0) || ($0 >= 48 && $0 <= 57) || $0 == 95 })
        else {
            throw fail(at, path, "name '\(Self.shown(name))' must be an ASCII letter followed by at most \(Schema.maxNameLength - 1) ASCII letters, digits or underscores")
        }
    }

    /// `at`, the entity and field at fault, for the message; `path`, the
    /// value in the schema's JSON form, for the position.
    private func fail(_ at: String, _ path: String, _ message: String) -> ChronicleError {
        ChronicleError(.invalidSchema, "\(locate(path))\(at): \(message)")
    }

    /// A name as messages show it: as it is when it is a valid name;
    /// otherwise escaped like a JSON string without its quotes (so quotes
    /// and line breaks in it cannot pass for the message's own) and cut
    /// after 40 characters.
    static func shown(_ name: String) -> String {
        var out = ""
        for scalar in name.prefix(40).unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F || scalar.properties.generalCategory == .lineSeparator
                || scalar.properties.generalCategory == .paragraphSeparator:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + (name.count > 40 ? "…" : "")
    }
}
