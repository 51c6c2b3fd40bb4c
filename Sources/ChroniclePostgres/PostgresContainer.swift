import ChronicleContainer
import ChronicleCore
import Foundation
import Logging
import NIOCore
import NIOSSL
import PostgresNIO
import Synchronization

/// A container in a PostgreSQL database, for many machines sharing one
/// store (a synced folder serves one person's devices).
///
/// Blobs and markers are rows of two tables in the container's own schema
/// (`chronicle_blobs`, `chronicle_markers`), created on first use. A
/// transaction makes every operation atomic: exclusive create is an
/// `INSERT ... ON CONFLICT DO NOTHING`, compare-and-swap an `UPDATE ...
/// WHERE version = expected`, so ``ContainerCapabilities/reliableExclusiveCreate``
/// is true and elections take a lease, never the deterministic rule.
/// Names keep the container's grammar (``ContainerName``) and compare
/// byte by byte (`COLLATE "C"`); prefixes match exactly, whatever
/// characters a name holds (`starts_with`, not `LIKE`).
///
/// One schema is one container: accounts kept apart by schema each have
/// their own (see ``Configuration/schema``).
///
/// ```swift
/// let container = try await PostgresContainer.connect(
///     PostgresContainer.Configuration(url: "postgres://chronicle@db.example.com/chronicle?schema=team_a"),
///     logger: logger)
/// defer { Task { await container.shutdown() } }
/// ```
///
/// A server that does not answer, or a connection lost mid-operation, is a
/// transient ``ChronicleError/Code/unavailable`` error: devices keep saving
/// locally and their next sync uploads what is pending. An operation that
/// failed that way may or may not have happened; every operation here can
/// be repeated (a blob put again with the same bytes, a marker read back).
public final class PostgresContainer: Container {
    /// Where the server is and which schema holds the container.
    public struct Configuration: Sendable {
        /// The server's host name (TCP), or nil with ``socketPath``.
        public var host: String?
        /// The server's TCP port.
        public var port: Int
        /// The path of the server's Unix-domain socket file, if it is reached that way.
        public var socketPath: String?
        /// The role to connect as.
        public var username: String
        /// Its password, if the server asks for one.
        public var password: String?
        /// The database.
        public var database: String?
        /// The schema that holds this container's tables: one container
        /// per schema. Lowercase letters, digits and `_`, starting with a
        /// letter, at most 63 characters.
        public var schema: String
        /// How to use TLS on a TCP connection, as libpq's `sslmode`.
        public enum TLSMode: String, Sendable, CaseIterable {
            /// Never.
            case disable
            /// If the server offers it (libpq's default).
            case prefer
            /// Always, without checking the server's certificate.
            case require
            /// Always, checking the certificate and the host name against
            /// the system's trusted roots.
            case verifyFull = "verify-full"
        }

        /// TLS on a TCP connection (a Unix-domain socket never uses it).
        public var tls: TLSMode = .prefer

        /// How long one operation may wait for the server (a connection
        /// included) before it fails as ``ChronicleError/Code/unavailable``:
        /// a dead server is an error the app sees in this time, not a hang.
        /// After an operation that went unanswered, the next ones fail at
        /// once for as long, so a sync that makes several fails in about
        /// this time too.
        public var timeout: Duration = .seconds(15)

        /// A configuration from its parts.
        public init(host: String? = "127.0.0.1", port: Int = 5432, socketPath: String? = nil, username: String,
                    password: String? = nil, database: String? = nil, schema: String = "chronicle") {
            self.host = host
            self.port = port
            self.socketPath = socketPath
            self.username = username
            self.password = password
            self.database = database
            self.schema = schema
        }

        /// A configuration from a URL:
        /// `postgres://user[:password]@host[:port]/database[?schema=name][&sslmode=mode]`,
        /// or, for a Unix-domain socket, `postgres://user@/database?host=/socket/folder[&port=5432]`
        /// (libpq's convention: `host` names the socket's folder). Without
        /// `schema`, the container is the schema `chronicle`; `sslmode` is
        /// `disable`, `prefer` (the default), `require` or `verify-full`.
        ///
        /// - Throws: ``ChronicleError/Code/invalidValue`` for a URL of
        ///   another scheme, without a user, with a bad port, schema name or
        ///   `sslmode`, or with a parameter it does not know or gives twice.
        ///   The message shows the URL without its password.
        public init(url: String) throws(ChronicleError) {
            try self.init(url: url, environment: [:])
        }

