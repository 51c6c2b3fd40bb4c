// The contexts example of README.md, compiled and run by
// DocumentationExampleTests. The code between the markers is a code block of
// the README, character for character.
import Chronicle
import Foundation
import GRDB // AsyncValueObservation

// BEGIN CONTEXT EXAMPLE
/// The laptop's UI reads on its main context and keeps a query current
/// while the phone saves; each sync brings the phone's saves to the screen.
func contextExample(schema: Schema, root: URL) async throws -> (screens: [[String]], pages: Int64?) {
    let container = try DirectoryContainer(root: root.appendingPathComponent("shared"), create: true)
    let laptop = try await Store.open(Store.Configuration(
        schema: schema, directory: root.appendingPathComponent("laptop"), container: container))
    let phone = try await Store.open(Store.Configuration(
        schema: schema, directory: root.appendingPathComponent("phone"), container: container))

    // The UI: the main context, and an observed query. Its first value comes
    // at once; a new one after each save or import that changes the books.
    let main = laptop.mainContext
    var updates = try main.observeAll(Book.self, orderedBy: [.ascending("title")]).makeAsyncIterator()
    var screens = [try await updates.next()?.map(\.title) ?? []]

    // The phone saves through its own main context: one transaction.
    let id = try phone.mainContext.insert("Book", ["title": "Kindred", "pages": 264])
    try await phone.mainContext.save()
    try await phone.sync()
    try await laptop.sync()
    screens.append(try await updates.next()?.map(\.title) ?? [])

    // An edit sheet on the laptop: a child context, saved into main, then
    // main saves it as one log. Main now holds the book.
    let sheet = main.newChildContext()
    if var book = try await sheet.fetch(Book.self, id: id) {
        book.title = "Kindred (graphic novel)"
        try await sheet.update(book)
        try await sheet.save()
        try await main.save()
    }
    screens.append(try await updates.next()?.map(\.title) ?? [])

    // The phone changes the page count; after a sync the book main holds
    // shows it, without being fetched again.
    try await phone.sync()
    try await phone.write { tx in tx.update("Book", id: id, ["pages": 288]) }
    try await phone.sync()
    try await laptop.sync()
    let pages = try await main.fetch(Book.self, id: id)?.pages

    try await laptop.close()
    try await phone.close()
    return (screens, pages)
}
// END CONTEXT EXAMPLE
