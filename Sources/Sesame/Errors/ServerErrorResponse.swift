import Foundation
internal import SesameJOSE

/// An error answer as the server sent it: the status, and its `{"error","error_description","error_uri"}` body
/// (RFC 6749 §5.2, RFC 6750 §3.1, the REST contract), kept verbatim.
public struct ServerErrorResponse: Sendable, Hashable {
    /// The HTTP status; 0 for an error that came on the authorization redirect, which has none.
    public let statusCode: Int
    /// The error code as sent.
    ///
    /// Sent as `error`.
    public let error: String
    /// The server's explanation, with control characters replaced (it is meant for people, and may be shown).
    ///
    /// Sent as `error_description`.
    public let errorDescription: String?
    /// A page about the error.
    ///
    /// Sent as `error_uri`.
    public let errorURI: String?

    /// Creates an error response.
    public init(statusCode: Int, error: String, errorDescription: String? = nil, errorURI: String? = nil) {
        self.statusCode = statusCode
        self.error = error
        self.errorDescription = errorDescription
        self.errorURI = errorURI
    }

    /// Reads an error body; nil when the body is not a JSON object with a string `error`.
    public init?(_ response: SesameHTTP.Response) {
        guard let json = try? JOSEValue.parse(response.body), let code = json["error"]?.stringValue, !code.isEmpty
        else { return nil }
        self.init(
            statusCode: response.status, error: PrintableText.sanitized(code, limit: 128),
            errorDescription: json["error_description"]?.stringValue.map { PrintableText.sanitized($0, limit: 1024) },
            errorURI: json["error_uri"]?.stringValue.map { PrintableText.sanitized($0, limit: 1024) })
    }

    /// Whether a refused refresh means the refresh token is dead (sign in again) rather than "try later".
    ///
    /// Definitive: a 400 or 401 whose body is a well-formed OAuth error (a JSON object whose `error` is an error
    /// code as OAuth spells them: lower-case letters, digits and `_`), **whatever the code** — `invalid_grant`, but
    /// also the `invalid_request` or `unauthorized_client` some certified providers send for a dead refresh token:
    /// the same request will fail the same way again (RFC 6749 §5.2). The exceptions say so themselves:
    /// `use_dpop_nonce` (retry with a nonce, RFC 9449 §8), `invalid_dpop_proof` (the proof, not the grant — a clock
    /// off by seconds), `temporarily_unavailable` and `server_error` (some providers send them with a 400).
    /// Everything else is transient: 5xx, 408, 429, a proxy's 403, and any answer that is not an OAuth error body
    /// (a captive portal's HTML page, an empty body, a framework's `{"error":"Bad Request"}`).
    public static func isDefinitiveRefreshRejection(_ response: SesameHTTP.Response) -> Bool {
        guard response.status == 400 || response.status == 401,
            let code = (try? JOSEValue.parse(response.body))?["error"]?.stringValue, !code.isEmpty,
            code.utf8.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x5F })
        else { return false }
        return !retryableCodes.contains(code)
    }

    /// Codes that say "try again", whatever the status.
    private static let retryableCodes: Set<String> = [
        "use_dpop_nonce", "invalid_dpop_proof", "temporarily_unavailable", "server_error",
    ]

    /// The code as an OAuth code (RFC 6749 and friends).
    public var oauthError: OAuthErrorCode { OAuthErrorCode(rawValue: error) }

    /// The code as a REST-contract code.
    public var restError: RESTErrorCode { RESTErrorCode(rawValue: error) }
}

/// An OAuth 2.0 error code; unknown codes pass through untouched.
public struct OAuthErrorCode: RawRepresentable, Hashable, Sendable {
    /// The code as sent.
    public let rawValue: String
    /// Creates a code.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// RFC 6749 §5.2: the grant (a refresh token, a code) is invalid, expired or revoked.
    public static let invalidGrant = Self(rawValue: "invalid_grant")
    /// RFC 6749 §5.2.
    public static let invalidRequest = Self(rawValue: "invalid_request")
    /// RFC 6749 §5.2.
    public static let invalidClient = Self(rawValue: "invalid_client")
    /// RFC 6749 §5.2.
    public static let invalidScope = Self(rawValue: "invalid_scope")
    /// RFC 6749 §5.2.
    public static let unauthorizedClient = Self(rawValue: "unauthorized_client")
    /// RFC 6749 §5.2.
    public static let unsupportedGrantType = Self(rawValue: "unsupported_grant_type")
    /// RFC 6750 §3.1: the access token is invalid or expired.
    public static let invalidToken = Self(rawValue: "invalid_token")
    /// RFC 6750 §3.1.
    public static let insufficientScope = Self(rawValue: "insufficient_scope")
}

/// An error code of the proprietary REST contract (DESIGN §4); unknown codes pass through untouched.
public struct RESTErrorCode: RawRepresentable, Hashable, Sendable {
    /// The code as sent.
    public let rawValue: String
    /// Creates a code.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Wrong email or password.
    public static let invalidCredentials = Self(rawValue: "invalid_credentials")
    /// The email is registered already.
    public static let emailTaken = Self(rawValue: "email_taken")
    /// The request is malformed (for example a password that is too short).
    public static let invalidRequest = Self(rawValue: "invalid_request")
    /// The refresh token is unknown, expired or revoked.
    public static let invalidGrant = Self(rawValue: "invalid_grant")
}
