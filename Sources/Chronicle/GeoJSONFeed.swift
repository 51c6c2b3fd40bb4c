import ChronicleCore
import Foundation

extension ChronicleError.Code {
    /// A feed given to an import is not what it should be: not JSON, or
    /// not a GeoJSON `FeatureCollection`. The message names the position.
    public static let malformedFeed = Self("malformedFeed")
}

/// A GeoJSON `FeatureCollection` in the shape of the USGS earthquake feeds,
/// read as items for a ``BulkImport``.
///
/// Each feature becomes one record: an attribute of the entity takes the
/// feature's property of the same name; `longitude`, `latitude` and `depth`,
/// when the properties lack them, take the point's coordinates. Properties
/// the entity lacks are ignored, and attributes the feature lacks are left
/// out (their default on insert, unchanged on update). Values are read as
/// in Chronicle's JSON form (see `docs/values.md`), except that a number
/// for a date is milliseconds since 1970, as in the USGS feeds. A feature
/// whose `type` is not `Feature`, or whose `geometry` is not an object
/// (or null), is malformed.
///
/// ```swift
/// let feed = try GeoJSONFeed(data: Data(contentsOf: url))
/// let items = feed.items(for: schema.entity(named: "Quake")!)
/// ```
public struct GeoJSONFeed: Sendable {
    /// The features, as parsed.
    let features: [JSONValue]
    /// The text, to name the line of a malformed feature.
    private let text: Data

    /// How many features the feed holds.
    public var count: Int { features.count }

    /// Parses a feed.
    ///
    /// - Throws: ``ChronicleError/Code/malformedFeed`` for text that is not
    ///   JSON (naming the line and column) or not a `FeatureCollection`
    ///   with a `features` array.
    public init(data: Data) throws {
        let root: JSONValue
        do {
            root = try JSONValue(parsing: data, code: .malformedFeed)
        } catch {
            throw ChronicleError(.malformedFeed, "the feed is not valid JSON: \(error.message)")
        }
        guard case .object(let members) = root else {
            throw ChronicleError(.malformedFeed, "the feed is \(root.kindName), not a GeoJSON FeatureCollection object")
        }
        if let type = members["type"], type != .string("FeatureCollection") {
            throw ChronicleError(.malformedFeed, "the feed's type is \(Self.shown(type)), not FeatureCollection")
        }
        guard case .array(let features)? = members["features"] else {
            throw ChronicleError(.malformedFeed, "the feed has no \"features\" array")
        }
        self.features = features
        self.text = data
    }

    /// The feed's features as import items for `entity`, in order; a
    /// feature that cannot be read is a malformed item naming its index,
    /// line and column.
    ///
    /// Each item is made when it is read (a feed of millions of features
    /// holds no item of each at once), the same item every time.
    ///
    /// - Parameter key: an attribute every feature must have (not null),
    ///   the upsert key: a feature without it is malformed.
    public func items(for entity: Entity, requiring key: String? = nil) -> Items {
        let starts = Self.featureStarts(text)
        return Items(features: features, starts: starts.count == features.count ? starts : [], entity: entity, key: key)
    }

    /// The import items of a feed's features (see ``items(for:requiring:)``).
    public struct Items: RandomAccessCollection, Sendable {
        let features: [JSONValue]
        /// Where each feature starts; empty when they could not be told.
        let starts: [Position]
        let entity: Entity
        let key: String?

        public var startIndex: Int { 0 }
        public var endIndex: Int { features.count }

        public subscript(index: Int) -> BulkImport.Item {
            let at = "feature \(index + 1)" + (starts.isEmpty ? "" : ", line \(starts[index].line), column \(starts[index].column)")
            do throws(ChronicleError) {
                let values = try GeoJSONFeed.values(of: features[index], for: entity)
                if let key, values[key]?.isNull ?? true {
                    throw ChronicleError(.malformedFeed, "no \(key), the key to import by")
                }
                return .record(values, at: at)
            } catch {
                return .malformed(error.message, at: at)
            }
        }
    }

    /// A place in the feed's text: lines from 1, columns counting
    /// characters from 1.
    struct Position: Sendable, Hashable {
        var line: Int
        var column: Int
    }

    /// A `type` member as a message shows it: a string quoted, anything
    /// else by its kind.
    static func shown(_ type: JSONValue) -> String {
        if case .string(let text) = type { return "\"\(text)\"" }
        return type.kindName
    }

