/// A per-store LZ4 dictionary: up to 64 KiB of typical body bytes that small
/// logs compress against. One-record bodies barely compress alone (ratio about
/// 1.0); against a 16 KiB dictionary they reach about 1.7.
///
/// A log names its dictionary by ``id`` in the header; a reader must have the
/// same dictionary to decode it.
package struct CompressionDictionary: Sendable, Hashable {
    /// The dictionary's ID, never 0.
    package let id: UInt32
    /// The dictionary bytes (LZ4 uses at most the last 64 KiB).
    package let bytes: [UInt8]

    /// The largest useful dictionary.
    package static let maxSize = 64 * 1024

    /// Creates a dictionary.
    ///
    /// - Throws: ``ChronicleError/Code/invalidValue`` for ID 0, an empty
    ///   dictionary or one over 64 KiB.
    package init(id: UInt32, bytes: [UInt8]) throws(ChronicleError) {
        guard id != 0 else { throw ChronicleError(.invalidValue, "dictionary ID 0 means 'no dictionary'") }
        guard !bytes.isEmpty, bytes.count <= Self.maxSize else {
            throw ChronicleError(.invalidValue, "a dictionary holds 1 to \(Self.maxSize) bytes, not \(bytes.count)")
        }
        self.id = id
        self.bytes = bytes
    }

    /// Builds a dictionary from sample bodies: the most recent samples first,
    /// trimmed to `size` bytes. (LZ4 has no trainer; recent, typical content is
    /// what it matches best.)
    package static func fromSamples(_ samples: [[UInt8]], id: UInt32, size: Int = 16 * 1024) throws(ChronicleError) -> CompressionDictionary {
        var bytes: [UInt8] = []
        for sample in samples.reversed() where bytes.count < size {
            bytes.append(contentsOf: sample.prefix(size - bytes.count))
        }
        return try CompressionDictionary(id: id, bytes: bytes)
    }
}
