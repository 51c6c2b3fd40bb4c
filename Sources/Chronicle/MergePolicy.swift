import ChronicleCore

/// One record of an entity: what a ``StoreContext`` holds and what a
/// ``MergeConflict`` names.
public struct RecordReference: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The entity's name.
    public var entity: String
    /// The record's ID.
    public var id: RecordID

    /// The record `id` of `entity`.
    public init(_ entity: String, _ id: RecordID) {
        self.entity = entity
        self.id = id
    }

    public static func < (a: RecordReference, b: RecordReference) -> Bool {
        (a.entity, a.id) < (b.entity, b.id)
    }

    public var description: String { "\(entity) \(id)" }
}

/// What a ``StoreContext`` does with a record it changed when the record
/// changed underneath it since it read it: in the store (a save of
/// another context, a sync importing another device's log) or, for a
/// child context, in its parent.
///
/// A *conflict* is an attribute that both sides changed to different
/// values since the context read the record, a record the context changed
/// that was deleted underneath, or a record the context deleted whose
/// attributes changed underneath. Attributes only one side changed are
/// never a conflict: each side's change is kept (the context writes only
/// the attributes it changed), except under ``overwrite``.
///
/// | Policy | An attribute both sides changed | A record deleted underneath | A record the context deleted that changed underneath |
/// |---|---|---|---|
/// | ``error`` | save fails, nothing saved | save fails | save fails |
/// | ``storeTrumps`` | the stored value stays | the context's changes are dropped | the record stays |
/// | ``memoryTrumps`` | the context's value is saved | the context's changes are dropped | the record is deleted |
/// | ``overwrite`` | the context's whole record is saved | the context's changes are dropped | the record is deleted |
/// | ``rollback`` | all of the record's changes in the context are dropped | the context's changes are dropped | the record stays |
///
/// A record deleted underneath is never brought back: record IDs are never
/// reused, so a change to it cannot be saved under any policy.
public enum MergePolicy: String, Sendable, Hashable, CaseIterable {
    /// The save fails with ``ChronicleError/Code/mergeConflict``, listing
    /// every conflict (``ChronicleError/mergeConflicts``); nothing is saved
    /// and the context keeps its changes.
    case error
    /// Per attribute, what is stored wins; the context's other changes are saved.
    case storeTrumps
    /// Per attribute, the context's value wins; attributes changed only
    /// underneath keep their stored values.
    case memoryTrumps
    /// The context's version of each record it changed replaces the
    /// stored one: every attribute that differs from what the context shows
    /// is written, undoing changes made underneath to attributes the
    /// context did not change.
    case overwrite
    /// A record in conflict loses all of its changes in the context and
    /// shows what is stored; records without conflicts are saved.
    case rollback
}

/// A record that changed both in a ``StoreContext`` and underneath it.
public struct MergeConflict: Sendable, Hashable, CustomStringConvertible {
    /// The record.
    public var record: RecordReference
    /// The attributes both sides changed to different values, sorted; for
    /// a record the context deleted, the attributes changed underneath.
    public var attributes: [String]
    /// The record was deleted underneath while the context changed it.
    public var deletedUnderneath: Bool
    /// The context deleted the record while it changed underneath.
    public var deletedInContext: Bool
    /// The stored values of ``attributes`` (what is underneath now).
    public var stored: [String: Value]
    /// The context's values of ``attributes``.
    public var inContext: [String: Value]

    public var description: String {
        if deletedUnderneath { return "\(record) was deleted while this context changed \(attributes.joined(separator: ", "))" }
        if deletedInContext { return "\(record) was deleted in this context while \(attributes.joined(separator: ", ")) changed underneath" }
        let pairs = attributes.map { "\($0) (stored \(stored[$0].map { "\($0)" } ?? "null"), here \(inContext[$0].map { "\($0)" } ?? "null"))" }
        return "\(record): \(pairs.joined(separator: ", "))"
    }
}

/// The conflicts of a save refused by ``MergePolicy/error``: the cause of
/// its ``ChronicleError/Code/mergeConflict`` error.
public struct MergeConflicts: Error, Sendable, CustomStringConvertible {
    /// Every conflict, ordered by record.
    public var conflicts: [MergeConflict]

    public var description: String { "\(conflicts.count) conflict\(conflicts.count == 1 ? "" : "s")" }
}

extension ChronicleError {
    /// The conflicts of a ``Code/mergeConflict`` error; empty for other errors.
    public var mergeConflicts: [MergeConflict] {
        underlying(as: MergeConflicts.self)?.conflicts ?? []
    }
}
