import ArgumentParser
import Foundation
import Logging
import Synchronization

/// The CLI's log on standard error: errors only by default, so ordinary
/// commands print nothing there but their errors and progress;
/// `--log-level LEVEL` (any command) or `CHRONICLE_LOG=LEVEL` sets it
/// (`trace`, `debug`, `info`, `notice`, `warning`, `error`, `critical`),
/// the option over the variable.
enum CLILogging {
    /// The level of every logger the CLI hands out.
    private static let level = Mutex<Logger.Level>(.error)

    /// The name of the option, which every command takes.
    static let option = "--log-level"

    /// The variable read when the option is not given.
    static let variable = "CHRONICLE_LOG"

    /// A logger at the level set by ``configure(_:environment:)``.
    static var logger: Logger {
        var logger = Logger(label: "chronicle") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = level.withLock { $0 }
        return logger
    }

    /// Sets the level from `CHRONICLE_LOG` and `--log-level` (before any
    /// `--`), and returns the arguments without that option, for the
    /// command's own parsing.
    ///
    /// - Throws: `ValidationError` (bad usage) for a value that is no level.
    static func configure(_ arguments: [String], environment: [String: String]) throws -> [String] {
        var chosen: Logger.Level = .error
        if let text = environment[variable] {
            guard let parsed = Logger.Level(rawValue: text.lowercased()) else { throw notALevel(text, "\(variable)=") }
            chosen = parsed
        }
        var rest: [String] = []
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            if argument == "--" {
                rest += arguments[index...]
                break
            }
            if argument == option || argument.hasPrefix(option + "=") {
                let value: String
                if argument == option {
                    index += 1
                    guard index < arguments.endIndex else { throw ValidationError("missing value for \(option) <level>") }
                    value = arguments[index]
                } else {
                    value = String(argument.dropFirst(option.count + 1))
                }
                guard let parsed = Logger.Level(rawValue: value.lowercased()) else { throw notALevel(value, option + " ") }
                chosen = parsed
            } else {
                rest.append(argument)
            }
            index += 1
        }
        level.withLock { $0 = chosen }
        return rest
    }

    private static func notALevel(_ text: String, _ source: String) -> ValidationError {
        let levels = Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")
        return ValidationError("\(source)\(text) is not a log level (one of \(levels))")
    }
}
