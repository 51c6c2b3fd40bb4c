import ArgumentParser
import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Synchronization

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Upload this device's pending saves, put back its own logs the container lacks, and import other devices' logs, once.",
        discussion: """
            Exit status: 0 when everything visible was imported; 3 when something is not visible yet \
            (another device's log or a baseline still arriving: run sync again later), a log is held \
            because another app version wrote it for a schema this one does not know (a later version; \
            or an earlier one not named with --earlier-schema), or this device \
            marked the store corrupted and waits for another device to rebuild it (waitingForRebuild); \
            1 when some log failed in a way another sync will not clear (each is named; the others are \
            still imported) or this device has just marked the store corrupted (markedCorrupted); \
            2 on bad usage.
            Each sync also takes the health monitor's steps as they fall due (docs/health.md): a log that \
            stays damaged makes the device build its copy again, then mark the store corrupted; healthy \
            devices that see a mark elect one, which rebuilds the store under a new ID, and every device \
            moves there at its next sync. The health lines say what happened; `chronicle health` shows \
            where things stand. The --grace-period, --repair-wait, --gap-timeout, --election-window, \
            --lease and --unhealthy-rebuild-wait options shorten its timings for trying it out.
            A sync that takes more than a moment reports its progress on standard error (uploading, \
            applying a baseline, importing), with a rate.
            If the container holds saves under this device's ID that its files did not write (the folder \
            was restored from an older copy or copied from another machine), the device continues under \
            a new ID and carries over its saves the container lacks; the output says so.
            """)

    /// The exit status for a sync that left something to wait for.
    static let waitingExitCode: Int32 = 3

    @OptionGroup var device: DeviceOptions
    @OptionGroup var health: HealthOptions
    @OptionGroup var output: OutputOptions

    func run() async throws {
        try await reportingErrors(output, unavailableExit: Self.waitingExitCode) {
            let manager = try await device.openManager(schema: try device.loadSchema(), health: health.configuration,
                                                       tolerating: [.cloudContentCorrupted])
            // Opening migrated the loaded store to this schema version: say so.
            let migrated = (try? await manager.store)?.schemaMigration
            let migrationLines = migrated.map { m in
                ["migrated this device's store from schema version \(m.source.version) to \(m.target.version): "
                 + m.steps.map(\.description).joined(separator: "; ")]
            } ?? []
            let events = HealthEventLines(manager)
            let progress = SyncProgressLines()
            let synced: Store.SyncReport?
            do {
                synced = try await manager.sync { progress.report($0) }
            } catch let error as ChronicleError where (error.underlying as? ChronicleError)?.code == .cloudContentCorrupted {
                // Marked corrupted, and not rebuilt yet.
                progress.finish()
                let health = try? await manager.health()
                try? await manager.close()
                let lines = await events.lines + [error.message, "run sync again after a healthy device has synced: it rebuilds the store"]
                output.print(.object([
                    "status": .string("waitingForRebuild"), "store": health?.store.map { .string($0.description) } ?? .null,
                    "health": .array(lines.map { .string($0) }),
                ]), text: lines.map(oneLine).joined(separator: "\n"))
                throw ExitCode(Self.waitingExitCode)
            } catch {
                progress.finish()
                try? await manager.close()
                throw error
            }
            progress.finish()
            if await manager.loadedKind == nil {
                // This sync marked the store corrupted and unloaded it.
                try await manager.close()
                let imported = synced.map { Self.importLines($0) } ?? []
                let health = await events.lines
                output.print(.object(["status": .string("markedCorrupted"), "health": .array(health.map { .string($0) }),
                                      "sync": .array(imported.map { .string($0) })]),
                             text: (imported + health).joined(separator: "\n"))
                throw ExitCode.failure
            }
            let store = try await manager.store
            let kind = await manager.loadedKind ?? .local
            let hash = try await store.stateHash()
            let deviceID = store.deviceID
            // The status from the manager's record; the container is read
            // (marks, election, history) only to say what an unhealthy device does next.
            let healthStatus = await manager.healthStatus?.status
            var waitLines: [String] = []
            if healthStatus == .unhealthy, let first = try? await manager.health().problems.first {
                // What happens next, and when.
                let due = first.since + UInt64(health.repairWait) * 1000
                waitLines.append("health: unhealthy since \(millisecondsText(first.since)); if \(first.blob.split(separator: "/").last ?? "") still fails "
                                 + "after \(millisecondsText(due)) (the repair wait), a sync builds this device's copy again, then marks the store corrupted")
            }
            // What the scrub found that a device that joins could not
            // import, though this device holds it: said at every sync until
            // it is back (the device stays healthy meanwhile).
            let damage = await manager.storeDamageFound
            for found in damage {
                waitLines.append("store damage: \(found.blob) is \(found.blob.contains(" sequence ") ? "missing" : "damaged") in the container since \(millisecondsText(found.since)); "
                                 + "a device that joins could not import it; see `chronicle health`")
            }
            try await manager.close()
            let healthLines = await events.lines
            let cloudEnabled = await manager.cloudEnabled
            if synced == nil, kind == .fallback, cloudEnabled {
                // The cloud is on, and no cloud store could be loaded (the
                // container away or unreadable): nothing synced; run again.
                output.print(.object([
                    "status": .string("fallback"), "device": .string(deviceID.description),
                    "store": .string(store.storeID.description), "loaded": .string(kind.rawValue), "stateHash": .string(hash),
                ]), text: "the cloud store could not be loaded (the container is away or cannot be read): this device saves into its fallback store, "
                    + "whose saves move to the cloud store once it loads; run sync again later\nstate hash \(hash)")
                throw ExitCode(Self.waitingExitCode)
            }
            guard let report = synced else {
                // The cloud is off, or the store just changed under the device.
                let text = kind == .cloud
                    ? "the device moved to store \(store.storeID); run sync again to import it\nstate hash \(hash)"
                    : "the cloud is off for this device (its \(kind.rawValue) store is loaded): nothing to sync\nstate hash \(hash)"
                output.print(.object([
                    "status": .string(kind == .cloud ? "moved" : "cloudOff"), "device": .string(deviceID.description),
                    "store": .string(store.storeID.description), "loaded": .string(kind.rawValue), "stateHash": .string(hash),
                ]), text: text)
                return
            }
            let failures = report.imported.failures
            let change = report.identityChange
            var lines = migrationLines + healthLines + Self.importLines(report) + waitLines
            lines.append("state hash \(hash)")
            output.print(.object([
                "status": .string(report.status.rawValue),
                "health": .array(healthLines.map { .string($0) }),
                "healthStatus": healthStatus.map { .string($0.rawValue) } ?? .null,
                "storeDamage": .array(damage.map { .string($0.blob) }),
                "device": .string(deviceID.description),
                "uploadedLogs": .int(Int64(report.uploadedLogs)),
                "repairedLogs": .array(report.repairedLogs.map { .string($0.rawValue) }),
                "importedLogs": .int(Int64(report.imported.appliedLogs)),
                "importedTransactions": .int(Int64(report.imported.appliedTransactions)),
                "waitingForLogs": .array(report.imported.gaps.map {
                    .object(["device": .string($0.device.description), "expected": .int(Int64($0.expected)), "found": .int(Int64($0.found)), "atEnd": .bool($0.atEnd)])
                }),
                "waitingForBaseline": report.imported.waitingForBaseline.map { .string($0) } ?? .null,
                "failures": .array(failures.filter { $0.error.code != .schemaMismatch }.map {
                    .object(["name": .string($0.name), "code": .string($0.error.code.name), "message": .string($0.error.message),
                             "transient": .bool($0.error.code.isTransient || $0.error.code == .shortRead)])
                }),
                "passedOver": .array(report.imported.passedOver.map { .string($0) }),
                "held": .array(report.imported.held.map { .object(["name": .string($0.name), "message": .string($0.error.message)]) }),
                "migrated": migrated.map { m in .object(["from": .int(Int64(m.source.version)), "to": .int(Int64(m.target.version)),
                                                         "steps": .array(m.steps.map { .string($0.description) })]) } ?? .null,
                "identityChange": change.map { c in .object([
                    "previous": .string(c.previous.description), "current": .string(c.current.description),
                    "reason": .string(c.reason), "carriedOver": .int(Int64(c.carriedOver.count)),
                ]) } ?? .null,
                "stateHash": .string(hash),
                "startedFromBaseline": report.imported.baseline.map { b in
                    .object(["device": .string(b.device.description), "parts": .int(Int64(b.parts)), "records": .int(Int64(b.records))])
                } ?? .null,
            ]), text: lines.map(oneLine).joined(separator: "\n"))
            switch report.status {
            case .upToDate: break
            case .waiting: throw ExitCode(Self.waitingExitCode)
            case .failed: throw ExitCode.failure
            }
        }
    }

    /// What the sync did, in lines.
    static func importLines(_ report: Store.SyncReport) -> [String] {
        let failures = report.imported.failures
        var lines: [String] = []
        if let change = report.identityChange {
            lines.append("moved to a new device ID: \(change.reason). So that no sequence number is used twice, this device continues as device "
                         + "\(change.current) (it was \(change.previous)); it carried over \(change.carriedOver.count) save(s) the container lacked, "
                         + "and built its copy of the store again from the container (the logs imported below)")
        }
        if let b = report.imported.baseline {
            lines.append("started from a baseline by device \(b.device): \(b.parts) part(s), \(b.records) record state(s)")
        }
        lines.append("uploaded \(report.uploadedLogs) log(s), imported \(report.imported.appliedLogs) log(s) with \(report.imported.appliedTransactions) transaction(s)"
                     + (report.repairedLogs.isEmpty ? "" : ", put back \(report.repairedLogs.count) of its own"))
        for gap in report.imported.gaps {
            lines.append(gap.atEnd
                ? "waiting: device \(gap.device) needs sequence \(gap.expected), which other devices applied (through \(gap.found - 1)); no log of it is listed"
                : "waiting: device \(gap.device) needs sequence \(gap.expected), not visible yet")
        }
        if !report.imported.passedOver.isEmpty {
            lines.append("passed over \(report.imported.passedOver.count) entr(ies) among the logs that are not logs (left as they are): "
                         + report.imported.passedOver.prefix(5).joined(separator: ", ") + (report.imported.passedOver.count > 5 ? ", …" : ""))
        }
        if let waiting = report.imported.waitingForBaseline {
            if waiting.hasSuffix("/origin"), report.imported.held.contains(where: { $0.name.hasSuffix(ContainerLayout.baselinePartExtension) }) {
                // The store starts from a baseline another app version wrote.
                lines.append("waiting: the store starts from a baseline written for a schema version this app does not know (a later version rebuilt it): this device joins it once its app upgrades")
            } else if waiting.hasSuffix("/origin") {
                // The store starts from a baseline, and none is complete and intact here.
                lines.append("waiting: the store starts from a baseline, and no complete, intact one is in the container yet (still arriving, or damaged: `chronicle verify` tells)")
            } else {
                // The report names the baseline's first part; its folder says which baseline.
                let folder = waiting.hasSuffix(ContainerLayout.baselinePartExtension) ? String(waiting[..<(waiting.lastIndex(of: "/") ?? waiting.endIndex)]) + "/" : waiting
                lines.append("waiting: baseline \(folder) is incomplete (its final part is missing or not marked final): it is still being written or copied. "
                             + "A minute after it was started, this device starts from an older baseline or from the logs instead")
            }
        }
        for f in failures {
            if f.error.code == .schemaMismatch {
                lines.append("held, waiting for an app upgrade (another schema version; its device's later logs wait behind it): \(f.name): \(f.error.message)")
            } else {
                lines.append("\(f.error.code.isTransient || f.error.code == .shortRead ? "waiting" : "failed"): \(f.name): \(f.error.code): \(f.error.message)")
            }
        }
        return lines
    }
}

