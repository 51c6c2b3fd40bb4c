import Chronicle
import ChronicleContainer
import ChronicleCore
import ChroniclePostgres
import ChronicleTestSupport
import Foundation
import GRDB
import Logging
import PostgresNIO
import Testing

/// The server `make test` starts (scripts/with-postgres), as a URL:
/// `postgres://user@/database?host=/socket/folder&port=N`.
let serverURL = ProcessInfo.processInfo.environment["CHRONICLE_TEST_POSTGRES"]

/// The client's own log lines (each failed connection attempt) stay out of the test output.
let quiet: Logger = {
    var logger = Logger(label: "test")
    logger.logLevel = .critical
    return logger
}()

/// A container in a schema of its own on the test server: every check
/// starts from an empty container.
func freshContainer(_ label: String = "conf") async throws -> (PostgresContainer, PostgresContainer.Configuration) {
    var configuration = try PostgresContainer.Configuration(url: try #require(serverURL, "CHRONICLE_TEST_POSTGRES names no server"))
    configuration.schema = "\(label)_\(UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16))"
    // A machine busy with the rest of the suite (or a build) delays the
    // server and the client's tasks: the timeout is for dead servers only.
    configuration.timeout = .seconds(120)
    return (try await PostgresContainer.connect(configuration, create: true, logger: quiet), configuration)
}

/// Runs `body` with a client of its own on the server `configuration` names.
func withClient(_ configuration: PostgresContainer.Configuration, _ body: (PostgresClient) async throws -> Void) async throws {
    let client = PostgresClient(configuration: .init(unixSocketPath: try #require(configuration.socketPath), username: configuration.username,
                                                     password: nil, database: configuration.database),
                                backgroundLogger: quiet)
    let runner = Task { await client.run() }
    defer { runner.cancel() }
    try await body(client)
}

/// A device of `schema` in `root/name` on `container`.
func openStore(_ name: String, in root: URL, on container: any Container, schema: Schema) async throws -> Store {
    try await Store.open(Store.Configuration(schema: schema, directory: root.appendingPathComponent(name), container: container,
                                             logger: quiet, durability: .normal))
}

/// The same conformance suite as the other backends, on a real server.
/// Without a server named in CHRONICLE_TEST_POSTGRES these tests are not
/// run and say why; `make test` always names one, and fails if it cannot
/// start it.
@Suite(.enabled(if: serverURL != nil, "no PostgreSQL server: run `make test`, which starts one (scripts/with-postgres)"))
struct PostgresContainerTests {
    @Test(arguments: ContainerConformance.checks)
    func conformance(check: ContainerConformance.Check) async throws {
        let (container, configuration) = try await freshContainer()
        do {
            try await check.run {
                ContainerConformance.Subject(container) { try await PostgresContainer.connect(configuration, logger: quiet) }
            }
        } catch {
            await container.shutdown()
            throw error
        }
        await container.shutdown()
    }

    @Test func exclusiveCreateIsReliable() async throws {
        let (container, _) = try await freshContainer()
        #expect(container.capabilities.reliableExclusiveCreate)
        await container.shutdown()
    }

    /// Prefixes match exactly: `_` (which names may hold) and `%` are not
    /// patterns, as they would be to `LIKE`.
    @Test func prefixesWithPatternCharactersMatchExactly() async throws {
        let (container, _) = try await freshContainer()
        for raw in ["a_b/x", "axb/x", "a_bc/y"] {
            try await container.put(try ContainerName(raw), [1])
            _ = try await container.createMarker(try ContainerName(raw + "m"), [1])
        }
        #expect(try await container.listAll(prefix: "a_b/").map(\.name.rawValue) == ["a_b/x"])
        #expect(try await container.listAll(prefix: "a%").isEmpty)
        #expect(try await container.listMarkers(prefix: "a_b/").map(\.rawValue) == ["a_b/xm"])
        #expect(try await container.listMarkers(prefix: "a%").isEmpty)
        #expect(try await container.listChildren(prefix: "a_") == ["b", "bc"])
        await container.shutdown()
    }

    /// Two containers on one server, in two schemas, do not see each other.
    @Test func schemasAreSeparateContainers() async throws {
        let (a, _) = try await freshContainer("a")
        let (b, _) = try await freshContainer("b")
        try await a.put(try ContainerName("s/x"), [1, 2])
        _ = try await a.createMarker(try ContainerName("active-store"), [3])
        #expect(try await b.listAll(prefix: "").isEmpty)
        #expect(try await b.readMarker(try ContainerName("active-store")) == nil)
        await a.shutdown()
        await b.shutdown()
    }

    /// Accounts apart: each account has its own role and its own schema,
    /// owned by that role (docs/container-layout.md). Account B's
    /// credentials can neither read nor write account A's blobs and
    /// markers, through a container or through SQL.
    @Test func anAccountsRoleCannotReachAnotherAccountsContainer() async throws {
        let admin = try PostgresContainer.Configuration(url: try #require(serverURL))
        let tag = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(12)
        let (roleA, roleB, schemaA, schemaB) = ("role_a_\(tag)", "role_b_\(tag)", "acct_a_\(tag)", "acct_b_\(tag)")
        try await withClient(admin) { client in
            for sql in ["CREATE ROLE \(roleA) LOGIN", "CREATE ROLE \(roleB) LOGIN",
                        "CREATE SCHEMA \(schemaA) AUTHORIZATION \(roleA)", "CREATE SCHEMA \(schemaB) AUTHORIZATION \(roleB)"] {
                try await client.query(PostgresQuery(unsafeSQL: sql), logger: quiet)
            }
        }
        func account(_ role: String, _ schema: String) -> PostgresContainer.Configuration {
            var c = admin
            c.username = role
            c.schema = schema
            c.timeout = .seconds(10)
            return c
        }
        let a = try await PostgresContainer.connect(account(roleA, schemaA), create: true, logger: quiet)
        try await a.put(try ContainerName("s/logs/x"), [1, 2, 3])
        _ = try await a.createMarker(try ContainerName("active-store"), [4])
        let b = try await PostgresContainer.connect(account(roleB, schemaB), create: true, logger: quiet)
        #expect(try await b.listAll(prefix: "").isEmpty)

        // B's role on A's schema: no container.
        do {
            let intruder = try await PostgresContainer.connect(account(roleB, schemaA), create: true, logger: quiet)
            await intruder.shutdown()
            Issue.record("account B's role opened account A's container")
        } catch let error as ChronicleError {
            #expect(error.code == .io && error.message.contains("permission denied"), "\(error)")
        }
        // Nor through SQL.
        try await withClient(account(roleB, schemaB)) { client in
            for sql in ["SELECT name FROM \(schemaA).chronicle_blobs", "SELECT name FROM \(schemaA).chronicle_markers",
                        "INSERT INTO \(schemaA).chronicle_blobs (name, bytes) VALUES ('s/logs/y', '\\x01')",
                        "UPDATE \(schemaA).chronicle_markers SET version = 9", "DELETE FROM \(schemaA).chronicle_blobs"] {
                do {
                    try await client.query(PostgresQuery(unsafeSQL: sql), logger: quiet)
                    Issue.record("account B's role ran: \(sql)")
                } catch let error as PSQLError {
                    #expect(error.serverInfo?[.sqlState] == "42501", "\(sql): \(String(reflecting: error))")
                }
            }
        }
        #expect(try await a.get(try ContainerName("s/logs/x")) == [1, 2, 3])
        #expect(try await a.readMarker(try ContainerName("active-store"))?.version == 1)
        await a.shutdown()
        await b.shutdown()
    }

    /// Another device's upload wakes a device's automatic sync at once
    /// (LISTEN/NOTIFY): with an hour between ticks, only the notification
    /// can bring the save over within the test.
    @Test func anUploadWakesAnotherDevicesAutomaticSync() async throws {
        let (containerA, configuration) = try await freshContainer("wake")
        let containerB = try await PostgresContainer.connect(configuration, logger: quiet)
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-wake-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let schema = try Schema(version: 1, entities: [Entity("Note", attributes: [Attribute("title", .string)])])
        func store(_ name: String, _ container: PostgresContainer) async throws -> Store { try await openStore(name, in: root, on: container, schema: schema) }
        let a = try await store("a", containerA)
        let b = try await store("b", containerB)
        try await b.startAutomaticSync(every: .seconds(3600))
        // b's first sync (at once) is over: from here only a wake syncs it.
        // (Up to two minutes: on a machine busy with the rest of the suite
        // the first sync has been seen to start 30 s late.)
        let clock = ContinuousClock()
        let began = clock.now
        while b.syncStatus.automaticSyncs == 0, clock.now - began < .seconds(120) { try await Task.sleep(for: .milliseconds(50)) }
        #expect(b.syncStatus.automaticSyncs >= 1)
        var seen = 0
        // A save every half second until b shows one: the first ones may
        // come before b listens.
        for i in 0..<60 where seen == 0 {
            try await a.write { tx in _ = tx.insert("Note", ["title": .string("n\(i)")]) }
            try await a.sync()
            try await Task.sleep(for: .milliseconds(500))
            seen = try await b.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM Note") } ?? 0
        }
        #expect(seen > 0, "b's automatic sync never woke for a's uploads")
        #expect(b.syncStatus.automaticSyncs > 1)
        try await a.close()
        try await b.close()
        await containerA.shutdown()
        await containerB.shutdown()
    }

    /// The server crashes (an immediate stop: connections cut, no
    /// checkpoint) between a device's syncs and again under its upload,
    /// and comes back: saves made meanwhile stay local, a sync while it is
    /// down is a transient error within the timeout, and after it comes
    /// back everything uploads once. A new device gets every save, once,
    /// and the container holds no overlapping or damaged log.
    @Test(.serialized, arguments: [false, true])
    func aServerThatCrashesAndComesBackLosesAndDuplicatesNothing(underUpload: Bool) async throws {
        let script = try #require(ProcessInfo.processInfo.environment["CHRONICLE_TEST_POSTGRES_CONTROL"], "make test names the server's control script")
        // Spawned with no descriptor of this process but its three: the
        // server it starts must hold none of the test's.
        @discardableResult
        func control(_ arguments: [String]) throws -> [String] {
            let run = try SpawnedProcess.run(script, arguments, timeLimitSeconds: 120)
            #expect(run.status == 0 && !run.signaled, "control \(arguments): \(String(decoding: run.stderr, as: UTF8.self))")
            return String(decoding: run.stdout, as: UTF8.self).split(separator: "\n").map(String.init)
        }
        // A server of its own: the other tests' stays up.
        let created = try control(["create"])
        let folder = try #require(created.first), url = try #require(created.last)
        func server(_ verb: String) throws { try control([verb, folder]) }
        var configuration = try PostgresContainer.Configuration(url: url)
        configuration.schema = "crash"
        // Long enough for a machine busy with the rest of the suite; a sync
        // while the server is down waits this long, once per case.
        configuration.timeout = .seconds(30)
        let container = try await PostgresContainer.connect(configuration, create: true, logger: quiet)
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-crash-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let schema = try Schema(version: 1, entities: [Entity("Note", attributes: [Attribute("title", .string)])])
        func store(_ name: String, _ container: any Container) async throws -> Store { try await openStore(name, in: root, on: container, schema: schema) }
        let a = try await store("a", container)
        for i in 0..<5 { try await a.write { tx in _ = tx.insert("Note", ["title": .string("before \(i)")]) } }
        try await a.sync()

        for i in 0..<5 { try await a.write { tx in _ = tx.insert("Note", ["title": .string("during \(i)")]) } }
        if underUpload {
            // Down while the upload runs: it fails part way, or not at all.
            async let crash: Void = { try await Task.sleep(for: .milliseconds(2)); try server("crash") }()
            _ = try? await a.sync()
            try await crash
        } else {
            try server("crash")
        }
        do {
            try await a.sync()
            Issue.record("a sync with the server down succeeded")
        } catch let error as ChronicleError {
            #expect(error.code.isTransient, "\(error)")
        }
        try await a.write { tx in _ = tx.insert("Note", ["title": "while down"]) }
        try server("start")
        var synced = false
        // Operations fail at once for a timeout after one went unanswered:
        // tried for several timeouts.
        let deadline = ContinuousClock.now + .seconds(150)
        while !synced && ContinuousClock.now < deadline {
            synced = (try? await a.sync()) != nil
            if !synced { try await Task.sleep(for: .milliseconds(500)) }
        }
        #expect(synced, "a syncs again once the server is back")
        #expect(try await a.sync().status == .upToDate)

        let fresh = try await PostgresContainer.connect(configuration, logger: quiet)
        let b = try await store("b", fresh)
        try await b.sync()
        let titles = try await b.read { db in try String.fetchAll(db, sql: "SELECT title FROM Note ORDER BY title") }
        #expect(titles.count == 11 && Set(titles).count == 11, "\(titles)")
        let verification = try await ContainerVerification(of: fresh, decoder: LogDecoder(schema: schema))
        #expect(verification.passed, "\(verification.problems)")
        #expect(verification.valid > 0)
        try await a.close()
        try await b.close()
        await container.shutdown()
        await fresh.shutdown()
    }

    /// Rows written into the tables by hand under names outside the
    /// grammar: listings pass over them (pages still fill up), and they are
    /// reported as foreign entries, so `inspect` and `verify` name them
    /// instead of failing.
    @Test func rowsWithNamesOutsideTheGrammarAreForeignEntriesNotFailures() async throws {
        let (container, configuration) = try await freshContainer("foreign")
        for i in 0..<4 { try await container.put(try ContainerName("s/logs/b\(i)"), Array("blob".utf8)) }
        _ = try await container.createMarker(try ContainerName("s/m1"), Array("m".utf8))
        _ = try await container.createMarker(try ContainerName("s/m3"), Array("m".utf8))
        try await withClient(configuration) { client in
            for (table, name) in [("chronicle_blobs", "s/logs/b1x/../../etc"), ("chronicle_blobs", "s/logs/B2"), ("chronicle_markers", "s/m2 "),
                                  ("chronicle_markers", "s/M2")] {
                let qualified = "\"\(configuration.schema)\".\(table)"
                let columns = table == "chronicle_blobs" ? "(name, bytes)" : "(name, bytes, version)"
                let values = table == "chronicle_blobs" ? "($1, '\\x00'::bytea)" : "($1, '\\x00'::bytea, 1)"
                var bindings = PostgresBindings()
                bindings.append(name)
                _ = try await client.query(PostgresQuery(unsafeSQL: "INSERT INTO \(qualified) \(columns) VALUES \(values)", binds: bindings))
            }
        }
        #expect(try await container.listAll(prefix: "s/logs/").map(\.name.rawValue) == ["s/logs/b0", "s/logs/b1", "s/logs/b2", "s/logs/b3"])
        // A page of two after b0: b1x/… is passed over, and the page still holds two.
        #expect(try await container.list(prefix: "s/logs/", after: try ContainerName("s/logs/b0"), limit: 2).map(\.name.rawValue)
                == ["s/logs/b1", "s/logs/b2"])
        #expect(try await container.listMarkers(prefix: "s/").map(\.rawValue) == ["s/m1", "s/m3"])
        #expect(try await container.listMarkers(prefix: "s/", after: nil, limit: 1).map(\.rawValue) == ["s/m1"])
        #expect(try await container.listMarkers(prefix: "s/", after: try ContainerName("s/m1"), limit: 1).map(\.rawValue) == ["s/m3"])
        let foreign = try await container.foreignEntries()
        #expect(Set(foreign.map(\.path)) == ["blobs/s/logs/b1x/../../etc", "blobs/s/logs/B2", "markers/s/m2 ", "markers/s/M2"], "\(foreign)")
        #expect(foreign.allSatisfy { $0.reason == .nameOutsideGrammar })
        let inventory = try await ContainerInventory(of: container)
        #expect(inventory.foreignEntries.count == 4)
        await container.shutdown()
    }

    /// A server killed with SIGKILL: an operation fails well before its
    /// timeout (it cannot be reached, and a look of its own says so), the
    /// ones after it fail at once, and once the server is started again the
    /// container is used again within seconds, not after a timeout.
    @Test func aKilledServerFailsOperationsSoonAndIsUsedAgainOnceItIsBack() async throws {
        let server = try ThrowAwayPostgres()
        defer { server.remove() }
        var configuration = try PostgresContainer.Configuration(url: server.url)
        configuration.timeout = .seconds(60)
        let container = try await PostgresContainer.connect(configuration, create: true, logger: quiet)
        let name = try ContainerName("probe")
        _ = try await container.createMarker(name, Array("one".utf8))
        try server.kill()
        let clock = ContinuousClock()
        var failedAfter: Duration = .zero
        for _ in 0..<3 {
            let started = clock.now
            do {
                _ = try await container.readMarker(name)
                Issue.record("a read from a killed server succeeded")
            } catch let error as ChronicleError {
                #expect(error.code == .unavailable, "\(error)")
            }
            failedAfter = max(failedAfter, clock.now - started)
        }
        // Its timeout is a minute: a look at the server decides instead.
        #expect(failedAfter < .seconds(30), "an operation on a killed server took \(failedAfter)")
        try server.start()
        let restarted = clock.now
        var answered: Marker?
        while answered == nil, clock.now - restarted < .seconds(60) {
            answered = try? await container.readMarker(name)
            if answered == nil { try await Task.sleep(for: .milliseconds(200)) }
        }
        #expect(answered?.bytes == Array("one".utf8))
        #expect(clock.now - restarted < .seconds(30), "used again \(clock.now - restarted) after the restart")
        await container.shutdown()
    }

    /// A store goes from a folder to PostgreSQL and on to another folder,
    /// the first replication interrupted part way and run again: nothing
    /// copied twice, and a device that joins at either end sees every save.
    @Test func aStoreReplicatesFolderToPostgresToFolderResumingAfterAnInterruption() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-replicate-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let schema = try Schema(version: 1, entities: [Entity("Note", attributes: [Attribute("title", .string)])])
        func store(_ name: String, _ container: any Container) async throws -> Store { try await openStore(name, in: root, on: container, schema: schema) }
        func titles(_ store: Store) async throws -> [String] {
            try await store.read { db in try String.fetchAll(db, sql: "SELECT title FROM Note ORDER BY title") }
        }
        let folder = try DirectoryContainer(root: root.appendingPathComponent("folder"), create: true)
        let writer = try await store("writer", folder)
        for i in 0..<20 {
            try await writer.write { tx in _ = tx.insert("Note", ["title": .string("note \(i)")]) }
            if i % 5 == 4 { try await writer.sync() }
        }
        _ = try await writer.publishBaseline()
        for i in 20..<25 { try await writer.write { tx in _ = tx.insert("Note", ["title": .string("note \(i)")]) } }
        try await writer.sync()
        let expected = try await titles(writer)
        #expect(expected.count == 25)

        let (postgres, _) = try await freshContainer("replica")
        let interrupted = Task {
            try await ContainerReplication(from: folder, to: postgres).run { progress in
                if progress.processed == 4 { withUnsafeCurrentTask { $0?.cancel() } }
            }
        }
        await #expect(throws: CancellationError.self) { try await interrupted.value }
        let resumed = try await ContainerReplication(from: folder, to: postgres).run()
        #expect(resumed.ended && resumed.error == nil && resumed.conflicts.isEmpty, "\(resumed)")
        #expect(resumed.processed == resumed.total)
        #expect(resumed.copied == resumed.total - 4 && resumed.alreadyThere == 4, "the four copied before the interruption are not copied again")
        let again = try await ContainerReplication(from: folder, to: postgres).run()
        #expect(again.copied == 0 && again.conflicts.isEmpty)

        let second = try DirectoryContainer(root: root.appendingPathComponent("second"), create: true)
        let onward = try await ContainerReplication(from: postgres, to: second).run()
        #expect(onward.copied == onward.total && onward.conflicts.isEmpty)
        for (name, container) in [("joins-postgres", postgres as any Container), ("joins-folder", second)] {
            let joining = try await store(name, container)
            try await joining.sync()
            #expect(try await titles(joining) == expected, "\(name)")
            try await joining.close()
            let verification = try await ContainerVerification(of: container, decoder: LogDecoder(schema: schema))
            #expect(verification.passed, "\(name): \(verification.problems)")
        }
        try await writer.close()
        await postgres.shutdown()
    }

    @Test(arguments: ["http://u@h/db", "postgres://h/db", "postgres://u@h/db?schema=Bad-Name", "postgres://u@h/db?schema=1abc",
                      "postgres://u@h/db?shcema=x", "postgres://u@h/db?schema=a&schema=b", "postgres://u@h/db?port=abc",
                      "postgres://u@h:99999/db", "postgres://u@h/db?sslmode=bogus", "postgres://:SECRET@h/db", "postgres://u:SECRET@ h/db",
                      "postgres://u@h/db?password=SECRET&x=1"])
    func badURLsAreTypedErrors(url: String) {
        do {
            _ = try PostgresContainer.Configuration(url: url)
            Issue.record("\(url) was accepted")
        } catch {
            #expect(error.code == .invalidValue)
            #expect(!error.message.contains("SECRET"), "the message shows no password: \(error.message)")
        }
    }

    /// What a URL leaves out comes from libpq's environment variables; what
    /// it says wins over them.
    @Test func theEnvironmentFillsWhatTheURLLeavesOut() throws {
        let environment = ["PGUSER": "envuser", "PGPASSWORD": "SECRET", "PGHOST": "/run/pg", "PGPORT": "6543", "PGDATABASE": "envdb",
                           "PGSSLMODE": "require"]
        let bare = try PostgresContainer.Configuration(url: "postgres://", environment: environment)
        #expect(bare.username == "envuser" && bare.password == "SECRET" && bare.database == "envdb")
        #expect(bare.socketPath == "/run/pg/.s.PGSQL.6543")
        #expect(bare.tls == .require)
        let given = try PostgresContainer.Configuration(url: "postgres://u:pw@db.example:5433/app?sslmode=disable", environment: environment)
        #expect(given.username == "u" && given.password == "pw" && given.host == "db.example" && given.port == 5433 && given.database == "app")
        #expect(given.socketPath == nil && given.tls == .disable)
        let tcp = try PostgresContainer.Configuration(url: "postgres://", environment: ["PGUSER": "u", "PGHOST": "db.example"])
        #expect(tcp.host == "db.example" && tcp.port == 5432 && tcp.socketPath == nil)
        #expect(throws: ChronicleError.self) { try PostgresContainer.Configuration(url: "postgres://", environment: [:]) }
        do {
            _ = try PostgresContainer.Configuration(url: "postgres://u@h/db", environment: ["PGPORT": "nope", "PGPASSWORD": "SECRET"])
            Issue.record("a bad PGPORT was accepted")
        } catch {
            #expect(error.code == .invalidValue && error.message.contains("PGPORT") && !error.message.contains("SECRET"))
        }
    }

    /// A server that answers with a refusal is told at once, as `io` with
    /// its SQLSTATE, not as a server that does not answer.
    @Test func aRoleTheServerDoesNotKnowIsRefusedAtOnce() async throws {
        var configuration = try PostgresContainer.Configuration(url: try #require(serverURL))
        configuration.username = "nobody_\(UUID().uuidString.prefix(8).lowercased())"
        do {
            let container = try await PostgresContainer.connect(configuration, create: true, logger: quiet)
            await container.shutdown()
            Issue.record("an unknown role connected")
        } catch let error as ChronicleError {
            #expect(error.code == .io && error.message.contains("28000"), "\(error)")
        }
    }

    /// A server that does not answer is a transient error (a refused
    /// connection at once, a silent server after the configured time),
    /// not a hang: the client alone keeps trying to connect for a minute.
    @Test func aServerThatDoesNotAnswerIsUnavailable() async throws {
        var configuration = PostgresContainer.Configuration(host: "127.0.0.1", port: 1, username: "nobody", database: "none")
        configuration.timeout = .seconds(2)
        do {
            let container = try await PostgresContainer.connect(configuration, create: true, logger: quiet)
            await container.shutdown()
            Issue.record("connected to a port nothing listens on")
        } catch let error as ChronicleError {
            #expect(error.code == .unavailable, "\(error)")
            #expect(error.code.isTransient)
            #expect(error.message.contains("did not answer"), "\(error)")
        }
    }
}
