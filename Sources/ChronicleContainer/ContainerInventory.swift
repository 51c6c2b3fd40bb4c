import ChronicleCore

/// What a container holds, store by store, and the problems that show
/// without reading a blob: entries that are not Chronicle's and overlapping
/// logs of one device. `chronicle inspect` prints it; a health monitor can
/// take one of any backend.
///
/// ```swift
/// let inventory = try await ContainerInventory(of: container)
/// for problem in inventory.problems { logger.error("\(problem)") }
/// ```
///
/// Reads listings page by page and no blob: memory grows with the number of
/// stores, devices, baselines, markers and problems, not with the number of logs.
package struct ContainerInventory: Sendable {
    /// One device's logs in a store.
    package struct DeviceLogs: Sendable, Hashable {
        /// How many.
        package var logs = 0
        /// Their total size.
        package var bytes = 0
        /// The highest sequence a log name covers.
        package var lastSequence: UInt64 = 0
    }

    /// One baseline's parts.
    package struct BaselineParts: Sendable, Hashable {
        /// How many parts are listed.
        package var parts = 0
        /// Their total size.
        package var bytes = 0
    }

    /// What one store holds.
    package struct StoreContents: Sendable, Hashable {
        /// Logs per device.
        package var devices: [DeviceID: DeviceLogs] = [:]
        /// Baselines by folder name (`<clock>-<device>-<vector digest>`).
        package var baselines: [String: BaselineParts] = [:]
        /// Blobs that are neither logs nor baseline parts.
        package var otherBlobs = 0
    }

    /// The active-store pointer, if there is one.
    package var activeStore: Marker?
    /// The stores, by their folder name (a store UUID for Chronicle's own).
    package var stores: [String: StoreContents] = [:]
    /// Every marker.
    package var markers: [ContainerName] = []
    /// Entries that are not Chronicle's.
    package var foreignEntries: [ForeignEntry] = []
    /// One per foreign entry and one per pair of overlapping logs.
    package var problems: [ContainerProblem] = []

    /// Takes the inventory of `container`.
    ///
    /// - Throws: what the container throws for a listing, or when it does
    ///   not answer; a damaged marker or stray entry is a problem, not a throw.
    package init(of container: any Container, decoder: LogDecoder = LogDecoder(schema: nil), pageSize: Int = 1000) async throws {
        do {
            activeStore = try await container.readMarker(ContainerLayout.activeStore)
        } catch let error as ChronicleError where !error.code.isTransient {
            // Damaged: reported with the other markers' problems below.
            activeStore = nil
        }
        var strays: [ContainerProblem] = []
        var overlaps = ContainerLayout.LogOverlapScan()
        var overlapping: [ContainerProblem] = []
        var cursor: ContainerName?
        repeat {
            let page = try await container.list(prefix: "", after: cursor, limit: pageSize)
            for blob in page {
                if !count(blob) {
                    strays.append(ContainerProblem(name: blob.name.rawValue, error: ChronicleError(
                        .foreignEntry, "a blob that is neither a log nor a baseline part: Chronicle did not write it, and no device reads it")))
                }
                if let overlap = overlaps.next(blob.name) { overlapping.append(ContainerProblem(overlap)) }
            }
            cursor = page.count == pageSize ? page.last?.name : nil
        } while cursor != nil
        markers = try await container.listMarkers(prefix: "")
        foreignEntries = try await container.foreignEntries()
        let foreignPaths = Set(foreignEntries.map(\.path))
        problems = foreignEntries.map(ContainerProblem.init) + overlapping
            + (try await ContainerVerification.uncovered(overlaps.gaps, in: container, decoder: decoder)).map(ContainerProblem.init)
            + strays.filter { !foreignPaths.contains(ContainerLayout.Directory.blobs + "/" + $0.name) }
            + (try await ContainerVerification.markerProblems(in: container, foreign: foreignPaths))
    }

    /// Counts `blob` where it belongs; false for a blob that is neither a
    /// log nor a baseline part.
    private mutating func count(_ blob: BlobInfo) -> Bool {
        let store = String(blob.name.rawValue.prefix { $0 != "/" })
        if let log = ContainerLayout.parseLog(blob.name) {
            var logs = stores[store, default: StoreContents()].devices[log.device, default: DeviceLogs()]
            logs.logs += 1
            logs.bytes += blob.size
            logs.lastSequence = max(logs.lastSequence, log.last)
            stores[store, default: StoreContents()].devices[log.device] = logs
        } else if let part = ContainerLayout.parseBaselinePart(blob.name) {
            let folder = String(ContainerLayout.baselinePrefix(store: part.store, clock: part.clock, device: part.device, vector: part.vector)
                .split(separator: "/").last!)
            var parts = stores[store, default: StoreContents()].baselines[folder, default: BaselineParts()]
            parts.parts += 1
            parts.bytes += blob.size
            stores[store, default: StoreContents()].baselines[folder] = parts
        } else {
            stores[store, default: StoreContents()].otherBlobs += 1
            return false
        }
        return true
    }
}
