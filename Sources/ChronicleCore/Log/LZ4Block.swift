import CLZ4

/// The LZ4 block API, the fastest LZ4 path: the header already carries both
/// lengths and a checksum, so the frame format's own would be redundant.
enum LZ4Block {
    /// The most bytes compressing `count` bytes can produce.
    static func bound(_ count: Int) -> Int {
        Int(LZ4_compressBound(Int32(clamping: count)))
    }

    /// The largest body compressed with LZ4's high-compression parser
    /// against a dictionary; larger ones take the fast one.
    static let highCompressionLimit = 4096

    /// Compresses `source` into `destination` (at least ``bound(_:)`` bytes)
    /// and returns the compressed size, or nil when it would not be smaller.
    static func compress(
        _ source: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer,
        dictionary: CompressionDictionary?, highCompression: Bool = false
    ) -> Int? {
        guard source.count > 0, source.count <= Int(LZ4_MAX_INPUT_SIZE) else { return nil }
        let s = source.baseAddress!.assumingMemoryBound(to: CChar.self)
        let d = destination.baseAddress!.assumingMemoryBound(to: CChar.self)
        let capacity = Int32(clamping: destination.count)
        let written: Int32
        if let dictionary, highCompression, source.count <= highCompressionLimit {
            // Small bodies, where every byte shows: LZ4's high-compression
            // parser finds longer matches in the dictionary (a one-record
            // body comes out about 5% smaller), and costs tens of
            // microseconds at this size. Decompression is the same.
            guard let stream = LZ4_createStreamHC() else { return nil }
            defer { LZ4_freeStreamHC(stream) }
            LZ4_resetStreamHC_fast(stream, 9)
            written = dictionary.bytes.withUnsafeBytes { dict in
                LZ4_loadDictHC(stream, dict.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(dict.count))
                return LZ4_compress_HC_continue(stream, s, d, Int32(source.count), capacity)
            }
        } else if let dictionary {
            guard let stream = LZ4_createStream() else { return nil }
            defer { LZ4_freeStream(stream) }
            written = dictionary.bytes.withUnsafeBytes { dict in
                LZ4_loadDict(stream, dict.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(dict.count))
                return LZ4_compress_fast_continue(stream, s, d, Int32(source.count), capacity, 1)
            }
        } else {
            written = LZ4_compress_default(s, d, Int32(source.count), capacity)
        }
        guard written > 0, Int(written) < source.count else { return nil }
        return Int(written)
    }

    /// Decompresses exactly `length` bytes, or throws ``ChronicleError/Code/decompressionFailed``.
    static func decompress(
        _ source: UnsafeRawBufferPointer, length: Int, dictionary: CompressionDictionary?
    ) throws(ChronicleError) -> [UInt8] {
        guard length > 0 else {
            throw ChronicleError(.decompressionFailed, "a compressed body cannot be empty")
        }
        let result = [UInt8](unsafeUninitializedCapacity: length) { buffer, initialized in
            let s = source.baseAddress?.assumingMemoryBound(to: CChar.self)
            let d = UnsafeMutableRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
            let n: Int32
            if let dictionary {
                n = dictionary.bytes.withUnsafeBytes { dict in
                    LZ4_decompress_safe_usingDict(s, d, Int32(source.count), Int32(length),
                                                  dict.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(dict.count))
                }
            } else {
                n = LZ4_decompress_safe(s, d, Int32(source.count), Int32(length))
            }
            initialized = n == Int32(length) ? length : 0
        }
        guard result.count == length else {
            throw ChronicleError(.decompressionFailed, "LZ4 body does not decompress to the declared \(length) bytes")
        }
        return result
    }
}
