import CXXHash

/// XXH64, the 64-bit xxHash, used for log header and body checksums.
///
/// Computed by xxHash, the reference implementation, from the system's
/// `libxxhash-dev` (the `CXXHash` module compiles its header in). The
/// checksums of every log ever written stay the same: XXH64 is a fixed
/// function, and the tests hold it to the reference vectors, to the hashes
/// of every path through it, and to the fixture logs.
package enum XXH64 {
    /// The hash of `bytes` with `seed`.
    package static func hash(_ bytes: UnsafeRawBufferPointer, seed: UInt64 = 0) -> UInt64 {
        XXH_INLINE_XXH64(bytes.baseAddress, bytes.count, seed)
    }

    /// The hash of a byte array.
    package static func hash(_ bytes: [UInt8], seed: UInt64 = 0) -> UInt64 {
        bytes.withUnsafeBytes { hash($0, seed: seed) }
    }
}
