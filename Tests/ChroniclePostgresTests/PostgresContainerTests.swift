import ChronicleContainer
import ChronicleCore
import ChroniclePostgres
import ChronicleTestSupport
import Foundation
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

    @Test(arguments: ["http://u@h/db", "postgres://h/db", "postgres://u@h/db?schema=Bad-Name", "postgres://u@h/db?schema=1abc"])
    func badURLsAreTypedErrors(url: String) {
        #expect(throws: ChronicleError.self) { try PostgresContainer.Configuration(url: url) }
    }

    /// A server that does not answer is a transient error after the
    /// configured time, not a hang (the client alone keeps trying to
    /// connect for a minute). Not timed here: a loaded machine delays the
    /// timer; the message says which gave up.
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
            #expect(error.message.contains("did not answer within 2"), "\(error)")
        }
    }
}
