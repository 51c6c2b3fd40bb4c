import ChronicleContainer
import ChronicleCore
import Foundation
import GRDB

/// What a snapshot keeps of its store's compression dictionaries.
struct DictionaryCache: Sendable {
    /// Every dictionary kept, by ID.
    var kept: [UInt32: PublishedDictionary] = [:]
    /// When the container's dictionaries were last listed (Unix
    /// milliseconds, by the replayer's clock), if since this open.
    var listedAt: UInt64?
}

extension Snapshot {
    /// The store's compression dictionaries this device keeps (fetched
    /// from the container, or trained here), oldest first. Every decoder
    /// of this snapshot reads logs compressed against them.
    package func keptDictionaries() -> [PublishedDictionary] {
        loadedDictionaries().kept.values.sorted { $1.isNewer(than: $0) }
    }

    /// The newest dictionary kept: the one uploads compress against.
    package func newestDictionary() -> PublishedDictionary? {
        loadedDictionaries().kept.values.max { $1.isNewer(than: $0) }
    }

    /// Keeps a dictionary of the store, in the snapshot file (to read its
    /// logs after the next open too) and in memory.
    package func keep(_ dictionary: PublishedDictionary) throws {
        try pool.write { db in
            try db.execute(sql: "CREATE TABLE IF NOT EXISTS _chronicle_dictionaries (id INTEGER PRIMARY KEY NOT NULL, created INTEGER NOT NULL, bytes BLOB NOT NULL)")
            try db.execute(sql: "INSERT OR IGNORE INTO _chronicle_dictionaries (id, created, bytes) VALUES (?, ?, ?)",
                           arguments: [Int64(dictionary.dictionary.id), Int64(bitPattern: dictionary.created), Data(dictionary.dictionary.bytes)])
        }
        _ = loadedDictionaries()
        dictionaryCache.withLock { cache in
            if cache?.kept[dictionary.dictionary.id] == nil { cache?.kept[dictionary.dictionary.id] = dictionary }
        }
    }

    /// When the container's dictionaries were last listed, since this open.
    package var dictionariesListedAt: UInt64? {
        get { loadedDictionaries().listedAt }
        set { _ = loadedDictionaries(); dictionaryCache.withLock { $0?.listedAt = newValue } }
    }

    /// The bodies of this device's most recent saves (at most `limit`,
    /// oldest first): what a dictionary is trained from.
    package func recentOwnBodies(limit: Int) throws -> [[UInt8]] {
        try read { db in
            try Data.fetchAll(db, sql: "SELECT body FROM _chronicle_outbox ORDER BY sequence DESC LIMIT ?", arguments: [limit]).reversed().map { [UInt8]($0) }
        }
    }

    func loadedDictionaries() -> DictionaryCache {
        if let cache = dictionaryCache.withLock({ $0 }) { return cache }
        var loaded = DictionaryCache()
        // A file that cannot be read here fails its next real use; until
        // then it has no dictionaries (logs that need one wait).
        let rows = (try? read { db -> [Row] in
            guard try db.tableExists("_chronicle_dictionaries") else { return [] }
            return try Row.fetchAll(db, sql: "SELECT id, created, bytes FROM _chronicle_dictionaries")
        }) ?? []
        for row in rows {
            let id = UInt32(truncatingIfNeeded: row[0] as Int64)
            guard let bytes = (row[2] as Data?).map(Array.init), let dictionary = try? CompressionDictionary(id: id, bytes: bytes),
                  CompressionDictionary.identifier(for: bytes) == id else { continue }
            loaded.kept[id] = PublishedDictionary(dictionary: dictionary, created: UInt64(bitPattern: row[1] as Int64))
        }
        return dictionaryCache.withLock { cache in
            if cache == nil { cache = loaded }
            return cache!
        }
    }
}
