import Chronicle
import ChronicleContainer
import ChronicleCore
import ChronicleSnapshot
import Foundation
import GRDB
import Synchronization

/// The fault options of a simulated container, as probabilities per event.
package struct ContainerFaults: Sendable, Hashable, Codable {
    /// The longest delay, in virtual time, before another device sees a blob.
    package var maxVisibilityDelay: Duration = .milliseconds(400)
    /// Chance that a blob is first visible torn (a prefix) for a while.
    package var tornProbability: Probability = 0.05
    /// Chance that an upload reports success but never arrives.
    package var lostUploadProbability: Probability = 0.03
    /// Whether a name whose upload was lost swallows every later put of it
    /// too, so that not even its owner can put it back. Off in every real
    /// run; on, it is the control that shows the checkers catch lost saves.
    package var lostUploadsStayLost = false
    /// Whether creating the active-store pointer is exclusive. When false,
    /// the container behaves like a folder a sync service shares: a device
    /// sees another's pointer only after a visibility delay, can create its
    /// own meanwhile, and the later write is the one that stays (the
    /// service keeps one file under the name). The container then reports
    /// ``ContainerCapabilities/reliableExclusiveCreate`` false.
    package var reliableExclusiveCreate = true

    /// Creates fault options.
    package init() {}

    /// No faults and no delay.
    package static let none: ContainerFaults = {
        var f = ContainerFaults()
        f.maxVisibilityDelay = .zero
        f.tornProbability = 0
        f.lostUploadProbability = 0
        return f
    }()
}

