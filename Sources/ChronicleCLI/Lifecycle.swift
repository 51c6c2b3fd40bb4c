import ArgumentParser
import Chronicle
import ChronicleContainer
import ChronicleCore
import Foundation

/// `chronicle cloud enable|disable|status`.
struct Cloud: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Turn the cloud on or off for a device, or show where its data is.",
        discussion: """
            A device works on its local store (device-only) while the cloud is off, and on the container's \
            active store while it is on; the choice is kept in the device folder. A new device folder starts \
            with the cloud on. docs/lifecycle.md describes what each switch does to data.
            """,
        subcommands: [CloudEnable.self, CloudDisable.self, CloudStatus.self])
}

/// How `cloud enable` brings the local store's records along.
enum LocalDataOption: String, ExpressibleByArgument, CaseIterable {
    case merge
    case useCloud = "use-cloud"
    case overwrite

    var policy: StoreManager.LocalDataPolicy {
        switch self {
        case .merge: .merge
        case .useCloud: .useCloud
        case .overwrite: .overwriteCloudWithLocal
        }
    }
}

struct CloudEnable: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enable",
        abstract: "Turn the cloud on: load the container's active store, bringing the local records along.",
        discussion: """
            --local-data merge (the default) saves the local records into the cloud store, one per unique key; \
            use-cloud leaves them in the local store; overwrite replaces the cloud content with the local store \
            (the previous cloud store is kept as its predecessor; needs --yes). With no store in the container, \
            the first one is seeded from the local store.
            """)

    @OptionGroup var device: DeviceOptions
    @Option(name: .customLong("local-data"), help: "merge, use-cloud or overwrite.")
    var localData: LocalDataOption = .merge
    @Flag(name: .customLong("yes"), help: "Confirm a destructive choice (overwrite).")
    var confirmed = false
    @OptionGroup var output: OutputOptions

    func validate() throws {
        if localData == .overwrite, !confirmed {
            throw ValidationError("--local-data overwrite replaces the cloud content with this device's local store; add --yes to confirm")
        }
    }

    func run() async throws {
        try await maintaining(device, output, done: nil) { try await $0.setCloudEnabled(true, localData: localData.policy) }
    }
}

struct CloudDisable: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "disable",
        abstract: "Turn the cloud off: load the local store as the device left it.",
        discussion: "The cloud store's copy stays in the device folder; its pending saves upload when the cloud is turned on again.")

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        // A new folder starts on its local store: no cloud store is made for it.
        try await maintaining(device, output, done: nil, cloudOnForANewFolder: false, tolerating: [.cloudContentCorrupted, .unavailable]) {
            try await $0.setCloudEnabled(false)
        }
    }
}

struct CloudStatus: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show whether the cloud is on, which store is loaded, and what waits to upload.",
        discussion: "The device folder must exist: status makes no device folder, and no store in the container.")

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await reportingErrors(output) { try device.requireExistingFolder() }
        // Where the data is matters most when nothing could be loaded (a
        // store this device marked corrupted, a container away): said, not failed.
        try await maintaining(device, output, done: nil, tolerating: [.cloudContentCorrupted, .unavailable, .storeNotLoaded]) { _ in }
    }
}

/// `chronicle store reload|delete-cloud|delete-container|delete-local|migrate-to-local|rebuild`.
struct StoreMaintenance: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "Maintenance of a device's stores: reload, delete, migrate, rebuild.",
        discussion: "Destructive operations need --yes. docs/lifecycle.md describes each.",
        subcommands: [StoreReload.self, StoreDeleteCloud.self, StoreDeleteContainer.self, StoreDeleteLocal.self, StoreMigrateToLocal.self, StoreRebuild.self])
}

/// Runs `body` on the device's manager, then prints where the data is
/// (after `done`, if given).
private func maintaining(_ device: DeviceOptions, _ output: OutputOptions, done: String?, cloudOnForANewFolder: Bool = true,
                         tolerating: Set<ChronicleError.Code> = [], _ body: (StoreManager) async throws -> Void) async throws {
    try await maintaining(device, output, done: done, cloudOnForANewFolder: cloudOnForANewFolder,
                          tolerating: tolerating) { (manager: StoreManager) -> StoreManager.MergeReport? in
        try await body(manager)
        return nil
    }
}

