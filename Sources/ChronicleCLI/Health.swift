import ArgumentParser
import Chronicle
import ChronicleCore
import Foundation

/// The health monitor's timings, for the commands that sync.
struct HealthOptions: ParsableArguments {
    @Option(name: .customLong("grace-period"), parsing: .unconditional, help: "Seconds a device must import everything without a permanent failure before it is healthy (0 to 31536000).")
    var gracePeriod: Int = 30
    @Option(name: .customLong("repair-wait"), parsing: .unconditional, help: "Seconds a damaged log may stay damaged (its owner puts it back) before this device acts (0 to 31536000).")
    var repairWait: Int = 60
    @Option(name: .customLong("gap-timeout"), parsing: .unconditional, help: "Seconds a missing log is waited for before it counts as a permanent failure (0 to 31536000).")
    var gapTimeout: Int = 900
    @Option(name: .customLong("election-window"), parsing: .unconditional, help: "Seconds candidates stand before the winner is picked, where exclusive create is not reliable (0 to 31536000).")
    var electionWindow: Int = 10
    @Option(name: .customLong("lease"), parsing: .unconditional, help: "Seconds an election lease lasts before another device may take it over (0 to 31536000).")
    var lease: Int = 120
    @Option(name: .customLong("unhealthy-rebuild-wait"), parsing: .unconditional, help: "Seconds a device that marked the store waits for a healthy device to rebuild it before it rebuilds from its own copy (0 to 31536000).")
    var unhealthyRebuildWait: Int = 86_400

    func validate() throws {
        for (name, value) in [("--grace-period", gracePeriod), ("--repair-wait", repairWait), ("--gap-timeout", gapTimeout),
                              ("--election-window", electionWindow), ("--lease", lease),
                              ("--unhealthy-rebuild-wait", unhealthyRebuildWait)] where value < 0 || value > 86_400 * 365 {
            throw ValidationError("\(name) is \(value): give a number of seconds from 0 to 31536000")
        }
    }

    var configuration: StoreManager.HealthConfiguration {
        StoreManager.HealthConfiguration(gracePeriod: .seconds(gracePeriod), repairWait: .seconds(repairWait), gapTimeout: .seconds(gapTimeout),
                                         electionWindow: .seconds(electionWindow), leaseDuration: .seconds(lease),
                                         unhealthyRebuildWait: .seconds(unhealthyRebuildWait))
    }
}

/// What a health event says, in a line; nil for the other events.
func healthLine(_ event: StoreManager.Event) -> String? {
    switch event {
    case .healthChanged(let status, let store): "health: \(status.rawValue) on store \(store)"
    case .rebuildingLocalCopy(let store, let reason): "an import kept failing (\(reason)): rebuilt this device's copy of store \(store) from the container"
    case .cloudContentCorrupted(let mark, let healthy):
        healthy
            ? "device \(mark.device) marked store \(mark.store) corrupted (\(mark.blob): \(mark.reason)); this healthy device stands for the election to rebuild it"
            : "marked store \(mark.store) corrupted (\(mark.blob): \(mark.reason)) and unloaded it; a healthy device rebuilds it, and this device then moves there with its saves"
    case .electedToRebuild(let store): "elected to rebuild the corrupted store \(store)"
    case .waitingForAppUpgrade(let store, let logs):
        logs.isEmpty
            ? "no log of store \(store) waits for an app upgrade any more"
            : "\(logs.count) log(s) of store \(store) held: another app version wrote them for a schema this one does not know (a later version: they wait for this app to upgrade; an earlier one: name it with --earlier-schema)"
    case .rebuiltCloudStore(let new, let old): "rebuilt store \(old) as store \(new), from this device's copy"
    case .movedToStore(let new, let old, let carried): "moved from store \(old) to store \(new), carrying \(carried.copied) record(s) and \(carried.deleted) deletion(s)"
    case .cloudStoreDeleted(let store, let by, let carried):
        "the cloud store \(store) was deleted everywhere by device \(by): the cloud is off on this device now, "
            + "and \(carried.copied + carried.deleted) change(s) it had not uploaded went to its local store"
    case .accountChanged(let from, let to):
        "the container's account is not the one this device last used (its account token was \(from), it is \(to) now: "
            + "another account, or a container made again): this device's data for the previous account stays in the device folder, "
            + "and it works on this account's store"
    case .usingFallbackStore(let error): "the container cannot be reached (\(error.code)): working on a fallback store, merged into the cloud store when it is back"
    case .mergedFallbackStore(let report): "the container is back: merged the fallback store into the cloud store (\(report.copied) record(s))"
    default: nil
    }
}

