import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB

/// A Codable type stored as one entity's records.
///
/// Properties map to fields by name (their `CodingKeys`); `id` is the
/// record ID. Chronicle's own encoder and decoder convert each property
/// for its field's type: `String`, the integer types, `Double`, `Bool`,
/// `Date`, `Data`, `UUID`, Foundation's `Decimal` (exactly), ``RecordID``
/// for to-one relationships, and arrays or any other Codable value in a
/// `transformable` attribute (stored as JSON). See `docs/values.md`.
///
/// What a record stores:
///
/// - **Every field its type declares**, nil included. A declared field is
///   a key the type encodes, or reads when it decodes (synthesized Codable
///   skips nil optionals when encoding, but reads every key when
///   decoding). So `note.folder = nil` then `tx.update(note)` clears the
///   folder.
/// - **Nothing else.** Fields of the entity that the type neither encodes
///   nor reads are left as they are by an update (and get their defaults on
///   insert): a type may map only some of an entity's fields.
/// - **Properties kept in memory only** are left out of storage: leave
///   them out of `CodingKeys`, make them optional, or give the type an
///   `init(from:)` that reads them with `decodeIfPresent`. A key that is no field of the entity is
///   ignored unless the type *requires* it to decode (then the record could
///   be saved but never read back), which is a
///   ``ChronicleError/Code/unknownAttribute`` error naming the key.
///
/// ```swift
/// struct Book: ChronicleRecord {
///     static let entityName = "Book"
///     var id: RecordID
///     var title: String
///     var pages: Int64
/// }
/// ```
public protocol ChronicleRecord: Codable, Sendable {
    /// The entity this type is stored in.
    static var entityName: String { get }
    /// The record's ID.
    var id: RecordID { get }
}

enum RecordCoding {
    /// Field indices by name.
    static func fieldIndex(_ entity: Entity) -> [String: Int] {
        Dictionary(uniqueKeysWithValues: entity.fields.enumerated().map { ($0.element.name, $0.offset) })
    }

    /// What the record stores (see ``ChronicleRecord``), by field name, `id`
    /// excluded: every field it encodes, and null for every field it reads
    /// when decoding but did not encode.
    static func values<R: ChronicleRecord>(of record: R, entity: Entity) throws -> [String: Value] {
        let fieldIndex = fieldIndex(entity)
        let encoder = RecordEncoder(entity: entity, fieldIndex: fieldIndex)
        do {
            try record.encode(to: encoder)
        } catch let error as ChronicleError {
            throw error
        } catch {
            throw ChronicleError(.typeMismatch, "a \(R.self) cannot be encoded for \(entity.name): \(error)")
        }
        if let refusal = encoder.refusal { throw ChronicleError(.typeMismatch, refusal) }
        // Decoding the record from what it encoded shows which keys its type
        // declares, the nil optionals that encoding skipped among them.
        let reads = KeyReads()
        do {
            _ = try R(from: RecordDecoder(entity: entity, fieldIndex: fieldIndex, source: ValuesSource(values: encoder.values),
                                          id: record.id, reads: reads))
        } catch let error as ChronicleError where error.code == .unknownAttribute {
            throw error
        } catch {
            throw ChronicleError(.typeMismatch, "a \(R.self) cannot be read back from what it stores in \(entity.name): \(error)")
        }
        var values: [String: Value] = [:]
        for (i, field) in entity.fields.enumerated() {
            if let value = encoder.values[i] {
                values[field.name] = value
            } else if reads.contains(field.name) {
                values[field.name] = .null
            }
        }
        return values
    }

    /// Builds a record from its values by field name; a field missing from
    /// `values` reads as absent.
    static func record<R: ChronicleRecord>(_ type: R.Type, id: RecordID, values: [String: Value], entity: Entity) throws -> R {
        let source = ValuesSource(values: entity.fields.map { values[$0.name] })
        return try R(from: RecordDecoder(entity: entity, fieldIndex: fieldIndex(entity), source: source, id: id))
    }

    /// Reads records from rows of `SELECT *` on the entity's table.
    static func records<R: ChronicleRecord>(_ type: R.Type, entity: Entity, cursor: RowCursor) throws -> [R] {
        let fieldIndex = fieldIndex(entity)
        let columnNames = cursor.columnNames
        func column(_ name: String) throws -> Int {
            guard let i = columnNames.firstIndex(of: name) else {
                throw ChronicleError(.database, "the \(entity.name) table has no column \(name)")
            }
            return i
        }
        let idColumn = try column("id")
        let columns = try entity.fields.map { try column($0.name) }
        var records: [R] = []
        while let row = try cursor.next() {
            guard let id = RecordID.fromDatabaseValue(row[idColumn]) else {
                throw ChronicleError(.database, "a \(entity.name) row has no valid record ID")
            }
            let source = RowSource(row: row, columns: columns, fields: entity.fields)
            records.append(try R(from: RecordDecoder(entity: entity, fieldIndex: fieldIndex, source: source, id: id)))
        }
        return records
    }
}