        /// A configuration from a URL, with what it leaves out taken from
        /// libpq's environment variables, as `psql` does: `PGUSER`,
        /// `PGPASSWORD`, `PGHOST` (a path: a socket's folder), `PGPORT`,
        /// `PGDATABASE` and `PGSSLMODE`. `postgres://` alone takes them all,
        /// so that no password need appear on a command line.
        ///
        /// - Throws: as ``init(url:)``; a bad value from a variable names it.
        public init(url: String, environment: [String: String]) throws(ChronicleError) {
            let shown = Self.redacted(url)
            guard let parts = URLComponents(string: url), ["postgres", "postgresql"].contains(parts.scheme ?? "") else {
                throw ChronicleError(.invalidValue, "\(shown) is not a postgres:// URL (postgres://user@host:port/database?schema=name)")
            }
            guard let user = parts.user.flatMap({ $0.isEmpty ? nil : $0 }) ?? environment["PGUSER"].flatMap({ $0.isEmpty ? nil : $0 }) else {
                throw ChronicleError(.invalidValue, "\(shown) names no user (postgres://user@host/database, or PGUSER)")
            }
            var query: [String: String] = [:]
            let known: Set<String> = ["schema", "host", "port", "sslmode", "password"]
            for item in parts.queryItems ?? [] {
                guard known.contains(item.name) else {
                    throw ChronicleError(.invalidValue, "\(shown): unknown parameter \(item.name) (known: \(known.sorted().joined(separator: ", ")))")
                }
                guard query[item.name] == nil else { throw ChronicleError(.invalidValue, "\(shown): \(item.name) is given twice") }
                query[item.name] = item.value ?? ""
            }
            var port = parts.port ?? 5432
            if let text = query["port"] {
                guard parts.port == nil, let value = Int(text) else { throw ChronicleError(.invalidValue, "\(shown): port \(text) is not a port number") }
                port = value
            } else if parts.port == nil, let text = environment["PGPORT"] {
                guard let value = Int(text) else { throw ChronicleError(.invalidValue, "PGPORT \(text) is not a port number") }
                port = value
            }
            guard (1...65_535).contains(port) else { throw ChronicleError(.invalidValue, "\(shown): port \(port) is out of range (1 to 65535)") }
            let password = parts.password ?? query["password"] ?? environment["PGPASSWORD"]
            let database = parts.path.split(separator: "/").first.map(String.init) ?? environment["PGDATABASE"].flatMap { $0.isEmpty ? nil : $0 }
            if query["host"] == nil, parts.host.map({ $0.isEmpty }) ?? true, let host = environment["PGHOST"], !host.isEmpty {
                query["host"] = host
            }
            if query["sslmode"] == nil, let mode = environment["PGSSLMODE"] { query["sslmode"] = mode }
            if let folder = query["host"], folder.hasPrefix("/") {
                self.init(host: nil, port: port, socketPath: "\(folder)/.s.PGSQL.\(port)", username: user, password: password,
                          database: database, schema: query["schema"] ?? "chronicle")
            } else {
                let host = parts.host.flatMap { $0.isEmpty ? nil : $0 } ?? query["host"].flatMap { $0.isEmpty ? nil : $0 } ?? "127.0.0.1"
                self.init(host: host, port: port, username: user, password: password, database: database, schema: query["schema"] ?? "chronicle")
            }
            if let mode = query["sslmode"] {
                guard let tls = TLSMode(rawValue: mode) else {
                    throw ChronicleError(.invalidValue, "\(shown): sslmode \(mode) is not one of \(TLSMode.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                self.tls = tls
            }
            try Self.check(schema: schema)
        }

        /// `url` with its password (in the user part or a `password`
        /// parameter) replaced by `***`, for messages.
        public static func redacted(_ url: String) -> String {
            var text = url
            if let scheme = text.range(of: "://"), let at = text[scheme.upperBound...].firstIndex(of: "@"),
               let colon = text[scheme.upperBound..<at].firstIndex(of: ":") {
                text.replaceSubrange(text.index(after: colon)..<at, with: "***")
            }
            if let range = text.range(of: "password=") {
                let end = text[range.upperBound...].firstIndex(of: "&") ?? text.endIndex
                text.replaceSubrange(range.upperBound..<end, with: "***")
            }
            return text
        }

        static func check(schema: String) throws(ChronicleError) {
            let allowed = schema.utf8.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x5F }
            guard allowed, let first = schema.utf8.first, (0x61...0x7A).contains(first), schema.utf8.count <= 63 else {
                throw ChronicleError(.invalidValue, "\"\(schema)\" is not a container schema name: lowercase letters, digits and _, starting with a letter, at most 63 characters")
            }
        }
    }

    public let capabilities = ContainerCapabilities(reliableExclusiveCreate: true)
    /// The configuration it was opened with.
    public let configuration: Configuration
    private let client: PostgresClient
    private let runner: Task<Void, Never>
    private let logger: Logger
    private let blobs: String
    private let markers: String
    /// The LISTEN/NOTIFY channel of this container's writes.
    private let channel: String
    /// When an operation last went unanswered (its timeout passed), until
    /// one is answered again: the operations after it, within one timeout,
    /// fail at once instead of each waiting the whole timeout, so a sync
    /// against a dead server fails in about one timeout, not one per call.
    private let unansweredSince = Breaker()

