/// An error body as a server sends it: RFC 6749 §5.2 / RFC 6750 §3.1, and the REST contract's
/// `{"error","error_description"}`.
public struct OAuthErrorResponse: Sendable, Hashable {
    /// The error code.
    ///
    /// Sent as `error`.
    public let error: OAuthErrorCode
    /// A human explanation from the server.
    ///
    /// Sent as `error_description`.
    public let errorDescription: String?
    /// A page about the error.
    ///
    /// Sent as `error_uri`.
    public let errorURI: String?

    /// Creates an error response.
    public init(error: OAuthErrorCode, errorDescription: String? = nil, errorURI: String? = nil) {
        self.error = error
        self.errorDescription = errorDescription
        self.errorURI = errorURI
    }
}

/// An error code from a server; unknown codes pass through untouched.
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
    /// RFC 6750 §3.1: the access token is invalid or expired.
    public static let invalidToken = Self(rawValue: "invalid_token")
    /// The REST contract: wrong email or password.
    public static let invalidCredentials = Self(rawValue: "invalid_credentials")
    /// The REST contract: the email is registered already.
    public static let emailTaken = Self(rawValue: "email_taken")
}
