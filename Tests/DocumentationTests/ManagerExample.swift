// The store-manager example of README.md, compiled and run by
// DocumentationExampleTests. The code between the markers is a code block of
// the README, character for character.
import Chronicle
import Foundation
import GRDB

// BEGIN MANAGER EXAMPLE
/// One device of a notes app: its books stay on the device until the user
/// turns the cloud on; then they join the store every device shares.
func managerExample(schema: Schema, folder: URL, shared: URL) async throws -> [String] {
    let manager = try await StoreManager.open(StoreManager.Configuration(
        store: Store.Configuration(schema: schema, directory: folder,
                                   container: try DirectoryContainer(root: shared, create: true))))
    // The cloud is off at first: the local store is loaded.
    try await manager.store.write { tx in
        _ = tx.insert("Book", ["title": "Kindred", "pages": 264])
    }
    // On: the local records are saved into the cloud store, one per unique key.
    try await manager.setCloudEnabled(true)
    try await manager.sync()
    // A switch closes the Store the app held: ask the manager for the loaded one.
    let titles = try await manager.store.read { db in
        try String.fetchAll(db, sql: "SELECT title FROM Book")
    }
    try await manager.close()
    return titles
}
// END MANAGER EXAMPLE
