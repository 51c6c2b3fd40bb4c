extension Array where Element == UInt8 {
    /// `withUnsafeBytes` with a typed-throwing body (the standard one rethrows
    /// `any Error`).
    @inline(__always)
    package func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws(ChronicleError) -> R) throws(ChronicleError) -> R {
        let result: Result<R, ChronicleError> = withUnsafeBytes { (raw) -> Result<R, ChronicleError> in
            do throws(ChronicleError) { return .success(try body(raw)) } catch { return .failure(error) }
        }
        return try result.get()
    }
}
