@testable import ChronicleSimulation
import Chronicle
import ChronicleCore
import Foundation
import Testing

/// The simulation with every device under a store manager (`--lifecycle`).
@Suite struct LifecycleSimulationTests {
    static func options(firstEnables: Int = 0) -> SimulationOptions {
        var options = SimulationOptions()
        options.lifecycle = true
        options.firstEnables = firstEnables
        return options
    }

    /// Every bug a lifecycle sweep found, as a seed that once failed
    /// (`chronicle simulate --lifecycle --seed N`).
    static let regressionSeeds: [(seed: UInt64, what: String)] = [
        (5, "a device back from another account never moved from its store, rebuilt meanwhile: its saves there were stranded"),
        (15, "deleting the local copy of the cloud store dropped a log the container had lost: nobody could put it back"),
        (18, "after a wipe, the seeding device's logs were gone and new devices never got the store's first records"),
        (0x3f4, "deleting one account's local copy gave the folder a new ID, and the other account's snapshot no longer opened"),
        (0x6e, "a move to a rebuilt store waited forever for a baseline part that a bit flip had damaged"),
        (0x6f, "a carried save got a new clock, so the order in which devices moved decided the result"),
        (0x7a, "after a local-only deletion and a wipe, the old device ID's logs were gone for good"),
        (0x79, "a copy of a device's folder uploaded a save under their shared ID before a rebuild: the original's own save of that sequence was taken as covered, and lost"),
        (0xf2, "a device that deleted its copy of the cloud store did not carry its earlier ID's last save into a store rebuilt without it"),
        (0x78, "the checker did not count records kept compactly in their rows among those a deleted store took with it"),
        (0x2ee, "the checker did not count a save the container held when its store was deleted among those that went with it, once its log was lost afterwards"),
        (0x216, "a pointer read before its last move named a store rebuilt since: the device opened that store and left its own, with its saves in it, behind"),
        (0x228, "a device that left a store because the store it was rebuilt as was deleted wrote a tombstone of its own for it, hiding where its devices' saves went"),
        (0x34d, "the checker did not count a save carried into a deleted store (logged again under another device) among those that went with it"),
        (0x391, "the checker looked for a fallback store's delete under the record a twin's older copy of that store was merged into"),
        (0x3ca, "the checker did not accept a twin's later update of a record as bringing back the record its original deleted"),
        (0x3e2, "the seeding device lost its -wal and with it the seed's log bodies; a wipe then took the seed from every device that had not imported it"),
        (0x7da, "a copy of a device's folder merged its fallback store first; the original's later edit of a record both held was dropped by its own merge, which kept what the cloud had"),
        (0xec, "the harness wiped the container after a folder's twin left the device ID it shared with its original and before the original had met the twin's logs under it; it now waits, as it does while two copies share an ID"),
        (0x2767, "a note deleted in one copy of a fallback store came back: the other copy merged it first, and its merge had moved the note's folder reference to the cloud's folder of the same name, which the deleting copy's merge took for a write it never saw"),
        (0x1393, "a merge of a fallback store took a record the cloud held but did not show (merged into another of the same name) as deleted, and dropped the fallback's later edit of it"),
    ]

    /// Seeds that failed on a container whose exclusive create is not
    /// reliable (`chronicle simulate --lifecycle --exclusive-create unreliable --seed N`).
    static let unreliableCreateSeeds: [(seed: UInt64, what: String)] = [
        (0x64, "a device away while its store was rebuilt twice carried its saves as copies with new clocks"),
        (0xd1, "a device that had left a deleted store put it back after a wipe took its tombstone"),
        (0x17e, "a device whose -wal was lost moved to a rebuilt store without the saves only the old store's logs held"),
        (0x140, "a twin's log replaced another copy's under the same name after a wipe: the devices that applied the first version kept it, and a copy built again started from a baseline that held it"),
    ]