/// Collects a manager's health events until its streams end (at close).
struct HealthEventLines {
    private let task: Task<[String], Never>

    init(_ manager: StoreManager) {
        let events = manager.events()
        task = Task {
            var lines: [String] = []
            for await event in events { if let line = healthLine(event) { lines.append(line) } }
            return lines
        }
    }

    /// The lines, once the manager is closed.
    var lines: [String] { get async { await task.value } }
}

func millisecondsText(_ ms: UInt64) -> String {
    ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double(ms) / 1000))
}

struct HealthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "health",
        abstract: "Show a device's health for the cloud store, its failed and held logs, the store's corruption marks, the election, and the rebuilds behind the active store.",
        discussion: """
            A device is healthy once it has imported everything visible without a permanent failure for a grace \
            period. A log that stays damaged past the repair wait makes the device build its copy of the store again \
            from the container; if that fails too, it marks the store corrupted and unloads it. Healthy devices that \
            see a mark elect one of them (a lease where the container's exclusive create is reliable, the most logs \
            applied then the smallest device ID where it is not), which rebuilds the store under a new ID; every \
            device then moves there with its saves. Each `chronicle sync` takes these steps as they fall due. \
            Logs written for a schema this app version does not know are held (waiting for an app upgrade), never \
            counted as corruption. docs/health.md explains the rules.
            """)

    @OptionGroup var device: DeviceOptions
    @OptionGroup(title: "Health timings (give the ones sync runs with: the waits and deadlines shown are counted with these)")
    var timings: HealthOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await reportingErrors(output) {
            // A folder that is not there has no health: nothing is made for it.
            try device.requireExistingFolder()
            // Whatever the device could load: health is most wanted when it could not.
            let manager = try await device.openManager(schema: try device.loadSchema(), health: timings.configuration,
                                                       tolerating: [.cloudContentCorrupted, .unavailable, .storeNotLoaded])
            // Opening may have moved the device to a rebuilt store: said below.
            let events = HealthEventLines(manager)
            let health: StoreManager.Health
            let cloudEnabled = await manager.cloudEnabled
            let loadError = await manager.loadError
            // The device ID it has in the cloud store, whichever store is loaded.
            let deviceID = (try? StoreManager.cloudDeviceID(in: URL(fileURLWithPath: device.deviceDirectory))) ?? nil
            do {
                health = try await manager.health()
                try await manager.close()
            } catch {
                try? await manager.close()
                throw error
            }
            let opened = await events.lines
            var value = Self.value(health, device: deviceID, cloudEnabled: cloudEnabled, loadError: loadError)
            if case .object(var object) = value {
                object["opening"] = .array(opened.map { .string($0) })
                value = .object(object)
            }
            output.print(value, text: (opened.map { "opening the device: \($0)" } + [Self.text(health, device: deviceID, cloudEnabled: cloudEnabled, loadError: loadError,
                                                                                          gracePeriod: timings.gracePeriod)])
                .joined(separator: "\n"))
        }
    }

    static func text(_ h: StoreManager.Health, device: DeviceID?, cloudEnabled: Bool, loadError: ChronicleError?, gracePeriod: Int? = nil) -> String {
        var lines: [String] = []
        let who = device.map { "device \($0)" } ?? "this device"
        if !cloudEnabled {
            lines.append("\(who): the cloud is off (the local store is loaded)"
                         + (h.status.map { s in "; when it was last on: \(s.rawValue) on store \(h.store.map(\.description) ?? "?")" } ?? ""))
        } else if let status = h.status, let store = h.store {
            lines.append("\(who): \(status.rawValue) on store \(store)" + (h.since.map { " since \(millisecondsText($0))" } ?? "")
                         + (status == .checking && h.problems.isEmpty && h.marked == nil
                            ? "; it turns healthy at a sync once " + (gracePeriod.map { "\($0) s have" } ?? "a grace period has") + " passed without a failed import"
                            : ""))
        } else {
            lines.append("\(who): no health yet (the cloud store has not been synced)")
        }
        if let mark = h.marked {
            lines.append("this device marked the store corrupted at \(millisecondsText(mark.milliseconds)) (\(mark.blob): \(mark.reason)) "
                         + "and waits for a healthy device to rebuild it; its next sync after that moves it there with its saves")
        } else if let loadError {
            lines.append("nothing loaded: \(loadError.code): \(loadError.message)")
        }
        for p in h.problems {
            lines.append("problem (\(p.kind.rawValue)) since \(millisecondsText(p.since)): \(p.blob): \(p.reason)")
        }
        for d in h.storeDamage {
            lines.append("store damage (\(d.kind.rawValue)) since \(millisecondsText(d.since)): \(d.blob): \(d.reason)")
        }
        for held in h.held { lines.append("held, waiting for an app upgrade (another schema version; its device's later logs wait behind it): \(held)") }
        for mark in h.marks {
            lines.append("corruption mark by device \(mark.device) at \(millisecondsText(mark.milliseconds)): \(mark.blob): \(mark.reason)"
                         + (mark.healthy == true ? " (that device holds every save and stays loaded: it may rebuild the store itself)" : ""))
        }
        if let e = h.election {
            if let lease = e.lease {
                lines.append("election: device \(lease.device) holds the lease to rebuild as store \(lease.newStore), until \(millisecondsText(lease.expires))")
            } else if !e.candidacies.isEmpty {
                lines.append("election: \(e.candidacies.count) candidate(s): "
                             + e.candidacies.map { "device \($0.device) (\($0.applied) saves applied)" }.joined(separator: ", ")
                             + (e.leader.map { "; the rule picks device \($0)" } ?? ""))
            } else {
                lines.append("election: no healthy device has stood yet (\(h.reliableExclusiveCreate ? "a lease decides" : "the deterministic rule decides"))")
            }
        }
        if h.history.isEmpty {
            lines.append("rebuilds: none behind the active store")
        } else {
            for r in h.history {
                lines.append("rebuilt: store \(r.from) became store \(r.to), by device \(r.device) at \(millisecondsText(r.milliseconds))"
                             + (r.reason.map { ": \($0)" } ?? ""))
            }
        }
        return lines.map(oneLine).joined(separator: "\n")
    }

    static func value(_ h: StoreManager.Health, device: DeviceID?, cloudEnabled: Bool, loadError: ChronicleError?) -> JSONValue {
        func mark(_ m: CorruptionMark) -> JSONValue {
            .object(["device": .string(m.device.description), "store": .string(m.store.description), "blob": .string(m.blob),
                     "reason": .string(m.reason), "milliseconds": .int(Int64(m.milliseconds)), "staysHealthy": .bool(m.healthy == true)])
        }
        var election: JSONValue = .null
        if let e = h.election {
            election = .object([
                "rule": .string(h.reliableExclusiveCreate ? "lease" : "deterministic"),
                "lease": e.lease.map { .object(["device": .string($0.device.description), "newStore": .string($0.newStore.description),
                                                "expires": .int(Int64($0.expires))]) } ?? .null,
                "candidates": .array(e.candidacies.map { .object(["device": .string($0.device.description), "applied": .int(Int64($0.applied)),
                                                                  "since": .int(Int64($0.since))]) }),
                "leader": e.leader.map { .string($0.description) } ?? .null,
            ])
        }
        return .object([
            "device": device.map { .string($0.description) } ?? .null,
            "cloudEnabled": .bool(cloudEnabled),
            "status": h.status.map { .string($0.rawValue) } ?? .null,
            "store": h.store.map { .string($0.description) } ?? .null,
            "since": h.since.map { .int(Int64($0)) } ?? .null,
            "loadError": loadError.map { .object(["code": .string($0.code.name), "message": .string($0.message)]) } ?? .null,
            "problems": .array(h.problems.map { .object(["kind": .string($0.kind.rawValue), "blob": .string($0.blob), "reason": .string($0.reason),
                                                         "since": .int(Int64($0.since))]) }),
            "storeDamage": .array(h.storeDamage.map { .object(["kind": .string($0.kind.rawValue), "blob": .string($0.blob), "reason": .string($0.reason),
                                                               "since": .int(Int64($0.since))]) }),
            "held": .array(h.held.map { .string($0) }),
            "marked": h.marked.map(mark) ?? .null,
            "marks": .array(h.marks.map(mark)),
            "election": election,
            "history": .array(h.history.map { .object(["from": .string($0.from.description), "to": .string($0.to.description),
                                                       "device": .string($0.device.description), "milliseconds": .int(Int64($0.milliseconds)),
                                                       "reason": $0.reason.map { .string($0) } ?? .null]) }),
        ])
    }
}
