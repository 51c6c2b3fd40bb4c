import ChronicleCore
import Dispatch
import Foundation
import GRDB

/// An order for typed fetches and observations of ``ChronicleRecord``
/// values: a field of the record's entity, ascending or descending.
public struct RecordOrder: Sendable, Hashable {
    /// The field (an attribute or a to-one relationship) of the entity.
    public var field: String
    /// Whether the largest values come first.
    public var descending: Bool

    /// Smallest first.
    public static func ascending(_ field: String) -> RecordOrder { RecordOrder(field: field, descending: false) }
    /// Largest first.
    public static func descending(_ field: String) -> RecordOrder { RecordOrder(field: field, descending: true) }
}

extension Store {
    /// Observes what `fetch` reads from the snapshot: an asynchronous
    /// sequence whose first value is read at once, and then a new value
    /// after each committed save or import that changed a table `fetch`
    /// reads.
    ///
    /// Values are read on the snapshot's read-only connections, never
    /// queued behind saves and imports, and only after a commit: an import
    /// applies each log whole in one SQLite transaction, so a value never
    /// holds part of a log. Values that come faster than they are consumed
    /// are coalesced: the sequence keeps the newest.
    ///
    /// ```swift
    /// for try await count in store.observe({ db in try Int.fetchOne(db, sql: "SELECT count(*) FROM Note") ?? 0 }) {
    ///     print(count)
    /// }
    /// ```
    ///
    /// The sequence fails with ``ChronicleError/Code/closed`` once the
    /// store is closed.
    public nonisolated func observe<T: Sendable>(_ fetch: @escaping @Sendable (Database) throws -> T) -> AsyncValueObservation<T> {
        ValueObservation.tracking(reader.endingAtClose(fetch))
            .values(in: reader, scheduling: .async(onQueue: Self.observationQueue), bufferingPolicy: .bufferingNewest(1))
    }

    /// ``observe(_:)`` for values that can be compared: a value equal to
    /// the one before is not delivered again (a save that did not change
    /// what `fetch` reads, or a fetch the observation makes as it starts).
    public nonisolated func observe<T: Sendable & Equatable>(_ fetch: @escaping @Sendable (Database) throws -> T) -> AsyncValueObservation<T> {
        ValueObservation.tracking(reader.endingAtClose(fetch)).removeDuplicates()
            .values(in: reader, scheduling: .async(onQueue: Self.observationQueue), bufferingPolicy: .bufferingNewest(1))
    }

    /// The records of a Codable type, filtered and ordered.
    ///
    /// - Parameters:
    ///   - filter: an SQL condition on the entity's fields (`"pinned AND
    ///     words > ?"`), with its `arguments`; nil for every record.
    ///   - order: the fields to order by, then the record ID.
    /// - Throws: ``ChronicleError/Code/unknownEntity`` for a type whose
    ///   entity the schema lacks; ``ChronicleError/Code/unknownAttribute``
    ///   for an order on a field the entity lacks; SQLite's error for a
    ///   filter that is not valid SQL.
    public nonisolated func fetchAll<R: ChronicleRecord>(_ type: R.Type, where filter: String?, arguments: StatementArguments = [],
                                                         orderedBy order: [RecordOrder] = []) async throws -> [R] {
        let query = try recordQuery(R.self, filter: filter, arguments: arguments, order: order)
        return try await reader.read { db in try query(db) }
    }

    /// Observes the records of a Codable type, filtered and ordered (see
    /// ``fetchAll(_:where:arguments:orderedBy:)`` and ``observe(_:)``).
    ///
    /// A list equal to the one before (the same records with the same
    /// values, compared by their encoding) is not delivered again.
    ///
    /// - Throws: ``ChronicleError/Code/closed`` after ``close()``; the
    ///   errors of ``fetchAll(_:where:arguments:orderedBy:)``.
    public nonisolated func observeAll<R: ChronicleRecord>(_ type: R.Type, where filter: String? = nil, arguments: StatementArguments = [],
                                                           orderedBy order: [RecordOrder] = []) throws -> AsyncValueObservation<[R]> {
        try checkOpen()
        let query = try recordQuery(R.self, filter: filter, arguments: arguments, order: order)
        return ValueObservation.tracking(reader.endingAtClose(query))
            .removeDuplicates { a, b in
                guard a.count == b.count else { return false }
                let encoder = JSONEncoder()
                encoder.outputFormatting = .sortedKeys
                return (try? encoder.encode(a)) == (try? encoder.encode(b))
            }
            .values(in: reader, scheduling: .async(onQueue: Self.observationQueue), bufferingPolicy: .bufferingNewest(1))
    }

    /// The fetch of a filtered, ordered typed request, checked against the schema.
    private nonisolated func recordQuery<R: ChronicleRecord>(_ type: R.Type, filter: String?, arguments: StatementArguments,
                                                             order: [RecordOrder]) throws -> @Sendable (Database) throws -> [R] {
        let entity = try Self.entity(of: R.self, configuration.schema)
        let sql = try Self.recordSQL(entity, filter: filter, order: order)
        let arguments = arguments
        return { db in try RecordCoding.records(R.self, entity: entity, cursor: Row.fetchCursor(db, sql: sql, arguments: arguments)) }
    }

    /// `SELECT *` of an entity's records, filtered and ordered (then by ID).
    static func recordSQL(_ entity: Entity, filter: String?, order: [RecordOrder], limit: Int? = nil) throws -> String {
        var terms: [String] = []
        for o in order {
            guard entity.field(named: o.field) != nil else {
                throw ChronicleError(.unknownAttribute, "\(entity.name) has no field \(o.field) to order by")
            }
            terms.append("\(o.field.quotedDatabaseIdentifier)\(o.descending ? " DESC" : "")")
        }
        terms.append("id")
        if let limit, limit < 0 { throw ChronicleError(.misuse, "a fetch's limit must not be negative, not \(limit)") }
        return "SELECT * FROM \(entity.name.quotedDatabaseIdentifier)" + (filter.map { " WHERE \($0)" } ?? "") + " ORDER BY " + terms.joined(separator: ", ")
            + (limit.map { " LIMIT \($0)" } ?? "")
    }

    /// Where observations deliver their values (not the main queue, which
    /// a process without a run loop never serves).
    static let observationQueue = DispatchQueue(label: "chronicle.observation")
}
