/// The one error type Chronicle throws.
///
/// An error carries a ``Code`` to match on, a human-readable message naming
/// what is wrong, an optional underlying cause, and the source location that
/// raised it. Codes are open-ended values (not an enum), so later versions can
/// add codes without breaking `switch` statements in apps.
///
/// ```swift
/// do {
///     let log = try decoder.decode(bytes)
/// } catch ChronicleError.Code.bodyChecksumMismatch {
///     // the blob is damaged: report it, keep importing the others
/// }
/// ```
public struct ChronicleError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Compare with `==` or match with `~=`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The stable, machine-readable name of the code (used in `--json` output).
        public let name: String
        /// Whether retrying the same operation later may succeed.
        public let isTransient: Bool

        init(_ name: String, transient: Bool = false) {
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
        /// Fewer bytes than the format requires.
        public static let shortRead = Code("shortRead")
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
        /// The log needs a compression dictionary that is not available.
        public static let unknownDictionary = Code("unknownDictionary")
        /// The log was written for a different schema.
        public static let schemaMismatch = Code("schemaMismatch")

        // MARK: Schema
        /// A schema file is not valid JSON.
        public static let schemaSyntax = Code("schemaSyntax")
        /// A schema is well-formed JSON but not a valid schema.
        public static let invalidSchema = Code("invalidSchema")

        // MARK: Values and saves
        /// A value does not fit the attribute's type.
        public static let typeMismatch = Code("typeMismatch")
        /// A required attribute has no value.
        public static let missingValue = Code("missingValue")
        /// A save would give two records the same unique key.
        public static let uniqueViolation = Code("uniqueViolation")
        /// A save names a record that does not exist.
        public static let recordNotFound = Code("recordNotFound")
        /// A delete is refused by a `deny` delete rule.
        public static let deleteDenied = Code("deleteDenied")
        /// A value is out of its representable range.
        public static let invalidValue = Code("invalidValue")

        // MARK: Containers
        /// A store UUID, device ID or blob name does not follow the grammar.
        public static let invalidName = Code("invalidName")
        /// Different bytes were put under an existing immutable name.
        public static let blobConflict = Code("blobConflict")
        /// The named blob or marker does not exist.
        public static let notFound = Code("notFound")
        /// A marker's compare-and-swap lost against another writer.
        public static let markerConflict = Code("markerConflict")
        /// The container did not answer or a blob is not fully visible yet.
        public static let unavailable = Code("unavailable", transient: true)
        /// An I/O operation failed.
        public static let io = Code("io")
        /// Something that is not Chronicle's sits in a container: a symbolic
        /// link, a FIFO, a device, a socket, a folder where a blob or marker
        /// belongs, or a name outside the grammar. Chronicle never follows,
        /// opens for reading or writes through such an entry; a person must
        /// remove it. Not transient.
        public static let foreignEntry = Code("foreignEntry")

        // MARK: Snapshot and store
        /// The snapshot belongs to another store, device or schema.
        public static let storeMismatch = Code("storeMismatch")
        /// A log could not be applied to the snapshot.
        public static let applyFailed = Code("applyFailed")
        /// A baseline's parts are not all there (yet): its final part, or a
        /// part before it, is missing. Retried later.
        public static let incompleteBaseline = Code("incompleteBaseline", transient: true)
        /// A SQLite error underneath.
        public static let database = Code("database")
        /// The API was used in a way it does not allow.
        public static let misuse = Code("misuse")
        /// Another process, or another open ``Store`` in this process, holds
        /// the device folder. The message names the process when it can.
        public static let deviceInUse = Code("deviceInUse", transient: true)
        /// The container holds history for this device that the device's own
        /// files do not (its folder was restored from an older copy, copied
        /// to a second machine, or lost its snapshot). The device continues
        /// under a new device ID; this code names the reason in reports.
        public static let identityConflict = Code("identityConflict")
        /// A simulation made the device crash here (never raised in production).
        public static let simulatedCrash = Code("simulatedCrash")
    }

    /// What kind of failure this is.
    public let code: Code
    /// What is wrong, for a person.
    public let message: String
    /// The error that caused this one, if any.
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
}
