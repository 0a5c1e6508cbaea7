import Foundation
public import SesameJOSE

/// A client registered with the dev server's OpenID Connect provider.
///
/// Every client is public (no secret): it proves possession of the authorization with PKCE, and of the tokens with
/// DPoP when it binds them.
public struct RegisteredClient: Sendable, Hashable {
    /// The `client_id`.
    public let id: String
    /// The redirect URIs, which are also the registered post-logout URIs.
    ///
    /// They are compared byte for byte, except that a loopback IP literal (`http://127.0.0.1`, `http://[::1]`)
    /// matches on any port (RFC 8252 §7.3).
    public let redirectURIs: [String]
    /// Whether any loopback redirect URI on any port and path is accepted (the built-in `sesame-cli`).
    public let acceptsAnyLoopbackRedirect: Bool
    /// The algorithm of this client's ID tokens (`id_token_signed_response_alg`); nil signs them with the
    /// server's ``DevServer/Configuration/signingAlgorithm``.
    ///
    /// Clients read from a configuration file or registered dynamically get RS256 when they name none, as OIDC
    /// Registration §2 says.
    public var idTokenSigningAlgorithm: JWSAlgorithm?
    /// Where RP-initiated logout may return to; nil means the redirect URIs.
    public var postLogoutRedirectURIs: [String]?
    /// Claims added to this client's ID tokens and UserInfo answers, as templates (``ClaimTemplate``).
    public var claims: [String: JOSEValue] = [:]
    /// Whether a remembered browser session still needs the user's consent before a code goes to this client
    /// (clients registered at `/connect/register`: anyone could have registered them).
    var requiresConsent = false
    /// The audiences or resources this client may exchange its access tokens for (RFC 8693, `audience` or
    /// `resource` compared byte for byte); empty refuses every exchange (`invalid_target`).
    public var exchangeAudiences: [String] = []
    /// The Native SSO group: clients of one vendor that share a sign-in on a device (OpenID Connect Native SSO).
    ///
    /// A client of a group may ask for the `device_sso` scope, and may sign in with the ID token and device secret
    /// that another client of the same group received. Nil: no Native SSO (`device_sso` is `invalid_scope`).
    public var nativeSSOGroup: String?
    /// How this client authenticates at the token, revocation, PAR and device endpoints; ``TokenEndpointAuthentication/none``
    /// for a public client.
    public var tokenEndpointAuthentication: TokenEndpointAuthentication = .none
    /// The scopes a confidential client may ask for with the client credentials grant (all of them when it names
    /// none); empty: tokens without a scope.
    public var allowedScopes: [String] = []

    /// How a client proves itself (RFC 7591 `token_endpoint_auth_method`).
    public enum TokenEndpointAuthentication: Sendable, Hashable {
        /// A public client: `client_id` only (PKCE and DPoP protect what it gets).
        case none
        /// RFC 7523 client assertions signed by one of the keys of this JWKS (public keys, as JSON).
        case privateKeyJWT(jwks: String)
        /// The secret in HTTP Basic (RFC 6749 §2.3.1).
        case clientSecretBasic(secret: String)
        /// The secret as `client_secret` in the body.
        case clientSecretPost(secret: String)

        /// The RFC 7591 name.
        public var methodName: String {
            switch self {
            case .none: "none"
            case .privateKeyJWT: "private_key_jwt"
            case .clientSecretBasic: "client_secret_basic"
            case .clientSecretPost: "client_secret_post"
            }
        }
    }
    /// The grant types this client may use; nil allows every one.
    ///
    /// They are `authorization_code`, `refresh_token` and the device grant; a client without `refresh_token` gets
    /// no refresh token.
    public var grantTypes: Set<String>?

    /// The grant types this server knows, or nil when `names` has another.
    static func grantTypes(_ names: [String]) -> Set<String>? {
        let known: Set<String> = [
            "authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code",
            "urn:ietf:params:oauth:grant-type:token-exchange", "client_credentials",
        ]
        let set = Set(names)
        return set.isSubset(of: known) ? set : nil
    }

    /// Whether this client may use `grantType`.
    func allows(_ grantType: String) -> Bool { grantTypes?.contains(grantType) ?? true }

    /// A client with registered redirect URIs.
    public init(
        id: String, redirectURIs: [String], acceptsAnyLoopbackRedirect: Bool = false,
        idTokenSigningAlgorithm: JWSAlgorithm? = nil, postLogoutRedirectURIs: [String]? = nil,
        claims: [String: JOSEValue] = [:]
    ) {
        self.id = id
        self.redirectURIs = redirectURIs
        self.acceptsAnyLoopbackRedirect = acceptsAnyLoopbackRedirect
        self.idTokenSigningAlgorithm = idTokenSigningAlgorithm
        self.postLogoutRedirectURIs = postLogoutRedirectURIs
        self.claims = claims
    }

    /// The built-in public client for native apps and the CLI: any loopback redirect, the device grant.
    public static let sesameCLI = RegisteredClient(id: "sesame-cli", redirectURIs: [], acceptsAnyLoopbackRedirect: true)

    /// Parses `ID:URI[,URI…]` (the `--client` option).
    ///
    /// - Throws: ``DevServerError`` for an empty ID or a URI that is not absolute or has a fragment.
    public init(specification: String) throws {
        guard let colon = specification.firstIndex(of: ":") else {
            throw DevServerError("--client takes ID:URI[,URI...], got \(specification)")
        }
        let id = String(specification[..<colon])
        let uris = specification[specification.index(after: colon)...].split(separator: ",").map(String.init)
        try Self.check(id: id, redirectURIs: uris)
        self.init(id: id, redirectURIs: uris)
    }

