import ChronicleCore
import ChronicleSnapshot
import Foundation

extension StoreContext {
    /// Saves this context's changes: a context of the store writes them as
    /// one transaction log (one save, all or nothing); a child context
    /// pushes them into its parent, all or nothing, and its parent's save
    /// writes them.
    ///
    /// Each record changed is compared with what is underneath now (the
    /// store's committed record, or the parent's), against what this
    /// context read, and a conflict is settled by ``mergePolicy``.
    ///
    /// - Returns: how many records were written and the conflicts settled.
    /// - Throws: ``ChronicleError/Code/mergeConflict`` under
    ///   ``MergePolicy/error`` (the context keeps its changes);
    ///   ``ChronicleError/Code/readOnlyContext`` for a read-only or scratch
    ///   context (or a child of a read-only one); a save's validation
    ///   errors (see ``Store/write(_:)``). Nothing is saved then.
    @discardableResult
    public func save() async throws -> SaveResult {
        if kind == .scratch {
            throw ChronicleError(.readOnlyContext, "a scratch context is never saved: its changes are discarded with it")
        }
        try state.withLock { try checkWritable($0) }
        await saving.enter()
        defer { saving.leave() }
        let (pending, policy) = state.withLock { s in
            let pending = s.entries.filter { $0.value.hasChanges }.sorted { $0.value.order < $1.value.order }.map { Pending(key: $0.key, entry: $0.value) }
            s.saving = Set(pending.map(\.key))
            return (pending, s.mergePolicy)
        }
        defer { state.withLock { $0.saving = [] } }
        guard !pending.isEmpty else { return SaveResult(savedRecords: 0, resolved: []) }
        let outcome: Outcome
        do {
            if let parent {
                // The parent holds every record this context changed, so the
                // comparison and the push happen under its lock at once.
                for item in pending where item.entry.base != nil { _ = try await parent.view(item.key) }
                outcome = try parent.absorb(pending, policy: policy)
            } else {
                outcome = try await store.saveContext(pending, policy: policy)
            }
        } catch let error as ChronicleError where error.code == .mergeConflict {
            // What the save found underneath is what a rollback shows.
            state.withLock { s in
                for conflict in error.mergeConflicts {
                    if conflict.deletedUnderneath {
                        s.entries[conflict.record]?.gone = true
                    } else {
                        let seen = (s.entries[conflict.record]?.underneath ?? [:]).merging(conflict.stored) { _, new in new }
                        s.entries[conflict.record]?.underneath = seen
                    }
                }
            }
            throw error
        }
        settle(pending, now: outcome.rows)
        return SaveResult(savedRecords: outcome.saved, resolved: outcome.resolved)
    }

    /// A record to save, as the context held it when the save began.
    struct Pending: Sendable {
        var key: RecordReference
        var entry: Entry
    }

    /// What a save did: records written, conflicts settled, and the
    /// records as they are underneath after it.
    struct Outcome: Sendable {
        var saved = 0
        var resolved: [MergeConflict] = []
        var rows: [RecordReference: [String: Value]] = [:]
    }

    /// How one record's changes are saved over what is underneath.
    struct Resolution: Sendable {
        enum Write: Sendable {
            case insert([String: Value])
            case update([String: Value])
            case delete
        }
        var write: Write?
        var conflict: MergeConflict?
        /// A conflict under ``MergePolicy/error``: the save is refused.
        var refused = false
    }

