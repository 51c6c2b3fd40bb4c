import ChronicleContainer
import ChronicleCore
import Logging

/// The store's compression dictionary: trained from a device's own saves,
/// published in the container under its ID, fetched by every device that
/// reads a log compressed against it. See `docs/log-format.md`, "The
/// store's dictionary".
extension Replayer {
    /// How many saves of its own a device needs (in its outbox) before it
    /// trains the store's dictionary, when the store has none: the default
    /// of ``dictionaryTrainingSaves``.
    package static let defaultDictionaryTrainingSaves = 64
    /// How many of its most recent saves a dictionary is trained from.
    package static let dictionaryTrainingSamples = 256
    /// How often an upload looks in the container for a newer dictionary
    /// than the one it keeps (and puts back one the container lost): the
    /// default of ``dictionaryListingInterval``, ten minutes.
    package static let defaultDictionaryListingInterval: Duration = .seconds(600)

    /// The dictionary this upload compresses against: the newest the store
    /// has published that this device keeps. Looks for newer ones at most
    /// once per ``dictionaryListingInterval``; trains and publishes one
    /// when the store has none and this device has made enough saves.
    /// nil: logs go out compressed without one.
    ///
    /// A dictionary is used only once it is in the container (or this
    /// device keeps it, and puts it back at its next listing if the
    /// container lost it): every reader can fetch what a log names.
    func uploadDictionary() async throws -> CompressionDictionary? {
        try await refreshDictionariesIfDue()
        if snapshot.newestDictionary() == nil { try await trainDictionary() }
        return snapshot.newestDictionary()?.dictionary
    }

    /// ``syncDictionaries()`` once per ``dictionaryListingInterval`` (and
    /// at the first sync after opening): every sync of a device that keeps
    /// a dictionary so puts it back within that interval if the container
    /// lost it, whether or not the device has saves to upload.
    func refreshDictionariesIfDue() async throws {
        let now = clock.nowMilliseconds()
        let interval = UInt64(dictionaryListingInterval.components.seconds) * 1000
            + UInt64(dictionaryListingInterval.components.attoseconds / 1_000_000_000_000_000)
        if let listedAt = snapshot.dictionariesListedAt, now >= listedAt, now - listedAt < interval { return }
        try await syncDictionaries()
        snapshot.dictionariesListedAt = now
    }

    /// Keeps every dictionary the store published that verifies, and
    /// publishes again those this device keeps that the container lacks or
    /// holds damaged (a dictionary is immutable: its ID names its bytes).
    package func syncDictionaries() async throws {
        let store = snapshot.storeID
        let kept = Dictionary(snapshot.keptDictionaries().map { ($0.dictionary.id, $0) }, uniquingKeysWith: { a, _ in a })
        var listed = Set<UInt32>()
        for name in try await container.listMarkers(prefix: ContainerLayout.dictionariesPrefix(store: store)) {
            guard let id = ContainerLayout.parseDictionaryID(name) else { continue }
            let marker: Marker
            do {
                guard let read = try await container.readMarker(name) else { continue }
                marker = read
            } catch let error as ChronicleError where error.code == .foreignEntry {
                // Not Chronicle's to remove: `chronicle verify` names it.
                listed.insert(id)
                logger.warning("a compression dictionary's place in the container holds something Chronicle did not write",
                               metadata: ["chronicle.dictionary": "\(name)", "chronicle.error": "\(error)"])
                continue
            }
            listed.insert(id)
            do {
                let read = try CompressionDictionary.readPublished(marker.bytes, id: id)
                if kept[id] == nil { try snapshot.keep(PublishedDictionary(dictionary: read.dictionary, created: read.created)) }
            } catch let error as ChronicleError {
                guard let mine = kept[id] else {
                    logger.warning("a compression dictionary in the container does not verify; logs compressed against it wait until a device that keeps it publishes it again",
                                   metadata: ["chronicle.dictionary": "\(name)", "chronicle.error": "\(error)"])
                    continue
                }
                _ = try? await container.replaceMarker(name, mine.dictionary.published(createdAt: mine.created), expected: marker.version)
                logger.notice("replaced a damaged copy of a compression dictionary", metadata: ["chronicle.dictionary": "\(name)"])
            }
        }
        for (id, mine) in kept where !listed.contains(id) {
            do {
                _ = try await container.createMarker(ContainerLayout.dictionary(store: store, id: id), mine.dictionary.published(createdAt: mine.created))
                logger.notice("published again a compression dictionary the container lacked",
                              metadata: ["chronicle.dictionary": "\(ContainerLayout.dictionary(store: store, id: id))"])
            } catch let error as ChronicleError where error.code == .markerConflict {
                // Published meanwhile.
            }
        }
    }

    /// Trains the store's dictionary from this device's recent saves and
    /// publishes it, if this device has made enough. Another device's
    /// dictionary of the same bytes (the same ID) is used as it is.
    func trainDictionary() async throws {
        let bodies = try snapshot.recentOwnBodies(limit: Self.dictionaryTrainingSamples)
        guard bodies.count >= max(1, dictionaryTrainingSaves) else { return }
        // One another device published since the last look is used instead.
        try await syncDictionaries()
        guard snapshot.newestDictionary() == nil else { return }
        let dictionary = try CompressionDictionary.trained(from: bodies)
        let trained = PublishedDictionary(dictionary: dictionary, created: clock.nowMilliseconds())
        let name = ContainerLayout.dictionary(store: snapshot.storeID, id: dictionary.id)
        do {
            _ = try await container.createMarker(name, dictionary.published(createdAt: trained.created))
        } catch let error as ChronicleError where error.code == .markerConflict {
            guard let theirs = try? await container.publishedDictionary(store: snapshot.storeID, id: dictionary.id) else { return }
            try snapshot.keep(theirs)
            return
        }
        try snapshot.keep(trained)
        logger.info("trained and published the store's compression dictionary",
                    metadata: ["chronicle.dictionary": "\(name)", "chronicle.bytes": "\(dictionary.bytes.count)", "chronicle.saves": "\(bodies.count)"])
    }

    /// For a log compressed against a dictionary this device does not
    /// keep: fetches that dictionary from the container. Returns nil once
    /// this device keeps it, or why it cannot: a missing or damaged one
    /// leaves the log waiting (``ChronicleError/Code/unknownDictionary`` is
    /// transient).
    func fetchDictionary(for bytes: [UInt8], at location: LogLocation?) async -> String? {
        guard let header = try? decoder.header(of: bytes, at: location), header.dictionaryID != 0 else { return "its header names none" }
        let name = ContainerLayout.dictionary(store: snapshot.storeID, id: header.dictionaryID)
        do {
            guard let found = try await container.publishedDictionary(store: snapshot.storeID, id: header.dictionaryID) else {
                return "the container holds no copy of it (\(name))"
            }
            try snapshot.keep(found)
            return nil
        } catch let error as ChronicleError {
            logger.warning("a compression dictionary cannot be read", metadata: ["chronicle.dictionary": "\(name)", "chronicle.error": "\(error)"])
            switch error.code {
            case .foreignEntry: return "its place in the container (\(name)) holds something Chronicle did not write (\(error.message)), which a person must remove"
            case .unavailable: return "the container does not answer (\(error.message))"
            default: return "the container's copy (\(name)) does not verify (\(error.code): \(error.message))"
            }
        } catch {
            return "it cannot be read: \(error)"
        }
    }
}
