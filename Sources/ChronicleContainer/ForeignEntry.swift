import ChronicleCore

/// Something in a container that Chronicle did not put there and will not
/// use: a file whose name is outside the grammar (a sync service's
/// conflicted copy, `.DS_Store`), or, at any name, a symbolic link, FIFO,
/// socket or device, or a folder where a blob or marker belongs.
///
/// Chronicle never follows, reads or writes through such an entry: a read
/// of its name fails with ``ChronicleError/Code/foreignEntry``.
/// ``Container/foreignEntries(prefix:)`` lists them; `chronicle verify`
/// reports each as a problem for a person to remove.
public struct ForeignEntry: Sendable, Hashable, CustomStringConvertible {
    /// Why an entry is not Chronicle's.
    public enum Reason: Sendable, Hashable {
        /// Its name is outside the container name grammar.
        case nameOutsideGrammar
        /// It is not a regular file or folder (a symbolic link, FIFO, socket, device).
        case notARegularFile(EntryKind)
        /// It is a folder at a name where the layout keeps a file (a log,
        /// a baseline part or a marker).
        case folderAtAFileName
        /// It is at the container's root, beside `blobs/`, `markers/` and
        /// `tmp/` (a stray file, or a device folder pointed at the container).
        case outsideTheLayout
    }

    /// Where it is, from the container's root: `blobs/…`, `markers/…`, or a
    /// name at the root.
    public var path: String
    /// Why it is not Chronicle's.
    public var reason: Reason

    /// Creates an entry.
    public init(path: String, reason: Reason) {
        self.path = path
        self.reason = reason
    }

    /// Why it is not Chronicle's, in words.
    public var explanation: String {
        switch reason {
        case .nameOutsideGrammar: return "a name outside the container grammar (not Chronicle's)"
        case .notARegularFile(let kind): return "\(kind.phrase), not a regular file (never followed or read)"
        case .folderAtAFileName: return "a folder where Chronicle keeps a file"
        case .outsideTheLayout: return "beside blobs/, markers/ and tmp/ at the container's root, where Chronicle keeps nothing (a device folder must not be the container)"
        }
    }

    public var description: String { "\(path): \(explanation)" }

    /// The entry as an error, for reports.
    public var error: ChronicleError { ChronicleError(.foreignEntry, description) }
}
