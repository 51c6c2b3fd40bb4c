// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "Chronicle",
    platforms: [.macOS(.v15)],
    products: [
        // What apps use: `import Chronicle` (see Sources/Chronicle/Chronicle.docc).
        .library(name: "Chronicle", targets: ["Chronicle"]),
        // The layers below it, for container backends written outside this
        // package (ChronicleContainer) and for the Benchmarks/ and Fuzz/
        // packages; their internals are `package` access.
        .library(name: "ChronicleCore", targets: ["ChronicleCore"]),
        .library(name: "ChronicleContainer", targets: ["ChronicleContainer"]),
        .library(name: "ChronicleSnapshot", targets: ["ChronicleSnapshot"]),
        // A container in a PostgreSQL database, for many machines.
        .library(name: "ChroniclePostgres", targets: ["ChroniclePostgres"]),
        .executable(name: "chronicle", targets: ["ChronicleCLI"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // postgres-nio's own TLS, named for its configuration (sslmode).
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
    ],
    targets: [
        // C shims: the system libraries, nothing vendored.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .systemLibrary(
            name: "CLZ4",
            pkgConfig: "liblz4",
            providers: [.apt(["liblz4-dev"])]
        ),
        .systemLibrary(
            name: "CXXHash",
            pkgConfig: "libxxhash",
            providers: [.apt(["libxxhash-dev"])]
        ),
        // Model, values, clock and the log codec. No file or network I/O.
        .target(name: "ChronicleCore", dependencies: ["CLZ4", "CXXHash"]),
        // Where logs live: the container protocol and its backends.
        .target(
            name: "ChronicleContainer",
            dependencies: ["ChronicleCore"]
        ),
        // The PostgreSQL container backend.
        .target(
            name: "ChroniclePostgres",
            dependencies: [
                "ChronicleCore",
                "ChronicleContainer",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The device's SQLite snapshot: materialization, merge, dedupe, outbox.
        .target(
            name: "ChronicleSnapshot",
            dependencies: [
                "ChronicleCore",
                "ChronicleContainer",
                "CSQLite",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The public API.
        .target(
            name: "Chronicle",
            dependencies: [
                "ChronicleCore",
                "ChronicleContainer",
                "ChronicleSnapshot",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The deterministic multi-device simulation harness.
        .target(
            name: "ChronicleSimulation",
            dependencies: [
                "Chronicle",
                "ChronicleCore",
                "ChronicleContainer",
                "ChronicleSnapshot",
                // Its multi-process mode starts workers the way the tests start processes.
                "ChronicleTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The scenarios of `chronicle bench`, each against its baseline (plain
        // SQLite through its C API, LZ4 alone, COPY), reported as ratios.
        .target(
            name: "ChronicleBench",
            dependencies: [
                "Chronicle",
                "ChronicleCore",
                "ChronicleContainer",
                "ChronicleSnapshot",
                "ChroniclePostgres",
                // The PostgreSQL scenarios run on a throw-away server.
                "ChronicleTestSupport",
                "CLZ4",
                "CSQLite",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "ChronicleCLI",
            dependencies: [
                "Chronicle",
                "ChronicleCore",
                "ChronicleContainer",
                "ChronicleSnapshot",
                "ChronicleSimulation",
                "ChroniclePostgres",
                "ChronicleBench",
                // `simulate --processes --postgres` starts a throw-away server.
                "ChronicleTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The container conformance suite, shared by the test targets of
        // every backend, and small helpers for tests. Used only by test targets.
        .target(name: "ChronicleTestSupport", dependencies: ["ChronicleCore", "ChronicleContainer"]),
        .testTarget(
            name: "ChronicleCoreTests",
            dependencies: ["ChronicleCore"],
            exclude: ["Fixtures"]
        ),
        .testTarget(name: "ChronicleContainerTests", dependencies: ["ChronicleContainer", "ChronicleTestSupport"]),
        // Runs against a real server: `make test` starts a throw-away one
        // (scripts/with-postgres) and names it in CHRONICLE_TEST_POSTGRES.
        .testTarget(
            name: "ChroniclePostgresTests",
            dependencies: ["Chronicle", "ChroniclePostgres", "ChronicleContainer", "ChronicleCore", "ChronicleTestSupport",
                           .product(name: "GRDB", package: "GRDB.swift"), .product(name: "Logging", package: "swift-log"),
                           .product(name: "PostgresNIO", package: "postgres-nio")]
        ),
        .testTarget(
            name: "ChronicleSnapshotTests",
            dependencies: [
                "ChronicleSnapshot", "ChronicleContainer",
                .product(name: "GRDB", package: "GRDB.swift"), .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "ChronicleSimulationTests",
            dependencies: [
                "Chronicle", "ChronicleCore", "ChronicleContainer", "ChronicleSnapshot", "ChronicleSimulation", "ChronicleTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // Tests only: a SQLite VFS that wraps the system's default one and
        // counts each file's syncs. Whether a returned save reached the disk
        // cannot be seen from SQL (a PRAGMA can be overridden after it is
        // set); counting the syncs of N saves can.
        .target(name: "CSyncCountingVFS", dependencies: ["CSQLite"], path: "Tests/CSyncCountingVFS"),
        .testTarget(
            name: "ChronicleTests",
            dependencies: [
                "Chronicle", "ChronicleCore", "ChronicleContainer", "ChronicleSnapshot", "ChronicleTestSupport", "CSyncCountingVFS", "ChronicleCLI",
                .product(name: "GRDB", package: "GRDB.swift"), .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The README's and the DocC catalog's example, compiled and run,
        // with the public surface of `Chronicle` checked for documentation.
        .testTarget(
            // A notes app as a new user writes it: only the products an app depends on.
            name: "ClientAppTests",
            dependencies: ["Chronicle", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: [.enableUpcomingFeature("MemberImportVisibility")]
        ),
        .testTarget(
            name: "DocumentationTests",
            dependencies: [
                "Chronicle", "ChronicleTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"), .product(name: "Logging", package: "swift-log"),
            ],
            // As an app that opts in sees it: members only from imported modules.
            swiftSettings: [.enableUpcomingFeature("MemberImportVisibility")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
