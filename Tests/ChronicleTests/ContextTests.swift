import Chronicle
import ChronicleCore
import Dispatch
import Foundation
import Synchronization
import Testing

/// Main, background, child and scratch contexts, automatic merges and
/// merge policies.
// Serialized: two tests hold the store's actor with a blocking wait, and
// two of them at once could hold every thread of a two-core machine.
@Suite(.serialized, .timeLimit(.minutes(1))) struct ContextTests {
    static let schema = try! Schema(version: 1, entities: [
        Entity("Note", attributes: [Attribute("title", .string), Attribute("words", .int64, default: 0), Attribute("pinned", .bool, default: false)]),
    ])

    struct Note: ChronicleRecord, Equatable {
        static let entityName = "Note"
        var id: RecordID
        var title: String
        var words: Int64
        var pinned: Bool
    }

    struct Place {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-contexts-\(UUID().uuidString)")
        let container: DirectoryContainer
        init() throws { container = try DirectoryContainer(root: root.appendingPathComponent("shared"), create: true) }
        func open(_ name: String) async throws -> Store {
            try await Store.open(Store.Configuration(schema: ContextTests.schema, directory: root.appendingPathComponent(name), container: container))
        }
        func remove() { try? FileManager.default.removeItem(at: root) }
    }

    /// A store with one note (title "a", 1 word, not pinned).
    static func storeWithNote(_ place: Place) async throws -> (Store, RecordID) {
        let store = try await place.open("device")
        let id = try await store.write { tx in tx.insert("Note", ["title": "a", "words": 1]) }
        return (store, id)
    }

    /// The code of the error `body` throws; nil if it throws none.
    static func failure(_ body: () async throws -> Void) async -> ChronicleError.Code? {
        do {
            try await body()
            return nil
        } catch {
            return (error as? ChronicleError)?.code
        }
    }

    static func stored(_ store: Store, _ id: RecordID) async throws -> Note {
        try #require(try await store.fetch(Note.self, id: id))
    }

    // MARK: Main context

    @Test func theMainContextReadsWhileTheStoreIsBusySaving() async throws {
        let place = try Place()
        defer { place.remove() }
        let (store, id) = try await Self.storeWithNote(place)
        let release = DispatchSemaphore(value: 0)
        let entered = DispatchSemaphore(value: 0)
        // A save that holds the store's writer until the read is done.
        let busy = Task {
            try await store.write { tx in
                entered.signal()
                release.wait()
                tx.update("Note", id: id, ["title": "b"])
            }
        }
        while entered.wait(timeout: .now()) == .timedOut { try await Task.sleep(for: .milliseconds(1)) }
        let note = try await store.mainContext.fetch(Note.self, id: id)
        #expect(note?.title == "a")
        release.signal()
        try await busy.value
        #expect(try await store.mainContext.fetch(Note.self, id: id)?.title == "b")
    }

    @Test func aReadOnlyMainContextRefusesChangesAndSaves() async throws {
        let place = try Place()
        defer { place.remove() }
        let (store, id) = try await Self.storeWithNote(place)
        let main = store.mainContext
        #expect(main === store.mainContext)
        #expect(main.kind == .main && main.mergePolicy == .storeTrumps)
        main.isReadOnly = true
        #expect(await Self.failure { try main.insert("Note", ["title": "x"]) } == .readOnlyContext)
        #expect(await Self.failure { try await main.update("Note", id: id, ["title": "x"]) } == .readOnlyContext)
        #expect(await Self.failure { try await main.delete("Note", id: id) } == .readOnlyContext)
        #expect(await Self.failure { try await main.save() } == .readOnlyContext)
        // A child of a read-only context cannot push into it either.
        let child = main.newChildContext()
        try await child.update("Note", id: id, ["title": "x"])
        #expect(await Self.failure { try await child.save() } == .readOnlyContext)
        #expect(try await Self.stored(store, id).title == "a")
        #expect(try await main.fetch(Note.self, id: id)?.title == "a")
    }

    @Test func changesAreValidatedAsTheyAreMade() async throws {
        let place = try Place()
        defer { place.remove() }
        let (store, id) = try await Self.storeWithNote(place)
        let main = store.mainContext
        #expect(await Self.failure { try main.insert("Nope", ["title": "x"]) } == .unknownEntity)
        #expect(await Self.failure { try main.insert("Note", ["colour": "x"]) } == .unknownAttribute)
        #expect(await Self.failure { try await main.update("Note", id: RecordID(UUID()), ["title": "x"]) } == .recordNotFound)
        // An ID already stored is refused by the save (record IDs are never reused).
        try main.insert("Note", ["title": "x"], id: id)
        #expect(await Self.failure { try await main.save() } == .recordExists)
        #expect(await Self.failure { try main.insert("Note", ["title": "y"], id: id) } == .recordExists)
        main.rollback()
        // A value of the wrong type is refused by the save, and nothing is saved.
        try await main.update("Note", id: id, ["words": "many"])
        #expect(await Self.failure { try await main.save() } == .typeMismatch)
        #expect(try await Self.stored(store, id).words == 1)
        #expect(main.hasChanges)
        main.rollback()
        #expect(!main.hasChanges)
    }

    @Test func aSaveOfTheMainContextIsOneLogAndReadsBackWhatWasStored() async throws {
        let place = try Place()
        defer { place.remove() }
        let (store, id) = try await Self.storeWithNote(place)
        _ = try await store.upload()
        let main = store.mainContext
        var note = try #require(try await main.fetch(Note.self, id: id))
        note.title = "edited"
        try await main.update(note)
        let new = try main.insert("Note", ["title": "new"])
        // Inserted, not saved: reached by its ID, not by queries.
        #expect(try await main.values(of: "Note", id: new)?["title"] == .string("new"))
        #expect(try await main.fetchAll(Note.self).count == 1)
        #expect(main.changedRecords == [RecordReference("Note", id), RecordReference("Note", new)])
        let result = try await main.save()
        #expect(result.savedRecords == 2 && result.resolved.isEmpty)
        #expect(!main.hasChanges)
        #expect(try await store.upload() == 1)
        // The inserted record now shows its defaults, as stored.
        #expect(try await main.fetch(Note.self, id: new) == Note(id: new, title: "new", words: 0, pinned: false))
        #expect(try await Self.stored(store, id).title == "edited")
        #expect(try await main.fetchAll(Note.self, where: "title = ?", arguments: ["new"]).map(\.id) == [new])
    }

    // MARK: Automatic merges

    @Test func backgroundSavesRefreshOnlyWhatTheMainContextHolds() async throws {
        let place = try Place()
        defer { place.remove() }
        let (store, id) = try await Self.storeWithNote(place)
        let other = try await store.write { tx in tx.insert("Note", ["title": "other"]) }
        let main = store.mainContext
        _ = try await main.fetch(Note.self, id: id)
        #expect(main.registeredRecords == [RecordReference("Note", id)])
        let changes = main.changes()
        let background = store.newBackgroundContext()
        #expect(background.kind == .background && background.mergePolicy == .memoryTrumps)
        try await background.update("Note", id: id, ["title": "from the background"])
        try await background.update("Note", id: other, ["title": "other, changed"])
        try await background.save()
        // Refreshed as the save committed, before it returned.
        #expect(try await main.fetch(Note.self, id: id)?.title == "from the background")
        #expect(main.registeredRecords == [RecordReference("Note", id)])
        var iterator = changes.makeAsyncIterator()
        let change = try #require(await iterator.next())
        #expect(change.refreshed == [RecordReference("Note", id)])
        // A deletion underneath removes the record from the context.
        try await store.write { tx in tx.delete("Note", id: id) }
        #expect(main.registeredRecords.isEmpty)
        #expect(try await main.fetch(Note.self, id: id) == nil)
        let removal = try #require(await iterator.next())
        #expect(removal.removed == [RecordReference("Note", id)])
    }

    @Test func anotherDevicesSavesReachTheMainContextAsTheyAreImported() async throws {
        let place = try Place()
        defer { place.remove() }
        let phone = try await place.open("phone")
        let laptop = try await place.open("laptop")
        let id = try await phone.write { tx in tx.insert("Note", ["title": "a"]) }
        try await phone.sync()
        try await laptop.sync()
        let main = laptop.mainContext
        #expect(try await main.fetch(Note.self, id: id)?.title == "a")
        try await phone.write { tx in tx.update("Note", id: id, ["title": "from the phone"]) }
        try await phone.sync()
        try await laptop.sync()
        #expect(try await main.fetch(Note.self, id: id)?.title == "from the phone")
    }

    @Test func withoutAutomaticMergesTheContextKeepsWhatItReadUntilItSaves() async throws {
        let place = try Place()
        defer { place.remove() }
        let (store, id) = try await Self.storeWithNote(place)
        let main = store.mainContext
        main.automaticallyMergesChanges = false
        _ = try await main.fetch(Note.self, id: id)
        try await store.write { tx in tx.update("Note", id: id, ["title": "underneath"]) }
        #expect(try await main.fetch(Note.self, id: id)?.title == "a")
        try await main.refresh([RecordReference("Note", id)])
        #expect(try await main.fetch(Note.self, id: id)?.title == "underneath")
    }

    @Test func anAutomaticMergeSettlesPendingChangesByThePolicy() async throws {
        for policy in MergePolicy.allCases {
            let place = try Place()
            defer { place.remove() }
            let (store, id) = try await Self.storeWithNote(place)
            let context = store.newBackgroundContext(mergePolicy: policy)
            try await context.update("Note", id: id, ["title": "mine", "words": 5])
            try await store.write { tx in tx.update("Note", id: id, ["title": "theirs", "pinned": true]) }
            let shown = try #require(try await context.fetch(Note.self, id: id))
            // Attributes only one side changed: both kept, under every policy.
            #expect(shown.pinned, "\(policy)")
            switch policy {
            case .storeTrumps:
                #expect(shown == Note(id: id, title: "theirs", words: 5, pinned: true))
            case .rollback:
                #expect(shown == Note(id: id, title: "theirs", words: 1, pinned: true))
                #expect(!context.hasChanges)
            case .memoryTrumps, .overwrite, .error:
                #expect(shown == Note(id: id, title: "mine", words: 5, pinned: true), "\(policy)")
            }
            if policy == .error {
                let error = await #expect(throws: ChronicleError.self) { try await context.save() }
                #expect(error?.code == .mergeConflict)
                #expect(error?.mergeConflicts.map(\.attributes) == [["title"]])
            } else {
                try await context.save()
                #expect(try await Self.stored(store, id) == shown, "\(policy)")
            }
        }
    }

    @Test func aRollbackAfterAConflictKeptByTheErrorPolicyShowsWhatIsStored() async throws {
        let place = try Place()
        defer { place.remove() }
        let (store, id) = try await Self.storeWithNote(place)
        let main = store.mainContext
        main.mergePolicy = .error
        try await main.update("Note", id: id, ["title": "mine"])
        try await store.write { tx in tx.update("Note", id: id, ["title": "theirs", "words": 2]) }
        // The conflict waits for the save; the other attribute is merged.
        #expect(try await main.fetch(Note.self, id: id) == Note(id: id, title: "mine", words: 2, pinned: false))
        main.rollback()
        #expect(try await main.fetch(Note.self, id: id) == Note(id: id, title: "theirs", words: 2, pinned: false))
        #expect(!main.hasChanges)
        // Likewise for a record deleted in the context while it changed underneath.
        try await main.delete("Note", id: id)
        try await store.write { tx in tx.update("Note", id: id, ["title": "theirs again"]) }
        #expect(try await main.fetch(Note.self, id: id) == nil)
        main.rollback()
        #expect(try await main.fetch(Note.self, id: id)?.title == "theirs again")
        // Setting the value read back is a change while the stored one differs.
        main.mergePolicy = .error
        try await main.update("Note", id: id, ["words": 5])
        try await store.write { tx in tx.update("Note", id: id, ["words": 6]) }
        try await main.update("Note", id: id, ["words": 2])
        #expect(try await main.fetch(Note.self, id: id)?.words == 2)
        let error = await #expect(throws: ChronicleError.self) { try await main.save() }
        #expect(error?.mergeConflicts.first?.attributes == ["words"])
    }

    // MARK: Merge policies at save time

    /// The context changes title and words; underneath, title and pinned change.
    private static func conflict(_ policy: MergePolicy) async throws -> (Place, Store, RecordID, StoreContext) {
        let place = try Place()
        let (store, id) = try await storeWithNote(place)
        let context = store.newBackgroundContext(mergePolicy: policy)
        context.automaticallyMergesChanges = false
        var note = try #require(try await context.fetch(Note.self, id: id))
        note.title = "mine"
        note.words = 5
        try await context.update(note)
        try await store.write { tx in tx.update("Note", id: id, ["title": "theirs", "pinned": true]) }
        return (place, store, id, context)
    }

    @Test func theErrorPolicyRefusesASaveAndListsTheConflicts() async throws {
        let (place, store, id, context) = try await Self.conflict(.error)
        defer { place.remove() }
        let other = try context.insert("Note", ["title": "also in this save"])
        let error = await #expect(throws: ChronicleError.self) { try await context.save() }
        #expect(error?.code == .mergeConflict)
        let conflict = try #require(error?.mergeConflicts.first)
        #expect(error?.mergeConflicts.count == 1)
        #expect(conflict.record == RecordReference("Note", id))
        #expect(conflict.attributes == ["title"])
        #expect(conflict.stored == ["title": .string("theirs")] && conflict.inContext == ["title": .string("mine")])
        #expect(error?.message.contains("title") == true)
        // Nothing saved, the insert included; the context keeps its changes.
        #expect(try await Self.stored(store, id) == Note(id: id, title: "theirs", words: 1, pinned: true))
        #expect(try await store.fetch(Note.self, id: other) == nil)
        #expect(context.hasChanges)
        // Settled by another policy, the same save goes through.
        context.mergePolicy = .memoryTrumps
        let result = try await context.save()
        #expect(result.resolved.map(\.attributes) == [["title"]])
        #expect(try await store.fetch(Note.self, id: other) != nil)
    }

    @Test func storeTrumpsKeepsStoredValuesOfConflictingAttributes() async throws {
        let (place, store, id, context) = try await Self.conflict(.storeTrumps)
        defer { place.remove() }
        let result = try await context.save()
        #expect(result.resolved.count == 1)
        #expect(try await Self.stored(store, id) == Note(id: id, title: "theirs", words: 5, pinned: true))
        #expect(try await context.fetch(Note.self, id: id) == Note(id: id, title: "theirs", words: 5, pinned: true))
    }

    @Test func memoryTrumpsSavesTheContextsValuesPerAttribute() async throws {
        let (place, store, id, context) = try await Self.conflict(.memoryTrumps)
        defer { place.remove() }
        try await context.save()
        #expect(try await Self.stored(store, id) == Note(id: id, title: "mine", words: 5, pinned: true))
    }

    @Test func overwriteSavesTheContextsWholeRecord() async throws {
        let (place, store, id, context) = try await Self.conflict(.overwrite)
        defer { place.remove() }
        try await context.save()
        #expect(try await Self.stored(store, id) == Note(id: id, title: "mine", words: 5, pinned: false))
    }

    @Test func rollbackDropsTheRecordsChangesAndSavesTheRest() async throws {
        let (place, store, id, context) = try await Self.conflict(.rollback)
        defer { place.remove() }
        let other = try context.insert("Note", ["title": "kept"])
        let result = try await context.save()
        #expect(result.resolved.map(\.record) == [RecordReference("Note", id)])
        #expect(try await Self.stored(store, id) == Note(id: id, title: "theirs", words: 1, pinned: true))
        #expect(try await context.fetch(Note.self, id: id) == Note(id: id, title: "theirs", words: 1, pinned: true))
        #expect(try await store.fetch(Note.self, id: other)?.title == "kept")
        #expect(!context.hasChanges)
    }

    @Test func aChangeToAnAttributeNobodyElseChangedIsNoConflict() async throws {
        let place = try Place()
        defer { place.remove() }
        let (store, id) = try await Self.storeWithNote(place)
        let context = store.newBackgroundContext(mergePolicy: .error)
        context.automaticallyMergesChanges = false
        try await context.update("Note", id: id, ["words": 7])
        try await store.write { tx in tx.update("Note", id: id, ["pinned": true]) }
        try await context.save()
        #expect(try await Self.stored(store, id) == Note(id: id, title: "a", words: 7, pinned: true))
    }

    @Test func deletionsOnEitherSideAreConflictsSettledByThePolicy() async throws {
        for policy in MergePolicy.allCases {
            // The context deletes a record that changed underneath.
            do {
                let place = try Place()
                defer { place.remove() }
                let (store, id) = try await Self.storeWithNote(place)
                let context = store.newBackgroundContext(mergePolicy: policy)
                context.automaticallyMergesChanges = false
                try await context.delete("Note", id: id)
                try await store.write { tx in tx.update("Note", id: id, ["title": "theirs"]) }
                if policy == .error {
                    let error = await #expect(throws: ChronicleError.self) { try await context.save() }
                    #expect(error?.mergeConflicts.first?.deletedInContext == true)
                    #expect(error?.mergeConflicts.first?.attributes == ["title"])
                } else {
                    try await context.save()
                    let kept = try await store.fetch(Note.self, id: id) != nil
                    #expect(kept == (policy == .storeTrumps || policy == .rollback), "\(policy)")
                }
            }
            // The context changes a record deleted underneath.
            do {
                let place = try Place()
                defer { place.remove() }
                let (store, id) = try await Self.storeWithNote(place)
                let context = store.newBackgroundContext(mergePolicy: policy)
                context.automaticallyMergesChanges = false
                try await context.update("Note", id: id, ["title": "mine"])
                try await store.write { tx in tx.delete("Note", id: id) }
                if policy == .error {
                    let error = await #expect(throws: ChronicleError.self) { try await context.save() }
                    #expect(error?.mergeConflicts.first?.deletedUnderneath == true)
                } else {
                    let result = try await context.save()
                    #expect(result.savedRecords == 0 && result.resolved.first?.deletedUnderneath == true, "\(policy)")
                    #expect(try await store.fetch(Note.self, id: id) == nil)
                    #expect(try await context.fetch(Note.self, id: id) == nil)
                }
            }
        }
    }

    // MARK: Child and scratch contexts

    @Test func aChildPushesIntoItsParentAndOnlyTheParentsSaveWritesOneLog() async throws {
        let place = try Place()
        defer { place.remove() }
        let (store, id) = try await Self.storeWithNote(place)
        _ = try await store.upload()
        let main = store.mainContext
        let child = main.newChildContext()
        #expect(child.kind == .child && child.parent === main)
        try await child.update("Note", id: id, ["title": "edited in a sheet"])
        let added = try child.insert("Note", ["title": "added in a sheet"])
        // Not visible to the parent before the child saves.
        #expect(try await main.fetch(Note.self, id: id)?.title == "a")
        #expect(try await main.values(of: "Note", id: added) == nil)
        try await child.save()
        #expect(!child.hasChanges)
        #expect(try await main.fetch(Note.self, id: id)?.title == "edited in a sheet")
        #expect(try await main.values(of: "Note", id: added)?["title"] == .string("added in a sheet"))
        // Nothing written yet.
        #expect(try await Self.stored(store, id).title == "a")
        #expect(try await store.upload() == 0)
        try await main.save()
        #expect(try await store.upload() == 1)
        #expect(try await Self.stored(store, id).title == "edited in a sheet")
        #expect(try await store.fetch(Note.self, id: added) != nil)
    }

    @Test func childrenNestAndADiscardedChildLeavesNoTrace() async throws {
        let place = try Place()
        defer { place.remove() }
        let (store, id) = try await Self.storeWithNote(place)
        let main = store.mainContext
        let child = main.newChildContext()
        let grandchild = child.newChildContext()
        try await grandchild.update("Note", id: id, ["words": 3])
        try await grandchild.delete("Note", id: try grandchild.insert("Note", ["title": "gone before saving"]))
        try await grandchild.save()
        #expect(try await child.fetch(Note.self, id: id)?.words == 3)
        #expect(try await main.fetch(Note.self, id: id)?.words == 1)
        // A second session on the side, discarded.
        do {
            let discarded = main.newChildContext()
            try await discarded.update("Note", id: id, ["title": "never"])
            _ = try discarded.insert("Note", ["title": "never either"])
        }
        try await child.save()
        #expect(try await main.fetch(Note.self, id: id) == Note(id: id, title: "a", words: 3, pinned: false))
        #expect(main.changedRecords == [RecordReference("Note", id)])
        try await main.save()
        #expect(try await Self.stored(store, id) == Note(id: id, title: "a", words: 3, pinned: false))
        #expect(try await store.fetchAll(Note.self).count == 1)
    }

    @Test func aChildFindsConflictsWithItsParentAtSaveTime() async throws {
        let place = try Place()
        defer { place.remove() }
        let (store, id) = try await Self.storeWithNote(place)
        let main = store.mainContext
        let child = main.newChildContext(mergePolicy: .error)
        try await child.update("Note", id: id, ["title": "child"])
        try await main.update("Note", id: id, ["title": "main"])
        let error = await #expect(throws: ChronicleError.self) { try await child.save() }
        #expect(error?.code == .mergeConflict)
        #expect(error?.mergeConflicts.first?.stored == ["title": .string("main")])
        #expect(try await main.fetch(Note.self, id: id)?.title == "main")
        child.mergePolicy = .memoryTrumps
        try await child.save()
        #expect(try await main.fetch(Note.self, id: id)?.title == "child")
    }

    @Test func aScratchContextIsNeverSaved() async throws {
        let place = try Place()
        defer { place.remove() }
        let (store, id) = try await Self.storeWithNote(place)
        let main = store.mainContext
        let scratch = main.newScratchContext()
        #expect(scratch.kind == .scratch)
        try await scratch.update("Note", id: id, ["title": "draft"])
        #expect(try await scratch.fetch(Note.self, id: id)?.title == "draft")
        // A child of the scratch context saves into it, and no further.
        let child = scratch.newChildContext()
        try await child.update("Note", id: id, ["words": 9])
        try await child.save()
        #expect(try await scratch.fetch(Note.self, id: id)?.words == 9)
        let error = await #expect(throws: ChronicleError.self) { try await scratch.save() }
        #expect(error?.code == .readOnlyContext)
        #expect(!main.hasChanges)
        #expect(try await main.fetch(Note.self, id: id) == Note(id: id, title: "a", words: 1, pinned: false))
        #expect(try await Self.stored(store, id) == Note(id: id, title: "a", words: 1, pinned: false))
    }

    @Test func aRecordDeletedWhileASaveInsertsItIsDeletedByTheNextSave() async throws {
        let place = try Place()
        defer { place.remove() }
        let (store, _) = try await Self.storeWithNote(place)
        for child in [false, true] {
            let context = store.newBackgroundContext()
            let id = try context.insert("Note", ["title": "doomed"])
            // The store is busy, so the context's save waits with its changes taken.
            let release = DispatchSemaphore(value: 0)
            let entered = DispatchSemaphore(value: 0)
            let busy = Task { try await store.write { _ in entered.signal(); release.wait() } }
            while entered.wait(timeout: .now()) == .timedOut { try await Task.sleep(for: .milliseconds(1)) }
            let saving = Task { try await context.save() }
            try await Task.sleep(for: .milliseconds(100))
            if child {
                let sheet = context.newChildContext()
                try await sheet.delete("Note", id: id)
                try await sheet.save()
            } else {
                try await context.delete("Note", id: id)
            }
            #expect(try await context.values(of: "Note", id: id) == nil)
            release.signal()
            try await busy.value
            _ = try await saving.value
            #expect(context.hasChanges, "child: \(child)")
            try await context.save()
            #expect(try await store.values(of: "Note", id: id) == nil, "child: \(child)")
            #expect(try await context.values(of: "Note", id: id) == nil)
        }
    }

    @Test func aTypedUpdateWritesWhatTheAppChangedNotFieldsThatWentStale() async throws {
        let place = try Place()
        defer { place.remove() }
        let (store, id) = try await Self.storeWithNote(place)
        for policy in MergePolicy.allCases {
            let main = store.newBackgroundContext(mergePolicy: policy)
            var note = try #require(try await main.fetch(Note.self, id: id))
            let words = note.words + 10
            // Another save changes the words; the context shows it, the struct does not.
            try await store.write { tx in tx.update("Note", id: id, ["words": .int(words)]) }
            note.title = "retitled \(policy)"
            try await main.update(note)
            try await main.save()
            #expect(try await Self.stored(store, id).words == words, "\(policy)")
            #expect(try await Self.stored(store, id).title == "retitled \(policy)")
            // Changed back by the app: that is a change too.
            note.title = "a"
            try await main.update(note)
            try await main.save()
            #expect(try await Self.stored(store, id).title == "a")
        }
    }

    @Test func aRefusedSaveTellsTheContextWhatIsStoredForItsRollback() async throws {
        let place = try Place()
        defer { place.remove() }
        let (store, id) = try await Self.storeWithNote(place)
        // Without automatic merges: the save finds the stored title.
        let context = store.newBackgroundContext(mergePolicy: .error)
        context.automaticallyMergesChanges = false
        try await context.update("Note", id: id, ["title": "mine"])
        try await store.write { tx in tx.update("Note", id: id, ["title": "theirs"]) }
        #expect(await Self.failure { try await context.save() } == .mergeConflict)
        context.rollback()
        #expect(try await context.fetch(Note.self, id: id)?.title == "theirs")
        // A child finds its parent's value.
        let parent = store.newBackgroundContext()
        let child = parent.newChildContext(mergePolicy: .error)
        try await child.update("Note", id: id, ["title": "child"])
        try await parent.update("Note", id: id, ["title": "parent"])
        #expect(await Self.failure { try await child.save() } == .mergeConflict)
        child.rollback()
        #expect(try await child.fetch(Note.self, id: id)?.title == "parent")
        // A record deleted underneath is gone after the rollback, merged or found by the save.
        for merges in [true, false] {
            let other = try await store.write { tx in tx.insert("Note", ["title": "d0"]) }
            let c = store.newBackgroundContext(mergePolicy: .error)
            c.automaticallyMergesChanges = merges
            try await c.update("Note", id: other, ["title": "ctx"])
            try await store.write { tx in tx.delete("Note", id: other) }
            #expect(await Self.failure { try await c.save() } == .mergeConflict)
            c.rollback()
            #expect(try await c.values(of: "Note", id: other) == nil, "merges: \(merges)")
        }
    }

    @Test func anOlderCopyIsUpdatedAgainstTheCopyItStartedFrom() async throws {
        let place = try Place()
        defer { place.remove() }
        let (store, id) = try await Self.storeWithNote(place)
        let main = store.mainContext
        let original = try #require(try await main.fetch(Note.self, id: id))
        try await store.write { tx in tx.update("Note", id: id, ["words": 2]) }
        _ = try await main.fetch(Note.self, id: id)   // another view fetches again
        var draft = original
        draft.title = "C2"
        try await main.update(draft, from: original)
        try await main.save()
        #expect(try await Self.stored(store, id) == Note(id: id, title: "C2", words: 2, pinned: false))
        #expect(await Self.failure { try await main.update(draft, from: Note(id: RecordID(UUID()), title: "", words: 0, pinned: false)) } == .misuse)
    }

    @Test func changesMadeWhileASaveRunsAreKept() async throws {
        let place = try Place()
        defer { place.remove() }
        let (store, id) = try await Self.storeWithNote(place)
        let main = store.mainContext
        try await main.update("Note", id: id, ["title": "first"])
        async let saved = main.save()
        try await main.update("Note", id: id, ["words": 2])
        _ = try await saved
        // Whichever came first, the words change is saved by now or still held.
        if main.hasChanges {
            #expect(main.changedRecords == [RecordReference("Note", id)])
            try await main.save()
        }
        #expect(try await Self.stored(store, id) == Note(id: id, title: "first", words: 2, pinned: false))
    }
}
