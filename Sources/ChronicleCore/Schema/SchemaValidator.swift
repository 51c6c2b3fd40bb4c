/// Checks a schema's internal consistency, naming the first problem found.
struct SchemaValidator {
    let schema: Schema

    /// Names of stored columns Chronicle itself uses in every entity table.
    static let reservedFieldNames: Set<String> = ["id", "rowid", "oid", "_rowid_"]

    func validate() throws(ChronicleError) {
        guard !schema.entities.isEmpty else { throw fail("entities", "a schema needs at least one entity") }
        var seenEntities = Set<String>()
        for (i, entity) in schema.entities.enumerated() {
            let at = "entities[\(i)] (\(entity.name))"
            try checkName(entity.name, at)
            guard seenEntities.insert(entity.name.lowercased()).inserted else {
                throw fail(at, "entity name '\(entity.name)' is used twice (names are case-insensitive)")
            }
            try validate(entity, at: at)
        }
    }

    private func validate(_ entity: Entity, at: String) throws(ChronicleError) {
        var seenFields = Set<String>()
        for (j, a) in entity.attributes.enumerated() {
            let here = "\(at).attributes[\(j)] (\(a.name))"
            try checkFieldName(a.name, here, &seenFields)
            if let d = a.defaultValue {
                let field = Field(name: a.name, kind: .attribute(a.type), isOptional: a.isOptional, defaultValue: d)
                guard field.accepts(d) else {
                    throw fail(here, "default value \(d) is not a \(a.type.rawValue)")
                }
            }
        }
        for (j, r) in entity.relationships.enumerated() {
            let here = "\(at).relationships[\(j)] (\(r.name))"
            try checkFieldName(r.name, here, &seenFields)
            try validate(r, of: entity, at: here)
        }
        for (j, key) in entity.uniqueConstraints.enumerated() {
            let here = "\(at).unique[\(j)]"
            guard !key.isEmpty else { throw fail(here, "a unique constraint needs at least one field") }
            guard Set(key).count == key.count else { throw fail(here, "a unique constraint names a field twice") }
            for name in key where entity.field(named: name) == nil {
                throw fail(here, "'\(name)' is not an attribute or to-one relationship of \(entity.name)")
            }
        }
    }

    private func validate(_ r: Relationship, of entity: Entity, at here: String) throws(ChronicleError) {
        guard let destination = schema.entity(named: r.destination) else {
            throw fail(here, "destination '\(r.destination)' is not an entity")
        }
        if r.isToMany {
            guard let inverseName = r.inverse else {
                throw fail(here, "a to-many relationship needs an inverse to-one on \(r.destination)")
            }
            guard let inverse = destination.relationships.first(where: { $0.name == inverseName }),
                  !inverse.isToMany, inverse.destination == entity.name
            else {
                throw fail(here, "inverse '\(inverseName)' must be a to-one from \(r.destination) to \(entity.name)")
            }
        } else if let inverseName = r.inverse {
            guard let inverse = destination.relationships.first(where: { $0.name == inverseName }),
                  inverse.destination == entity.name
            else {
                throw fail(here, "inverse '\(inverseName)' is not a relationship from \(r.destination) to \(entity.name)")
            }
            if !inverse.isToMany && inverse.inverse != r.name {
                throw fail(here, "one-to-one inverses must name each other")
            }
        }
    }

    private func checkFieldName(_ name: String, _ at: String, _ seen: inout Set<String>) throws(ChronicleError) {
        try checkName(name, at)
        guard !Self.reservedFieldNames.contains(name.lowercased()) else {
            throw fail(at, "'\(name)' is reserved (Chronicle stores the record ID as column 'id')")
        }
        guard seen.insert(name.lowercased()).inserted else {
            throw fail(at, "field name '\(name)' is used twice (names are case-insensitive)")
        }
    }

    /// Names become SQL identifiers: a letter, then letters, digits or `_`.
    private func checkName(_ name: String, _ at: String) throws(ChronicleError) {
        let utf8 = Array(name.utf8)
        func isLetter(_ c: UInt8) -> Bool { (c >= 65 && c <= 90) || (c >= 97 && c <= 122) }
        guard let first = utf8.first, isLetter(first), utf8.count <= Schema.maxNameLength,
              utf8.allSatisfy({ isLetter($0) || ($0 >= 48 && $0 <= 57) || $0 == 95 })
        else {
            throw fail(at, "name '\(name)' must be a letter followed by at most \(Schema.maxNameLength - 1) letters, digits or underscores")
        }
    }

    private func fail(_ at: String, _ message: String) -> ChronicleError {
        ChronicleError(.invalidSchema, "\(at): \(message)")
    }
}
