import ChronicleCore

/// Copies a store from one container to another (a folder to PostgreSQL,
/// PostgreSQL to a folder, any two backends): its logs, baseline parts and
/// markers, and the container's account marker and active-store pointer
/// where the destination has none (so the copy is the same account: its
/// devices do not take it for another).
///
/// Resumable: a blob or marker the destination already holds is skipped,
/// and a put is idempotent, so a replication interrupted anywhere (a
/// crash, a lost connection, a cancelled task) and run again copies what
/// is left, once. Nothing is deleted, and nothing the destination holds is
/// replaced: a blob or marker there with other bytes than the source's is
/// reported in ``Progress/conflicts``, and left as it is.
///
/// Progress follows CDTDatastore's replicator: after each item, a
/// ``Progress`` with the items processed so far and the total, and one
/// last value with `ended` set (and the error, if one stopped it).
package struct ContainerReplication: Sendable {
    /// Where the replication stands.
    package struct Progress: Sendable {
        /// Blobs and markers examined so far.
        package var processed = 0
        /// Blobs and markers to examine in all.
        package var total = 0
        /// Of those, how many were copied (the rest were there already).
        package var copied = 0
        /// Bytes of blobs copied.
        package var bytes = 0
        /// Names the destination holds with other bytes, left as they are.
        package var conflicts: [String] = []
        /// Whether this is the last value.
        package var ended = false
        /// What stopped it, on the last value, if anything did.
        package var error: ChronicleError?
    }

    let source: any Container
    let destination: any Container

    package init(from source: any Container, to destination: any Container) {
        self.source = source
        self.destination = destination
    }

    /// Copies `store` (every store the source holds if nil).
    ///
    /// - Throws: the first error that stops it (after reporting it through
    ///   `progress` with `ended` set); `CancellationError` between items.
    @discardableResult
    package func run(store: StoreID? = nil, progress: @Sendable (Progress) -> Void = { _ in }) async throws -> Progress {
        var state = Progress()
        do {
            let prefixes: [String]
            if let store {
                prefixes = ["\(store)/"]
            } else {
                prefixes = try await source.listChildren(prefix: ContainerLayout.storesPrefix).compactMap(StoreID.init(string:))
                    .map { "\($0)/" }
            }
            var blobs: [BlobInfo] = []
            var markers: [ContainerName] = []
            for prefix in prefixes {
                blobs += try await source.listAll(prefix: prefix)
                markers += try await source.listMarkers(prefix: prefix)
            }
            let pointer = ContainerLayout.activeStore
            var containerMarkers: [ContainerName] = []
            for name in [ContainerLayout.account, pointer] where try await source.readMarker(name) != nil { containerMarkers.append(name) }
            state.total = blobs.count + markers.count + containerMarkers.count
            progress(state)
            // What the destination holds, with sizes: a blob of another
            // size under the same name is another blob.
            var present: [ContainerName: Int] = [:]
            for prefix in prefixes {
                for blob in try await destination.listAll(prefix: prefix) { present[blob.name] = blob.size }
            }
            for blob in blobs {
                try Task.checkCancellation()
                if let size = present[blob.name] {
                    if size != blob.size { state.conflicts.append(blob.name.rawValue) }
                } else {
                    let bytes = try await source.get(blob.name, maxBytes: max(blob.size, 1))
                    do {
                        try await destination.put(blob.name, bytes)
                        state.copied += 1
                        state.bytes += bytes.count
                    } catch let error as ChronicleError where error.code == .blobConflict {
                        state.conflicts.append(blob.name.rawValue)
                    }
                }
                state.processed += 1
                progress(state)
            }
            for name in markers + containerMarkers {
                try Task.checkCancellation()
                if let marker = try await source.readMarker(name) {
                    if let existing = try await destination.readMarker(name) {
                        if existing.bytes != marker.bytes { state.conflicts.append(name.rawValue) }
                    } else {
                        do {
                            _ = try await destination.createMarker(name, marker.bytes)
                            state.copied += 1
                        } catch let error as ChronicleError where error.code == .markerConflict {
                            // Created meanwhile by another writer: theirs stays.
                        }
                    }
                }
                state.processed += 1
                progress(state)
            }
        } catch let error as ChronicleError {
            state.ended = true
            state.error = error
            progress(state)
            throw error
        }
        state.ended = true
        progress(state)
        return state
    }
}