    /// Throws unless `id` is 1 to 128 visible ASCII characters and every URI is absolute without a fragment.
    static func check(id: String, redirectURIs uris: [String], serviceOnly: Bool = false) throws {
        guard !id.isEmpty, id.utf8.count <= 128, id.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F })
        else { throw DevServerError("--client: the client ID must be 1 to 128 visible ASCII characters") }
        guard !uris.isEmpty || serviceOnly else {
            throw DevServerError("--client \(id): at least one redirect URI is needed")
        }
        for uri in uris where !isRegistrable(uri) {
            throw DevServerError(
                isWellFormed(uri)
                    ? "--client \(id): \(uri) has a scheme a browser would run or open locally"
                    : "--client \(id): \(uri) is not an absolute URI without a fragment")
        }
    }

    /// Whether `uri` may be registered as a redirect or post-logout URI: absolute, visible ASCII, no fragment, at
    /// most 2,048 bytes, and no scheme a browser runs (``isScriptable(_:)``).
    static func isRegistrable(_ uri: String) -> Bool { isWellFormed(uri) && !isScriptable(uri) }

    /// Absolute, visible ASCII, no fragment, at most 2,048 bytes (whatever the scheme).
    static func isWellFormed(_ uri: String) -> Bool {
        guard uri.utf8.count <= 2048, uri.utf8.allSatisfy(isURICharacter), let parts = URLComponents(string: uri),
            let scheme = parts.scheme, !scheme.isEmpty, parts.fragment == nil
        else { return false }
        return true
    }

    /// Whether `uri` is `http` or `https` (what a form post may go to).
    static func isHTTP(_ uri: String) -> Bool {
        ["http", "https"].contains(URLComponents(string: uri)?.scheme?.lowercased() ?? "")
    }

    /// Schemes a browser runs or opens locally (`javascript:`, `data:`, …): never a redirect target, or a form
    /// post to one would run script in the server's origin.
    static func isScriptable(_ uri: String) -> Bool {
        guard let scheme = URLComponents(string: uri)?.scheme?.lowercased() else { return true }
        return ["javascript", "data", "vbscript", "file", "blob", "about", "filesystem", "view-source"].contains(scheme)
    }

    /// Whether `uri` is one of this client's post-logout redirect URIs (the same matching as redirect URIs).
    func accepts(postLogoutRedirectURI uri: String) -> Bool {
        guard let registered = postLogoutRedirectURIs else { return accepts(redirectURI: uri) }
        return RegisteredClient(id: id, redirectURIs: registered).accepts(redirectURI: uri)
    }

    /// Whether `uri` is one of this client's redirect URIs (RFC 6749 §3.1.2.3 exact match, RFC 8252 §7.3 ports).
    func accepts(redirectURI uri: String) -> Bool {
        guard uri.utf8.count <= 2048, !uri.contains("#"), uri.utf8.allSatisfy(Self.isURICharacter),
            !Self.isScriptable(uri)
        else { return false }
        let loopback = Self.loopbackParts(uri)
        if acceptsAnyLoopbackRedirect, loopback != nil { return true }
        return redirectURIs.contains { registered in
            if registered.utf8.elementsEqual(uri.utf8) { return true }
            guard let candidate = loopback, let expected = Self.loopbackParts(registered) else { return false }
            return candidate.utf8.elementsEqual(expected.utf8)
        }
    }

    /// RFC 3986's characters: unreserved, reserved and `%`; no space, quote, angle bracket, backslash, caret,
    /// backtick, brace, bar or control character, and nothing outside ASCII.
    static func isURICharacter(_ byte: UInt8) -> Bool {
        guard byte > 0x20, byte < 0x7F else { return false }
        return !"\"<>\\^`{|}".utf8.contains(byte)
    }

    /// `uri` without its port when it is `http` to a loopback IP literal, else nil.
    static func loopbackParts(_ uri: String) -> String? {
        guard var parts = URLComponents(string: uri), parts.scheme == "http", parts.user == nil,
            parts.password == nil, parts.fragment == nil, let host = parts.percentEncodedHost,
            host == "127.0.0.1" || host == "[::1]" || host == "::1"
        else { return nil }
        guard uri.hasPrefix("http://127.0.0.1") || uri.hasPrefix("http://[::1]") else { return nil }
        parts.port = nil
        return parts.string
    }
}

/// The registered clients by ID, found only by the ID's exact bytes.
///
/// A Swift dictionary compares `String` keys by Unicode canonical equivalence, so `client_id=\u{212A}app` (a Kelvin
/// sign) would find the client `Kapp` and tokens would go out naming the look-alike: identifiers are compared byte
/// for byte (DESIGN §5).
struct ClientRegistry: Sendable {
    private var byID: [String: RegisteredClient] = [:]

    init(_ clients: [RegisteredClient] = []) {
        for client in clients { add(client) }
    }

    /// Adds or replaces the client with `client.id`.
    mutating func add(_ client: RegisteredClient) { byID[client.id] = client }

    /// The client whose ID is exactly `id`.
    subscript(id: String) -> RegisteredClient? {
        guard let client = byID[id], client.id.utf8.elementsEqual(id.utf8) else { return nil }
        return client
    }

    var values: Dictionary<String, RegisteredClient>.Values { byID.values }
    var count: Int { byID.count }
}

/// The registered client's earlier name.
@available(*, deprecated, renamed: "RegisteredClient")
public typealias OIDCClient = RegisteredClient
