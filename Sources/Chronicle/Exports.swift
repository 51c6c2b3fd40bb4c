// The declarations an app uses, and nothing else, from the modules below
// `Chronicle`. The rest of those modules is internal to the package.
// GRDB is not re-exported: an app that uses GRDB's types in `Store.read`
// imports GRDB itself.

// The data model and its values.
@_exported import struct ChronicleCore.Schema
@_exported import struct ChronicleCore.Entity
@_exported import struct ChronicleCore.Attribute
@_exported import enum ChronicleCore.AttributeType
@_exported import struct ChronicleCore.Relationship
@_exported import enum ChronicleCore.DeleteRule
@_exported import struct ChronicleCore.Field
@_exported import enum ChronicleCore.Value
@_exported import protocol ChronicleCore.ChronicleValueConvertible
@_exported import struct ChronicleCore.Timestamp
@_exported import struct ChronicleCore.ChronicleDecimal
@_exported import struct ChronicleCore.TransformableValue
@_exported import struct ChronicleCore.RecordID
@_exported import struct ChronicleCore.DeviceID
@_exported import struct ChronicleCore.StoreID

// Errors, time and limits.
@_exported import struct ChronicleCore.ChronicleError
@_exported import protocol ChronicleCore.PhysicalClock
@_exported import struct ChronicleCore.SystemClock
@_exported import struct ChronicleCore.HybridTimestamp
@_exported import struct ChronicleCore.DecodingLimits

// Where logs live: the container protocol, its value types and backends.
@_exported import protocol ChronicleContainer.Container
@_exported import struct ChronicleContainer.ContainerCapabilities
@_exported import struct ChronicleContainer.ContainerName
@_exported import struct ChronicleContainer.BlobInfo
@_exported import struct ChronicleContainer.Marker
@_exported import struct ChronicleContainer.ForeignEntry
@_exported import enum ChronicleContainer.EntryKind
@_exported import struct ChronicleContainer.DirectoryContainer
@_exported import class ChronicleContainer.InMemoryContainer
@_exported import struct ChronicleContainer.CorruptionMark
@_exported import struct ChronicleContainer.ElectionLease
@_exported import struct ChronicleContainer.RebuildCandidacy

// What the store reports.
@_exported import enum ChronicleSnapshot.Durability
@_exported import struct ChronicleSnapshot.RecordEvent
@_exported import struct ChronicleSnapshot.SyncProgress
@_exported import struct ChronicleSnapshot.ImportReport
@_exported import struct ChronicleSnapshot.CompactionReport