/// A container that shows each device the others' blobs late, torn, or not at
/// all, and can be damaged, made unavailable or wiped, all decided by a seeded
/// generator on a virtual clock. It wraps an ``InMemoryContainer``; every
/// device gets its own ``View``.
package final class SimulatedContainer: Sendable {
    struct State {
        var visibleAt: [ContainerName: [DeviceID: UInt64]] = [:]
        var owner: [ContainerName: DeviceID] = [:]
        var torn: [ContainerName: (until: UInt64, length: Int)] = [:]
        var unavailableUntil: UInt64 = 0
        /// Names whose uploads were lost (kept only when
        /// ``ContainerFaults/lostUploadsStayLost``), and logs made unrepairable.
        var swallowed: Set<ContainerName> = []
        /// Blobs some devices see damaged, for good (their copy of the folder).
        var damagedViews: [ContainerName: Set<DeviceID>] = [:]
        /// Writes of the active-store pointer not yet seen by every device
        /// (only without reliable exclusive create), oldest first.
        var pointerWrites: [PointerWrite] = []
        var random: SeededRandom
        var counts = FaultCounts()
    }

    /// One write of the active-store pointer: what it left (nil for a
    /// deletion), by whom, and from when the other devices see it.
    struct PointerWrite {
        var device: DeviceID
        var marker: Marker?
        var visibleAt: UInt64
    }

    let base = InMemoryContainer()
    let clock: ManualClock
    let faults: ContainerFaults
    // Mutex makes the shared state safe across device tasks.
    let state: Mutex<State>

    /// Creates an empty simulated container.
    package init(clock: ManualClock, faults: ContainerFaults, seed: UInt64) {
        self.clock = clock
        self.faults = faults
        state = Mutex(State(random: SeededRandom(seed: seed)))
    }

    /// What `device` sees of the container.
    package func view(for device: DeviceID) -> View { View(container: self, device: device) }

    /// How many faults of each kind happened.
    package var counts: FaultCounts { state.withLock { $0.counts } }

    func count(_ body: (inout FaultCounts) -> Void) { state.withLock { body(&$0.counts) } }

    // MARK: Faults driven by the simulation

    /// Flips one bit of a random stored log; returns its name.
    @discardableResult
    package func flipRandomBit(suffix: String = ContainerLayout.logExtension, where include: (ContainerName) -> Bool = { _ in true }) async throws -> ContainerName? {
        let logs = try await base.listAll(prefix: "").filter { $0.name.rawValue.hasSuffix(suffix) && include($0.name) }
        guard !logs.isEmpty else { return nil }
        let (index, bit) = state.withLock { s in (Int(s.random.next() % UInt64(logs.count)), s.random.next()) }
        let name = logs[index].name
        var bytes = try await base.get(name)
        guard !bytes.isEmpty else { return nil }
        bytes[Int(bit % UInt64(bytes.count))] ^= UInt8(1 << (bit >> 32 % 8))
        try await base.delete(name)
        try await base.put(name, bytes)
        count { $0.bitFlips += 1 }
        return name
    }

    /// Makes the devices `seeing` read the blob `name` damaged from now on
    /// (one bit flipped in their copy), while the others read it whole.
    package func damageView(of name: ContainerName, for seeing: Set<DeviceID>) {
        state.withLock { s in
            s.damagedViews[name, default: []].formUnion(seeing)
            s.counts.damagedViews += 1
        }
    }

    /// The blobs whose every later put is lost (damaged for good, or an
    /// upload lost for good): the container will not hold them again.
    package var lostForGood: Set<ContainerName> { state.withLock { $0.swallowed } }

    /// Flips one bit of the stored blob `name`, and loses every later put of
    /// it: not even its owner can put it back.
    package func damageForGood(_ name: ContainerName) async throws {
        var bytes = try await base.get(name)
        guard !bytes.isEmpty else { return }
        bytes[bytes.count / 2] ^= 0x08
        try await base.delete(name)
        try await base.put(name, bytes)
        state.withLock { s in
            s.swallowed.insert(name)
            s.counts.unrepairableLogs += 1
        }
    }

    /// Makes every operation fail as unavailable for `milliseconds`.
    package func beUnavailable(forMilliseconds milliseconds: UInt64) {
        let until = clock.nowMilliseconds() + milliseconds
        state.withLock { s in
            s.unavailableUntil = max(s.unavailableUntil, until)
            s.counts.outages += 1
        }
    }

    /// Deletes every blob and marker, as a reset cloud account does.
    package func wipe() async throws {
        for blob in try await base.listAll(prefix: "") { try await base.delete(blob.name) }
        for marker in try await base.listMarkers(prefix: "") { try await base.deleteMarker(marker, expected: nil) }
        state.withLock { s in
            s.visibleAt = [:]
            s.torn = [:]
            s.pointerWrites = []
            s.counts.wipes += 1
        }
    }

    /// Ends every delay, tear and outage: everything stored is visible to all.
    package func settle() {
        state.withLock { s in
            s.visibleAt = [:]
            s.torn = [:]
            s.unavailableUntil = 0
            s.pointerWrites = []
        }
    }

    /// Every blob, whole, ignoring visibility (for checks).
    package var everything: InMemoryContainer { base }

    /// A device's view of the container.
    package struct View: Container {
        let container: SimulatedContainer
        let device: DeviceID

        package var capabilities: ContainerCapabilities {
            ContainerCapabilities(reliableExclusiveCreate: container.faults.reliableExclusiveCreate)
        }

        /// Whether `name` is the active-store pointer of a container whose
        /// exclusive create is not reliable.
        private func sharedByService(_ name: ContainerName) -> Bool {
            !container.faults.reliableExclusiveCreate && name == ContainerLayout.activeStore
        }

        /// The pointer as this device sees it: the latest write that reached
        /// it (its own, or another's after its delay).
        private func seenPointer() async throws -> Marker? {
            let now = container.clock.nowMilliseconds()
            let seen = container.state.withLock { s -> PointerWrite? in
                // A write every device sees by now stands; what came before it is history.
                if let settled = s.pointerWrites.lastIndex(where: { $0.visibleAt <= now }) { s.pointerWrites.removeFirst(settled) }
                return s.pointerWrites.last { $0.device == device || $0.visibleAt <= now }
            }
            if let seen { return seen.marker }
            return try await container.base.readMarker(ContainerLayout.activeStore)
        }

        /// Records a write of the pointer (`before` is what it replaced),
        /// which the other devices see after a delay.
        private func notePointerWrite(before: Marker?, after: Marker?) {
            let now = container.clock.nowMilliseconds()
            let maxDelay = container.faults.maxVisibilityDelay.wholeMilliseconds
            container.state.withLock { s in
                // What every device saw until now heads the list.
                if s.pointerWrites.isEmpty { s.pointerWrites.append(PointerWrite(device: DeviceID(index: 0), marker: before, visibleAt: 0)) }
                s.pointerWrites.append(PointerWrite(device: device, marker: after, visibleAt: now + 1 + s.random.next() % (maxDelay + 1)))
            }
        }

        private func checkAvailable() throws {
            let now = container.clock.nowMilliseconds()
            let down = container.state.withLock { $0.unavailableUntil > now }
            if down {
                container.count { $0.unavailableErrors += 1 }
                throw ChronicleError(.unavailable, "simulated container outage")
            }
        }

        package func put(_ name: ContainerName, _ bytes: [UInt8]) async throws {
            try checkAvailable()
            let now = container.clock.nowMilliseconds()
            let faults = container.faults
            let maxDelay = faults.maxVisibilityDelay.wholeMilliseconds
            let (lost, delays, tear) = container.state.withLock { s -> (Bool, UInt64, (UInt64, Int)?) in
                let lost = Double(s.random.next() % 10_000) / 10_000 < faults.lostUploadProbability.value
                let delay = maxDelay == 0 ? 0 : s.random.next() % (maxDelay + 1)
                let torn = Double(s.random.next() % 10_000) / 10_000 < faults.tornProbability.value && bytes.count > 1
                return (lost, delay, torn ? (now + delay + 1 + s.random.next() % 300, Int(s.random.next() % UInt64(bytes.count))) : nil)
            }
            let swallowed = container.state.withLock { s -> Bool in
                if faults.lostUploadsStayLost, lost { s.swallowed.insert(name) }
                return s.swallowed.contains(name)
            }
            if lost || swallowed {
                container.count { $0.lostUploads += 1 }
                return
            }
            try await container.base.put(name, bytes)
            container.state.withLock { s in
                if s.owner[name] == nil {
                    s.owner[name] = device
                    // Other devices see it after a per-blob delay (so blobs arrive out of order).
                    s.visibleAt[name] = [device: 0, DeviceID(index: 0): now + delays]
                    if let tear {
                        s.torn[name] = tear
                        s.counts.tornBlobs += 1
                    }
                    if delays > 0 { s.counts.delayedBlobs += 1 }
                }
            }
        }

        private func readable(_ name: ContainerName) -> Bool {
            let now = container.clock.nowMilliseconds()
            return container.state.withLock { s in
                guard let entry = s.visibleAt[name], s.owner[name] != device else { return true }
                return now >= (entry[DeviceID(index: 0)] ?? 0)
            }
        }

        package func get(_ name: ContainerName, maxBytes: Int) async throws -> [UInt8] {
            try checkAvailable()
            guard readable(name) else { throw ChronicleError(.notFound, "no blob named \(name) (not visible yet)") }
            let bytes = try await container.base.get(name, maxBytes: maxBytes)
            let now = container.clock.nowMilliseconds()
            let owner = container.state.withLock { $0.owner[name] }
            if owner != device, let tear = container.state.withLock({ $0.torn[name] }), now < tear.until {
                return Array(bytes.prefix(tear.length))
            }
            if container.state.withLock({ $0.damagedViews[name]?.contains(device) ?? false }), !bytes.isEmpty {
                var damaged = bytes
                damaged[damaged.count / 2] ^= 0x10
                return damaged
            }
            return bytes
        }

        package func list(prefix: String, after: ContainerName?, limit: Int) async throws -> [BlobInfo] {
            try checkAvailable()
            return try await container.base.listAll(prefix: prefix, after: after)
                .filter { readable($0.name) }
                .prefix(limit).map { $0 }
        }

        /// The stored children, visible or not: a child whose blobs are not
        /// visible yet lists as empty.
        package func listChildren(prefix: String) async throws -> [String] {
            try checkAvailable()
            return try await container.base.listChildren(prefix: prefix)
        }

        package func foreignEntries(prefix: String) async throws -> [ForeignEntry] {
            try checkAvailable()
            return try await container.base.foreignEntries(prefix: prefix)
        }

        package func delete(_ name: ContainerName) async throws {
            try checkAvailable()
            try await container.base.delete(name)
            container.state.withLock { s in
                s.owner[name] = nil
                s.visibleAt[name] = nil
                s.torn[name] = nil
            }
        }

        package func readMarker(_ name: ContainerName) async throws -> Marker? {
            try checkAvailable()
            if sharedByService(name) { return try await seenPointer() }
            return try await container.base.readMarker(name)
        }

        package func createMarker(_ name: ContainerName, _ bytes: [UInt8]) async throws -> Marker {
            try checkAvailable()
            guard sharedByService(name) else { return try await container.base.createMarker(name, bytes) }
            // Exclusive only against what this device sees: another
            // device's pointer on its way is overwritten, the later write stays.
            if try await seenPointer() != nil { throw ChronicleError(.markerConflict, "marker \(name) already exists") }
            let before = try await container.base.readMarker(name)
            let created: Marker
            if let before {
                created = try await container.base.replaceMarker(name, bytes, expected: before.version)
                container.count { $0.pointerOverwrites += 1 }
            } else {
                created = try await container.base.createMarker(name, bytes)
            }
            notePointerWrite(before: before, after: created)
            return created
        }

        package func replaceMarker(_ name: ContainerName, _ bytes: [UInt8], expected: UInt64) async throws -> Marker {
            try checkAvailable()
            guard sharedByService(name) else { return try await container.base.replaceMarker(name, bytes, expected: expected) }
            guard let seen = try await seenPointer(), seen.version == expected else {
                throw ChronicleError(.markerConflict, "marker \(name) is not at version \(expected)")
            }
            let before = try await container.base.readMarker(name)
            let replaced: Marker
            if let before {
                replaced = try await container.base.replaceMarker(name, bytes, expected: before.version)
            } else {
                replaced = try await container.base.createMarker(name, bytes)
            }
            notePointerWrite(before: before, after: replaced)
            return replaced
        }

        package func deleteMarker(_ name: ContainerName, expected: UInt64?) async throws {
            try checkAvailable()
            guard sharedByService(name) else { return try await container.base.deleteMarker(name, expected: expected) }
            let seen = try await seenPointer()
            if let expected, seen?.version != expected {
                throw ChronicleError(.markerConflict, "marker \(name) is not at version \(expected)")
            }
            let before = try await container.base.readMarker(name)
            if before != nil { try await container.base.deleteMarker(name, expected: nil) }
            notePointerWrite(before: before, after: nil)
        }

        package func listMarkers(prefix: String) async throws -> [ContainerName] {
            try checkAvailable()
            return try await container.base.listMarkers(prefix: prefix)
        }
    }
}

