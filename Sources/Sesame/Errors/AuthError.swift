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
        /// A provider named another issuer than the one configured: in its discovery document, or in an
        /// authorization response's `iss` (RFC 9207, a mix-up defence).
        public static let issuerMismatch = Code(rawValue: "issuer_mismatch")
        /// An endpoint is plain http and not on loopback.
        public static let insecureEndpoint = Code(rawValue: "insecure_endpoint")
        /// The authorization response is not the answer to the request this client made: a missing or different
        /// `state`, a missing `iss` the provider promised, or no pending request at all.
        public static let invalidAuthorizationResponse = Code(rawValue: "invalid_authorization_response")
        /// The provider answered the authorization request with an error (`access_denied`, `login_required`, …;
        /// see ``AuthError/serverResponse``).
        public static let authorizationFailed = Code(rawValue: "authorization_failed")
        /// An ID token failed validation (OIDC Core §3.1.3.7); ``AuthError/reason`` says which rule.
        public static let idTokenRejected = Code(rawValue: "id_token_rejected")
        /// A UserInfo response failed validation (its `sub` differs from the ID token's).
        public static let userInfoRejected = Code(rawValue: "userinfo_rejected")
        /// The user cancelled the sign-in.
        public static let cancelled = Code(rawValue: "cancelled")
        /// The device code expired before the user approved it (RFC 8628 `expired_token`).
        public static let deviceCodeExpired = Code(rawValue: "device_code_expired")
        /// The tokens are DPoP-bound to a key that is missing or is not the configured one: sign in again.
        ///
        /// Found (``TokenSet/dpopKeyThumbprint``) before any request is sent. The session ends: its credentials are
        /// deleted (they cannot be used without the key) and ``AuthError/requiresReauthentication`` is true.
        public static let dpopKeyMismatch = Code(rawValue: "dpop_key_mismatch")
        /// A resource wants a stronger or more recent sign-in (RFC 9470); the credentials are kept.
        ///
        /// ``AuthError/stepUpChallenge`` says what it wants; ``OIDCAuth/stepUp(_:with:)`` signs in that way.
        public static let stepUpRequired = Code(rawValue: "step_up_required")
        /// The provider refused a token exchange (RFC 8693) with an OAuth error (see ``AuthError/serverResponse``:
        /// `invalid_target` when the client may not get tokens for that audience or resource).
        public static let exchangeRejected = Code(rawValue: "exchange_rejected")
        /// The provider refused a Native SSO sign-in (``OIDCAuth/signInWithNativeSSO(scope:)``): sign in with the
        /// browser instead.
        ///
        /// ``AuthError/serverResponse`` has its OAuth error: `invalid_grant` when the shared sign-in is no longer good
        /// (its device session ended: the shared entry is forgotten), `unauthorized_client` when this app may not
        /// use it.
        public static let nativeSSORejected = Code(rawValue: "native_sso_rejected")
    }

    /// The code.
    public let code: Code
    /// A human explanation without secrets.
    public let message: String
    /// The HTTP status, when a response arrived.
    public let statusCode: Int?
    /// The server's error answer, verbatim, when there was one.
    public let serverResponse: ServerErrorResponse?
    /// The rule that failed, for ``Code/idTokenRejected`` and ``Code/userInfoRejected``: a `JOSEError` code
    /// (`issuer_mismatch`, `audience_mismatch`, `nonce_mismatch`, `signature_invalid`, `ambiguous_key`, `expired`,
    /// `missing_claim`, `algorithm_not_allowed`, …) or one of `untrusted_audience`, `at_hash_mismatch`,
    /// `auth_time_missing`, `auth_time_too_old`, `acr_not_met`; after a step-up or a refresh `subject_changed`;
    /// after a refresh `issuer_changed`, `audience_changed`, `auth_time_changed`; for UserInfo `subject_mismatch`;
    /// for ``Code/transport``, `cannot_connect` when no connection was made (nothing reached the server).
    public internal(set) var reason: String?
    /// What the resource asked for, for ``Code/stepUpRequired``.
    public internal(set) var stepUpChallenge: StepUpChallenge?
    /// How long the server asked to wait before trying again (`Retry-After`, in seconds), when it said.
    ///
    /// Always finite, from 0 to a year: a longer ask (`Retry-After: 99999999999`) is reported as a year, so the
    /// value can be given to `Task.sleep(for: .seconds(_:))` or converted to an integer as it is.
    public internal(set) var retryAfter: TimeInterval?

    /// Creates an error; control characters in `message` are replaced (it may quote what a server sent).
    public init(_ code: Code, _ message: String, statusCode: Int? = nil, serverResponse: ServerErrorResponse? = nil) {
        self.code = code
        self.message = PrintableText.isClean(message) ? message : PrintableText.sanitized(message)
        self.statusCode = statusCode ?? serverResponse?.statusCode
        self.serverResponse = serverResponse
    }

    /// A ``Code/stepUpRequired`` error carrying `challenge`, as ``AuthorizedClient`` throws it (for an app's tests
    /// of its step-up handling).
    public static func stepUpRequired(_ challenge: StepUpChallenge, statusCode: Int = 401, message: String? = nil)
        -> AuthError
    {
        var error = AuthError(
            .stepUpRequired, message ?? "the resource wants a stronger or more recent sign-in (\(challenge))",
            statusCode: statusCode)
        error.stepUpChallenge = challenge
        return error
    }

    /// Whether retrying later may succeed (network, 5xx, 408, 429, store unavailable).
    ///
    /// Credentials are kept.
    public var isTransient: Bool {
        code == .transport || code == .storeUnavailable
            || (code == .server && (statusCode.map { $0 >= 500 || $0 == 429 || $0 == 408 } ?? false))
    }

    /// Whether the user has to sign in again.
    public var requiresReauthentication: Bool {
        [.sessionExpired, .notSignedIn, .refreshRejected, .noRefreshToken, .dpopKeyMismatch].contains(code)
    }

    /// `code: message`, then the server's status, code and description when it sent them (an error on the
    /// authorization redirect has no status); no secrets.
    public var description: String {
        var text = "\(code.rawValue): \(message)"
        if let serverResponse {
            text += serverResponse.statusCode > 0 ? " (\(serverResponse.statusCode) " : " ("
            text += serverResponse.error
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
        var error: AuthError
        if let body = ServerErrorResponse(response) {
            error = AuthError(.server, "the server answered \(response.status)", serverResponse: body)
        } else if response.status >= 500 || response.status == 429 {
            error = AuthError(.transport, "the server answered \(response.status)", statusCode: response.status)
        } else {
            error = AuthError(.server, "the server answered \(response.status)", statusCode: response.status)
        }
        error.retryAfter = RetryPolicy.retryAfter(response).map { min($0, 366 * 86_400) }
        return error
    }
}
