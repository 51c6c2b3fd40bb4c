#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What sits at a name in a directory container, read without following a
/// symbolic link.
public enum EntryKind: String, Sendable, Hashable, CaseIterable {
    /// A regular file: the only kind Chronicle reads or writes.
    case regularFile
    /// A folder.
    case directory
    /// A symbolic link, which Chronicle never follows.
    case symbolicLink
    /// A named pipe, which could block a reader forever.
    case fifo
    /// A Unix domain socket.
    case socket
    /// A character or block device.
    case device
    /// Anything else the file system reports.
    case unknown

    /// The kind a `stat` mode names.
    init(mode: mode_t) {
        switch mode & S_IFMT {
        case S_IFREG: self = .regularFile
        case S_IFDIR: self = .directory
        case S_IFLNK: self = .symbolicLink
        case S_IFIFO: self = .fifo
        case S_IFSOCK: self = .socket
        case S_IFCHR, S_IFBLK: self = .device
        default: self = .unknown
        }
    }

    /// The kind a directory entry's `d_type` names, or nil when the file
    /// system does not say (`DT_UNKNOWN`).
    init?(direntType: UInt8) {
        switch Int32(direntType) {
        case Int32(DT_REG): self = .regularFile
        case Int32(DT_DIR): self = .directory
        case Int32(DT_LNK): self = .symbolicLink
        case Int32(DT_FIFO): self = .fifo
        case Int32(DT_SOCK): self = .socket
        case Int32(DT_CHR), Int32(DT_BLK): self = .device
        default: return nil
        }
    }

    /// The kind in words, for messages: "a symbolic link".
    public var phrase: String {
        switch self {
        case .regularFile: return "a regular file"
        case .directory: return "a folder"
        case .symbolicLink: return "a symbolic link"
        case .fifo: return "a FIFO (named pipe)"
        case .socket: return "a socket"
        case .device: return "a device"
        case .unknown: return "a file of unknown type"
        }
    }
}