/// A sync's progress on standard error: one ``ProgressLine`` per phase.
final class SyncProgressLines: Sendable {
    private let start = ContinuousClock.now
    private let current = Mutex<(phase: SyncProgress.Phase, line: ProgressLine)?>(nil)

    func report(_ progress: SyncProgress) {
        let line = current.withLock { current -> ProgressLine in
            if let current, current.phase == progress.phase { return current.line }
            current?.line.finish()
            let names: [SyncProgress.Phase: String] = [.uploading: "sync: uploading", .baseline: "sync: applying a baseline", .importing: "sync: importing"]
            let line = ProgressLine(names[progress.phase] ?? "sync", unit: progress.phase == .baseline ? "parts" : "logs",
                                    total: progress.total, start: current == nil ? start : .now)
            current = (progress.phase, line)
            return line
        }
        line.update(progress.logs, total: progress.total,
                    note: progress.phase == .importing ? "\(progress.transactions) transactions" : "")
    }

    func finish() {
        current.withLock { $0?.line.finish() }
    }
}

struct PublishBaseline: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "baseline",
        abstract: "Publish this device's state as a baseline of the store, after uploading its pending saves.",
        discussion: """
            A new device then starts from the newest complete baseline and imports only the logs after it, \
            instead of replaying the whole history. Parts are written in order and the last is marked final, \
            so a reader never uses a baseline that is still being written.
            """)

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    @Option(name: .customLong("part-kib"), help: "Uncompressed size of each part, in KiB (1 to 16384: a reader refuses a log body over 64 MiB).")
    var partKiB = Snapshot.baselinePartBytes / 1024

    func validate() throws {
        guard (1...16_384).contains(partKiB) else { throw ValidationError("--part-kib takes 1 to 16384 (16 MiB), not \(partKiB)") }
    }

    func run() async throws {
        try await reportingErrors(output) {
            try device.requireExistingFolder("a baseline holds what a device that has synced the store holds, and this makes no device")
            let opened = try await device.open()
            guard await opened.manager.loadedKind == .cloud else {
                try await opened.close()
                throw ChronicleError(.invalidValue, "the cloud is off for this device: there is no cloud store to publish a baseline of (`chronicle cloud enable` first)")
            }
            let published: (prefix: String, parts: Int, records: Int)
            do {
                published = try await opened.store.publishBaseline(partBytes: partKiB * 1024)
            } catch {
                try? await opened.close()
                throw error
            }
            try await opened.close()
            output.print(.object([
                "baseline": .string(published.prefix),
                "parts": .int(Int64(published.parts)),
                "records": .int(Int64(published.records)),
            ]), text: "published baseline \(published.prefix): \(published.parts) part(s), \(published.records) record state(s)")
        }
    }
}

