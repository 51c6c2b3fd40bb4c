import Chronicle
import ChronicleContainer
import ChronicleCore
@testable import ChronicleSimulation
import ChronicleSnapshot
import GRDB
import Testing

@Suite struct WorkloadTests {
    let standard = Workload.standardWeights

    @Test func standardWeightsAddUpToAHundred() {
        #expect(standard.values.reduce(0, +) == 100)
        #expect(standard["rename-folder"] == 6)
    }

    @Test(arguments: [(UInt64(0), "insert-folder"), (11, "insert-folder"), (12, "insert-note"), (40, "update-note"),
                      (59, "delete-note"), (69, "delete-folder"), (74, "insert-reading"), (82, "update-reading"), (90, "delete-reading"),
                      (94, "rename-folder"), (99, "rename-folder")])
    func choicesFollowTheTableOrder(choice: UInt64, name: String) {
        #expect(Workload.chosen(choice, weights: standard).name == name)
    }

    @Test func aZeroWeightIsNeverChosen() {
        var weights = standard
        weights["insert-note"] = 0
        weights["rename-folder"] = 5
        let names = (UInt64(0)..<71).map { Workload.chosen($0, weights: weights).name }
        #expect(!names.contains("insert-note"))
        #expect(names.suffix(5) == Array(repeating: "rename-folder", count: 5))
    }

    func input(folders: Int, notes: Int, readings: Int) -> Workload.Input {
        func ids(_ n: Int) -> [RecordID] { (0..<n).map { RecordID(high: 1, low: UInt64($0)) } }
        return Workload.Input(folders: ids(folders), notes: ids(notes), readings: ids(readings), folderName: "Inbox", title: "t",
                              words: 1, r1: 0, r2: 0)
    }

    @Test func operationsFallBackWhenWhatTheyNeedIsMissing() {
        let update = Workload.operation(named: "update-reading")
        #expect(Workload.resolve(update, input(folders: 0, notes: 3, readings: 3)).name == "insert-folder")
        #expect(Workload.resolve(update, input(folders: 1, notes: 0, readings: 0)).name == "insert-reading")
        #expect(Workload.resolve(update, input(folders: 1, notes: 0, readings: 1)).name == "update-reading")
        #expect(Workload.resolve(Workload.operation(named: "delete-folder"), input(folders: 2, notes: 0, readings: 0)).name == "insert-note")
        #expect(Workload.resolve(Workload.operation(named: "rename-folder"), input(folders: 2, notes: 0, readings: 0)).name == "rename-folder")
    }

    /// Every fallback names an operation that exists and needs nothing.
    @Test func fallbacksExist() {
        for operation in Workload.operations {
            guard let fallback = operation.fallback else { continue }
            #expect(Workload.operations.contains { $0.name == fallback && $0.fallback == nil })
        }
    }

    /// A rename turned on by weight runs (whether such runs pass is
    /// `SimulationTests.renamingFoldersConverges`).
    @Test func renamesRun() async throws {
        var options = SimulationOptions()
        options.devices = 3
        options.savesPerDevice = 15
        options.operationWeights["rename-folder"] = 30
        let simulation = Simulation(seed: 31, options: options, verbose: true)
        _ = try await simulation.run()
        #expect(simulation.events.contains { $0.contains("saved update Folder") })
    }
}