    @Test(arguments: unreliableCreateSeeds.map(\.seed))
    func pinnedUnreliableCreateSeeds(seed: UInt64) async throws {
        var options = Self.options()
        options.exclusiveCreate = .unreliable
        let summary = try await Simulation(seed: seed, options: options).run()
        #expect(summary.passed, "seed \(seed): \(summary.violations)")
        #expect(summary.lifecycle?.unreliableCreateSeeds == 1)
    }

    /// Seeds that failed in a swarm sweep (`chronicle simulate --lifecycle --swarm --seed N`).
    static let swarmSeeds: [(seed: UInt64, what: String)] = [
        (0x35, "the checker expected local data at the cloud after the user turned the cloud off before it merged"),
        (0x3b, "deleting the copy of a store rebuilt meanwhile dropped the saves beyond the rebuild's vector"),
        (0x72, "a save made after its store was deleted, then uploaded by a baseline, was not carried to the local store"),
        (0x75, "a rebuilt store lost the pointer after a wipe and was merged into a fresh one, without its past"),
        (0xc9, "after a wipe the store a rebuild replaced came back as a live store, and the rebuilt one merged into it"),
        (0xd5, "the checker expected carried saves in a local store the device had since deleted on purpose"),
        (0x194, "a carried folder that the store showed as a duplicate of another (same unique name) was taken for deleted, and dropped"),
        (0x1a8, "after a wipe took the tombstone, a device back from another account put the deleted store back, and everyone merged into it"),
        (0x9d, "the checker missed a deleted store's log that a bit flip damaged after the deletion (nobody repairs a deleted store)"),
        (0xeb, "the device that seeded a store lost its -wal, and with it the seeding device's log bodies; the store then merged into another without them"),
    ]

    @Test(arguments: swarmSeeds.map(\.seed))
    func pinnedSwarmSeeds(seed: UInt64) async throws {
        let summary = try await Simulation(seed: seed, options: SimulationOptions.swarm(seed: seed, base: Self.options())).run()
        #expect(summary.passed, "seed \(seed): \(summary.violations)")
    }

    /// Seeds that failed with four to five times the default rates of
    /// deletions and maintenance (`chronicle simulate --lifecycle --rate
    /// cloud-deletion=0.01,maintenance=0.03 --seed N`).
    static let busySeeds: [(seed: UInt64, what: String)] = [
        (0x13, "a device whose copy had not yet started from the store's baseline published one of its own, the newest: devices that joined started from it without the store's past"),
        (0x5b, "the same: a baseline published before the copy had imported the store"),
        (0xe1, "a device leaving a deleted store put back its log the sync service had dropped, and did not carry that log's saves, which the store never held, to its local store"),
        (0x115, "the checker's fresh replay used logs only, but a wipe had left a twin's logs after a gap that only the newest baseline covers, as a joining device starts from"),
        (0xbf, "the checker did not count a note a cascade hid as a device left a deleted store (it imported the folder's deletion first) among those a move does not carry"),
        (0x192, "the checker looked for a fallback store's saves on every device, though they were merged into a cloud store that was then deleted and carried to a local store its device deleted"),
        (0x164, "the checker missed a deletion that a crash stopped and the device's next load finished, on the store its store had been rebuilt as"),
        (0x257, "a device leaving a deleted store carried a folder's delete and then its note's, which the cascade already hid: the note's delete was dropped, and the note would come back with its folder"),
        (0x2c8, "a store was deleted while a device's move into it waited for its baseline: the device left the new, empty store and dropped the saves still in the one it was leaving; later, the harness recorded a deletion made right after a rebuild under the store the device had left, not the one deleted"),
        (0x53f, "a device that joined a rebuilt store before its baseline arrived rebuilt the store from its copy, and the new store lost the whole past the baseline held"),
        (0x3373, "a device leaving a deleted store did not carry its later update of a folder's name to the value its local store already showed: the local store kept the older version of the field"),
        (0x1fed, "a device leaving a deleted store whose copy had not imported the seed of its own local data deleted that data from its local store: the copy knew nothing of the seeded folder, and the carry took that for a delete"),
        (0x23dc, "the harness flipped a bit in the only copy of a twin's update, uploaded just before the twin lost its -wal; the device it shared the ID with never held it"),
        (0x182e, "a device on a deleted store whose tombstone a wipe took put the pointer back to it; its deleter wrote the tombstone again and removed the pointer, and the two stores left stayed active with no pointer: devices turning the cloud on could join neither"),
    ]

