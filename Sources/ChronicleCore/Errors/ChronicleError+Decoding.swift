import Foundation

extension ChronicleError {
    /// An error for JSON that does not decode to what it should hold (a
    /// marker, a device file): ``Code/malformedBody``, with the message
    /// saying which key is wrong and how, and the `DecodingError` as the
    /// underlying error.
    ///
    /// - Parameter what: what was being read, as "the active-store marker".
    package static func decoding(
        _ what: String, _ error: any Error, file: String = #fileID, line: UInt = #line
    ) -> ChronicleError {
        if let error = error as? ChronicleError { return error }
        return ChronicleError(.malformedBody, "\(what) is not valid: \(reason(error))", underlying: error, file: file, line: line)
    }

    private static func reason(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        func at(_ context: DecodingError.Context) -> String {
            let path = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
            return path.isEmpty ? "" : " at \(path)"
        }
        switch error {
        case .keyNotFound(let key, let context): return "\"\(key.stringValue)\" is missing\(at(context))"
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            let detail = (context.underlyingError as NSError?)?.userInfo[NSDebugDescriptionErrorKey] as? String
            return context.debugDescription + (detail.map { " (\($0))" } ?? "") + at(context)
        @unknown default: return "\(error)"
        }
    }
}