/// The same, for an operation that may bring the local store's records
/// into the cloud store: what it merged is printed too.
private func maintaining(_ device: DeviceOptions, _ output: OutputOptions, done: String?, cloudOnForANewFolder: Bool = true,
                         tolerating: Set<ChronicleError.Code> = [], intoLocal: Bool = false,
                         _ body: (StoreManager) async throws -> StoreManager.MergeReport?) async throws {
    try await maintaining(device, output, cloudOnForANewFolder: cloudOnForANewFolder, tolerating: tolerating) { manager in
        let merged = try await body(manager)
        var text = done
        if let r = merged, intoLocal {
            text = "copied the cloud store into the local store: \(r.copied) record(s) copied (copied), \(r.deduplicated) matched a local record "
                + "with the same unique key and merged into it (deduplicated), \(r.alreadyPresent) already in the local store (alreadyPresent; "
                + "the cloud's values win)" + (done.map { "\n" + $0 } ?? "")
        } else if let r = merged {
            text = "merged the local store: \(r.copied) record(s) copied (copied), \(r.deduplicated) matched a cloud record with the same unique key "
                + "and merged into it (deduplicated), \(r.alreadyPresent) already in the cloud store from an earlier merge (alreadyPresent)"
                + (done.map { "\n" + $0 } ?? "")
        }
        return (text, merged.map { ["merged": mergeValue($0)] } ?? [:])
    }
}

/// The same, for any operation: `body` returns what to print before the
/// status, and what to add to its JSON object.
private func maintaining(_ device: DeviceOptions, _ output: OutputOptions, cloudOnForANewFolder: Bool = true,
                         tolerating: Set<ChronicleError.Code> = [],
                         _ body: (StoreManager) async throws -> (done: String?, json: [String: JSONValue])) async throws {
    try await reportingErrors(output) {
        let manager = try await device.openManager(schema: try device.loadSchema(), cloudOnForANewFolder: cloudOnForANewFolder, tolerating: tolerating)
        do {
            let outcome = try await body(manager)
            var status = try await statusValue(manager, device)
            status.loadError = await manager.loadError
            try await manager.close()
            var value = status.merging(nil)
            if case .object(var object) = value {
                object.merge(outcome.json) { _, added in added }
                value = .object(object)
            }
            output.print(value, text: (outcome.done.map { $0 + "\n" } ?? "") + statusText(status))
        } catch {
            try? await manager.close()
            throw error
        }
    }
}

private func requireConfirmation(_ confirmed: Bool, _ what: String) throws {
    guard confirmed else { throw ValidationError("\(what); add --yes to confirm") }
}

struct StoreReload: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "reload", abstract: "Close the loaded store and load the chosen one again.")
    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await maintaining(device, output, done: "reloaded") { try await $0.reload() }
    }
}

struct StoreDeleteCloud: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-cloud",
        abstract: "Delete the cloud store: this device's copy (--local-only), or everywhere.",
        discussion: """
            --local-only uploads the device's pending saves, then rebuilds its copy from the container. \
            Without it, every device falls back to its local store at its next sync, carrying there the \
            saves the container never got; the cloud is turned off on each.
            """)
    @OptionGroup var device: DeviceOptions
    @Flag(name: .customLong("local-only"), help: "Delete only this device's copy.")
    var localOnly = false
    @Flag(name: .customLong("yes"), help: "Confirm.")
    var confirmed = false
    @OptionGroup var output: OutputOptions

    func validate() throws {
        try requireConfirmation(confirmed, localOnly ? "this deletes the device's copy of the cloud store" : "this deletes the cloud store on every device")
    }

    func run() async throws {
        try await maintaining(device, output, done: localOnly ? "deleted this device's copy of the cloud store" : "deleted the cloud store everywhere") {
            try await $0.deleteCloudStore(localOnly: localOnly)
        }
    }
}