/// Faults injected, by kind.
package struct FaultCounts: Sendable, Hashable, Codable {
    package var delayedBlobs = 0
    package var tornBlobs = 0
    package var lostUploads = 0
    package var bitFlips = 0
    package var outages = 0
    package var unavailableErrors = 0
    package var wipes = 0
    package var crashes = 0
    package var offlinePeriods = 0
    package var accountSwitches = 0
    /// Device-folder faults: restores from an older copy, twins, lost `-wal` files.
    package var folderRestores = 0
    package var folderTwins = 0
    package var lostWALs = 0
    /// Writes of the active-store pointer that replaced another device's
    /// pointer that had not reached them (without reliable exclusive create).
    package var pointerOverwrites = 0
    /// Corruption faults: blobs some devices see damaged for good, logs
    /// damaged that their owner cannot put back.
    package var damagedViews = 0
    package var unrepairableLogs = 0

    /// Creates zero counts.
    package init() {}

    /// The sum of two runs' counts.
    package static func + (a: FaultCounts, b: FaultCounts) -> FaultCounts {
        var c = FaultCounts()
        c.delayedBlobs = a.delayedBlobs + b.delayedBlobs
        c.tornBlobs = a.tornBlobs + b.tornBlobs
        c.lostUploads = a.lostUploads + b.lostUploads
        c.bitFlips = a.bitFlips + b.bitFlips
        c.outages = a.outages + b.outages
        c.unavailableErrors = a.unavailableErrors + b.unavailableErrors
        c.wipes = a.wipes + b.wipes
        c.crashes = a.crashes + b.crashes
        c.offlinePeriods = a.offlinePeriods + b.offlinePeriods
        c.accountSwitches = a.accountSwitches + b.accountSwitches
        c.folderRestores = a.folderRestores + b.folderRestores
        c.folderTwins = a.folderTwins + b.folderTwins
        c.lostWALs = a.lostWALs + b.lostWALs
        c.pointerOverwrites = a.pointerOverwrites + b.pointerOverwrites
        c.damagedViews = a.damagedViews + b.damagedViews
        c.unrepairableLogs = a.unrepairableLogs + b.unrepairableLogs
        return c
    }

    /// One line naming every count.
    package var summary: String {
        "\(delayedBlobs) delayed, \(tornBlobs) torn, \(lostUploads) lost uploads, \(bitFlips) bit flips, \(outages) outages (\(unavailableErrors) failed calls), \(wipes) wipes, \(crashes) crashes, \(offlinePeriods) offline periods, \(accountSwitches) account switches, \(folderRestores) folder restores, \(folderTwins) folder twins, \(lostWALs) lost WALs"
            + (pointerOverwrites > 0 ? ", \(pointerOverwrites) pointers written twice" : "")
            + (damagedViews + unrepairableLogs > 0 ? ", \(damagedViews) logs seen damaged by some devices, \(unrepairableLogs) unrepairable logs" : "")
    }
}
