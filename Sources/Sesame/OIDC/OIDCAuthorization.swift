public import Foundation
internal import SesameJOSE

/// One authorization request in flight: the URL to open, and the secrets that complete it (PKCE verifier,
/// `state`, `nonce`).
///
/// Keep it only until the redirect arrives (persist it, if at all, just for the flow, and delete it afterwards
/// whatever happens). Its `description` and `dump()` never show the secrets.
public struct PendingAuthorization: Sendable, Codable, Hashable, CustomStringConvertible, CustomReflectable {
    /// The URL to open in the user agent.
    public let url: URL
    /// The redirect URI the response must come back to.
    public let redirectURI: String
    /// The PKCE `code_verifier` (RFC 7636): 43 characters from 32 random bytes.
    public let codeVerifier: String
    /// The `state`, compared in constant time.
    public let state: String
    /// The `nonce`, when `openid` was requested.
    public let nonce: String?
    /// The `max_age` requested, if any.
    public let maxAge: TimeInterval?
    /// When the request was made.
    public let createdAt: Date
    /// The issuer the request was sent to (mix-up defence, BCP-08), nil for plain OAuth 2.0.
    public let issuer: String?
    /// The client that made it.
    public let clientID: String
    /// The `acr_values` requested, if any: the ID token's `acr` must be one of them.
    public let acrValues: [String]?

    /// Creates a pending authorization (``OIDCAuthProvider/authorizationRequest(_:)`` makes them).
    public init(
        url: URL, redirectURI: String, codeVerifier: String, state: String, nonce: String?, maxAge: TimeInterval?,
        createdAt: Date, issuer: String?, clientID: String, acrValues: [String]? = nil
    ) {
        self.acrValues = acrValues
        self.issuer = issuer
        self.clientID = clientID
        self.url = url
        self.redirectURI = redirectURI
        self.codeVerifier = codeVerifier
        self.state = state
        self.nonce = nonce
        self.maxAge = maxAge
        self.createdAt = createdAt
    }

    /// The PKCE S256 challenge of ``codeVerifier``.
    public var codeChallenge: String { Self.challenge(for: codeVerifier) }

    static func challenge(for verifier: String) -> String { Base64URL.encode(JOSECrypto.sha256(Array(verifier.utf8))) }

    /// 32 random bytes, base64url: the verifier, `state` and `nonce` each get their own.
    static func randomSecret() -> String { Base64URL.encode(JOSECrypto.randomBytes(32)) }

    /// The redirect URI and creation time; never the verifier, state or nonce.
    public var description: String { "PendingAuthorization(redirectURI: \(redirectURI), createdAt: \(createdAt))" }

    /// A mirror without the secrets.
    public var customMirror: Mirror {
        Mirror(self, children: ["redirectURI": redirectURI, "createdAt": createdAt], displayStyle: .struct)
    }
}

/// What to ask for in one authorization request.
public struct AuthorizationOptions: Sendable {
    /// `prompt` (`login`, `none`, `consent`, `select_account`).
    public var prompt: String?
    /// `max_age` in seconds: the ID token's `auth_time` must then be that recent.
    public var maxAge: TimeInterval?
    /// `login_hint`.
    public var loginHint: String?
    /// `acr_values`, strongest wish first: the ID token's `acr` must then be one of them (RFC 9470 step-up).
    public var acrValues: [String]?
    /// Further parameters (never overriding the ones this library sets).
    public var additionalParameters: [String: String] = [:]

    /// Default options: none of the above.
    public init(
        prompt: String? = nil, maxAge: TimeInterval? = nil, loginHint: String? = nil, acrValues: [String]? = nil
    ) {
        self.prompt = prompt
        self.maxAge = maxAge
        self.loginHint = loginHint
        self.acrValues = acrValues
    }
}

/// What the provider sent back to the redirect URI, parsed (RFC 6749 §4.1.2, RFC 9207).
public struct AuthorizationResponse: Sendable, CustomStringConvertible, CustomReflectable {
    /// The query parameters (each name once; a repeated name makes the response invalid).
    public let parameters: [String: String]

    /// Parses the redirect URL.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/invalidAuthorizationResponse`` when a parameter repeats or
    ///   the URL has no query.
    public init(url: URL) throws {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false),
            let items = components.percentEncodedQueryItems
        else { throw AuthError(.invalidAuthorizationResponse, "the redirect has no query parameters") }
        var parameters: [String: String] = [:]
        for item in items {
            let name = OIDCAuthProvider.formDecoded(item.name, plusIsSpace: false) ?? item.name
            let value = OIDCAuthProvider.formDecoded(item.value ?? "", plusIsSpace: true) ?? ""
            guard parameters[name] == nil else {
                throw AuthError(.invalidAuthorizationResponse, "the redirect repeats the parameter \(name)")
            }
            parameters[name] = value
        }
        self.parameters = parameters
    }

    /// The parameters' names, and the values of `error` and `iss` only: never the code or the state.
    public var description: String {
        let shown = parameters.keys.sorted().map { name in
            ["error", "iss"].contains(name)
                ? "\(name)=\(PrintableText.sanitized(parameters[name] ?? "", limit: 80))" : "\(name)=<redacted>"
        }
        return "AuthorizationResponse(\(shown.joined(separator: ", ")))"
    }

    /// What `dump()` and debuggers show: as ``description``.
    public var customMirror: Mirror { Mirror(self, children: ["parameters": description], displayStyle: .struct) }
}
