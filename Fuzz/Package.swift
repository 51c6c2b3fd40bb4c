// swift-tools-version:6.1
// A libFuzzer target for the log decoder, kept out of the library's package
// like Benchmarks/: it is built only with the fuzzer's flags (see `make
// fuzz` in the top-level Makefile and docs/log-format.md). `Chronicle` is a
// symbolic link to the repository root.
import PackageDescription

/// Lets these targets use Chronicle's `package` declarations (the log codec,
/// the snapshot), which apps never see: they compile in Chronicle's package
/// namespace, named after its identity (`chronicle`, from the `Chronicle`
/// link). Such a target sets `packageAccess: false`, so that SwiftPM does not
/// also pass this package's own name.
let chroniclePackageAccess: [SwiftSetting] = [.unsafeFlags(["-package-name", "chronicle"])]

let package = Package(
    name: "ChronicleFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: "Chronicle"),
    ],
    targets: [
        // Declares libFuzzer's `LLVMFuzzerRunDriver`, which the Swift `main` calls.
        .target(name: "CFuzzDriver", path: "Sources/CFuzzDriver"),
        .executableTarget(
            name: "fuzz-log-decoder",
            dependencies: ["CFuzzDriver", .product(name: "ChronicleCore", package: "Chronicle")],
            path: "Sources/FuzzLogDecoder",
            packageAccess: false,
            swiftSettings: chroniclePackageAccess
        ),
    ],
    swiftLanguageModes: [.v6]
)
