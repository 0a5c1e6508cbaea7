import Foundation

/// The one seam for putting credentials on a request and reading what the server thought of them.
///
/// ``AuthorizedClient`` calls ``authenticate(_:context:)`` for every request that goes to one of its credential
/// origins — never for another origin — and ``classify(_:for:)`` for each response to such a request. Bearer,
/// Basic and a custom async signer ship with Sesame; DPoP plugs in the same way. Alamofire's `Authenticator` and
/// Moya's async request closure are the models.
public protocol Authenticator: Sendable {
    /// Whether the credentials come from the ``AuthSession`` (so that a rejection can be cured by refreshing).
    ///
    /// When false, ``AuthorizedClient`` never asks the session for tokens and never refreshes.
    var usesSessionCredentials: Bool { get }

    /// Returns `request` with credentials applied: headers, and anything else derived from the whole request
    /// (method, URL, body).
    ///
    /// - Throws: whatever stops the request (an ``AuthError`` or `CancellationError`).
    func authenticate(_ request: SesameHTTP.Request, context: AuthenticationContext) async throws -> SesameHTTP.Request

    /// What to do about a response to a request this authenticator signed.
    func classify(_ response: SesameHTTP.Response, for request: SesameHTTP.Request) -> AuthenticationVerdict
}

/// What an ``Authenticator`` is given to sign a request.
public struct AuthenticationContext: Sendable {
    /// The session's current credentials (nil for authenticators that do not use them).
    public var tokens: TokenSet?
    /// A nonce the server asked for in its previous answer (DPoP's `DPoP-Nonce`), when there is one.
    public var nonce: String?

    /// Creates a context.
    public init(tokens: TokenSet? = nil, nonce: String? = nil) {
        self.tokens = tokens
        self.nonce = nonce
    }
}

/// An ``Authenticator``'s reading of a response.
public enum AuthenticationVerdict: Sendable, Equatable {
    /// The response stands (success, or a failure that new credentials would not cure).
    case done
    /// The credentials were rejected: refresh them (once for every concurrent caller) and retry once.
    case refreshAndRetry
    /// Retry once with the same credentials and this nonce (RFC 9449 §8–9 `use_dpop_nonce`).
    case retry(nonce: String)
}

/// `Authorization: Bearer <access token>` (RFC 6750 §2.1).
///
/// A 401 is a reason to refresh when it carries no challenge, or a `Bearer` challenge with
/// `error="invalid_token"` or without an error (RFC 6750 §3.1). `insufficient_scope`, `invalid_request` and other
/// schemes' challenges are final: a new token would not help, and refreshing would loop.
public struct BearerAuthenticator: Authenticator {
    /// Creates the authenticator.
    public init() {}

    /// Always true.
    public var usesSessionCredentials: Bool { true }

    /// Sets `Authorization: Bearer`.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/notSignedIn`` when there are no tokens,
    ///   ``AuthError/Code/dpopKeyMismatch`` for DPoP-bound tokens (never sent as Bearer).
    public func authenticate(_ request: SesameHTTP.Request, context: AuthenticationContext) async throws
        -> SesameHTTP.Request
    {
        guard let tokens = context.tokens else { throw AuthError(.notSignedIn, "no one is signed in") }
        // A DPoP-bound token is never sent as Bearer (it would not work, and it would drop the proof).
        guard !tokens.isDPoPBound else {
            throw AuthError(
                .dpopKeyMismatch,
                "the session holds DPoP-bound tokens and no DPoP key is in use: send with Authorization.dpop(_:), "
                    + "or sign in again")
        }
        return Self.apply("Bearer " + tokens.accessToken, to: request)
    }

    /// `request` with `Authorization: value`, replacing any there.
    static func apply(_ value: String, to request: SesameHTTP.Request) -> SesameHTTP.Request {
        var request = request
        if request.headers.contains("Authorization") {
            request.headers["Authorization"] = value
        } else {
            request.headers.add("Authorization", value)
        }
        return request
    }

