import CLZ4

/// The LZ4 block API, the fastest LZ4 path: the header already carries both
/// lengths and a checksum, so the frame format's own would be redundant.
enum LZ4Block {
    /// Compresses `source`; returns nil when the result would not be smaller.
    static func compress(_ source: [UInt8], dictionary: CompressionDictionary?) -> [UInt8]? {
        guard !source.isEmpty, source.count <= Int(LZ4_MAX_INPUT_SIZE) else { return nil }
        let bound = Int(LZ4_compressBound(Int32(source.count)))
        var out = [UInt8](repeating: 0, count: bound)
        let written: Int32 = source.withUnsafeBytes { src in
            out.withUnsafeMutableBytes { dst in
                let s = src.baseAddress!.assumingMemoryBound(to: CChar.self)
                let d = dst.baseAddress!.assumingMemoryBound(to: CChar.self)
                guard let dictionary else {
                    return LZ4_compress_default(s, d, Int32(source.count), Int32(bound))
                }
                guard let stream = LZ4_createStream() else { return 0 }
                defer { LZ4_freeStream(stream) }
                return dictionary.bytes.withUnsafeBytes { dict in
                    LZ4_loadDict(stream, dict.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(dict.count))
                    return LZ4_compress_fast_continue(stream, s, d, Int32(source.count), Int32(bound), 1)
                }
            }
        }
        guard written > 0, Int(written) < source.count else { return nil }
        out.removeLast(bound - Int(written))
        return out
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
