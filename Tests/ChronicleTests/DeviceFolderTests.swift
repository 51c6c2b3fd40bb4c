@testable import Chronicle
import ChronicleTestSupport
import Foundation
import Testing

/// The device folder's small files (`device.json`, `manager.json`).
@Suite struct DeviceFolderTests {
    /// Regression: a process killed in the middle of writing `device.json`
    /// or `manager.json` left its temporary file (`<name>.tmp-<pid>`) in
    /// the folder for good. The next write removes those of processes that
    /// are gone, and leaves a live process's own.
    @Test func aWriteRemovesTheTemporaryFilesOfProcessesThatAreGone() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-folder-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        // A process that ran and ended: its ID names no live process now.
        let ended = try TestProcesses.pidOfAnEndedProcess()
        let stale = dir.appendingPathComponent("manager.json.tmp-\(ended)")
        let live = dir.appendingPathComponent("manager.json.tmp-1")  // init: alive
        let other = dir.appendingPathComponent("device.json.tmp-\(ended)")
        for url in [stale, live, other] { try Data("half".utf8).write(to: url) }

        let target = dir.appendingPathComponent("manager.json")
        try DeviceFolder.writeAtomically(Array("{}".utf8), to: target.path, directory: dir.path)
        #expect(try String(contentsOf: target, encoding: .utf8) == "{}")
        #expect(!FileManager.default.fileExists(atPath: stale.path), "the ended process's temporary file is gone")
        #expect(FileManager.default.fileExists(atPath: live.path), "a live process's is its own")
        #expect(FileManager.default.fileExists(atPath: other.path), "another file's temporaries wait for that file's next write")
    }
}
