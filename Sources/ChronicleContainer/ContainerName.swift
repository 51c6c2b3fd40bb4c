import ChronicleCore

/// A blob or marker name inside a container: 1 to 8 components separated by
/// `/`, each a lowercase letter or digit followed by up to 99 lowercase
/// letters, digits, `.`, `_` or `-`.
///
/// Every name is checked on the way in, whether it comes from the app, a
/// listing or a hostile file in a synced folder: no name can point outside
/// the container (`..`, absolute paths, backslashes and control characters
/// are all outside the grammar).
public struct ContainerName: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The validated name.
    public let rawValue: String

    /// The longest name.
    public static let maxLength = 512

    /// Validates a name.
    ///
    /// - Throws: ``ChronicleError/Code/invalidName`` saying what is wrong.
    public init(_ rawValue: String) throws(ChronicleError) {
        guard let problem = Self.problem(in: rawValue) else {
            self.rawValue = rawValue
            return
        }
        throw ChronicleError(.invalidName, "container name \(String(reflecting: String(rawValue.prefix(80)))): \(problem)")
    }

    /// Whether `rawValue` follows the grammar.
    public static func isValid(_ rawValue: String) -> Bool { problem(in: rawValue) == nil }

    private static func problem(in name: String) -> String? {
        let utf8 = Array(name.utf8)
        guard !utf8.isEmpty else { return "is empty" }
        guard utf8.count <= maxLength else { return "is longer than \(maxLength) bytes" }
        let components = utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        guard components.count <= 8 else { return "has more than 8 components" }
        for c in components {
            guard let first = c.first else { return "has an empty component" }
            guard c.count <= 100 else { return "has a component longer than 100 bytes" }
            guard isLowerAlnum(first) else { return "a component must start with a lowercase letter or digit" }
            guard c.allSatisfy({ isLowerAlnum($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") })
            else { return "may hold only lowercase letters, digits, '.', '_' and '-'" }
        }
        return nil
    }

    private static func isLowerAlnum(_ c: UInt8) -> Bool {
        (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9"))
    }

    /// Joins validated components.
    public func appending(_ component: String) throws(ChronicleError) -> ContainerName {
        try ContainerName(rawValue + "/" + component)
    }

    /// The last component.
    public var lastComponent: Substring {
        rawValue.split(separator: "/").last ?? Substring(rawValue)
    }

    public var description: String { rawValue }
    public static func < (lhs: ContainerName, rhs: ContainerName) -> Bool { lhs.rawValue < rhs.rawValue }
}