struct Compact: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove from the container the logs the store's newest baseline covers, once every device has applied them.",
        discussion: """
            Publish a baseline first (`chronicle baseline`). The logs it covers, and the baselines older than it, \
            are removed once every device that synced within the retention period has applied them; until then \
            nothing is removed, and the command names the devices it waits for. A device away for longer than \
            the retention period applies the baseline when it comes back, and uploads its saves as usual. \
            Nothing is removed from a store that was deleted or rebuilt, or whose newest baseline does not verify.
            """)

    @OptionGroup var device: DeviceOptions
    @OptionGroup var output: OutputOptions

    @Option(help: "Days a device may go without syncing and still be waited for (1 to 36500).")
    var retentionDays = 30

    func validate() throws {
        guard (1...36_500).contains(retentionDays) else { throw ValidationError("--retention-days takes 1 to 36500, not \(retentionDays)") }
    }

    func run() async throws {
        try await reportingErrors(output) {
            try device.requireExistingFolder("a compaction acts for a device that has synced the store, and makes no device")
            let opened = try await device.open()
            guard await opened.manager.loadedKind == .cloud else {
                try await opened.close()
                throw ChronicleError(.invalidValue, "the cloud is off for this device: there is no cloud store to compact (`chronicle cloud enable` first)")
            }
            let report: CompactionReport
            let me = opened.store.deviceID
            do {
                report = try await opened.store.compact(retention: .seconds(retentionDays * 86_400))
            } catch {
                try? await opened.close()
                throw error
            }
            try await opened.close()
            var text: String
            if report.baseline == nil {
                text = "nothing to compact: the store has no complete baseline (`chronicle baseline` publishes one)"
            } else if !report.waitingFor.isEmpty {
                let names = report.waitingFor.map { $0 == me ? "this device" : $0.description }
                text = "nothing removed: waiting for \(report.waitingFor.count) device(s) to apply the newest baseline's logs (\(names.joined(separator: ", "))); compact again after they have synced"
            } else {
                text = String(format: "removed %d log(s) (%.1f KB) and %d older baseline(s) (%.1f KB); the store now starts from %@",
                              report.removedLogs, Double(report.removedLogBytes) / 1e3, report.removedBaselines,
                              Double(report.removedBaselineBytes) / 1e3, report.baseline ?? "")
            }
            if !report.passedOverBaselines.isEmpty {
                text += "\nnewer baselines that do not verify, passed over (publish a new one): \(report.passedOverBaselines.joined(separator: ", "))"
            }
            if !report.passedOverDevices.isEmpty {
                text += "\nnot waited for (no sync within \(retentionDays) days): \(report.passedOverDevices.map(\.description).joined(separator: ", "))"
            }
            output.print(.object([
                "baseline": report.baseline.map(JSONValue.string) ?? .null,
                "removedLogs": .int(Int64(report.removedLogs)), "removedLogBytes": .int(Int64(report.removedLogBytes)),
                "removedBaselines": .int(Int64(report.removedBaselines)), "removedBaselineBytes": .int(Int64(report.removedBaselineBytes)),
                "waitingFor": .array(report.waitingFor.map { .string($0.description) }),
                "passedOver": .array(report.passedOverDevices.map { .string($0.description) }),
                "passedOverBaselines": .array(report.passedOverBaselines.map { .string($0) }),
            ]), text: text)
        }
    }
}
