import Foundation
import Logging

enum CLILogging {
    /// Warnings and errors on standard error; `CHRONICLE_LOG=debug` for more.
    static let logger: Logger = {
        var logger = Logger(label: "chronicle") { StreamLogHandler.standardError(label: $0) }
        let level = ProcessInfo.processInfo.environment["CHRONICLE_LOG"].flatMap(Logger.Level.init(rawValue:))
        logger.logLevel = level ?? .warning
        return logger
    }()
}
