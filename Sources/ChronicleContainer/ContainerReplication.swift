import ChronicleCore

/// Copies a store from one container to another (a folder to PostgreSQL,
/// PostgreSQL to a folder, any two backends): its logs, baseline parts and
/// markers, and the container's account marker and active-store pointer
/// where the destination has none (so the copy is the same account: its
/// devices do not take it for another).
///
/// Only logs and baseline parts are copied, each verified first (header
/// and body checksums, the body's structure): one that does not verify, or
/// is larger than any log, is reported in ``Progress/damaged`` and left
/// out, and an entry that is neither is reported in ``Progress/foreign``:
/// a copy does not spread damage. A damaged log's device puts it back in
/// the source at its next sync; copy again then.
///
/// A destination that belongs to another account (another account marker,
/// and stores) takes nothing: ``ChronicleError/Code/markerConflict``.
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
        /// Of those, how many were copied.
        package var copied = 0
        /// Of those, how many the destination held already, the same.
        package var alreadyThere = 0
        /// Bytes of blobs copied.
        package var bytes = 0
        /// Names the destination holds with other bytes, left as they are.
        package var conflicts: [String] = []
        /// Logs and baseline parts of the source that do not verify (or
        /// are larger than any log), with why: not copied.
        package var damaged: [String] = []
        /// Entries under the stores' folders that are neither logs nor
        /// baseline parts (and, copying every store, folders that are not
        /// stores'): not copied.
        package var foreign: [String] = []
        /// Stores deleted on purpose in the source: not copied.
        package var deleted: [String] = []
        /// Whether this is the last value.
        package var ended = false
        /// What stopped it, on the last value, if anything did.
        package var error: ChronicleError?

        /// Nothing done yet.
        package init() {}
    }

    let source: any Container
    let destination: any Container

    package init(from source: any Container, to destination: any Container) {
        self.source = source
        self.destination = destination
    }

    /// Copies `store` (every store the source holds if nil).
    ///
    /// The account marker goes first, then the active-store pointer, then
    /// the stores' markers, then the blobs: a device that syncs from the
    /// destination while a copy runs (or after one was interrupted) takes
    /// it for the same account and joins the store being copied, whose
    /// missing logs it reads as they arrive, instead of starting a store
    /// and an account of its own there.
    ///
    /// A store deleted on purpose in the source (its tombstone) is not
    /// copied (``Progress/deleted``): its deletion must not reach a
    /// destination where devices still use it. A destination that holds a
    /// store's tombstone takes nothing of that store.
    ///
    /// - Throws: ``ChronicleError/Code/notFound`` when `store` is given and
    ///   the source holds nothing of it; the first error that stops it
    ///   (after reporting it through `progress` with `ended` set);
    ///   `CancellationError` between items.
    @discardableResult
    package func run(store: StoreID? = nil, progress: @Sendable (Progress) -> Void = { _ in }) async throws -> Progress {
        var state = Progress()
        do {
            var stores: [StoreID]
            if let store {
                stores = [store]
            } else {
                let children = try await source.listChildren(prefix: ContainerLayout.storesPrefix)
                stores = children.compactMap(StoreID.init(string:))
                state.foreign += children.filter { StoreID(string: $0) == nil }.map { "\($0)/" }
            }
            for candidate in stores {
                if try await source.readMarker(ContainerLayout.tombstone(store: candidate)) != nil {
                    state.deleted.append(candidate.description)
                } else if try await destination.readMarker(ContainerLayout.tombstone(store: candidate)) != nil {
                    throw ChronicleError(.markerConflict, "the destination holds store \(candidate) deleted on purpose (its tombstone): no device there would read it; nothing was copied")
                }
            }
            stores.removeAll { state.deleted.contains($0.description) }
            let prefixes = stores.map { "\($0)/" }
            var blobs: [BlobInfo] = []
            var markers: [ContainerName] = []
            for prefix in prefixes {
                blobs += try await source.listAll(prefix: prefix)
                markers += try await source.listMarkers(prefix: prefix)
            }
            if let store, blobs.isEmpty, markers.isEmpty, state.deleted.isEmpty {
                throw ChronicleError(.notFound, "the source holds no store \(store) (`chronicle inspect` lists its stores)")
            }
            let account = try await source.readMarker(ContainerLayout.account)
            // The pointer only when it names a store copied here.
            var pointer: Marker?
            if let marker = try await source.readMarker(ContainerLayout.activeStore),
               let named = try? ActiveStorePointer(markerBytes: marker.bytes),
               stores.contains(named.store) {
                pointer = marker
            }
            state.total = blobs.count + markers.count + (account == nil ? 0 : 1) + (pointer == nil ? 0 : 1)
            progress(state)
            if let account {
                switch try await Self.carryAccount(account.bytes, into: destination) {
                case .copied: state.copied += 1
                case .alreadyThere: state.alreadyThere += 1
                case .conflict: throw Self.otherAccount()
                }
                state.processed += 1
                progress(state)
            }
            if let pointer {
                try await copyMarker(ContainerLayout.activeStore, pointer, &state)
                state.processed += 1
                progress(state)
            }
            for name in markers {
                try Task.checkCancellation()
                defer {
                    state.processed += 1
                    progress(state)
                }
                do {
                    guard let marker = try await source.readMarker(name) else { continue }
                    if let id = ContainerLayout.parseDictionaryID(name) {
                        // A compression dictionary is copied only whole; a
                        // damaged copy in the destination is put right.
                        _ = try CompressionDictionary.readPublished(marker.bytes, id: id)
                        if let existing = try await destination.readMarker(name), existing.bytes != marker.bytes,
                           (try? CompressionDictionary.readPublished(existing.bytes, id: id)) == nil {
                            _ = try await destination.replaceMarker(name, marker.bytes, expected: existing.version)
                            state.copied += 1
                            continue
                        }
                    }
                    try await copyMarker(name, marker, &state)
                } catch let error as ChronicleError where !error.code.isTransient || error.code == .shortRead {
                    // A marker file that does not read (too short, a link, a
                    // folder): reported, and the copy goes on.
                    state.damaged.append("\(name.rawValue) (\(error.code): \(error.message))")
                }
            }
            // What the destination holds, with sizes: a blob of another
            // size under the same name is another blob.
            var present: [ContainerName: Int] = [:]
            for prefix in prefixes {
                for blob in try await destination.listAll(prefix: prefix) { present[blob.name] = blob.size }
            }
            let decoder = LogDecoder(schema: nil)
            for blob in blobs {
                try Task.checkCancellation()
                defer {
                    state.processed += 1
                    progress(state)
                }
                // Only logs and baseline parts, each verified: a stray
                // entry or a damaged log is not spread to another container.
                guard ContainerLayout.parseLog(blob.name) != nil || ContainerLayout.parseBaselinePart(blob.name) != nil else {
                    state.foreign.append(blob.name.rawValue)
                    continue
                }
                guard blob.size <= decoder.limits.maxLogBytes else {
                    state.damaged.append("\(blob.name.rawValue) (\(blob.size) bytes: larger than any log)")
                    continue
                }
                if let size = present[blob.name] {
                    // The same name: the same bytes, or a conflict (a size
                    // tells most apart without reading either).
                    if size != blob.size {
                        state.conflicts.append(blob.name.rawValue)
                    } else if try await source.get(blob.name, maxBytes: decoder.limits.maxLogBytes)
                                == destination.get(blob.name, maxBytes: decoder.limits.maxLogBytes) {
                        state.alreadyThere += 1
                    } else {
                        state.conflicts.append(blob.name.rawValue)
                    }
                } else {
                    let bytes: [UInt8]
                    do {
                        bytes = try await source.get(blob.name, maxBytes: decoder.limits.maxLogBytes)
                    } catch let error as ChronicleError where error.code == .foreignEntry {
                        // A link, a FIFO or a folder where a log belongs.
                        state.foreign.append(blob.name.rawValue)
                        continue
                    }
                    // (A log compressed with a store dictionary verifies
                    // where the dictionary is; its header did here.)
                    if let problem = Self.problem(of: bytes, name: blob.name, decoder), problem.code != .unknownDictionary {
                        state.damaged.append("\(blob.name.rawValue) (\(problem.code): \(problem.message))")
                        continue
                    }
                    do {
                        try await destination.put(blob.name, bytes)
                        state.copied += 1
                        state.bytes += bytes.count
                    } catch let error as ChronicleError where error.code == .blobConflict {
                        state.conflicts.append(blob.name.rawValue)
                    }
                }
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

    /// Creates a marker the destination lacks; one it holds with other
    /// bytes is a conflict, left as it is.
    private func copyMarker(_ name: ContainerName, _ marker: Marker, _ state: inout Progress) async throws {
        if let existing = try await destination.readMarker(name) {
            if existing.bytes == marker.bytes {
                state.alreadyThere += 1
            } else if name.rawValue.contains("/applied/"), let theirs = try? AppliedReport(markerBytes: existing.bytes),
                      let ours = try? AppliedReport(markerBytes: marker.bytes), theirs.device == ours.device {
                // A device's applied report moves on with its syncs: a copy
                // made again carries the newer one, no conflict.
                if ours.milliseconds > theirs.milliseconds {
                    _ = try await destination.replaceMarker(name, marker.bytes, expected: existing.version)
                    state.copied += 1
                } else {
                    state.alreadyThere += 1
                }
            } else {
                state.conflicts.append(name.rawValue)
            }
            return
        }
        do {
            _ = try await destination.createMarker(name, marker.bytes)
            state.copied += 1
        } catch let error as ChronicleError where error.code == .markerConflict {
            // Created meanwhile by another writer: theirs stays.
            if try await destination.readMarker(name)?.bytes != marker.bytes { state.conflicts.append(name.rawValue) } else { state.alreadyThere += 1 }
        }
    }

    /// Why `bytes` do not verify as the log or baseline part `name` says
    /// they are, or nil.
    private static func problem(of bytes: [UInt8], name: ContainerName, _ decoder: LogDecoder) -> ChronicleError? {
        let header: LogHeader
        do {
            header = try decoder.open(bytes, name: name).header
        } catch {
            return error
        }
        if let log = ContainerLayout.parseLog(name) {
            guard header.kind == .transactions, header.storeID == log.store, header.deviceID == log.device,
                  header.firstSequence == log.first, header.lastSequence == log.last
            else { return ChronicleError(.malformedBody, "its header (\(header.kind) of store \(header.storeID), device \(header.deviceID), sequences \(header.firstSequence)...\(header.lastSequence)) is not what its name says") }
        } else if let part = ContainerLayout.parseBaselinePart(name) {
            guard header.kind == .baseline, header.storeID == part.store, header.deviceID == part.device, header.baselinePart == part.part
            else { return ChronicleError(.malformedBody, "its header (\(header.kind) of store \(header.storeID), device \(header.deviceID), part \(header.baselinePart)) is not what its name says") }
        }
        return nil
    }

    /// The error of a destination that belongs to another account: nothing
    /// is copied into it (its devices would take the store for theirs).
    package static func otherAccount() -> ChronicleError {
        ChronicleError(.markerConflict, "the destination belongs to another account (its account marker differs, and it holds stores): nothing was copied; copy into a new or empty container, or one `chronicle init` just made")
    }

    /// What ``carryAccount(_:into:)`` did.
    package enum AccountOutcome: Sendable {
        case copied, alreadyThere, conflict
    }

    /// Writes an account marker's `bytes` into `destination`: where it has
    /// none, and where it holds another account but no store and no
    /// active-store pointer (a container `chronicle init` just made: no
    /// device has joined it, so its account was never used). A destination
    /// that holds stores under another account keeps it: a conflict.
    package static func carryAccount(_ bytes: [UInt8], into destination: any Container) async throws -> AccountOutcome {
        guard let existing = try await destination.readMarker(ContainerLayout.account) else {
            do {
                _ = try await destination.createMarker(ContainerLayout.account, bytes)
                return .copied
            } catch let error as ChronicleError where error.code == .markerConflict {
                return try await destination.readMarker(ContainerLayout.account)?.bytes == bytes ? .alreadyThere : .conflict
            }
        }
        if existing.bytes == bytes { return .alreadyThere }
        // No store, live or deleted: no blob and no marker but the account's.
        let stores = try await destination.listChildren(prefix: ContainerLayout.storesPrefix).compactMap(StoreID.init(string:))
        let markers = try await destination.listMarkers(prefix: ContainerLayout.storesPrefix, after: nil, limit: 2)
        guard stores.isEmpty, markers.allSatisfy({ $0 == ContainerLayout.account }) else { return .conflict }
        do {
            _ = try await destination.replaceMarker(ContainerLayout.account, bytes, expected: existing.version)
            return .copied
        } catch let error as ChronicleError where error.code == .markerConflict {
            return .conflict
        }
    }
}