    /// Settles `entry`, which this context read as its base, over
    /// `current`, what is underneath now (nil: no such record).
    static func resolve(_ key: RecordReference, _ entry: Entry, current: [String: Value]?, policy: MergePolicy) -> Resolution {
        guard let base = entry.base else { return Resolution(write: .insert(entry.changed)) }
        guard let current else {
            if entry.deleted { return Resolution() }
            let conflict = MergeConflict(record: key, attributes: entry.changed.keys.sorted(), deletedUnderneath: true,
                                         deletedInContext: false, stored: [:], inContext: entry.changed)
            return Resolution(conflict: conflict, refused: policy == .error)
        }
        let underneath = changedAttributes(from: base, to: current)
        if entry.deleted {
            guard !underneath.isEmpty else { return Resolution(write: .delete) }
            let conflict = MergeConflict(record: key, attributes: underneath.sorted(), deletedUnderneath: false, deletedInContext: true,
                                         stored: current.filter { underneath.contains($0.key) }, inContext: [:])
            switch policy {
            case .error: return Resolution(conflict: conflict, refused: true)
            case .storeTrumps, .rollback: return Resolution(conflict: conflict)
            case .memoryTrumps, .overwrite: return Resolution(write: .delete, conflict: conflict)
            }
        }
        // What the context changes that is not so already.
        let changes = entry.changed.filter { !same(current[$0.key], $0.value) }
        let overlap = Set(changes.keys).intersection(underneath)
        let conflict = overlap.isEmpty ? nil : MergeConflict(
            record: key, attributes: overlap.sorted(), deletedUnderneath: false, deletedInContext: false,
            stored: current.filter { overlap.contains($0.key) }, inContext: changes.filter { overlap.contains($0.key) })
        switch policy {
        case .error:
            if let conflict { return Resolution(conflict: conflict, refused: true) }
            return Resolution(write: .update(changes))
        case .storeTrumps:
            return Resolution(write: .update(changes.filter { !overlap.contains($0.key) }), conflict: conflict)
        case .memoryTrumps:
            return Resolution(write: .update(changes), conflict: conflict)
        case .overwrite:
            let mine = base.merging(entry.changed) { _, new in new }
            return Resolution(write: .update(mine.filter { !same(current[$0.key], $0.value) }), conflict: conflict)
        case .rollback:
            if let conflict { return Resolution(conflict: conflict) }
            return Resolution(write: .update(changes))
        }
    }

    /// The attributes whose values differ between two versions of a record.
    static func changedAttributes(from old: [String: Value], to new: [String: Value]) -> Set<String> {
        Set(old.keys).union(new.keys).filter { !same(old[$0], new[$0]) }
    }

    /// The error refusing a save for `conflicts`.
    static func refusal(_ conflicts: [MergeConflict]) -> ChronicleError {
        let sorted = conflicts.sorted { $0.record < $1.record }
        let shown = sorted.prefix(5).map(\.description).joined(separator: "; ")
        let more = sorted.count > 5 ? " and \(sorted.count - 5) more" : ""
        return ChronicleError(.mergeConflict, "\(sorted.count) record(s) changed both here and underneath: \(shown)\(more)",
                              underlying: MergeConflicts(conflicts: sorted))
    }

    /// Takes a child's changes, under this context's lock: all of them, or
    /// none if one is refused.
    func absorb(_ pending: [Pending], policy: MergePolicy) throws -> Outcome {
        let (outcome, change) = try state.withLock { s throws -> (Outcome, Change) in
            try checkWritable(s)
            var resolutions: [(RecordReference, Resolution)] = []
            var refused: [MergeConflict] = []
            var outcome = Outcome()
            for item in pending {
                let current = s.entries[item.key]?.view
                let resolution = Self.resolve(item.key, item.entry, current: current, policy: policy)
                if resolution.refused, let conflict = resolution.conflict {
                    refused.append(conflict)
                    continue
                }
                if case .insert = resolution.write, current != nil {
                    throw ChronicleError(.recordExists, "\(item.key) already exists in the parent context")
                }
                if let conflict = resolution.conflict { outcome.resolved.append(conflict) }
                resolutions.append((item.key, resolution))
            }
            if !refused.isEmpty { throw Self.refusal(refused) }
            var refreshed: Set<RecordReference> = []
            for (key, resolution) in resolutions {
                switch resolution.write {
                case .insert(let values):
                    s.entries[key] = Entry(base: nil, changed: values, order: s.stamp())
                case .update(let values) where !values.isEmpty:
                    guard s.entries[key] != nil else { continue }
                    s.change(key, values)
                case .delete:
                    guard s.entries[key] != nil else { continue }
                    s.delete(key)
                case .update, nil:
                    continue
                }
                outcome.saved += 1
                refreshed.insert(key)
            }
            for item in pending {
                if let view = s.entries[item.key]?.view { outcome.rows[item.key] = view }
            }
            return (outcome, Change(refreshed: refreshed, removed: [], dropped: []))
        }
        publish(change)
        return outcome
    }

    /// After a save: what was saved is now the base of each record, and
    /// changes made while the save ran are kept on top of it.
    func settle(_ pending: [Pending], now rows: [RecordReference: [String: Value]]) {
        state.withLock { s in
            for item in pending {
                guard let held = s.entries[item.key] else { continue }
                guard let current = rows[item.key] else {
                    s.entries[item.key] = nil
                    continue
                }
                if held == item.entry {
                    s.entries[item.key] = Entry(base: current, delivered: held.delivered)
                    continue
                }
                var entry = held
                entry.base = current
                entry.underneath = [:]
                entry.changed = entry.changed.filter { !Self.same(current[$0.key], $0.value) }
                if !entry.hasChanges { entry.order = 0 }
                s.entries[item.key] = entry
            }
        }
    }

