import ChronicleCore

/// A compression dictionary a store published in its container (see
/// ``ContainerLayout/dictionary(store:id:)``).
package struct PublishedDictionary: Sendable {
    /// The dictionary.
    package var dictionary: CompressionDictionary
    /// When the device that trained it published it, Unix milliseconds by
    /// that device's clock: the newest is the one uploads use.
    package var created: UInt64

    /// Creates one.
    package init(dictionary: CompressionDictionary, created: UInt64) {
        self.dictionary = dictionary
        self.created = created
    }

    /// Whether this one is newer than `other` (later, or on a tie the larger ID).
    package func isNewer(than other: PublishedDictionary) -> Bool {
        (created, dictionary.id) > (other.created, other.dictionary.id)
    }
}

extension Container {
    /// The dictionary `id` of `store`, verified; nil when the container
    /// holds none under that ID.
    ///
    /// - Throws: what ``CompressionDictionary/readPublished(_:id:)`` throws
    ///   for a damaged one, and what reading the marker throws.
    package func publishedDictionary(store: StoreID, id: UInt32) async throws -> PublishedDictionary? {
        guard let marker = try await readMarker(ContainerLayout.dictionary(store: store, id: id)) else { return nil }
        let read = try CompressionDictionary.readPublished(marker.bytes, id: id)
        return PublishedDictionary(dictionary: read.dictionary, created: read.created)
    }

    /// Every dictionary `store` published that verifies, oldest first, and
    /// the names of those that do not with what is wrong.
    ///
    /// A marker that is not a file (a folder, a link) is named among the
    /// damaged ones, as is a folder of dictionaries that is not a folder.
    package func publishedDictionaries(store: StoreID) async throws -> (found: [PublishedDictionary], damaged: [(name: ContainerName, error: ChronicleError)]) {
        var found: [PublishedDictionary] = []
        var damaged: [(name: ContainerName, error: ChronicleError)] = []
        let prefix = ContainerLayout.dictionariesPrefix(store: store)
        let names: [ContainerName]
        do {
            names = try await listMarkers(prefix: prefix)
        } catch let error as ChronicleError where error.code == .foreignEntry {
            return ([], [(try ContainerName(String(prefix.dropLast())), error)])
        }
        for name in names {
            guard let id = ContainerLayout.parseDictionaryID(name) else { continue }
            do {
                if let d = try await publishedDictionary(store: store, id: id) { found.append(d) }
            } catch let error as ChronicleError where error.code != .unavailable && (error.code == .foreignEntry || !error.code.isTransient) {
                damaged.append((name, error))
            }
        }
        return (found.sorted { $1.isNewer(than: $0) }, damaged)
    }
}

extension LogDecoder {
    /// ``LogDecoder/open(_:at:)`` of the blob `name` of `container`; a log
    /// compressed against a dictionary this decoder lacks is read with the
    /// one its store published.
    ///
    /// - Throws: ``ChronicleError/Code/unknownDictionary`` when the store
    ///   published no such dictionary, or its copy does not verify.
    package func open(_ bytes: [UInt8], name: ContainerName, fetchingFrom container: any Container) async throws -> VerifiedLog {
        do {
            return try open(bytes, name: name)
        } catch where error.code == .unknownDictionary {
            return try await fetchingDictionary(of: bytes, name: name, from: container, error).open(bytes, name: name)
        }
    }

    /// ``LogDecoder/decode(_:at:)`` of the blob `name` of `container`,
    /// fetching its dictionary as ``open(_:name:fetchingFrom:)`` does.
    package func decode(_ bytes: [UInt8], name: ContainerName, fetchingFrom container: any Container) async throws -> DecodedLog {
        do {
            return try decode(bytes, name: name)
        } catch where error.code == .unknownDictionary {
            return try await fetchingDictionary(of: bytes, name: name, from: container, error).decode(bytes, name: name)
        }
    }

    /// This decoder with the dictionary that the log `bytes` at `name` was
    /// compressed against, as its store published it in `container`;
    /// `error` (the decoder's ``ChronicleError/Code/unknownDictionary``)
    /// when there is none, or a damaged one.
    package func fetchingDictionary(of bytes: [UInt8], name: ContainerName, from container: any Container, _ error: ChronicleError) async throws -> LogDecoder {
        guard let location = ContainerLayout.location(of: name) else { throw error }
        let header = try self.header(of: bytes, at: location)
        let found: PublishedDictionary?
        do {
            found = try await container.publishedDictionary(store: location.storeID, id: header.dictionaryID)
        } catch let damage as ChronicleError where !damage.code.isTransient && damage.code != .unavailable {
            throw ChronicleError(.unknownDictionary, "\(error.message); the store's published copy does not verify (\(damage.code): \(damage.message))", underlying: damage)
        }
        guard let found else { throw error }
        return adding([found.dictionary])
    }
}
