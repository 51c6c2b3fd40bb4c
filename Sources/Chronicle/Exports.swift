// The public API re-exports the model and the layers an app touches.
@_exported import ChronicleContainer
@_exported import ChronicleCore
@_exported import ChronicleSnapshot
@_exported import GRDB
