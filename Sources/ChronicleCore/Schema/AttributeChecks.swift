#if canImport(Glibc)
import Glibc
#endif

/// What each field of an entity takes, by field index: checks a value
/// without copying the field (a hot path for bulk saves).
package struct AttributeChecks: Sendable {
    private let types: [AttributeType?]
    private let optional: [Bool]

    /// The checks of `entity`'s fields.
    package init(_ entity: Entity) {
        types = entity.fields.map { field -> AttributeType? in
            if case .attribute(let type) = field.kind { return type } else { return nil }
        }
        optional = entity.fields.map(\.isOptional)
    }

    /// Whether `value` can be saved in field `index` as a plain attribute:
    /// null where the field is optional, otherwise of the field's type,
    /// text without U+0000. Any value of a reference field fails: a save
    /// checks those against their targets.
    package func fits(_ value: Value, at index: Int) -> Bool {
        switch value {
        case .null: return optional[index] && types[index] != nil
        case .string(let text): return types[index] == .string && !text.holdsNUL
        default: return types[index] != nil && value.attributeType == types[index]
        }
    }
}

extension String {
    /// Whether the text holds the character U+0000, which readers of text
    /// from SQLite (GRDB's `String` decoding among them) stop at.
    package var holdsNUL: Bool {
        var text = self
        return text.withUTF8 { bytes in
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return false }
            return memchr(base, 0, bytes.count) != nil
        }
    }
}
