/// The type of an entity attribute.
public enum AttributeType: String, Codable, Sendable, CaseIterable {
    /// UTF-8 text.
    case string
    /// A 64-bit signed integer.
    case int64
    /// An IEEE 754 double, kept bit for bit.
    case double
    /// A Boolean.
    case bool
    /// A point in time, exact to the microsecond.
    case date
    /// Bytes of any size.
    case data
    /// An exact decimal (38 digits, exponent -128…127).
    case decimal
    /// A UUID.
    case uuid
    /// An app-defined Codable value with its type name and MIME type.
    case transformable
}

/// What happens to the records that point at a record being deleted.
public enum DeleteRule: String, Codable, Sendable, CaseIterable {
    /// Their reference is set to null.
    case nullify
    /// They are deleted too.
    case cascade
    /// The delete is refused while any record points at it (locally); on
    /// import, a concurrent delete wins and the references are nullified, the
    /// same way on every device.
    case deny
}
