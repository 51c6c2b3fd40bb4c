import ChronicleCore
import Foundation

/// Every log and baseline part of a container checked whole: read under the
/// decoder's cap, verified (header, checksums, decompression, every change),
/// and compared with its name; plus every entry that is not Chronicle's and
/// every pair of overlapping logs of one device, every device's sequences
/// that no log holds although later ones are there, and the markers devices
/// read (the active-store pointer, device registrations). `chronicle verify` prints
/// it and exits 1 when ``problems`` is not empty; a health monitor can run
/// it on any backend.
///
/// ```swift
/// let verification = try await ContainerVerification(of: container, decoder: LogDecoder(schema: schema))
/// if !verification.passed { for p in verification.problems { print(p) } }
/// ```
///
/// One blob is held in memory at a time, never more than the decoder's
/// ``DecodingLimits/maxLogBytes``.
package struct ContainerVerification: Sendable {
    /// Logs and baseline parts that verified.
    package var valid = 0
    /// Their total size.
    package var bytes = 0
    /// What is wrong, in the order found: damaged or misnamed blobs, then
    /// foreign entries, with overlapping logs where the listing met them.
    package var problems: [ContainerProblem] = []

    /// Damaged blobs of stores that were rebuilt as another (their
    /// supersession marker): no device reads them any more, and their saves
    /// were carried into the store that replaced them. Reported, not failing.
    package var replacedStoreProblems: [ContainerProblem] = []

    /// Blobs written for a schema the decoder does not know (a later
    /// version's, or an earlier one it was not given): whole, as far as
    /// their checksums say, but not checked against the schema. Reported,
    /// not failing: devices hold them, they are not damaged.
    package var otherVersions: [ContainerProblem] = []

    /// Whether nothing is wrong.
    package var passed: Bool { problems.isEmpty }

    /// Verifies `container` with `decoder` (give it the app's schema to
    /// check names and value types too).
    ///
    /// - Throws: what the container throws for a listing; a blob that
    ///   cannot be read or verified is a problem, not a throw.
    package init(of container: any Container, decoder: LogDecoder, pageSize: Int = 1000) async throws {
        // Gains the stores' compression dictionaries as logs need them.
        var decoder = decoder
        let foreign = try await container.foreignEntries()
        let foreignPaths = Set(foreign.map(\.path))
        var overlaps = ContainerLayout.LogOverlapScan()
        var replaced: [String: Bool] = [:]
        func inReplacedStore(_ name: ContainerName) async -> Bool {
            let first = String(name.rawValue.prefix { $0 != "/" })
            guard let store = StoreID(string: first) else { return false }
            if let known = replaced[first] { return known }
            let isReplaced = ((try? await container.readMarker(ContainerLayout.supersession(store: store))) ?? nil) != nil
            replaced[first] = isReplaced
            return isReplaced
        }
        // The baseline parts that verified, per baseline folder, in name order.
        var baselineParts: [String: [(name: ContainerName, header: LogHeader, vector: [DeviceID: UInt64])]] = [:]
        var cursor: ContainerName?
        repeat {
            let page = try await container.list(prefix: "", after: cursor, limit: pageSize)
            for blob in page {
                if let overlap = overlaps.next(blob.name) { problems.append(ContainerProblem(overlap)) }
                guard blob.name.rawValue.hasSuffix(ContainerLayout.logExtension) || blob.name.rawValue.hasSuffix(ContainerLayout.baselinePartExtension) else {
                    // Chronicle writes logs and baseline parts only: anything
                    // else (a file where a shard folder belongs, a stray copy)
                    // is not what readers expect there.
                    if !foreignPaths.contains("blobs/" + blob.name.rawValue) {
                        problems.append(ContainerProblem(name: blob.name.rawValue, error: ChronicleError(
                            .foreignEntry, "a blob that is neither a log nor a baseline part: Chronicle did not write it, and no device reads it")))
                    }
                    continue
                }
                let (result, used) = await Self.verify(blob.name, in: container, decoder: decoder)
                decoder = used
                switch result {
                case .success(let (size, part)):
                    valid += 1
                    bytes += size
                    if let part, let parsed = ContainerLayout.parseBaselinePart(blob.name) {
                        let folder = ContainerLayout.baselinePrefix(store: parsed.store, clock: parsed.clock, device: parsed.device, vector: parsed.vector)
                        baselineParts[folder, default: []].append((blob.name, part.header, part.vector))
                    }
                case .failure(let error) where error.code == .schemaMismatch:
                    otherVersions.append(ContainerProblem(name: blob.name.rawValue, error: error))
                case .failure(let error):
                    // A foreign entry at a blob's name is reported once, below.
                    guard error.code != .foreignEntry || !foreignPaths.contains(ContainerLayout.Directory.blobPath(blob.name)) else { break }
                    if error.code != .foreignEntry, await inReplacedStore(blob.name) {
                        replacedStoreProblems.append(ContainerProblem(name: blob.name.rawValue, error: error))
                        break
                    }
                    problems.append(ContainerProblem(name: blob.name.rawValue, error: error))
                }
            }
            cursor = page.count == pageSize ? page.last?.name : nil
        } while cursor != nil
        // Each part verifies alone: the parts of one baseline must also
        // belong together (numbered without a gap, one vector, the store
        // and device of their folder), or a device that starts from them,
        // or a compaction that trusts them, loses saves.
        for (_, parts) in baselineParts.sorted(by: { $0.key < $1.key }) {
            var check = BaselinePartCheck(count: parts.count)
            for (index, part) in parts.enumerated() {
                do {
                    try check.check(part.header, vector: part.vector, name: part.name, index: index)
                } catch {
                    if await inReplacedStore(part.name) {
                        replacedStoreProblems.append(ContainerProblem(name: part.name.rawValue, error: error))
                    } else {
                        problems.append(ContainerProblem(name: part.name.rawValue, error: error))
                    }
                    break
                }
            }
        }
        problems += foreign.map(ContainerProblem.init)
        // A gap in a store rebuilt as another is reported, not failing, as
        // a damaged blob there is: no device reads that store any more.
        for gap in try await Self.uncovered(overlaps.gaps, in: container, decoder: decoder).map(ContainerProblem.init) {
            if let name = try? ContainerName(gap.name), await inReplacedStore(name) {
                replacedStoreProblems.append(gap)
            } else {
                problems.append(gap)
            }
        }
        problems += try await Self.markerProblems(in: container, foreign: foreignPaths)
    }

    /// The gaps no baseline of their store covers. A store rebuilt from a
    /// baseline, or one whose devices moved there, holds each device's
    /// earlier sequences in that baseline, and its logs start after them:
    /// a device importing the store starts from the baseline, so that is no
    /// gap. A baseline counts when all its parts are listed and its first
    /// part decodes.
    static func uncovered(_ gaps: [ContainerLayout.LogGap], in container: any Container, decoder: LogDecoder) async throws -> [ContainerLayout.LogGap] {
        guard !gaps.isEmpty else { return [] }
        var covered: [StoreID: [DeviceID: UInt64]] = [:]
        for store in Set(gaps.compactMap { ContainerLayout.parseLog($0.next)?.store }) {
            var byBaseline: [String: [(UInt64, ContainerName)]] = [:]
            for blob in try await container.listAll(prefix: ContainerLayout.baselinesPrefix(store: store)) {
                guard let parsed = ContainerLayout.parseBaselinePart(blob.name) else { continue }
                byBaseline[ContainerLayout.baselinePrefix(store: parsed.store, clock: parsed.clock, device: parsed.device, vector: parsed.vector), default: []]
                    .append((parsed.part, blob.name))
            }
            var vector: [DeviceID: UInt64] = [:]
            for parts in byBaseline.values {
                let sorted = parts.sorted { $0.0 < $1.0 }
                guard sorted.enumerated().allSatisfy({ $0.element.0 == UInt64($0.offset + 1) }),
                      let bytes = try? await container.get(sorted[0].1, maxBytes: decoder.limits.maxLogBytes),
                      case .baseline(_, let part)? = try? decoder.decode(bytes) else { continue }
                vector.merge(part.vector) { max($0, $1) }
            }
            covered[store] = vector
        }
        return gaps.filter { gap in
            guard let store = ContainerLayout.parseLog(gap.next)?.store else { return true }
            return (covered[store]?[gap.device] ?? 0) < gap.missing.upperBound
        }
    }

    /// The markers devices read, checked: the active-store pointer must name
    /// a store, and each device registration must be one, of the device its
    /// name says. A marker that cannot be read (too large, damaged) is a
    /// problem too, and so is a marker at a name Chronicle never writes.
    static func markerProblems(in container: any Container, foreign: Set<String>) async throws -> [ContainerProblem] {
        var problems: [ContainerProblem] = []
        for name in try await container.listMarkers(prefix: "") where !foreign.contains(ContainerLayout.Directory.markers + "/" + name.rawValue) {
            do {
                if name == ContainerLayout.activeStore {
                    _ = try await container.readMarker(name, as: ActiveStorePointer.self)
                } else if let device = Self.registeredDevice(name) {
                    guard let registration = try await container.readMarker(name, as: DeviceRegistration.self)?.payload else { continue }
                    if registration.device != device {
                        throw ChronicleError(.malformedBody, "the registration names device \(registration.device), not the device of its name")
                    }
                } else if let hash = ContainerLayout.parseSchemaHash(name) {
                    // A schema record: the JSON of the schema its name hashes.
                    guard let record = try await container.readMarker(name) else { continue }
                    let schema: Schema
                    do {
                        schema = try Schema(json: Data(record.bytes))
                    } catch {
                        throw ChronicleError(.malformedBody, "the schema record does not read: \(error.message)", underlying: error)
                    }
                    if schema.hash != hash {
                        throw ChronicleError(.malformedBody, "the schema record holds schema \(schema.hashString) (version \(schema.version)), not the one of its name: devices do not learn from it")
                    }
                } else if let id = ContainerLayout.parseDictionaryID(name) {
                    // A compression dictionary: its bytes, under their ID.
                    guard let record = try await container.readMarker(name) else { continue }
                    _ = try CompressionDictionary.readPublished(record.bytes, id: id)
                } else if !ContainerLayout.isReservedMarker(name) {
                    throw ChronicleError(.foreignEntry, "a marker Chronicle does not write: no device reads it")
                }
            } catch let error as ChronicleError {
                problems.append(ContainerProblem(name: name.rawValue, error: error))
            }
        }
        return problems
    }

    /// The device a registration marker's name is for, or nil if `name` is
    /// not a registration's.
    private static func registeredDevice(_ name: ContainerName) -> DeviceID? {
        let parts = name.rawValue.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3, let store = StoreID(string: String(parts[0])), let device = DeviceID(string: String(parts[2])),
              name == ContainerLayout.deviceRegistration(store: store, device: device) else { return nil }
        return device
    }

    /// Reads and verifies one blob: its size and, for a baseline part, its
    /// header and vector; or what is wrong.
    private static func verify(_ name: ContainerName, in container: any Container, decoder: LogDecoder)
        async -> (Result<(size: Int, part: (header: LogHeader, vector: [DeviceID: UInt64])?), ChronicleError>, LogDecoder) {
        var used = decoder
        do {
            let data = try await container.get(name, maxBytes: decoder.limits.maxLogBytes)
            var opened = Result { () throws(ChronicleError) in try decoder.open(data, name: name) }
            if case .failure(let error) = opened, error.code == .unknownDictionary {
                let fetched = try await decoder.fetchingDictionary(of: data, name: name, from: container, error)
                used = fetched
                opened = Result { () throws(ChronicleError) in try fetched.open(data, name: name) }
            }
            let log = try opened.get()
            if let parsed = ContainerLayout.parseLog(name),
               (parsed.device, parsed.first, parsed.last) != (log.header.deviceID, log.header.firstSequence, log.header.lastSequence) {
                throw ChronicleError(.malformedBody, "contents (device \(log.header.deviceID), sequences \(log.header.firstSequence)...\(log.header.lastSequence)) do not match the name")
            }
            let part = log.header.kind == .baseline ? (log.header, try log.baselineVector()) : nil
            return (.success((data.count, part)), used)
        } catch {
            return (.failure(error as? ChronicleError ?? ChronicleError(.io, "reading \(name) failed: \(error)", underlying: error)), used)
        }
    }
}
