/// A kind of record, stored as one table in every snapshot.
public struct Entity: Hashable, Sendable {
    /// The entity's name, also its table name.
    public let name: String
    /// Its attributes, in declared order.
    public let attributes: [Attribute]
    /// Its relationships, in declared order.
    public let relationships: [Relationship]
    /// Groups of fields whose values together must be unique (natural keys).
    /// Two devices inserting the same key are de-duplicated on import.
    public let uniqueConstraints: [[String]]
    /// Groups of fields to index for queries, each an SQLite index on the
    /// entity's rows (in the given order). Unique constraints and to-one
    /// relationships are indexed already.
    public let indexes: [[String]]
    /// The names this entity had in earlier versions of the schema, when
    /// it was renamed (see `docs/schema-evolution.md`).
    public let renamedFrom: [EarlierName]

    /// The stored fields: attributes, then to-one relationships, in declared order.
    public let fields: [Field]

    /// Declares an entity.
    ///
    /// - Parameters:
    ///   - unique: groups of fields whose values together must be unique.
    ///   - indexes: groups of fields to index for queries.
    ///   - renamedFrom: its names in earlier versions of the schema, when
    ///     it was renamed.
    public init(
        _ name: String,
        attributes: [Attribute],
        relationships: [Relationship] = [],
        unique uniqueConstraints: [[String]] = [],
        indexes: [[String]] = [],
        renamedFrom: [EarlierName] = []
    ) {
        self.name = name
        self.attributes = attributes
        self.relationships = relationships
        self.uniqueConstraints = uniqueConstraints
        self.indexes = indexes
        self.renamedFrom = renamedFrom
        var fields = attributes.map {
            Field(name: $0.name, kind: .attribute($0.type), isOptional: $0.isOptional, defaultValue: $0.defaultValue,
                  renamedFrom: $0.renamedFrom)
        }
        for r in relationships where !r.isToMany {
            fields.append(Field(name: r.name, kind: .reference(destination: r.destination, deleteRule: r.deleteRule),
                                isOptional: r.isOptional, defaultValue: nil, renamedFrom: r.renamedFrom))
        }
        self.fields = fields
    }

    /// The index of the field named `name` in ``fields``.
    package func fieldIndex(named name: String) -> Int? {
        fields.firstIndex { $0.name == name }
    }

    /// The field named `name`.
    public func field(named name: String) -> Field? {
        fieldIndex(named: name).map { fields[$0] }
    }

    public static func == (lhs: Entity, rhs: Entity) -> Bool {
        lhs.name == rhs.name && lhs.attributes == rhs.attributes && lhs.relationships == rhs.relationships
            && lhs.uniqueConstraints == rhs.uniqueConstraints && lhs.indexes == rhs.indexes
            && lhs.renamedFrom == rhs.renamedFrom
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(attributes)
        hasher.combine(relationships)
        hasher.combine(uniqueConstraints)
        hasher.combine(indexes)
        hasher.combine(renamedFrom)
    }
}

