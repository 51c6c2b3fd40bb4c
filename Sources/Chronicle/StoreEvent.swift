import ChronicleCore
import ChronicleSnapshot

/// What a ``Store/changes(bufferLimit:)`` stream delivers.
///
/// ```swift
/// for await event in try store.changes() {
///     switch event {
///     case .record(let change): model.apply(change)
///     case .refetch(let entities): model.reload(entities)   // events were coalesced
///     case .synced(let report): status.show(report.status)
///     case .syncFailed(let error): status.show(error)
///     }
/// }
/// ```
public enum StoreEvent: Sendable {
    /// One record changed, by a save on this device or an imported log.
    case record(RecordEvent)
    /// The consumer fell behind: more events arrived than the stream's
    /// buffer holds, and instead of them the stream says which entities
    /// changed. Read those entities again. Every event that was not
    /// delivered is covered by a refetch that follows the events that were.
    case refetch(entities: Set<String>)
    /// An automatic sync (``Store/startAutomaticSync(every:)``) finished.
    case synced(Store.SyncReport)
    /// An automatic sync failed; the next one is tried at the next tick.
    case syncFailed(ChronicleError)

    /// The record change, if this is one.
    public var record: RecordEvent? {
        if case .record(let event) = self { event } else { nil }
    }
}
