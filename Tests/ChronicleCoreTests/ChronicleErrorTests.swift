import ChronicleCore
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Errors say what is wrong in the user's words and keep what caused them.
@Suite struct ChronicleErrorTests {
    /// A log shorter than its header says may be a blob a sync service is
    /// still copying: transient, so it is waited for, not reported as damage.
    @Test func aShortReadIsTransient() throws {
        let bytes = try CorruptionTests.golden("transactions-v1")
        let error = expectError(.shortRead) { _ = try CorruptionTests.decoder.decode(Array(bytes.dropLast(10))) }
        #expect(error?.code.isTransient == true)
    }

    @Test func badMagicNamesTheMagicAsItIsWritten() throws {
        let error = expectError(.badMagic) { _ = try CorruptionTests.decoder.decode(Array("CHNR and then some more bytes".utf8)) }
        // The magic is "CHRN": 43 48 52 4e.
        #expect(error?.message.contains("expected 4348524e") == true, "\(String(describing: error))")
        #expect(error?.message.contains("first bytes are 43484e52") == true, "\(String(describing: error))")
    }

    /// A full disk and a refused permission are told apart by code, by
    /// whether a retry may help, and by the POSIX error kept underneath; the
    /// message is the system's words with the path, never "errno 28".
    @Test func systemCallErrorsKeepTheirErrnoAndSpeakPlainly() {
        let full = ChronicleError.system("write /data/blobs/x", errno: ENOSPC)
        #expect(full.code == .diskFull && full.code.isTransient)
        #expect(full.underlying(as: POSIXError.self)?.code == .ENOSPC)
        #expect(full.message == "write /data/blobs/x: No space left on device")

        let denied = ChronicleError.system("open /data/device.json", errno: EACCES)
        #expect(denied.code == .io && !denied.code.isTransient)
        #expect(denied.underlying(as: POSIXError.self)?.code == .EACCES)
        #expect(denied.message == "open /data/device.json: Permission denied")

        #expect(ChronicleError.system("open /x", errno: ENOENT).code == .notFound)
        #expect(ChronicleError.system("read /share/x", errno: ESTALE).code == .unavailable)
    }

    /// The cause is found however many wraps it went through.
    @Test func theUnderlyingErrorIsFoundThroughEveryWrap() {
        let system = ChronicleError.system("fsync /data/x", errno: EIO)
        let wrapped = ChronicleError(.io, "saving failed", underlying: ChronicleError(.unavailable, "the share went away", underlying: system))
        #expect(wrapped.underlying(as: POSIXError.self)?.code == .EIO)
        #expect(wrapped.underlying(as: ChronicleError.self)?.code == .io)
        #expect(wrapped.underlying(as: CocoaError.self) == nil)
        #expect(wrapped.description.contains("Input/output error"))
    }

    /// A schema file that cannot be read says why in the system's words,
    /// keeps Foundation's error (and the POSIX error under it), and a
    /// missing file is `notFound`, not a generic I/O failure.
    @Test func anUnreadableSchemaFileKeepsItsCause() throws {
        let missing = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-no-schema-\(UUID().uuidString).json")
        let error = expectError(.notFound) { _ = try Schema(contentsOf: missing) }
        #expect(error?.message == "cannot read schema file \(missing.path): No such file or directory")
        #expect(error?.underlying(as: CocoaError.self) != nil)
        #expect(error?.underlying(as: POSIXError.self)?.code == .ENOENT)
    }

    /// A schema file whose content is wrong keeps the inner error, with its
    /// own source location.
    @Test func aSchemaFileErrorKeepsTheInnerError() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("chronicle-bad-schema-\(UUID().uuidString).json")
        try Data(#"{"version": 1, "entities": [{"name": 3}]}"#.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let error = expectError(.invalidSchema) { _ = try Schema(contentsOf: file) }
        #expect(error?.message.hasPrefix(file.lastPathComponent + ": ") == true)
        let inner = error?.underlying as? ChronicleError
        #expect(inner?.code == .invalidSchema)
        #expect(inner.map { error!.message.hasSuffix($0.message) } == true)
    }
}
