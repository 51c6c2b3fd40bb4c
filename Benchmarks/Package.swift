// swift-tools-version:6.1
// Microbenchmarks, kept out of the library's package so that the benchmark
// tool's dependencies never slow down or enter a library build. `Chronicle` is
// a symbolic link to the repository root, which gives the package a stable
// identity wherever the repository is cloned.
import PackageDescription

/// Lets these targets use Chronicle's `package` declarations (the log codec,
/// the snapshot), which apps never see: they compile in Chronicle's package
/// namespace, named after its identity (`chronicle`, from the `Chronicle`
/// link). Such a target sets `packageAccess: false`, so that SwiftPM does not
/// also pass this package's own name.
let chroniclePackageAccess: [SwiftSetting] = [.unsafeFlags(["-package-name", "chronicle"])]

let package = Package(
    name: "ChronicleBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: "Chronicle"),
        .package(url: "https://github.com/ordo-one/benchmark", exact: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "CodecBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "ChronicleCore", package: "Chronicle"),
            ],
            path: "Benchmarks/CodecBenchmarks",
            packageAccess: false,
            swiftSettings: chroniclePackageAccess,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // XXH64 from libxxhash against the hand-written one Chronicle had
        // before, side by side (see docs/benchmarks.md). No benchmark tool.
        .executableTarget(
            name: "xxh64-comparison",
            dependencies: [.product(name: "ChronicleCore", package: "Chronicle")],
            path: "Benchmarks/XXH64Comparison",
            packageAccess: false,
            swiftSettings: chroniclePackageAccess
        ),
        .executableTarget(
            name: "ApplyBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "ChronicleCore", package: "Chronicle"),
                .product(name: "ChronicleSnapshot", package: "Chronicle"),
            ],
            path: "Benchmarks/ApplyBenchmarks",
            packageAccess: false,
            swiftSettings: chroniclePackageAccess,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
