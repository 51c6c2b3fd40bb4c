import Foundation

/// An app-defined value stored as bytes together with the name of the type
/// that produced them and their MIME type, so other platforms can still make
/// sense of them (seed 004's "transformable" values).
public struct TransformableValue: Hashable, Sendable, Codable {
    /// The name of the type that encoded the bytes, for example `"Color"`.
    public var typeName: String
    /// The MIME type of ``data``; `application/octet-stream` when unknown.
    public var mimeType: String
    /// The encoded value.
    public var data: Data

    /// Creates a transformable value from already-encoded bytes.
    public init(typeName: String, mimeType: String = "application/octet-stream", data: Data) {
        self.typeName = typeName
        self.mimeType = mimeType
        self.data = data
    }

    /// Encodes a `Codable` value as JSON, named after its type.
    public init<T: Encodable>(encoding value: T, typeName: String? = nil) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        self.init(
            typeName: typeName ?? String(describing: T.self),
            mimeType: "application/json",
            data: try encoder.encode(value))
    }

    /// Decodes the JSON bytes back into a `Codable` value.
    public func decoded<T: Decodable>(as type: T.Type) throws -> T {
        try JSONDecoder().decode(T.self, from: data)
    }
}
