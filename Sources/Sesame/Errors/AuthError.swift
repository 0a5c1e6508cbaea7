public import Foundation
internal import SesameJOSE

/// The one error type that `Sesame` throws (besides `CancellationError`).
///
/// Codes are open constants grouped by what the caller should do: ``isTransient`` errors are worth retrying and
/// never clear stored credentials; ``requiresReauthentication`` means the user must sign in again. The
/// ``description`` never contains a token, password, code or verifier; it does contain the server's own
/// `error_description` when there was one.
public struct AuthError: Error, Sendable, CustomStringConvertible, LocalizedError {
    /// A stable, machine-readable code.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The code's name.
        public let rawValue: String
        /// Creates a code.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The code's name.
        public var description: String { rawValue }

        /// The server refused the request with an error body (see ``AuthError/serverResponse``) or a status the
        /// contract does not expect.
        public static let server = Code(rawValue: "server")
        /// No usable response: no network, timeout, connection dropped, or a 5xx / 429.
        public static let transport = Code(rawValue: "transport")
        /// A response arrived but is not what the contract says.
        public static let invalidResponse = Code(rawValue: "invalid_response")
        /// There are no credentials: the user is signed out.
        public static let notSignedIn = Code(rawValue: "not_signed_in")
        /// The provider definitively rejected the refresh token (thrown by an ``AuthProvider``; the session turns
        /// it into ``sessionExpired``).
        public static let refreshRejected = Code(rawValue: "refresh_rejected")
        /// The credentials have no refresh token, and the access token needs one.
        public static let noRefreshToken = Code(rawValue: "no_refresh_token")
        /// The refresh token was definitively rejected; the session is over and credentials were deleted.
        public static let sessionExpired = Code(rawValue: "session_expired")
        /// More refreshes than the budget allows happened in its window: a refresh loop was stopped.
        public static let refreshBudgetExceeded = Code(rawValue: "refresh_budget_exceeded")
        /// The token store cannot be used right now (device locked, keyring unavailable, I/O error, lock timeout).
        ///
        /// Try later.
        public static let storeUnavailable = Code(rawValue: "store_unavailable")
        /// The stored credentials are unreadable; they were kept aside, not deleted.
        public static let storeCorrupt = Code(rawValue: "store_corrupt")
        /// The request was still unauthorized after one refresh and one retry.
        public static let unauthorized = Code(rawValue: "unauthorized")
        /// A redirect to an origin outside the client's credential origins was refused
        /// (``AuthorizedClient/RedirectPolicy/refuseCrossOrigin``).
        public static let redirectRefused = Code(rawValue: "redirect_refused")
        /// The response body could not be decoded as the requested type.
        public static let decoding = Code(rawValue: "decoding")
        /// The library was configured or called wrongly.
        public static let configuration = Code(rawValue: "configuration")
    }

    /// The code.
    public let code: Code
    /// A human explanation without secrets.
    public let message: String
    /// The HTTP status, when a response arrived.
    public let statusCode: Int?
    /// The server's error answer, verbatim, when there was one.
    public let serverResponse: ServerErrorResponse?

    /// Creates an error; control characters in `message` are replaced (it may quote what a server sent).
    public init(_ code: Code, _ message: String, statusCode: Int? = nil, serverResponse: ServerErrorResponse? = nil) {
        self.code = code
        self.message = PrintableText.isClean(message) ? message : PrintableText.sanitized(message)
        self.statusCode = statusCode ?? serverResponse?.statusCode
        self.serverResponse = serverResponse
    }

    /// Whether retrying later may succeed (network, 5xx, 429, store unavailable).
    ///
    /// Credentials are kept.
    public var isTransient: Bool {
        code == .transport || code == .storeUnavailable
            || (code == .server && (statusCode.map { $0 >= 500 || $0 == 429 } ?? false))
    }

    /// Whether the user has to sign in again.
    public var requiresReauthentication: Bool {
        [.sessionExpired, .notSignedIn, .refreshRejected, .noRefreshToken].contains(code)
    }

    /// `code: message`, then the server's code and description when it sent them; no secrets.
    public var description: String {
        var text = "\(code.rawValue): \(message)"
        if let serverResponse {
            text += " (\(serverResponse.statusCode) \(serverResponse.error)"
            if let detail = serverResponse.errorDescription { text += ": \(detail)" }
            text += ")"
        }
        return text
    }

    /// The same text as ``description``.
    public var errorDescription: String? { description }

    /// The error for a response the caller did not expect: ``Code/server`` with the error body when there is
    /// one, ``Code/transport`` for a 5xx or 429 without one, else ``Code/server`` with the bare status.
    public static func unexpected(_ response: SesameHTTP.Response) -> AuthError {
        if let body = ServerErrorResponse(response) {
            return AuthError(.server, "the server answered \(response.status)", serverResponse: body)
        }
        if response.status >= 500 || response.status == 429 {
            return AuthError(.transport, "the server answered \(response.status)", statusCode: response.status)
        }
        return AuthError(.server, "the server answered \(response.status)", statusCode: response.status)
    }
}