    /// Where each element of the root object's `features` array starts, in
    /// one pass over text that parsed, as the parser's own positions.
    static func featureStarts(_ bytes: Data) -> [Position] {
        var starts: [Position] = []
        var depth = 0, line = 1, column = 0
        var inString = false, escaped = false
        var text: [UInt8] = [], lastString: [UInt8] = [], key: [UInt8] = []
        var inFeatures = false, expectElement = false
        let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
        func element() {
            if expectElement {
                starts.append(Position(line: line, column: column))
                expectElement = false
            }
        }
        // Read in place: iterating `Data` itself costs a call per byte.
        bytes.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
            for b in raw {
                if b & 0xC0 != 0x80 { column += 1 }
                if inString {
                    if escaped {
                        escaped = false
                    } else if b == backslash {
                        escaped = true
                    } else if b == quote {
                        inString = false
                        if depth == 1 { lastString = text }
                    } else if depth == 1 {
                        text.append(b)
                    }
                    continue
                }
                switch b {
                case UInt8(ascii: "\n"):
                    line += 1
                    column = 0
                case quote:
                    element()
                    inString = true
                    text.removeAll(keepingCapacity: true)
                case UInt8(ascii: ":"):
                    if depth == 1 { key = lastString }
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    element()
                    depth += 1
                    if b == UInt8(ascii: "["), depth == 2, key == Array("features".utf8) {
                        inFeatures = true
                        expectElement = true
                    }
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    if depth == 2, inFeatures {
                        inFeatures = false
                        expectElement = false
                    }
                    depth -= 1
                case UInt8(ascii: ","):
                    if depth == 2, inFeatures { expectElement = true }
                case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"):
                    break
                case 0xEF where depth == 0, 0xBB where depth == 0, 0xBF where depth == 0:
                    // A leading byte order mark, which the parser skips.
                    if b == 0xEF { column -= 1 }
                default:
                    element()
                }
            }
        }
        return starts
    }

    private static let coordinates = ["longitude": 0, "latitude": 1, "depth": 2]

    /// The values of one feature for `entity`.
    static func values(of feature: JSONValue, for entity: Entity) throws(ChronicleError) -> [String: Value] {
        guard case .object(let members) = feature else {
            throw ChronicleError(.malformedFeed, "\(feature.kindName), not a feature object")
        }
        var properties: [String: JSONValue] = [:]
        switch members["properties"] {
        case .object(let p)?: properties = p
        case .null?, nil: break
        case let other?: throw ChronicleError(.malformedFeed, "properties is \(other.kindName), not an object")
        }
        if let type = members["type"], type != .string("Feature") {
            throw ChronicleError(.malformedFeed, "its type is \(Self.shown(type)), not Feature")
        }
        var point: [JSONValue] = []
        switch members["geometry"] {
        case .object(let geometry)?:
            if case .array(let c)? = geometry["coordinates"] { point = c }
        case .null?, nil: break
        case let other?: throw ChronicleError(.malformedFeed, "geometry is \(other.kindName), not an object")
        }
        var values: [String: Value] = [:]
        for field in entity.fields {
            guard case .attribute(let type) = field.kind else { continue }
            var json = properties[field.name]
            if json == nil, let i = coordinates[field.name], i < point.count { json = point[i] }
            guard let json else { continue }
            if type == .date, case .int(let milliseconds) = json {
                let (micros, overflow) = milliseconds.multipliedReportingOverflow(by: 1000)
                guard !overflow else { throw ChronicleError(.typeMismatch, "\(field.name): \(milliseconds) milliseconds is out of range") }
                values[field.name] = .date(Timestamp(microsecondsSinceEpoch: micros))
                continue
            }
            if type == .date, case .double(let milliseconds) = json {
                let micros = (milliseconds * 1000).rounded()
                guard micros.isFinite, abs(micros) < 9.2e18 else { throw ChronicleError(.typeMismatch, "\(field.name): \(milliseconds) milliseconds is out of range") }
                values[field.name] = .date(Timestamp(microsecondsSinceEpoch: Int64(micros)))
                continue
            }
            values[field.name] = try Value(json: json, for: field, path: field.name)
        }
        return values
    }

    // MARK: Sample feeds

    /// A feed in the USGS shape, made up from `seed`: the same seed, count
    /// and revision always give the same bytes.
    ///
    /// Revision 1 has `features` earthquakes; each later revision keeps
    /// them, revises about one in ten (magnitude, status, update time),
    /// and adds about one in twenty new ones, as a live feed does between
    /// two downloads.
    ///
    /// `features` below 0 count as 0; `revision` is taken from 1 to 100,
    /// and a feed stops growing at 5,000,000 features.
    public static func sample(features: Int, seed: UInt64 = 1, revision: Int = 1) -> Data {
        let features = max(0, min(features, sampleLimit))
        let revision = max(1, min(revision, 100))
        var random = SeededRandom(seed: seed)
        let places = ["Ridgecrest, CA", "Anchorage, Alaska", "Pahala, Hawaii", "Ferndale, CA", "Tonopah, NV", "Ponce, Puerto Rico",
                      "Nikolski, Alaska", "Cobb, CA", "Mammoth Lakes, CA", "Yellowstone National Park, WY"]
        let networks = ["ci", "ak", "hv", "nc", "nn", "pr", "us", "uw"]
        var quakes: [(code: String, net: String, mag: Double, place: String, time: Int64, lon: Double, lat: Double, depth: Double, status: String, updated: Int64)] = []
        func quake(_ n: Int) -> (code: String, net: String, mag: Double, place: String, time: Int64, lon: Double, lat: Double, depth: Double, status: String, updated: Int64) {
            let net = networks[Int(random.next() % UInt64(networks.count))]
            let time = 1_767_225_600_000 + Int64(n) * 37_000 + Int64(random.next() % 30_000)
            return (code: "\(net)\(70_000_000 + n)", net: net, mag: Double(random.next() % 600) / 100 + 0.1,
                    place: "\(1 + random.next() % 60) km \(["N", "NE", "E", "SE", "S", "SW", "W", "NW"][Int(random.next() % 8)]) of \(places[Int(random.next() % UInt64(places.count))])",
                    time: time, lon: -180 + Double(random.next() % 36_000_000) / 100_000, lat: -60 + Double(random.next() % 13_000_000) / 100_000,
                    depth: Double(random.next() % 70_000) / 1000, status: "automatic", updated: time + 60_000)
        }
        for n in 0..<features { quakes.append(quake(n)) }
        if revision > 1 {
            for _ in 2...revision {
                for i in quakes.indices where random.next() % 10 == 0 {
                    quakes[i].mag = Double(random.next() % 600) / 100 + 0.1
                    quakes[i].status = "reviewed"
                    quakes[i].updated += 3_600_000
                }
                for _ in 0..<max(1, quakes.count / 20) where quakes.count < sampleLimit { quakes.append(quake(quakes.count)) }
            }
        }
        var out = "{\"type\":\"FeatureCollection\",\"metadata\":{\"generated\":1767225600000,\"url\":\"https://earthquake.usgs.gov/earthquakes/feed/v1.0/summary/all_month.geojson\",\"title\":\"Sample earthquakes (made up, seed \(seed), revision \(revision))\",\"status\":200,\"api\":\"1.10.3\",\"count\":\(quakes.count)},\"features\":[\n"
        for (i, q) in quakes.enumerated() {
            let magType = q.mag < 3 ? "ml" : "mb"
            out += "{\"type\":\"Feature\",\"properties\":{\"mag\":\(q.mag),\"place\":\"\(q.place)\",\"time\":\(q.time),\"updated\":\(q.updated),\"tz\":null,"
            out += "\"url\":\"https://earthquake.usgs.gov/earthquakes/eventpage/\(q.code)\",\"felt\":null,\"cdi\":null,\"mmi\":null,\"alert\":null,"
            out += "\"status\":\"\(q.status)\",\"tsunami\":0,\"sig\":\(Int(q.mag * q.mag * 10)),\"net\":\"\(q.net)\",\"code\":\"\(q.code)\",\"ids\":\",\(q.code),\","
            out += "\"sources\":\",\(q.net),\",\"types\":\",origin,phase-data,\",\"nst\":null,\"dmin\":null,\"rms\":0.12,\"gap\":null,\"magType\":\"\(magType)\","
            out += "\"type\":\"earthquake\",\"title\":\"M \(q.mag) - \(q.place)\"},\"geometry\":{\"type\":\"Point\",\"coordinates\":[\(q.lon),\(q.lat),\(q.depth)]},\"id\":\"\(q.code)\"}"
            out += i == quakes.count - 1 ? "\n" : ",\n"
        }
        out += "]}\n"
        return Data(out.utf8)
    }

    /// The most features a sample feed holds.
    static let sampleLimit = 5_000_000

    /// How many features ``sample(features:seed:revision:)`` makes.
    public static func sampleCount(features: Int, revision: Int) -> Int {
        var count = max(0, min(features, sampleLimit))
        for _ in 1..<max(1, min(revision, 100)) where count < sampleLimit { count = min(sampleLimit, count + max(1, count / 20)) }
        return count
    }

    /// A schema for the sample feeds: one entity, `Quake`, unique by `code`.
    public static let sampleSchema: Schema = try! Schema(version: 1, entities: [
        Entity("Quake", attributes: [
            Attribute("code", .string), Attribute("net", .string, optional: true), Attribute("mag", .double, optional: true),
            Attribute("magType", .string, optional: true), Attribute("place", .string, optional: true),
            Attribute("time", .date), Attribute("updated", .date, optional: true), Attribute("status", .string, optional: true),
            Attribute("tsunami", .int64, default: 0), Attribute("sig", .int64, optional: true), Attribute("title", .string, optional: true),
            Attribute("url", .string, optional: true),
            Attribute("longitude", .double), Attribute("latitude", .double), Attribute("depth", .double, optional: true),
        ], unique: [["code"]], indexes: [["time"]]),
    ])
}
