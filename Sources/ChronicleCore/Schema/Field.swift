/// A stored field of an entity: an attribute, or the column of a to-one
/// relationship. Operations in logs name fields.
public struct Field: Hashable, Sendable {
    /// What a field holds.
    public enum Kind: Hashable, Sendable {
        /// An attribute of this type.
        case attribute(AttributeType)
        /// A to-one relationship to this entity, with its delete rule.
        case reference(destination: String, deleteRule: DeleteRule)
    }

    /// The field's name and column name.
    public let name: String
    /// What it holds.
    public let kind: Kind
    /// Whether it may be null.
    public let isOptional: Bool
    /// The value an insert gets when it gives none.
    public let defaultValue: Value?
    /// Its names in earlier versions of the schema (see
    /// ``Attribute/renamedFrom``).
    public let renamedFrom: [EarlierName]

    /// Creates a field.
    public init(name: String, kind: Kind, isOptional: Bool, defaultValue: Value?, renamedFrom: [EarlierName] = []) {
        self.name = name
        self.kind = kind
        self.isOptional = isOptional
        self.defaultValue = defaultValue
        self.renamedFrom = renamedFrom
    }

    /// Whether `value` has the right type for this field (null only when optional).
    package func accepts(_ value: Value) -> Bool {
        switch (kind, value) {
        case (_, .null): return isOptional
        case (.reference, .reference): return true
        case let (.attribute(type), v): return v.attributeType == type
        default: return false
        }
    }
}

extension Field.Kind: CustomStringConvertible {
    /// The kind as a schema names it: `string attribute`, `to-one
    /// relationship to Folder`.
    public var description: String {
        switch self {
        case .attribute(let type): return "\(type.rawValue) attribute"
        case .reference(let destination, _): return "to-one relationship to \(destination)"
        }
    }

    /// The description after its article: `a string attribute`, `an int64 attribute`.
    package var withArticle: String {
        (self == .attribute(.int64) ? "an " : "a ") + description
    }
}
