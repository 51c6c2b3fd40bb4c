import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import GRDB

/// What a container holds of one store's logs, read whole from the backing
/// container (past the simulated delays and tears): every transaction, by
/// device and sequence.
struct StoreLogs {
    /// Per device, per sequence, the transaction.
    private(set) var transactions: [DeviceID: [UInt64: Transaction]] = [:]
    /// Different transactions stored under the same device and sequence.
    private(set) var conflicts: [String] = []
    /// Logs that do not verify.
    private(set) var damaged: [ContainerName] = []

    /// Reads every log of `store` (of `device` only, if given), in the
    /// terms of the run's final schema.
    static func read(_ container: InMemoryContainer, store: StoreID, device: DeviceID? = nil, upgrades: Bool) async throws -> StoreLogs {
        let prefix = device.map { ContainerLayout.logPrefix(store: store, device: $0) } ?? ContainerLayout.logsPrefix(store: store)
        let decoder = Workload.decoder(upgrades: upgrades)
        var logs = StoreLogs()
        for blob in try await container.listAll(prefix: prefix) where ContainerLayout.parseLog(blob.name) != nil {
            guard case .transactions(_, let transactions)? = try? await decoder.decode(try await container.get(blob.name), name: blob.name, fetchingFrom: container) else {
                logs.damaged.append(blob.name)
                continue
            }
            for t in transactions { logs.add(t, from: blob.name) }
        }
        return logs
    }

    private mutating func add(_ t: Transaction, from name: ContainerName) {
        if let held = transactions[t.deviceID]?[t.sequence] {
            // Compare the encoded bodies: a NaN in a value is not equal to itself.
            if LogEncoder.body(of: held) != LogEncoder.body(of: t) {
                conflicts.append("device \(t.deviceID) sequence \(t.sequence) differs in \(name.lastComponent)")
            }
            return
        }
        transactions[t.deviceID, default: [:]][t.sequence] = t
    }

    /// The devices that have logs, in ID order.
    var devices: [DeviceID] { transactions.keys.sorted() }

    /// A device's transactions from sequence `first` (1 by default; after
    /// a compaction, the one after those its baseline covers) up to the
    /// first gap.
    func contiguous(_ device: DeviceID, from first: UInt64 = 1) -> [Transaction] {
        guard let held = transactions[device] else { return [] }
        var run: [Transaction] = []
        while let t = held[first + UInt64(run.count)] { run.append(t) }
        return run
    }

    /// A device's transactions as runs of consecutive sequences.
    func runs(_ device: DeviceID) -> [[Transaction]] {
        guard let held = transactions[device] else { return [] }
        var runs: [[Transaction]] = []
        for sequence in held.keys.sorted() {
            if let last = runs.last?.last, last.sequence + 1 == sequence {
                runs[runs.count - 1].append(held[sequence]!)
            } else {
                runs.append([held[sequence]!])
            }
        }
        return runs
    }

    /// A device's sequences after the first gap.
    func stranded(_ device: DeviceID) -> Int { (transactions[device]?.count ?? 0) - contiguous(device).count }

    /// The highest sequence of each device, by log name only (logs are not read).
    static func latest(_ container: InMemoryContainer, store: StoreID) async throws -> [DeviceID: UInt64] {
        var latest: [DeviceID: UInt64] = [:]
        for blob in try await container.listAll(prefix: ContainerLayout.logsPrefix(store: store)) {
            guard let parsed = ContainerLayout.parseLog(blob.name) else { continue }
            latest[parsed.device] = max(latest[parsed.device] ?? 0, parsed.last)
        }
        return latest
    }
}