    /// Reads a 401 as RFC 6750 §3.1 says.
    public func classify(_ response: SesameHTTP.Response, for request: SesameHTTP.Request) -> AuthenticationVerdict {
        Self.bearerVerdict(response)
    }

    /// The RFC 6750 reading of a response, shared with other schemes that follow it.
    public static func bearerVerdict(_ response: SesameHTTP.Response) -> AuthenticationVerdict {
        guard response.status == 401 else { return .done }
        let challenges = response.challenges
        if challenges.isEmpty { return .refreshAndRetry }
        let curable = challenges.contains { challenge in
            challenge.isScheme("Bearer") && (challenge["error"] == nil || challenge["error"] == "invalid_token")
        }
        return curable ? .refreshAndRetry : .done
    }
}

/// `Authorization: Basic` with fixed credentials (RFC 7617): never refreshes, and never reveals the password in
/// `description` or `dump()`.
public struct BasicAuthenticator: Authenticator, CustomStringConvertible, CustomReflectable {
    private let encoded: String
    /// The user name.
    public let user: String

    /// Creates the authenticator.
    public init(user: String, password: String) {
        self.user = user
        encoded = Data("\(user):\(password)".utf8).base64EncodedString()
    }

    /// Always false.
    public var usesSessionCredentials: Bool { false }

    /// Sets `Authorization: Basic`.
    public func authenticate(_ request: SesameHTTP.Request, context: AuthenticationContext) async throws
        -> SesameHTTP.Request
    {
        var request = request
        request.headers["Authorization"] = "Basic \(encoded)"
        return request
    }

    /// Always ``AuthenticationVerdict/done``.
    public func classify(_ response: SesameHTTP.Response, for request: SesameHTTP.Request) -> AuthenticationVerdict {
        .done
    }

    /// The user, never the password.
    public var description: String { "BasicAuthenticator(user: \(user), password: <redacted>)" }

    /// A mirror without the password.
    public var customMirror: Mirror { Mirror(self, children: ["user": user, "password": "<redacted>"]) }
}

/// Credentials computed by your code, asynchronously if need be (an HMAC over the body, a signature from a
/// service): Moya's async request closure, as an ``Authenticator``.
///
/// ```swift
/// let signer = CustomAuthenticator { request, tokens in
///     var request = request
///     request.headers["X-Api-Token"] = tokens?.accessToken
///     request.headers["X-Signature"] = try await signingService.sign(request.body ?? Data())
///     return request
/// }
/// ```
public struct CustomAuthenticator: Authenticator {
    /// Signs a request given the session's tokens (nil when ``usesSessionCredentials`` is false).
    public typealias Sign = @Sendable (SesameHTTP.Request, TokenSet?) async throws -> SesameHTTP.Request
    /// Reads a response.
    public typealias Classify = @Sendable (SesameHTTP.Response) -> AuthenticationVerdict

    /// Whether the closure needs the session's tokens.
    public let usesSessionCredentials: Bool
    private let sign: Sign
    private let classifier: Classify

    /// Creates the authenticator.
    ///
    /// - Parameters:
    ///   - usesSessionCredentials: whether `sign` needs the session's tokens (default true).
    ///   - classify: how to read responses (default: RFC 6750's rules, as ``BearerAuthenticator``).
    ///   - sign: applies the credentials.
    public init(
        usesSessionCredentials: Bool = true,
        classify: @escaping Classify = BearerAuthenticator.bearerVerdict,
        sign: @escaping Sign
    ) {
        self.usesSessionCredentials = usesSessionCredentials
        self.sign = sign
        self.classifier = classify
    }

    /// Calls the closure.
    ///
    /// - Throws: what the closure throws.
    public func authenticate(_ request: SesameHTTP.Request, context: AuthenticationContext) async throws
        -> SesameHTTP.Request
    {
        try await sign(request, context.tokens)
    }

    /// Calls the classifier.
    public func classify(_ response: SesameHTTP.Response, for request: SesameHTTP.Request) -> AuthenticationVerdict {
        classifier(response)
    }
}
