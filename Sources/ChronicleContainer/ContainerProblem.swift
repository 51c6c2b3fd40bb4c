import ChronicleCore

/// Something wrong in a container, found by ``ContainerInventory`` or
/// ``ContainerVerification``: a damaged or misnamed blob, a foreign entry,
/// two overlapping logs of one device.
public struct ContainerProblem: Sendable, CustomStringConvertible {
    /// The blob name, or the entry's path from the container's root
    /// (`blobs/…`, `markers/…`) for a foreign entry.
    public var name: String
    /// What is wrong: ``ChronicleError/Code/foreignEntry`` for an entry that
    /// is not Chronicle's, ``ChronicleError/Code/blobConflict`` for
    /// overlapping logs, the decoder's code for a damaged log.
    public var error: ChronicleError

    /// Creates a problem.
    public init(name: String, error: ChronicleError) {
        self.name = name
        self.error = error
    }

    public var description: String { "\(name): \(error.code): \(error.message)" }

    /// The problem of a foreign entry, named by its path.
    init(_ foreign: ForeignEntry) {
        self.init(name: foreign.path, error: ChronicleError(.foreignEntry, foreign.explanation))
    }

    /// The problem of two overlapping logs, named by the later one.
    init(_ overlap: ContainerLayout.LogOverlap) {
        self.init(name: overlap.later.rawValue, error: ChronicleError(
            .blobConflict, "overlaps the log \(overlap.earlier) of the same device: two writers used one device ID, and readers would mix their saves"))
    }
}
