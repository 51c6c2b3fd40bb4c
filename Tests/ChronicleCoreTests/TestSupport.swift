import ChronicleCore
import Testing
import Foundation

/// Schemas and random transactions shared by the codec tests.
enum Samples {
    static let library: Schema = try! Schema(version: 1, entities: [
        Entity("Author",
               attributes: [Attribute("name", .string), Attribute("born", .date, optional: true)],
               relationships: [.toMany("books", to: "Book", inverse: "author")],
               unique: [["name"]]),
        Entity("Book",
               attributes: [
                   Attribute("title", .string),
                   Attribute("pages", .int64, default: 0),
                   Attribute("rating", .double, optional: true),
                   Attribute("inPrint", .bool, default: true),
                   Attribute("price", .decimal, optional: true),
                   Attribute("isbn", .uuid, optional: true),
                   Attribute("cover", .data, optional: true),
                   Attribute("extra", .transformable, optional: true),
               ],
               relationships: [.toOne("author", to: "Author", inverse: "books", deleteRule: .cascade)]),
    ])

    static let store = StoreID(RecordID(high: 0x0192_0000_0000_7000, low: 0x8000_0000_0000_0001))
    static let device = DeviceID(index: 1)

    /// A random value of `type`, including the awkward ones.
    static func value(_ type: AttributeType, _ rng: inout SeededRandom) -> Value {
        switch type {
        case .string:
            let choices = ["", "a", "héllo wörld", "🦀🚀", String(repeating: "x", count: Int(rng.next() % 300))]
            return .string(choices[Int(rng.next() % UInt64(choices.count))])
        case .int64:
            let choices: [Int64] = [0, -1, 1, .min, .max, Int64(bitPattern: rng.next())]
            return .int(choices[Int(rng.next() % UInt64(choices.count))])
        case .double:
            let choices: [Double] = [0, -0.0, .infinity, -.infinity, .nan, Double(bitPattern: 0x7FF8_0000_0000_0BAD),
                                     .leastNonzeroMagnitude, .greatestFiniteMagnitude, Double(bitPattern: rng.next())]
            return .double(choices[Int(rng.next() % UInt64(choices.count))])
        case .bool: return .bool(rng.next() & 1 == 0)
        case .date: return .date(Timestamp(microsecondsSinceEpoch: Int64(bitPattern: rng.next()) >> 8))
        case .data:
            return .data(Data((0..<Int(rng.next() % 64)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }))
        case .decimal:
            return .decimal(try! ChronicleDecimal(isNegative: rng.next() & 1 == 0,
                                                  significand: UInt128(rng.next()) % ChronicleDecimal.maxSignificand,
                                                  exponent: Int8(truncatingIfNeeded: rng.next())))
        case .uuid: return .uuid(RecordID(high: rng.next(), low: rng.next()).uuid)
        case .transformable:
            return .transformable(TransformableValue(typeName: "Color", mimeType: "application/json",
                                                     data: Data("{\"r\":\(rng.next() % 256)}".utf8)))
        }
    }

    /// A random schema of 1 to 4 entities. Names share a stem of random
    /// length (0 to 61 letters) and differ only in their last character, so
    /// the decoder's name matching sees short, word-sized and maximal names
    /// that agree on everything but the final byte.
    static func schema(_ rng: inout SeededRandom) -> Schema {
        let entityCount = 1 + Int(rng.next() % 4)
        let stem = String(repeating: "x", count: Int(rng.next() % 62))
        var entities: [Entity] = []
        for e in 0..<entityCount {
            var attributes: [Attribute] = []
            for a in 0..<(1 + Int(rng.next() % 8)) {
                let type = AttributeType.allCases[Int(rng.next() % UInt64(AttributeType.allCases.count))]
                attributes.append(Attribute("a\(stem)\(a)", type, optional: rng.next() & 1 == 0))
            }
            var relationships: [Relationship] = []
            if e > 0 { relationships.append(.toOne("parent", to: "E\(stem)\(e - 1)")) }
            entities.append(Entity("E\(stem)\(e)", attributes: attributes, relationships: relationships))
        }
        return try! Schema(version: Int(rng.next() % 10), entities: entities)
    }

    /// A random transaction over `schema`.
    static func transaction(_ schema: Schema, sequence: UInt64, changes count: Int, _ rng: inout SeededRandom) -> Transaction {
        var ops: [Change] = []
        for _ in 0..<count {
            let entity = schema.entities[Int(rng.next() % UInt64(schema.entities.count))]
            let id = RecordID(high: rng.next(), low: rng.next())
            let kind = ChangeKind(rawValue: UInt8(1 + rng.next() % 3))!
            var values: [FieldValue] = []
            if kind != .delete {
                for field in entity.fields where kind == .insert || rng.next() & 1 == 0 {
                    switch field.kind {
                    case .attribute(let t):
                        values.append(FieldValue(field.name, field.isOptional && rng.next() % 4 == 0 ? .null : value(t, &rng)))
                    case .reference:
                        values.append(FieldValue(field.name, rng.next() & 1 == 0 ? .null : .reference(RecordID(high: rng.next(), low: rng.next()))))
                    }
                }
            }
            // Encoders write fields in schema order; any order must decode.
            if rng.next() % 4 == 0 { values.reverse() }
            ops.append(Change(kind, entity: entity.name, recordID: id, values: values))
        }
        return Transaction(deviceID: device, sequence: sequence,
                           clock: HybridTimestamp(milliseconds: 1_700_000_000_000 + sequence, counter: UInt16(rng.next() % 5)),
                           schemaHash: schema.hash, changes: ops)
    }
}

/// Expects `body` to throw a ``ChronicleError`` with `code`; returns it.
@discardableResult
func expectError(
    _ code: ChronicleError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
) -> ChronicleError? {
    do {
        try body()
        Issue.record("expected \(code), nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as ChronicleError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected ChronicleError \(code), got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}