struct StoreDeleteContainer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-container",
        abstract: "Delete the account's whole cloud content: every store in the container (or, with --local-only, this device's copy).",
        discussion: """
            Every store the container holds is deleted on purpose, not only the one in use: stores a rebuild \
            replaced and stores no device uses any more too. Every device falls back to its local store at its \
            next sync, carrying there the saves the container never got; turning the cloud on again starts a \
            new store. Works with the cloud off. --local-only deletes only this device's copy of the cloud \
            content (its copy of the cloud store), as `store delete-cloud --local-only` does.
            """)
    @OptionGroup var device: DeviceOptions
    @Flag(name: .customLong("local-only"), help: "Delete only this device's copy.")
    var localOnly = false
    @Flag(name: .customLong("yes"), help: "Confirm.")
    var confirmed = false
    @OptionGroup var output: OutputOptions

    func validate() throws {
        try requireConfirmation(confirmed, localOnly ? "this deletes the device's copy of the cloud content" : "this deletes every store of the cloud container, on every device")
    }

    func run() async throws {
        try await maintaining(device, output, cloudOnForANewFolder: false) { manager in
            let deleted = try await manager.deleteCloudContainer(localOnly: localOnly)
            let done = localOnly ? "deleted this device's copy of the cloud content"
                : "deleted the cloud content everywhere: \(deleted.count) store(s)" + (deleted.isEmpty ? "" : " (\(deleted.map(\.description).joined(separator: ", ")))")
            return (done, ["deletedStores": .array(deleted.map { .string($0.description) })])
        }
    }
}

struct StoreDeleteLocal: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "delete-local", abstract: "Delete the device's local store.")
    @OptionGroup var device: DeviceOptions
    @Flag(name: .customLong("yes"), help: "Confirm.")
    var confirmed = false
    @OptionGroup var output: OutputOptions

    func validate() throws { try requireConfirmation(confirmed, "this deletes the device's local store") }

    func run() async throws {
        try await maintaining(device, output, done: "deleted the local store") { try await $0.deleteLocalStore() }
    }
}

struct StoreMigrateToLocal: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate-to-local",
        abstract: "Copy the cloud store's records into the local store and turn the cloud off.")
    @OptionGroup var device: DeviceOptions
    @Flag(name: .customLong("delete-cloud"), help: "Then delete the cloud store everywhere (needs --yes).")
    var deleteCloud = false
    @Flag(name: .customLong("yes"), help: "Confirm.")
    var confirmed = false
    @OptionGroup var output: OutputOptions

    func validate() throws {
        if deleteCloud { try requireConfirmation(confirmed, "--delete-cloud deletes the cloud store on every device") }
    }

    func run() async throws {
        try await maintaining(device, output, done: "migrated the cloud store to the local store", intoLocal: true) {
            try await $0.migrateCloudToLocal(deleteCloudStore: deleteCloud)
        }
    }
}

/// Which store a rebuild starts from.
enum RebuildSource: String, ExpressibleByArgument, CaseIterable {
    case cloud, local
}

struct StoreRebuild: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rebuild",
        abstract: "Rebuild the cloud content under a new store ID, which every device then moves to.",
        discussion: """
            --from cloud (the default) seeds the new store from this device's copy of the cloud store; \
            --from local from its local store. Every device carries into the new store its saves the old \
            one's content did not hold.
            """)
    @OptionGroup var device: DeviceOptions
    @Option(name: .customLong("from"), help: "cloud or local.")
    var source: RebuildSource = .cloud
    @Flag(name: .customLong("yes"), help: "Confirm.")
    var confirmed = false
    @OptionGroup var output: OutputOptions

    func validate() throws { try requireConfirmation(confirmed, "this replaces the cloud store on every device") }

    func run() async throws {
        try await maintaining(device, output, done: "rebuilt the cloud store") {
            try await $0.rebuildCloudStore(from: source == .cloud ? .cloud : .local)
        }
    }
}

/// What `cloud status` and the maintenance commands print.
struct StatusValue {
    var cloudEnabled: Bool
    var status: StoreManager.SyncStatus
    var deviceID: DeviceID?
    /// With the cloud off: the deletion everywhere of the store this
    /// device's copy of the cloud store belongs to, if the container tells
    /// of one (its saves waiting there go to the local store when the cloud
    /// is turned on).
    var copyDeleted: (store: StoreID, tombstone: StoreTombstone)?
    /// Why nothing is loaded, when nothing could be.
    var loadError: ChronicleError?

