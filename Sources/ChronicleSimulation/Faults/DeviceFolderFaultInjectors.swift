import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB

// Faults on a device's own folder: what backups, sync services and disk
// tools do to an app's files. A device whose files went back in time must
// notice and continue under a new device ID; until the store does, runs with
// these faults on report violations.

/// A device's folder is copied (a backup) and, at a later strike, replaced by
/// that copy (a restore).
///
/// A restore happens only right after the device uploaded everything it had
/// and the container holds all of it: saves that lived only in the
/// overwritten files are destroyed by the restore itself, not lost by
/// Chronicle. Until then the strike waits.
struct FolderRestoreFault: FaultInjector {
    let probability: Probability

    func step(_ run: Simulation) async throws {
        guard probability.draw(&run.folderRandom) else { return }
        let d = run.pickForFolderFault()
        guard let copy = d.folderCopy, copy.account == d.account else {
            let url = run.root.appendingPathComponent("copies/device-\(d.number)-account-\(d.account)")
            try await run.reopen(d) {
                try? FileManager.default.removeItem(at: url)
                try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
                try FileManager.default.copyItem(at: d.folder, to: url)
                // With the lifecycle, only the cloud store's files go back in
                // time: the local store never reaches the container, so a
                // restore of it would destroy saves by itself.
                if d.lifecycle {
                    for entry in SimulatedDevice.deviceOnlyEntries { try? FileManager.default.removeItem(at: url.appendingPathComponent(entry)) }
                }
            }
            d.folderCopy = (d.account, url)
            run.note("device \(d.number)'s folder copied (a backup)")
            return
        }
        guard try await run.uploadedEverything(d), try await !run.holdsTheOnlyCopy(d) else {
            run.note("device \(d.number)'s folder restore waits: the container does not hold all it saved, or this device alone holds a log the container lost")
            return
        }
        try await run.reopen(d) {
            if d.lifecycle {
                let fm = FileManager.default
                for entry in try fm.contentsOfDirectory(atPath: d.folder.path) where !SimulatedDevice.deviceOnlyEntries.contains(entry) {
                    try fm.removeItem(at: d.folder.appendingPathComponent(entry))
                }
                for entry in try fm.contentsOfDirectory(atPath: copy.url.path) {
                    try fm.moveItem(at: copy.url.appendingPathComponent(entry), to: d.folder.appendingPathComponent(entry))
                }
                try fm.removeItem(at: copy.url)
            } else {
                try FileManager.default.removeItem(at: d.folder)
                try FileManager.default.moveItem(at: copy.url, to: d.folder)
            }
        }
        d.folderCopy = nil
        d.behindOn.insert(d.account)
        run.deviceFaults.folderRestores += 1
        run.note("device \(d.number)'s folder restored from its older copy")
    }
}

/// A device's folder is copied to a new device, which opens it (the same
/// device ID on disk) and runs the workload beside the original, as a
/// cloned disk or a copied app folder does. The twin's acknowledged saves
/// count like any other.
struct FolderTwinFault: FaultInjector {
    let probability: Probability
    /// At most this many twins in a run.
    static let maxTwins = 2

    func step(_ run: Simulation) async throws {
        guard probability.draw(&run.folderRandom) else { return }
        let d = run.pickForFolderFault()
        guard run.deviceFaults.folderTwins < Self.maxTwins else { return }
        let twin = SimulatedDevice(index: run.devices.count, initialID: d.initialID,
                                   root: run.root.appendingPathComponent("device-\(run.devices.count + 1)"))
        twin.lifecycle = d.lifecycle
        try await run.reopen(d) { try FileManager.default.copyItem(at: d.root, to: twin.root) }
        twin.account = d.account
        twin.knownStore = d.knownStore
        twin.online = d.online
        twin.saves = d.saves
        twin.twinOf = d.index
        twin.schemaVersion = d.schemaVersion
        // A copy of files that are behind the container is behind it too.
        twin.behindOn = d.behindOn
        try await run.open(twin)
        run.devices.append(twin)
        run.twinsSharingAnID.insert(twin.index)
        run.deviceFaults.folderTwins += 1
        run.note("device \(d.number)'s folder copied to device \(twin.number), which opens it as the same device")
    }
}

/// A device loses its snapshot's `-wal` file (and `-shm`), as a copy or
/// sync service that takes only the main database file does: the snapshot
/// goes back to its last checkpoint.
///
/// A clean close checkpoints the `-wal` into the main file, so the main
/// file is taken as it is while the store is open (as a crash leaves it),
/// then put back after the close without the `-wal`. Like a restore, it
/// strikes only once the container holds everything the device saved.
struct LostWALFault: FaultInjector {
    let probability: Probability

    func step(_ run: Simulation) async throws {
        guard probability.draw(&run.folderRandom) else { return }
        let d = run.pickForFolderFault()
        guard try await run.uploadedEverything(d), try await !run.holdsTheOnlyCopy(d), let store = d.store else {
            run.note("device \(d.number)'s lost -wal waits: the container does not hold all it saved, or this device alone holds a log the container lost")
            return
        }
        let path = store.snapshot.path
        let mainFile = try Data(contentsOf: URL(fileURLWithPath: path))
        let walBytes = ((try? FileManager.default.attributesOfItem(atPath: path + "-wal"))?[.size] as? Int) ?? 0
        try await run.reopen(d) {
            try mainFile.write(to: URL(fileURLWithPath: path))
            for suffix in ["-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
                try FileManager.default.removeItem(atPath: path + suffix)
            }
        }
        d.behindOn.insert(d.account)
        run.deviceFaults.lostWALs += 1
        run.note("device \(d.number) lost its snapshot's -wal (\(walBytes) bytes)")
    }
}