    private final class Breaker: Sendable {
        private let since = Mutex<ContinuousClock.Instant?>(nil)
        /// The last look at the server with a connection of its own: when,
        /// and why it could not be reached (nil: it answered).
        private let probed = Mutex<(at: ContinuousClock.Instant, unreachable: ChronicleError?)?>(nil)
        func open() { since.withLock { $0 = .now } }
        func close() { since.withLock { $0 = nil } }
        /// Whether an operation went unanswered less than `timeout` ago.
        func isOpen(within timeout: Duration) -> Bool {
            since.withLock { $0.map { ContinuousClock.now - $0 < timeout } ?? false }
        }
        /// Why the server could not be reached, by a look less than a
        /// second old; else looks again (`look` connects on its own).
        func unreachable(_ look: () async -> ChronicleError?) async -> ChronicleError? {
            if let last = probed.withLock({ $0 }), ContinuousClock.now - last.at < .seconds(1) { return last.unreachable }
            let found = await look()
            probed.withLock { $0 = (.now, found) }
            return found
        }
    }

    /// Why the server cannot be reached now, or nil if a connection of its
    /// own gets through (one look a second at most, shared by the operations).
    private func unreachable() async -> ChronicleError? {
        let configuration = configuration
        let logger = logger
        return await unansweredSince.unreachable {
            do {
                try await Self.checkConnection(configuration, logger: logger)
                return nil
            } catch let error as ChronicleError where error.code == .unavailable {
                return error
            } catch {
                // It answered (to refuse, say): reached.
                return nil
            }
        }
    }

    private init(configuration: Configuration, client: PostgresClient, runner: Task<Void, Never>, logger: Logger) {
        self.configuration = configuration
        self.client = client
        self.runner = runner
        self.logger = logger
        blobs = "\"\(configuration.schema)\".chronicle_blobs"
        markers = "\"\(configuration.schema)\".chronicle_markers"
        // An identifier: at most 63 bytes (a longer schema shares a channel
        // with another of the same first 53 bytes: a spurious wake, no more).
        channel = String("chronicle_\(configuration.schema)".prefix(63))
    }

    /// Connects to the container; with `create`, creates its schema and
    /// tables first if they do not exist yet.
    ///
    /// Without `create`, a schema that holds no container is an error, so
    /// that a mistyped schema name never becomes a separate, empty
    /// container; and a server that cannot be reached now is not: the
    /// container is returned, and its operations fail as
    /// ``ChronicleError/Code/unavailable`` until the server answers, so a
    /// device keeps saving locally and uploads at its next sync.
    ///
    /// - Throws: ``ChronicleError/Code/invalidValue`` for a bad schema
    ///   name; ``ChronicleError/Code/notFound`` for a schema without a
    ///   container (without `create`); ``ChronicleError/Code/unavailable``
    ///   if the server cannot be reached; ``ChronicleError/Code/io`` if the
    ///   server refuses (a role without rights on the schema, say).
    public static func connect(_ configuration: Configuration, create: Bool = false,
                               logger: Logger = Logger(label: "chronicle.postgres")) async throws -> PostgresContainer {
        try Configuration.check(schema: configuration.schema)
        do {
            try await checkConnection(configuration, logger: logger)
        } catch let error as ChronicleError where error.code == .unavailable && !create {
            logger.warning("the PostgreSQL server cannot be reached now; the container's operations fail until it answers",
                           metadata: ["chronicle.error": "\(error)"])
            let client = makeClient(configuration, logger: logger)
            return PostgresContainer(configuration: configuration, client: client, runner: Task { await client.run() }, logger: logger)
        }
        let client = makeClient(configuration, logger: logger)
        let runner = Task { await client.run() }
        let container = PostgresContainer(configuration: configuration, client: client, runner: runner, logger: logger)
        do {
            if create {
                try await container.createTables()
            } else {
                try await container.requireTables()
            }
        } catch let error as ChronicleError where error.code == .unavailable && !create {
            // The server went away between the two: as when it cannot be
            // reached at all, the container's operations fail until it answers.
            logger.warning("the PostgreSQL server stopped answering while the container opened; its operations fail until it answers",
                           metadata: ["chronicle.error": "\(error)"])
            return container
        } catch {
            // Not waited for: a pool still trying to connect ends on its own.
            runner.cancel()
            throw error
        }
        return container
    }