    @Test(arguments: busySeeds.map(\.seed))
    func pinnedBusySeeds(seed: UInt64) async throws {
        var options = Self.options()
        options.cloudDeletionProbability = 0.01
        options.maintenanceProbability = 0.03
        let summary = try await Simulation(seed: seed, options: options).run()
        #expect(summary.passed, "seed \(seed): \(summary.violations)")
    }

    /// Pinned: with more deletions and maintenance (the demo's rates), a
    /// store was rebuilt without a device's last uploaded saves and then
    /// deleted before that device moved; the device left without them.
    /// Reproduce: `chronicle simulate --lifecycle --first-enables 2
    /// --rate cloud-deletion=0.01,maintenance=0.03 --seed 15 --verbose`.
    @Test func aDeletionOfARebuiltStoreLeavesWhatItNeverGot() async throws {
        var options = Self.options(firstEnables: 2)
        options.cloudDeletionProbability = 0.01
        options.maintenanceProbability = 0.03
        let summary = try await Simulation(seed: 15, options: options).run()
        #expect(summary.passed, "\(summary.violations)")
        #expect((summary.lifecycle?.cloudDeletions ?? 0) >= 1 && (summary.lifecycle?.rebuilds ?? 0) >= 1)
    }

    @Test(arguments: regressionSeeds.map(\.seed))
    func pinnedRegressionSeeds(seed: UInt64) async throws {
        let summary = try await Simulation(seed: seed, options: Self.options()).run()
        #expect(summary.passed, "seed \(seed): \(summary.violations)")
        #expect(summary.lifecycle != nil)
    }

    /// Two, and then five, devices turn the cloud on at the same moment,
    /// each with its own local data: they end on one store that holds
    /// everyone's (the local-data checker runs, and nothing is reported).
    /// Without faults, so that every one of them does turn it on then.
    @Test(arguments: [2, 5]) func concurrentFirstEnablesEndOnOneStoreWithEveryonesData(devices: Int) async throws {
        var options = SimulationOptions.calm
        options.lifecycle = true
        options.devices = 5
        options.firstEnables = devices
        let summary = try await Simulation(seed: 40 + UInt64(devices), options: options).run()
        #expect(summary.passed, "\(summary.violations)")
        #expect(summary.invariantsChecked.contains("local data reaches the cloud store"))
        #expect(summary.lifecycle?.firstEnables == devices)
        #expect(summary.lifecycle?.storesUsed == 1, "every device loaded the one store that won")
    }

    /// The same with every fault on.
    @Test(arguments: [2, 5]) func concurrentFirstEnablesUnderFaults(devices: Int) async throws {
        let summary = try await Simulation(seed: 40 + UInt64(devices), options: Self.options(firstEnables: devices)).run()
        #expect(summary.passed, "\(summary.violations)")
        #expect((summary.lifecycle?.firstEnables ?? 0) >= 1)
    }

    /// The local-data checker can fail: a record a first enabler brought,
    /// missing from the store they end on, is reported.
    @Test func theLocalDataCheckerReportsABroughtRecordTheCloudStoreLacks() async throws {
        var options = SimulationOptions.calm
        options.lifecycle = true
        options.devices = 2
        options.savesPerDevice = 6
        options.firstEnables = 2
        let simulation = Simulation(seed: 3, options: options)
        simulation.beforeChecks = { sim in
            // As if device 1's merge had skipped a record.
            sim.firstEnableRecords[0, default: []].append((entity: "Reading", id: RecordID(UUID())))
        }
        let summary = try await simulation.run()
        #expect(summary.violations.contains { $0.hasPrefix("local data: device 1's local Reading") }, "\(summary.violations)")
    }
}
