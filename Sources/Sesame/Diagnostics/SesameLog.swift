public import Foundation
import SesameJOSE

/// Sesame's diagnostics: every decision worth seeing — sign-in steps, refreshes started, joined, adopted and
/// finished, transient and definitive failures, origin refusals, DPoP nonce retries, retries — sent to a handler the
/// app sets, and nowhere by default.
///
/// Messages are ``SesameLog/Message`` values, which cannot hold a secret by accident: text from outside goes in
/// only through ``SesameLog/Message/StringInterpolation/appendInterpolation(redacted:)`` (its length shown, never
/// its content) or ``SesameLog/Message/StringInterpolation/appendInterpolation(public:)`` (for what is not secret:
/// an origin, an error code). There is no way to interpolate a plain `String`.
///
/// ```swift
/// SesameLog.setHandler(level: .debug) { entry in print("[\(entry.category)] \(entry.message)") }
/// ```
///
/// There is one handler at a time: setting one (or `SesameApple`'s `SesameLog.useOSLog(subsystem:level:)`, which
/// sends the entries to the unified log) replaces the last.
public enum SesameLog {
    /// How much matters.
    public enum Level: Int, Sendable, Comparable, CustomStringConvertible {
        /// Every step (requests, cache hits).
        case debug
        /// What changed (signed in, refreshed).
        case info
        /// Something went wrong and was handled (a transient failure, a retry).
        case warning
        /// Something the app must deal with (a definitive rejection).
        case error

        /// Whether `lhs` matters less than `rhs`.
        public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }

        /// `debug`, `info`, `warning`, `error`.
        public var description: String {
            switch self {
            case .debug: "debug"
            case .info: "info"
            case .warning: "warning"
            case .error: "error"
            }
        }
    }

    /// What part of Sesame speaks.
    public enum Category: String, Sendable, CustomStringConvertible {
        /// Sign-in, refresh, sign-out, the store.
        case session
        /// Requests: origins, redirects, retries.
        case http
        /// OpenID Connect: authorization, code exchange, ID tokens, Native SSO, token exchange.
        case oidc
        /// DPoP proofs and nonces.
        case dpop

        /// The raw value.
        public var description: String { rawValue }
    }

    /// One entry: when, how much it matters, who speaks, what.
    public struct Entry: Sendable, CustomStringConvertible {
        /// When.
        public let date: Date
        /// How much it matters.
        public let level: Level
        /// Who speaks.
        public let category: Category
        /// What (secrets redacted).
        public let message: Message

        /// `LEVEL [category] message`.
        public var description: String { "\(level) [\(category)] \(message)" }
    }

    /// A message whose interpolated values are public or redacted, by construction.
    public struct Message: Sendable, CustomStringConvertible, ExpressibleByStringInterpolation {
        /// The text, secrets already redacted.
        public let description: String

        /// A message of fixed text.
        public init(stringLiteral value: String) { description = value }

        /// A message built by interpolation.
        public init(stringInterpolation: StringInterpolation) { description = stringInterpolation.text }

        /// The interpolation: fixed text, numbers, public text, redacted secrets.
        public struct StringInterpolation: StringInterpolationProtocol {
            var text = ""

            /// Room for the literal parts.
            public init(literalCapacity: Int, interpolationCount: Int) {
                text.reserveCapacity(literalCapacity + interpolationCount * 16)
            }

            /// Fixed text of the message.
            public mutating func appendLiteral(_ literal: String) { text += literal }

            /// A number.
            public mutating func appendInterpolation<Number: BinaryInteger>(_ number: Number) {
                text += String(number)
            }

            /// A number of seconds, to a tenth.
            public mutating func appendInterpolation(seconds: Double) {
                text += seconds.isFinite ? String(format: "%.1f s", seconds) : "unknown"
            }

            /// Text that is not secret (an origin, an error code, a status), made printable and bounded.
            public mutating func appendInterpolation(public value: String) {
                text += PrintableText.sanitized(value, limit: 300)
            }

            /// An error's code and reason (its message may quote a server; codes never hold secrets).
            public mutating func appendInterpolation(_ error: AuthError) {
                text += error.code.rawValue + (error.reason.map { " (\($0))" } ?? "")
                if let status = error.statusCode { text += " HTTP \(status)" }
            }

            /// A secret (a token, a code, a key): only that there is one, and its length.
            public mutating func appendInterpolation(redacted value: String) {
                text += "<redacted, \(value.utf8.count) bytes>"
            }
        }
    }

    /// The handler and the least level it gets.
    private static let sink = LockedValue<(handler: (@Sendable (Entry) -> Void)?, level: Level)>((nil, .info))

    /// Sends entries of at least `level` to `handler`; nil sends them nowhere (the default).
    ///
    /// The handler is called on the thread that logs: keep it fast and never block in it.
    public static func setHandler(level: Level = .info, _ handler: (@Sendable (Entry) -> Void)?) {
        sink.withLock { $0 = (handler, level) }
    }

    /// Logs `message` (built only when someone listens).
    static func log(_ level: Level, _ category: Category, _ message: @autoclosure () -> Message) {
        guard let handler = sink.withLock({ $0.handler != nil && level >= $0.level ? $0.handler : nil }) else {
            return
        }
        handler(Entry(date: Date(), level: level, category: category, message: message()))
    }
}