    /// The pooled client for `configuration`.
    private static func makeClient(_ configuration: Configuration, logger: Logger) -> PostgresClient {
        if let socket = configuration.socketPath {
            return PostgresClient(configuration: .init(unixSocketPath: socket, username: configuration.username,
                                                         password: configuration.password, database: configuration.database),
                                    backgroundLogger: logger)
        } else {
            let tls: PostgresClient.Configuration.TLS
            switch configuration.tls {
            case .disable: tls = .disable
            case .prefer: tls = .prefer(.makeClientConfiguration())
            case .require:
                var unchecked = TLSConfiguration.makeClientConfiguration()
                unchecked.certificateVerification = .none
                tls = .require(unchecked)
            case .verifyFull: tls = .require(.makeClientConfiguration())
            }
            var options = PostgresClient.Configuration(host: configuration.host ?? "127.0.0.1", port: configuration.port,
                                                       username: configuration.username, password: configuration.password,
                                                       database: configuration.database, tls: tls)
            options.options.connectTimeout = .seconds(5)
            return PostgresClient(configuration: options, backgroundLogger: logger)
        }
    }

    /// One connection of its own, at once: a server that refuses (an
    /// unknown role or database, a wrong password: `io`, with its SQLSTATE)
    /// or a socket nothing listens on (`unavailable`) is told now, where
    /// the pool would keep trying until the timeout.
    private static func checkConnection(_ configuration: Configuration, logger: Logger) async throws {
        var direct: PostgresConnection.Configuration
        if let socket = configuration.socketPath {
            direct = .init(unixSocketPath: socket, username: configuration.username, password: configuration.password, database: configuration.database)
        } else {
            let tls: PostgresConnection.Configuration.TLS
            switch configuration.tls {
            case .disable: tls = .disable
            case .prefer: tls = .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
            case .require:
                var unchecked = TLSConfiguration.makeClientConfiguration()
                unchecked.certificateVerification = .none
                tls = .require(try NIOSSLContext(configuration: unchecked))
            case .verifyFull: tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
            }
            direct = .init(host: configuration.host ?? "127.0.0.1", port: configuration.port, username: configuration.username,
                           password: configuration.password, database: configuration.database, tls: tls)
        }
        direct.options.connectTimeout = .seconds(max(1, min(10, configuration.timeout.components.seconds)))
        let endpoint = configuration.socketPath.map { "the socket \($0)" } ?? "\(configuration.host ?? "127.0.0.1"):\(configuration.port)"
        let what = "connecting to the PostgreSQL server at \(endpoint) as \(configuration.username)"
        do {
            let connection = try await PostgresConnection.connect(on: PostgresClient.defaultEventLoopGroup.next(), configuration: direct,
                                                                  id: 0, logger: logger).get()
            try? await connection.close()
        } catch let error as PSQLError {
            throw chronicleError(error, what)
        } catch {
            throw ChronicleError(.unavailable, "\(what) failed: \(error)")
        }
    }

    /// Closes the connections. The container cannot be used afterwards.
    public func shutdown() async {
        runner.cancel()
        await runner.value
    }

    private func requireTables() async throws {
        let schema = configuration.schema
        let what = "opening the container in schema \(schema)"
        let found = try await query(what, "SELECT count(*)::bigint FROM pg_tables WHERE schemaname = \(schema) AND tablename IN ('chronicle_blobs', 'chronicle_markers')")
        let count = try found.first.map { row in try decoding(what) { try row.decode(Int64.self) } } ?? 0
        guard count == 2 else {
            throw ChronicleError(.notFound, "schema \(schema) of database \(configuration.database ?? configuration.username) holds no Chronicle container: create it with `chronicle init` (or connect with create: true)")
        }
        // And it can be read with these credentials.
        _ = try await query(what, "SELECT 1 FROM \(unescaped: markers) LIMIT 1")
    }