    func merging(_ merge: JSONValue?) -> JSONValue {
        var object: [String: JSONValue] = [
            "cloudEnabled": .bool(cloudEnabled),
            "loaded": status.kind.map { .string($0.rawValue) } ?? .null,
            "store": status.storeID.map { .string($0.description) } ?? .null,
            "device": deviceID.map { .string($0.description) } ?? .null,
            "pendingUploads": .int(Int64(status.pendingUploads)),
        ]
        if let waiting = status.cloudCopyPendingUploads { object["cloudCopyPendingUploads"] = .int(Int64(waiting)) }
        if status.kind == nil, let loadError {
            object["notLoaded"] = .object(["code": .string(loadError.code.name), "message": .string(loadError.message)])
        }
        if let merge { object["merged"] = merge }
        if let copyDeleted {
            object["cloudCopyDeleted"] = .object([
                "store": .string(copyDeleted.store.description), "by": .string(copyDeleted.tombstone.device.description),
                "at": .int(Int64(copyDeleted.tombstone.milliseconds)),
            ])
        }
        if let deletion = status.lastCloudDeletion {
            object["cloudStoreDeleted"] = .object([
                "store": .string(deletion.store.description), "by": .string(deletion.by.description),
                "carriedToLocal": .int(Int64(deletion.carried)),
            ])
        }
        return .object(object)
    }
}

private func statusValue(_ manager: StoreManager, _ device: DeviceOptions) async throws -> StatusValue {
    let deviceID = await manager.loadedKind == nil ? nil : try await manager.store.deviceID
    var value = StatusValue(cloudEnabled: await manager.cloudEnabled, status: try await manager.syncStatus(), deviceID: deviceID)
    if value.status.kind != .cloud, (value.status.cloudCopyPendingUploads ?? 0) > 0,
       let copy = try StoreManager.snapshotLocation(of: .cloud, in: URL(fileURLWithPath: device.deviceDirectory)) {
        // Read only; a container that does not answer says nothing.
        let tombstone = try? await device.container.open().readMarker(ContainerLayout.tombstone(store: copy.store), as: StoreTombstone.self)
        if let tombstone = tombstone ?? nil { value.copyDeleted = (copy.store, tombstone.payload) }
    }
    return value
}

private func statusText(_ v: StatusValue) -> String {
    let loaded = v.status.kind.map { "the \($0.rawValue) store \(v.status.storeID.map(\.description) ?? "")" } ?? "nothing"
    var text = "cloud \(v.cloudEnabled ? "on" : "off"); loaded: \(loaded); \(v.status.pendingUploads) save(s) waiting to upload"
    if v.status.kind == nil, let error = v.loadError {
        text += "\nnothing is loaded: \(error.code): \(error.message)\nthis device's saves stay in its copy of the store, in the device folder; `chronicle health` explains what happens next"
    }
    if let waiting = v.status.cloudCopyPendingUploads, waiting > 0 {
        if let deleted = v.copyDeleted {
            text += "\n\(waiting) save(s) made with the cloud on are in this device's copy of the cloud store \(deleted.store) and on no other device; "
                + "device \(deleted.tombstone.device) deleted that store everywhere: they go to the local store when the cloud is turned on"
        } else {
            text += "\n\(waiting) save(s) made with the cloud on are in this device's copy of the cloud store and on no other device: they upload when the cloud is turned on"
        }
    }
    if let deletion = v.status.lastCloudDeletion {
        text += "\nthe cloud store \(deletion.store) was deleted everywhere by device \(deletion.by): no device uses its data any more (its logs stay in the container, as a record of what it held); "
            + "\(deletion.carried) record(s) this device had not uploaded were carried into its local store, which holds everything saved here with the cloud off"
    }
    return text
}

private func mergeValue(_ r: StoreManager.MergeReport) -> JSONValue {
    .object(["copied": .int(Int64(r.copied)), "deduplicated": .int(Int64(r.deduplicated)), "alreadyPresent": .int(Int64(r.alreadyPresent))])
}
