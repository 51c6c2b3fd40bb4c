import Foundation

/// The one error type Chronicle throws.
///
/// An error carries a ``Code`` to match on, a human-readable message naming
/// what is wrong, the underlying error that caused it (a SQLite error, a
/// system call's `POSIXError`, a decoding error, or another
/// `ChronicleError`), and the source location that raised it. Codes are
/// open-ended values (not an enum): each of Chronicle's modules declares the
/// codes it raises, and later versions can add codes without breaking
/// `switch` statements in apps.
///
/// ```swift
/// do {
///     let log = try decoder.decode(bytes)
/// } catch ChronicleError.Code.bodyChecksumMismatch {
///     // the blob is damaged: report it, keep importing the others
/// }
/// ```
///
/// Whether retrying may help is ``Code/isTransient``: a full disk
/// (``Code/diskFull``) or a blob still arriving (``Code/shortRead``) is
/// transient; a corrupt snapshot (`databaseCorrupt`) is not. The cause says
/// more when a code is not enough: ``underlying(as:)`` finds the SQLite
/// `DatabaseError` or the `POSIXError` anywhere in the chain of causes.
public struct ChronicleError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Compare with `==` or match with `~=`.
    ///
    /// Each module declares the codes it raises in an extension of `Code`:
    /// the model and the log codec here, the containers in
    /// `ChronicleContainer`, the snapshot in `ChronicleSnapshot`, the device
    /// folder in `Chronicle`. A code is its ``name``: two codes with one
    /// name are equal, so names are unique across modules.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The stable, machine-readable name of the code (used in `--json` output).
        public let name: String
        /// Whether retrying the same operation later may succeed.
        public let isTransient: Bool

        /// Declares a code; for the modules of Chronicle, each in its own
        /// `extension ChronicleError.Code`.
        package init(_ name: String, transient: Bool = false) {
            self.name = name
            self.isTransient = transient
        }

        public var description: String { name }

        public static func == (lhs: Code, rhs: Code) -> Bool { lhs.name == rhs.name }
        public func hash(into hasher: inout Hasher) { hasher.combine(name) }

        /// Lets `catch ChronicleError.Code.shortRead { … }` match an error.
        public static func ~= (code: Code, error: any Error) -> Bool {
            (error as? ChronicleError)?.code == code
        }

        // MARK: Log decoding
        /// Fewer bytes than the format requires: the log is shorter than
        /// its header says. Transient: a sync service may still be copying
        /// the blob. A blob that stays short is the health monitor's to judge.
        public static let shortRead = Code("shortRead", transient: true)
        /// The first bytes are not a Chronicle log.
        public static let badMagic = Code("badMagic")
        /// A format version this build cannot read.
        public static let unsupportedVersion = Code("unsupportedVersion")
        /// The header's own checksum does not match.
        public static let headerChecksumMismatch = Code("headerChecksumMismatch")
        /// The body checksum does not match the stored body.
        public static let bodyChecksumMismatch = Code("bodyChecksumMismatch")
        /// A declared length exceeds the configured cap.
        public static let sizeOverCap = Code("sizeOverCap")
        /// The LZ4 body does not decompress to the declared size.
        public static let decompressionFailed = Code("decompressionFailed")
        /// The body decodes to something that is not a valid operation list.
        public static let malformedBody = Code("malformedBody")
        /// An operation names an entity the schema does not have.
        public static let unknownEntity = Code("unknownEntity")
        /// An operation names an attribute the entity does not have.
        public static let unknownAttribute = Code("unknownAttribute")
        /// The log needs a compression dictionary this device has not
        /// fetched yet, or whose published copy is damaged: transient, the
        /// log waits until the dictionary can be read (a device that holds
        /// it publishes it again).
        public static let unknownDictionary = Code("unknownDictionary", transient: true)
        /// The log was written for a different schema.
        public static let schemaMismatch = Code("schemaMismatch")

        // MARK: Schema
        /// A schema file is not valid JSON.
        public static let schemaSyntax = Code("schemaSyntax")
        /// A schema is well-formed JSON but not a valid schema.
        public static let invalidSchema = Code("invalidSchema")
        /// A later version of a schema changes something Chronicle cannot
        /// migrate by itself (a field removed, a type changed): the message
        /// names the step. See ``SchemaMigration``.
        public static let unsupportedMigration = Code("unsupportedMigration")

        // MARK: Values and saves
        /// A value does not fit the attribute's type.
        public static let typeMismatch = Code("typeMismatch")
        /// A required attribute has no value.
        public static let missingValue = Code("missingValue")
        /// A save would give two records the same unique key.
        public static let uniqueViolation = Code("uniqueViolation")
        /// A save names a record that does not exist.
        public static let recordNotFound = Code("recordNotFound")
        /// An insert names a record ID that is taken: record IDs are never reused.
        public static let recordExists = Code("recordExists")
        /// A change that means nothing: an update that changes no field, a
        /// delete that carries values, a field given twice.
        public static let invalidChange = Code("invalidChange")
        /// A delete is refused by a `deny` delete rule.
        public static let deleteDenied = Code("deleteDenied")
        /// A value is out of its representable range.
        public static let invalidValue = Code("invalidValue")

        // MARK: Files and I/O (every module)
        /// The named blob, marker or file does not exist.
        public static let notFound = Code("notFound")
        /// The container did not answer or a blob is not fully visible yet.
        public static let unavailable = Code("unavailable", transient: true)
        /// An I/O operation failed. The message names the file and says why
        /// in the system's words; the underlying error is the `POSIXError`.
        public static let io = Code("io")
        /// The disk (or the user's quota) is full: `ENOSPC`, `EDQUOT`, or
        /// SQLite's `SQLITE_FULL`. Transient: nothing is damaged, and the
        /// same operation succeeds once space is freed.
        public static let diskFull = Code("diskFull", transient: true)

        // MARK: Misuse
        /// An argument or a call the library cannot act on, that an app
        /// can get from its users' input: an import's key that the schema
        /// does not declare unique, a batch size below 1, an import on a
        /// child context, a negative fetch limit. The message says what to
        /// change. (Programming errors that no input can cause stop with a
        /// precondition failure instead.) Tools built on the library use
        /// this code for their own usage errors too.
        public static let misuse = Code("misuse")
    }

    /// What kind of failure this is.
    public let code: Code
    /// What is wrong, for a person.
    public let message: String
    /// The error that caused this one, if any: kept by every wrap, so a
    /// full disk and a corrupt database stay told apart however many layers
    /// they went through.
    public let underlying: (any Error & Sendable)?
    /// The source file that raised the error.
    public let file: String
    /// The source line that raised the error.
    public let line: UInt

    /// Creates an error.
    public init(
        _ code: Code,
        _ message: String,
        underlying: (any Error & Sendable)? = nil,
        file: String = #fileID,
        line: UInt = #line
    ) {
        self.code = code
        self.message = message
        self.underlying = underlying
        self.file = file
        self.line = line
    }

    public var description: String {
        if let underlying {
            return "\(code): \(message) (\(underlying))"
        }
        return "\(code): \(message)"
    }

    /// The first error of type `E` in the chain of causes, this error
    /// included: `underlying(as: DatabaseError.self)` for the SQLite error
    /// under an apply failure, `underlying(as: POSIXError.self)` for the
    /// system call's (under Foundation's `CocoaError` too).
    public func underlying<E: Error>(as type: E.Type) -> E? {
        var next: (any Error)? = self
        while let error = next {
            if let match = error as? E { return match }
            next = (error as? ChronicleError)?.underlying ?? (error as? CocoaError)?.underlying
        }
        return nil
    }
}

/// Foundation's `localizedDescription` says what ``ChronicleError/description`` says.
extension ChronicleError: LocalizedError {
    public var errorDescription: String? { description }
}