    private func createTables() async throws {
        let schema = configuration.schema
        try await run("creating the container's tables") { connection in
            try await connection.withTransaction(logger: self.logger) { connection in
                // Two devices creating the same container at once: one waits for the other.
                try await connection.query("SELECT pg_advisory_xact_lock(hashtext(\(schema)))", logger: self.logger)
                // Created only when missing: an account's role may own its
                // schema without the right to create schemas in the database.
                let exists = try await connection.query("SELECT 1 FROM pg_namespace WHERE nspname = \(schema)", logger: self.logger).collect()
                if !exists.isEmpty {
                    // A schema that holds other things is not made a
                    // container: a container takes a schema of its own.
                    var others: [String] = []
                    let rows = try await connection.query("""
                        SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                        WHERE n.nspname = \(schema) AND c.relkind IN ('r', 'v', 'm', 'p', 'f', 'S')
                        AND c.relname NOT IN ('chronicle_blobs', 'chronicle_markers') ORDER BY c.relname LIMIT 5
                        """, logger: self.logger)
                    for try await row in rows { others.append(try row.decode(String.self)) }
                    if !others.isEmpty {
                        throw ChronicleError(.notFound, "schema \(schema) holds other tables (\(others.joined(separator: ", "))) and no Chronicle container: a container takes a schema of its own; name another with ?schema=")
                    }
                }
                if schema == "information_schema" || schema.hasPrefix("pg_") {
                    throw ChronicleError(.notFound, "schema \(schema) is PostgreSQL's own: a container takes a schema of its own; name another with ?schema=")
                }
                if exists.isEmpty {
                    try await connection.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA \"\(schema)\""), logger: self.logger)
                }
                try await connection.query(PostgresQuery(unsafeSQL: """
                    CREATE TABLE IF NOT EXISTS \(self.blobs) (
                        name text COLLATE "C" PRIMARY KEY,
                        bytes bytea NOT NULL,
                        log_prefix text COLLATE "C",
                        log_first bigint,
                        log_last bigint)
                    """), logger: self.logger)
                try await connection.query(PostgresQuery(unsafeSQL: """
                    CREATE INDEX IF NOT EXISTS chronicle_blobs_logs ON \(self.blobs) (log_prefix, log_first) WHERE log_prefix IS NOT NULL
                    """), logger: self.logger)
                try await connection.query(PostgresQuery(unsafeSQL: """
                    CREATE TABLE IF NOT EXISTS \(self.markers) (
                        name text COLLATE "C" PRIMARY KEY,
                        bytes bytea NOT NULL,
                        version bigint NOT NULL)
                    """), logger: self.logger)
            }
        }
    }

    // MARK: Blobs

    public func put(_ name: ContainerName, _ bytes: [UInt8]) async throws {
        let log = ContainerLayout.parseLog(name)
        if let log { try Self.checkLogSpan(log, name) }
        let raw = name.rawValue
        let buffer = ByteBuffer(bytes: bytes)
        try await run("storing \(name)") { connection in
            try await connection.withTransaction(logger: self.logger) { connection in
                if let log {
                    // Logs of one device never overlap: checked and stored
                    // under a lock per device, so two writers cannot both pass.
                    let prefix = ContainerLayout.logPrefix(store: log.store, device: log.device)
                    try await connection.query("SELECT pg_advisory_xact_lock(hashtext(\(prefix)))", logger: self.logger)
                    let first = Int64(bitPattern: log.first), last = Int64(bitPattern: log.last)
                    let overlapping = try await connection.query("""
                        SELECT name FROM \(unescaped: self.blobs)
                        WHERE log_prefix = \(prefix) AND log_first <= \(last) AND log_last >= \(first) AND name <> \(raw) LIMIT 1
                        """, logger: self.logger)
                    for try await (other) in overlapping.decode(String.self) {
                        throw ChronicleError(.blobConflict, "log \(name) overlaps the stored log \(other) of device \(log.device): two writers use one device ID")
                    }
                }
                let logPrefix = log.map { ContainerLayout.logPrefix(store: $0.store, device: $0.device) }
                let logFirst = log.map { Int64(bitPattern: $0.first) }, logLast = log.map { Int64(bitPattern: $0.last) }
                let inserted = try await connection.query("""
                    INSERT INTO \(unescaped: self.blobs) (name, bytes, log_prefix, log_first, log_last)
                    VALUES (\(raw), \(buffer), \(logPrefix)::text, \(logFirst)::bigint, \(logLast)::bigint)
                    ON CONFLICT (name) DO NOTHING RETURNING 1
                    """, logger: self.logger)
                var stored = false
                for try await _ in inserted { stored = true }
                if stored {
                    // Delivered when the transaction commits.
                    try await connection.query("SELECT pg_notify(\(self.channel), '')", logger: self.logger)
                    return
                }
                // The name was taken: the same bytes are a retry, others a conflict.
                let existing = try await connection.query("SELECT bytes = \(buffer) FROM \(unescaped: self.blobs) WHERE name = \(raw)",
                                                          logger: self.logger)
                for try await same in existing.decode(Bool.self) where !same {
                    throw ChronicleError(.blobConflict, "blob \(name) already exists with different bytes")
                }
            }
        }
    }

    public func get(_ name: ContainerName, maxBytes: Int) async throws -> [UInt8] {
        let cap = Int64(clamping: maxBytes)
        let rows = try await query("reading \(name)", """
            SELECT octet_length(bytes)::bigint, CASE WHEN octet_length(bytes) <= \(cap) THEN bytes END
            FROM \(unescaped: blobs) WHERE name = \(name.rawValue)
            """)
        guard let row = rows.first else { throw ChronicleError(.notFound, "no blob named \(name)") }
        let (size, bytes) = try decoding("reading \(name)") { try row.decode((Int64, ByteBuffer?).self) }
        guard let bytes else {
            throw ChronicleError(.sizeOverCap, "blob \(name) is \(size) bytes, over the cap of \(maxBytes)")
        }
        return Array(bytes.readableBytesView)
    }

    public func list(prefix: String, after: ContainerName?, limit: Int) async throws -> [BlobInfo] {
        guard limit > 0 else { return [] }
        let what = "listing \(prefix.isEmpty ? "the container" : prefix)"
        var found: [BlobInfo] = []
        var cursor = after?.rawValue ?? ""
        // Names outside the grammar (rows written by hand) are passed over
        // here and reported by `foreignEntries`; a page is filled past them.
        while found.count < limit {
            let count = Int64(limit - found.count)
            let rows = try await query(what, """
                SELECT name, octet_length(bytes)::bigint FROM \(unescaped: blobs)
                WHERE name >= \(prefix) AND starts_with(name, \(prefix)) AND name > \(cursor) ORDER BY name LIMIT \(count)
                """)
            for row in rows {
                let (name, size) = try decoding(what) { try row.decode((String, Int64).self) }
                cursor = name
                if let valid = try? ContainerName(name) { found.append(BlobInfo(name: valid, size: Int(size))) }
            }
            if rows.count < Int(count) { break }
        }
        return found
    }

    public func listChildren(prefix: String) async throws -> [String] {
        let rows = try await query("listing the children of " + (prefix.isEmpty ? "the container" : prefix), """
            SELECT DISTINCT substring(substr(name, length(\(prefix)) + 1) from '^/*([^/]+)') AS child FROM \(unescaped: blobs)
            WHERE name >= \(prefix) AND starts_with(name, \(prefix)) ORDER BY child
            """)
        return try rows.compactMap { row in try decoding("listing the children of \(prefix)") { try row.decode(String?.self) } }
    }

    public func delete(_ name: ContainerName) async throws {
        _ = try await query("deleting \(name)", "DELETE FROM \(unescaped: blobs) WHERE name = \(name.rawValue)")
    }

    /// Rows whose names are outside the container grammar (written by
    /// hand, or by another program): Chronicle's listings pass over them.
    /// Nothing but blobs and markers can be stored in the tables, so there
    /// is no other kind of foreign entry.
    public func foreignEntries(prefix: String) async throws -> [ForeignEntry] {
        var entries: [ForeignEntry] = []
        for (table, folder) in [(blobs, ContainerLayout.Directory.blobs), (markers, ContainerLayout.Directory.markers)] {
            let rows = try await query("looking for names outside the grammar under " + (prefix.isEmpty ? "the container" : prefix), """
                SELECT name FROM \(unescaped: table) WHERE name >= \(prefix) AND starts_with(name, \(prefix)) ORDER BY name
                """)
            for row in rows {
                let name = try decoding("looking for names outside the grammar") { try row.decode(String.self) }
                if (try? ContainerName(name)) == nil { entries.append(ForeignEntry(path: "\(folder)/\(name)", reason: .nameOutsideGrammar)) }
            }
        }
        return entries
    }

    // MARK: Markers

    public func readMarker(_ name: ContainerName) async throws -> Marker? {
        let rows = try await query("reading the marker \(name)", "SELECT bytes, version FROM \(unescaped: markers) WHERE name = \(name.rawValue)")
        guard let row = rows.first else { return nil }
        let (bytes, version) = try decoding("reading the marker \(name)") { try row.decode((ByteBuffer, Int64).self) }
        return Marker(bytes: Array(bytes.readableBytesView), version: UInt64(bitPattern: version))
    }

    public func createMarker(_ name: ContainerName, _ bytes: [UInt8]) async throws -> Marker {
        try Self.checkMarkerSize(bytes, name)
        let buffer = ByteBuffer(bytes: bytes)
        let rows = try await query("creating the marker \(name)", """
            WITH made AS (INSERT INTO \(unescaped: markers) (name, bytes, version) VALUES (\(name.rawValue), \(buffer), 1)
                          ON CONFLICT (name) DO NOTHING RETURNING version)
            SELECT version, pg_notify(\(channel), '') FROM made
            """)
        guard !rows.isEmpty else { throw ChronicleError(.markerConflict, "marker \(name) already exists") }
        return Marker(bytes: bytes, version: 1)
    }

    public func replaceMarker(_ name: ContainerName, _ bytes: [UInt8], expected: UInt64) async throws -> Marker {
        try Self.checkMarkerSize(bytes, name)
        let next = expected == .max ? 1 : expected + 1
        let buffer = ByteBuffer(bytes: bytes)
        let (was, now) = (Int64(bitPattern: expected), Int64(bitPattern: next))
        let rows = try await query("replacing the marker \(name)", """
            WITH changed AS (UPDATE \(unescaped: markers) SET bytes = \(buffer), version = \(now)
                             WHERE name = \(name.rawValue) AND version = \(was) RETURNING version)
            SELECT version, pg_notify(\(channel), '') FROM changed
            """)
        guard !rows.isEmpty else { throw ChronicleError(.markerConflict, "marker \(name) is not at version \(expected)") }
        return Marker(bytes: bytes, version: next)
    }

    public func deleteMarker(_ name: ContainerName, expected: UInt64?) async throws {
        guard let expected else {
            _ = try await query("deleting the marker \(name)", "DELETE FROM \(unescaped: markers) WHERE name = \(name.rawValue)")
            return
        }
        let was = Int64(bitPattern: expected)
        let rows = try await query("deleting the marker \(name)", """
            WITH gone AS (DELETE FROM \(unescaped: markers) WHERE name = \(name.rawValue) AND version = \(was) RETURNING 1)
            SELECT (SELECT count(*) FROM gone)::bigint, (SELECT version FROM \(unescaped: markers) WHERE name = \(name.rawValue))
            """)
        guard let row = rows.first else { return }
        let (deleted, current) = try decoding("deleting the marker \(name)") { try row.decode((Int64, Int64?).self) }
        if deleted == 0, let current {
            throw ChronicleError(.markerConflict, "marker \(name) is at version \(UInt64(bitPattern: current)), expected \(expected)")
        }
    }

    public func listMarkers(prefix: String, after: ContainerName?, limit: Int) async throws -> [ContainerName] {
        try await listMarkers(prefix: prefix, afterRaw: after?.rawValue ?? "", limit: limit)
    }

    /// A page of marker names after `cursor`, a raw name (one outside the
    /// grammar included). Names outside the grammar are passed over, and
    /// the page is filled past them (see `list(prefix:after:limit:)`).
    private func listMarkers(prefix: String, afterRaw cursor: String, limit: Int) async throws -> [ContainerName] {
        guard limit > 0 else { return [] }
        let count = Int64(limit)
        let rows = try await query("listing the markers under \(prefix)", """
            SELECT name FROM \(unescaped: markers) WHERE name >= \(prefix) AND starts_with(name, \(prefix)) AND name > \(cursor)
            ORDER BY name LIMIT \(count)
            """)
        let names = try rows.map { row in try decoding("listing the markers under \(prefix)") { try row.decode(String.self) } }
        let valid = names.compactMap { try? ContainerName($0) }
        if valid.count < names.count, names.count == limit, let last = names.last {
            return valid + (try await listMarkers(prefix: prefix, afterRaw: last, limit: limit - valid.count))
        }
        return valid
    }

    public func listMarkers(prefix: String) async throws -> [ContainerName] {
        let rows = try await query("listing the markers under \(prefix)", """
            SELECT name FROM \(unescaped: markers) WHERE name >= \(prefix) AND starts_with(name, \(prefix)) ORDER BY name
            """)
        return try rows.map { row in try decoding("listing the markers under \(prefix)") { try row.decode(String.self) } }
            .compactMap { try? ContainerName($0) }
    }

    // MARK: Notifications

    /// Yields after each blob or marker another handle writes (LISTEN on
    /// the container's channel; writes NOTIFY it as they commit). A lost
    /// connection is listened on again after a second; what was written
    /// meanwhile is found by the next tick of the sync loop.
    public func changes() async -> AsyncStream<Void>? {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let client = self.client, channel = self.channel, logger = self.logger
        let listener = Task {
            while !Task.isCancelled {
                do {
                    try await client.withConnection { connection in
                        try await connection.listen(on: channel) { notifications in
                            for try await _ in notifications { continuation.yield() }
                        }
                    }
                } catch {
                    logger.debug("listening for container writes failed; listening again", metadata: ["chronicle.error": "\(error)"])
                }
                try? await Task.sleep(for: .seconds(1))
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in listener.cancel() }
        return stream
    }

    // MARK: Running queries

    /// Runs `query` and collects its rows.
    private func query(_ what: String, _ query: PostgresQuery) async throws -> [PostgresRow] {
        try await run(what) { connection in
            var rows: [PostgresRow] = []
            for try await row in try await connection.query(query, logger: self.logger) { rows.append(row) }
            return rows
        }
    }

    /// Runs `body` on a connection, within ``Configuration/timeout``, with
    /// the errors it meets as Chronicle's.
    private func run<T: Sendable>(_ what: String, _ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        let client = self.client
        let timeout = configuration.timeout
        if unansweredSince.isOpen(within: timeout) {
            // Back already? A connection of its own says (a server that
            // restarted is used again within a second, not a timeout).
            if let unreachable = await unreachable() {
                throw ChronicleError(.unavailable, "\(what) failed: the PostgreSQL server could not be reached or did not answer moments ago, and cannot be reached now: \(unreachable.message)")
            }
            unansweredSince.close()
        }
        let unanswered = unansweredSince
        do {
            // The caller gets an answer within the timeout even if the
            // operation does not stop at once when cancelled (a connection
            // attempt in flight): it is cancelled and left to end.
            return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                let answer = Answer(continuation)
                let operation = Task {
                    do {
                        let result = try await client.withConnection { connection in try await body(connection) }
                        unanswered.close()
                        answer.give(.success(result))
                    } catch {
                        answer.give(.failure(error))
                    }
                }
                answer.watch(Task {
                    // Not answered within a second: a server that cannot be
                    // reached at all (killed, say) fails the operation now,
                    // not after the whole timeout.
                    let first = min(timeout, .seconds(1))
                    guard (try? await Task.sleep(for: first)) != nil else { return }
                    if timeout > first {
                        if let unreachable = await self.unreachable() {
                            if answer.give(.failure(ChronicleError(.unavailable, "\(what) failed: the PostgreSQL server cannot be reached: \(unreachable.message)"))) {
                                unanswered.open()
                                operation.cancel()
                            }
                            return
                        }
                        guard (try? await Task.sleep(for: timeout - first)) != nil else { return }
                    }
                    if answer.give(.failure(ChronicleError(.unavailable, "\(what) failed: the PostgreSQL server did not answer within \(timeout)"))) {
                        unanswered.open()
                        operation.cancel()
                    }
                })
            }
        } catch let error as PostgresTransactionError {
            // What failed inside a transaction: the body's own error first.
            let cause = error.closureError ?? error.beginError ?? error.commitError ?? error.rollbackError
            if let cause = cause as? ChronicleError { throw cause }
            if let cause = cause as? PSQLError { throw Self.chronicleError(cause, what) }
            throw ChronicleError(.unavailable, "\(what) failed: the PostgreSQL server did not answer (\(cause.map { "\($0)" } ?? "\(error)"))")
        } catch let error as ChronicleError {
            throw error
        } catch let error as PSQLError {
            throw Self.chronicleError(error, what)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw ChronicleError(.unavailable, "\(what) failed: the PostgreSQL server did not answer (\(error))")
        }
    }

    /// A continuation resumed by whichever comes first, the operation or
    /// its timeout.
    private final class Answer<T: Sendable>: Sendable {
        private let state: Mutex<(continuation: CheckedContinuation<T, any Error>?, timer: Task<Void, Never>?)>

        init(_ continuation: CheckedContinuation<T, any Error>) {
            state = Mutex((continuation, nil))
        }

        /// The timeout's task, cancelled once an answer is given (at once
        /// if one was): no sleeping task outlives its operation.
        func watch(_ timer: Task<Void, Never>) {
            let answered = state.withLock { s in
                s.timer = timer
                return s.continuation == nil
            }
            if answered { timer.cancel() }
        }

        /// Resumes with `result` unless something did already; says whether it did.
        @discardableResult
        func give(_ result: Result<T, any Error>) -> Bool {
            let (continuation, timer) = state.withLock { s in
                defer { s.continuation = nil; s.timer = nil }
                return (s.continuation, s.timer)
            }
            guard let continuation else { return false }
            timer?.cancel()
            continuation.resume(with: result)
            return true
        }
    }

    /// A server that reported an error is answering: that is the server's
    /// refusal (`io`); anything else (no connection, a connection lost,
    /// a timeout) is transient.
    static func chronicleError(_ error: PSQLError, _ what: String) -> ChronicleError {
        if let server = error.serverInfo {
            let message = server[.message] ?? "\(error.code)"
            let state = server[.sqlState] ?? "?"
            // Class 08 (connection exception), 53 (insufficient resources), 57P (operator intervention: a shutdown).
            if state.hasPrefix("08") || state.hasPrefix("53") || state.hasPrefix("57P") {
                return ChronicleError(.unavailable, "\(what) failed: the PostgreSQL server is not available (\(state): \(message))")
            }
            return ChronicleError(.io, "\(what) failed: the PostgreSQL server refused (\(state): \(message))")
        }
        let reason = error.underlying.map { ": \(String(describing: $0).prefix(200))" } ?? ""
        return ChronicleError(.unavailable, "\(what) failed: the PostgreSQL server did not answer (\(error.code)\(reason))")
    }

    private func decoding<T>(_ what: String, _ decode: () throws -> T) throws -> T {
        do {
            return try decode()
        } catch {
            throw ChronicleError(.io, "\(what) failed: the server's answer was not what a Chronicle container holds: a column of another type, or a NULL (\(String(reflecting: error)))")
        }
    }
}
