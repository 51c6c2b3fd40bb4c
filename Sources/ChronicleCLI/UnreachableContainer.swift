import ChronicleContainer
import ChronicleCore

/// The container of a device folder that has been used, when the container
/// cannot be opened now (a folder moved away or a share not mounted, a
/// server down): every call fails as `unavailable`, with the reason. A store
/// manager then works on its fallback store, as an app does offline: saves
/// wait, and go to the container when it is back.
struct UnreachableContainer: Container {
    /// The container as the user named it.
    let location: String
    /// Why it could not be opened.
    let reason: ChronicleError

    var capabilities: ContainerCapabilities { ContainerCapabilities(reliableExclusiveCreate: false) }

    private func fail() -> ChronicleError {
        ChronicleError(.unavailable, "the container \(location) cannot be reached: \(why); this device's saves wait until it is back",
                       underlying: reason)
    }

    /// Why it cannot be reached, in words.
    var why: String {
        reason.code == .notFound ? "it is not there (moved away, or a share that is not mounted)" : reason.message
    }

    func put(_ name: ContainerName, _ bytes: [UInt8]) async throws { throw fail() }
    func get(_ name: ContainerName, maxBytes: Int) async throws -> [UInt8] { throw fail() }
    func list(prefix: String, after: ContainerName?, limit: Int) async throws -> [BlobInfo] { throw fail() }
    func listChildren(prefix: String) async throws -> [String] { throw fail() }
    func delete(_ name: ContainerName) async throws { throw fail() }
    func readMarker(_ name: ContainerName) async throws -> Marker? { throw fail() }
    func createMarker(_ name: ContainerName, _ bytes: [UInt8]) async throws -> Marker { throw fail() }
    func replaceMarker(_ name: ContainerName, _ bytes: [UInt8], expected: UInt64) async throws -> Marker { throw fail() }
    func deleteMarker(_ name: ContainerName, expected: UInt64?) async throws { throw fail() }
    func listMarkers(prefix: String) async throws -> [ContainerName] { throw fail() }
    func foreignEntries(prefix: String) async throws -> [ForeignEntry] { throw fail() }
}
