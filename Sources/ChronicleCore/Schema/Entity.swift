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

    /// The stored fields: attributes, then to-one relationships, in declared order.
    public let fields: [Field]

    /// Declares an entity.
    public init(
        _ name: String,
        attributes: [Attribute],
        relationships: [Relationship] = [],
        unique uniqueConstraints: [[String]] = []
    ) {
        self.name = name
        self.attributes = attributes
        self.relationships = relationships
        self.uniqueConstraints = uniqueConstraints
        var fields = attributes.map {
            Field(name: $0.name, kind: .attribute($0.type), isOptional: $0.isOptional, defaultValue: $0.defaultValue)
        }
        for r in relationships where !r.isToMany {
            fields.append(Field(name: r.name, kind: .reference(destination: r.destination, deleteRule: r.deleteRule),
                                isOptional: r.isOptional, defaultValue: nil))
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
            && lhs.uniqueConstraints == rhs.uniqueConstraints
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(attributes)
        hasher.combine(relationships)
        hasher.combine(uniqueConstraints)
    }
}

