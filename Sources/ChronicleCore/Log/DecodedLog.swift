/// A verified, decoded log.
package enum DecodedLog: Sendable, Hashable {
    /// A log of transactions, in sequence order.
    case transactions(LogHeader, [Transaction])
    /// A baseline.
    case baseline(LogHeader, Baseline)

    /// The log's header.
    package var header: LogHeader {
        switch self {
        case .transactions(let h, _), .baseline(let h, _): return h
        }
    }
}

/// Bounds on what a decoder will accept, so hostile bytes cannot make it
/// allocate without limit.
public struct DecodingLimits: Sendable, Hashable {
    /// The largest body, compressed or not, accepted. Checked against the
    /// declared length before anything is allocated.
    public var maxBodyBytes: Int

    /// 64 MiB.
    public static let defaultMaxBodyBytes = 64 * 1024 * 1024

    /// The largest whole log (header and stored body) a decoder with these
    /// limits can accept: the cap a reader passes to a container's
    /// `get(_:maxBytes:)`, so a larger blob is refused before it is read.
    public var maxLogBytes: Int { LogHeader.size + maxBodyBytes }

    /// Creates limits.
    public init(maxBodyBytes: Int = DecodingLimits.defaultMaxBodyBytes) {
        self.maxBodyBytes = maxBodyBytes
    }
}
