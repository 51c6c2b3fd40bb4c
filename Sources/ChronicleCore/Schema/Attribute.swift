/// A typed attribute of an entity.
public struct Attribute: Hashable, Sendable {
    /// The attribute's name, also its column name in the snapshot.
    public var name: String
    /// The value type.
    public var type: AttributeType
    /// Whether the attribute may be null.
    public var isOptional: Bool
    /// The value an insert gets when it gives none.
    public var defaultValue: Value?
    /// The names this attribute had in earlier versions of the schema, for
    /// a rename (see `docs/schema-evolution.md`): an earlier snapshot's
    /// column and an earlier version's logs that name one of them are
    /// read as this attribute.
    public var renamedFrom: [EarlierName]

    /// Declares an attribute.
    ///
    /// - Parameter renamedFrom: its names in earlier versions of the
    ///   schema, when it was renamed.
    public init(_ name: String, _ type: AttributeType, optional: Bool = false, default defaultValue: Value? = nil,
                renamedFrom: [EarlierName] = []) {
        self.name = name
        self.type = type
        self.isOptional = optional
        self.defaultValue = defaultValue
        self.renamedFrom = renamedFrom
    }
}

/// A relationship between two entities.
///
/// Only to-one relationships are stored (as a column holding the destination's
/// record ID); a to-many relationship is the inverse of a to-one on its
/// destination and is answered by a query.
public struct Relationship: Hashable, Sendable {
    /// The relationship's name; for a to-one, also its column name.
    public var name: String
    /// The destination entity.
    public var destination: String
    /// Whether this is the to-many side.
    public var isToMany: Bool
    /// The name of the relationship on the destination pointing back, if any.
    /// Required for a to-many.
    public var inverse: String?
    /// For a to-one: what happens to this record when its destination is deleted.
    public var deleteRule: DeleteRule
    /// Whether a to-one may be null.
    public var isOptional: Bool
    /// For a to-one: its names in earlier versions of the schema, when it
    /// was renamed (as ``Attribute/renamedFrom``).
    public var renamedFrom: [EarlierName] = []

    /// Declares a to-one relationship.
    ///
    /// - Parameter renamedFrom: its names in earlier versions of the
    ///   schema, when it was renamed.
    public static func toOne(
        _ name: String, to destination: String, inverse: String? = nil,
        deleteRule: DeleteRule = .nullify, optional: Bool = true, renamedFrom: [EarlierName] = []
    ) -> Relationship {
        Relationship(name: name, destination: destination, isToMany: false, inverse: inverse,
                     deleteRule: deleteRule, isOptional: optional, renamedFrom: renamedFrom)
    }

    /// Declares a to-many relationship, the inverse of the to-one `inverse` on `destination`.
    public static func toMany(_ name: String, to destination: String, inverse: String) -> Relationship {
        Relationship(name: name, destination: destination, isToMany: true, inverse: inverse,
                     deleteRule: .nullify, isOptional: true)
    }
}

/// A name an entity or field had in earlier versions of the schema, for a
/// rename (see `docs/schema-evolution.md`).
///
/// Written as a string, it is the name in the version just before the one
/// that declares it; a later version that keeps the declaration as it was
/// (a schema file copied forward) keeps that meaning, so the rename is not
/// made again. Give the version, the last one that used the name, to keep
/// a rename unambiguous for devices that skip versions:
///
/// ```swift
/// Attribute("text", .string, renamedFrom: ["body"])                    // in the previous version
/// Attribute("text", .string, renamedFrom: [EarlierName("body", lastVersion: 1)])
/// ```
public struct EarlierName: Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// The earlier name.
    public var name: String
    /// The last schema version that used it; nil for the version just
    /// before the one that declares it.
    public var lastVersion: Int?

    /// An earlier name, used up to `lastVersion` (nil: the previous version).
    public init(_ name: String, lastVersion: Int? = nil) {
        self.name = name
        self.lastVersion = lastVersion
    }

    public init(stringLiteral name: String) {
        self.init(name)
    }

    public var description: String { lastVersion.map { "\(name) (to version \($0))" } ?? name }
}
