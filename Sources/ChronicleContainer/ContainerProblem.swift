import ChronicleCore

/// Something wrong in a container, found by ``ContainerInventory`` or
/// ``ContainerVerification``: a damaged or misnamed blob, a foreign entry,
/// two overlapping logs of one device.
package struct ContainerProblem: Sendable, CustomStringConvertible {
    /// The blob name, or the entry's path from the container's root
    /// (`blobs/…`, `markers/…`) for a foreign entry.
    package var name: String
    /// What is wrong: ``ChronicleError/Code/foreignEntry`` for an entry that
    /// is not Chronicle's, ``ChronicleError/Code/blobConflict`` for
    /// overlapping logs, ``ChronicleError/Code/notFound`` for a device's
    /// missing sequences, the decoder's code for a damaged log.
    package var error: ChronicleError

    /// Creates a problem.
    package init(name: String, error: ChronicleError) {
        self.name = name
        self.error = error
    }

    package var description: String { "\(name): \(error.code): \(error.message)" }

    /// The problem of a foreign entry, named by its path.
    init(_ foreign: ForeignEntry) {
        self.init(name: foreign.path, error: ChronicleError(.foreignEntry, foreign.explanation))
    }

    /// The problem of a device's missing sequences, named by the log after them.
    init(_ gap: ContainerLayout.LogGap) {
        let missing = gap.missing.count == 1 ? "sequence \(gap.missing.lowerBound)" : "sequences \(gap.missing.lowerBound)...\(gap.missing.upperBound)"
        self.init(name: gap.next.rawValue, error: ChronicleError(
            .notFound, "no log holds device \(gap.device)'s \(missing), although this later log is there: devices importing it stop before the gap. "
                + "A log a sync service has not delivered yet closes it by itself; a lost one is put back by its device's next sync"))
    }

    /// The problem of two overlapping logs, named by the later one.
    init(_ overlap: ContainerLayout.LogOverlap) {
        self.init(name: overlap.later.rawValue, error: ChronicleError(
            .blobConflict, "overlaps the log \(overlap.earlier) of the same device: two writers used one device ID, and readers would mix their saves"))
    }
}