    // MARK: Automatic merge

    /// Called by the store as saves and imports commit: refreshes the
    /// records this context holds among those that changed.
    func storeDidChange(_ events: [RecordEvent]) {
        let keys: [RecordReference] = state.withLock { s in
            s.epoch &+= 1
            guard s.automaticallyMerges, !s.entries.isEmpty else { return [] }
            var seen: Set<RecordReference> = []
            var keys: [RecordReference] = []
            for event in events {
                let key = RecordReference(event.entity, event.recordID)
                if s.entries[key] != nil, seen.insert(key).inserted { keys.append(key) }
            }
            return keys
        }
        guard !keys.isEmpty else { return }
        let rows: [RecordReference: [String: Value]]
        do {
            rows = try store.storedValuesNow(keys)
        } catch {
            // The store is closing (or its snapshot unreadable): the records
            // keep what they showed, and a save still compares them with
            // what is stored.
            store.configuration.log.warning("a context could not refresh \(keys.count) record(s): \(error)")
            return
        }
        let change = state.withLock { s in
            var total = Change(refreshed: [], removed: [], dropped: [])
            for key in keys {
                let one = merge(key, current: rows[key], &s, policy: s.mergePolicy)
                total.refreshed.formUnion(one.refreshed)
                total.removed.formUnion(one.removed)
                total.dropped += one.dropped
            }
            return total
        }
        publish(change)
    }

    /// Merges what is underneath now (`current`; nil once deleted) into the
    /// record held for `key`, settling its changes by `policy`.
    func merge(_ key: RecordReference, current: [String: Value]?, _ s: inout State, policy: MergePolicy) -> Change {
        var change = Change(refreshed: [], removed: [], dropped: [])
        guard var entry = s.entries[key], let base = entry.base else { return change }
        guard let current else {
            if entry.hasChanges, !entry.deleted {
                // The save reports it under the error policy; a rollback drops it.
                if policy == .error {
                    s.entries[key]?.gone = true
                    return change
                }
                change.dropped.append(MergeConflict(record: key, attributes: entry.changed.keys.sorted(), deletedUnderneath: true,
                                                   deletedInContext: false, stored: [:], inContext: entry.changed))
            }
            s.entries[key] = nil
            change.removed.insert(key)
            return change
        }
        let underneath = Self.changedAttributes(from: base, to: current)
        guard !underneath.isEmpty else { return change }
        if entry.deleted {
            let conflict = MergeConflict(record: key, attributes: underneath.sorted(), deletedUnderneath: false, deletedInContext: true,
                                         stored: current.filter { underneath.contains($0.key) }, inContext: [:])
            switch policy {
            case .error:
                // The save finds the conflict against the base; a rollback
                // shows what is stored.
                entry.underneath = current.filter { underneath.contains($0.key) }
            case .storeTrumps, .rollback:
                entry = Entry(base: current, delivered: entry.delivered)
                change.dropped.append(conflict)
            case .memoryTrumps, .overwrite:
                entry.base = current
                entry.underneath = [:]
            }
        } else {
            // Values both sides agree on are no longer changes.
            for name in underneath where entry.changed[name] != nil && Self.same(entry.changed[name], current[name]) {
                entry.changed[name] = nil
            }
            let overlap = underneath.filter { entry.changed[$0] != nil }
            let conflict = overlap.isEmpty ? nil : MergeConflict(
                record: key, attributes: overlap.sorted(), deletedUnderneath: false, deletedInContext: false,
                stored: current.filter { overlap.contains($0.key) }, inContext: entry.changed.filter { overlap.contains($0.key) })
            switch (policy, conflict) {
            case (_, nil), (.memoryTrumps, _), (.overwrite, _):
                entry.base = current
                entry.underneath = [:]
            case (.error, _):
                // The conflicting attributes keep the base they were read
                // with, so the save finds the conflict; what is stored for
                // them is kept beside it.
                var next = current
                for name in overlap { next[name] = base[name] }
                entry.base = next
                entry.underneath = current.filter { overlap.contains($0.key) }
            case (.storeTrumps, let conflict?):
                for name in overlap { entry.changed[name] = nil }
                entry.base = current
                entry.underneath = [:]
                change.dropped.append(conflict)
            case (.rollback, let conflict?):
                entry = Entry(base: current, delivered: entry.delivered)
                change.dropped.append(conflict)
            }
        }
        if !entry.hasChanges { entry.order = 0 }
        s.entries[key] = entry
        change.refreshed.insert(key)
        return change
    }
}
