public import Foundation
public import SesameJOSE

/// What a provider supports and where its endpoints are: OpenID Connect Discovery 1.0, or RFC 8414 authorization
/// server metadata, or endpoints configured by hand for a provider without discovery.
public struct OIDCProviderMetadata: Sendable, Hashable, Codable {
    /// The issuer identifier, exactly as the provider states it (compared byte for byte); nil for plain OAuth 2.0
    /// endpoints configured by hand (no ID tokens, and the session says so: ``isOpenIDConnect``).
    public var issuer: String?
    /// Where the user signs in.
    public var authorizationEndpoint: URL
    /// Where codes and refresh tokens are exchanged.
    public var tokenEndpoint: URL
    /// The provider's keys, for ID tokens.
    public var jwksURI: URL?
    /// UserInfo (OIDC Core §5.3).
    public var userInfoEndpoint: URL?
    /// Token revocation (RFC 7009).
    public var revocationEndpoint: URL?
    /// RP-initiated logout.
    public var endSessionEndpoint: URL?
    /// The device authorization endpoint (RFC 8628).
    public var deviceAuthorizationEndpoint: URL?
    /// Pushed authorization requests (RFC 9126).
    public var pushedAuthorizationRequestEndpoint: URL?
    /// Whether the provider requires PAR.
    public var requiresPushedAuthorizationRequests = false
    /// The PKCE methods it lists (empty when it lists none).
    public var codeChallengeMethods: [String] = []
    /// Whether authorization responses carry `iss` (RFC 9207): then a response without it is refused.
    public var authorizationResponseIssuerSupported = false
    /// The ID-token signature algorithms it lists; when empty, RS256 (OIDC Discovery §3).
    public var idTokenSigningAlgorithms: [String] = []
    /// The DPoP proof algorithms it lists (RFC 9449).
    public var dpopSigningAlgorithms: [String] = []
    /// The grant types it lists.
    public var grantTypes: [String] = []

    /// Whether this is an OpenID Connect provider (it has an issuer and keys), rather than bare OAuth 2.0.
    public var isOpenIDConnect: Bool { issuer != nil && jwksURI != nil }

    /// Endpoints configured by hand.
    public init(
        issuer: String? = nil, authorizationEndpoint: URL, tokenEndpoint: URL, jwksURI: URL? = nil,
        userInfoEndpoint: URL? = nil, revocationEndpoint: URL? = nil, endSessionEndpoint: URL? = nil,
        deviceAuthorizationEndpoint: URL? = nil
    ) {
        self.issuer = issuer
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.jwksURI = jwksURI
        self.userInfoEndpoint = userInfoEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.endSessionEndpoint = endSessionEndpoint
        self.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint
    }

    /// Reads a discovery document.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/invalidResponse`` when a required member is missing or an
    ///   endpoint is not an absolute URL.
    public init(json: JOSEValue) throws {
        func url(_ name: String, required: Bool = false) throws -> URL? {
            guard let text = json[name]?.stringValue else {
                if required { throw AuthError(.invalidResponse, "the provider metadata has no \(name)") }
                return nil
            }
            guard let url = URL(string: text), let scheme = url.scheme?.lowercased(),
                ["https", "http"].contains(scheme),
                url.host != nil
            else { throw AuthError(.invalidResponse, "the provider metadata's \(name) is not an http(s) URL") }
            return url
        }
        func strings(_ name: String) -> [String] { json[name]?.arrayValue?.compactMap(\.stringValue) ?? [] }
        guard let issuer = json["issuer"]?.stringValue else {
            throw AuthError(.invalidResponse, "the provider metadata has no issuer")
        }
        self.issuer = issuer
        func requiredURL(_ name: String) throws -> URL {
            guard let found = try url(name, required: true) else {
                throw AuthError(.invalidResponse, "the provider metadata has no \(name)")
            }
            return found
        }
        authorizationEndpoint = try requiredURL("authorization_endpoint")
        tokenEndpoint = try requiredURL("token_endpoint")
        jwksURI = try url("jwks_uri")
        userInfoEndpoint = try url("userinfo_endpoint")
        revocationEndpoint = try url("revocation_endpoint")
        endSessionEndpoint = try url("end_session_endpoint")
        deviceAuthorizationEndpoint = try url("device_authorization_endpoint")
        pushedAuthorizationRequestEndpoint = try url("pushed_authorization_request_endpoint")
        requiresPushedAuthorizationRequests = json["require_pushed_authorization_requests"] == .bool(true)
        codeChallengeMethods = strings("code_challenge_methods_supported")
        authorizationResponseIssuerSupported = json["authorization_response_iss_parameter_supported"] == .bool(true)
        idTokenSigningAlgorithms = strings("id_token_signing_alg_values_supported")
        dpopSigningAlgorithms = strings("dpop_signing_alg_values_supported")
        grantTypes = strings("grant_types_supported")
    }

    /// Whether `url` is `http` to a loopback host (`localhost`, `127.0.0.0/8`, `::1`).
    package static func isLoopback(_ url: URL) -> Bool {
        guard url.scheme?.lowercased() == "http", let host = url.host?.lowercased() else { return false }
        let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        return bare == "localhost" || bare == "::1" || isLoopbackIPv4(bare)
    }

    /// Whether `host` is a dotted-quad literal in `127.0.0.0/8`, read byte by byte: four parts of one to three
    /// decimal digits, each at most 255, the first 127 (`127.attacker.example` and `127.0.0.1\u{301}` are names).
    package static func isLoopbackIPv4(_ host: String) -> Bool {
        let parts = host.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 4 else { return false }
        let values = parts.map { part -> Int? in
            guard (1...3).contains(part.count), part.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
            return part.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        }
        return values[0] == 127 && values.allSatisfy { $0.map { $0 <= 255 } ?? false }
    }

    /// Fetches the provider's metadata: `/.well-known/openid-configuration`, then RFC 8414's
    /// `/.well-known/oauth-authorization-server` (path-inserted for an issuer with a path).
    ///
    /// The document's `issuer` must equal `issuer` byte for byte (OIDC Discovery §4.3: a mix-up defence), and every
    /// endpoint must be https unless the issuer is on loopback or `allowInsecureHTTP` is set.
    ///
    /// - Throws: ``AuthError`` — ``AuthError/Code/issuerMismatch``, ``AuthError/Code/insecureEndpoint``,
    ///   ``AuthError/Code/invalidResponse``, or transport errors.
    public static func discover(
        issuer: URL, transport: any HTTPTransport = SesameHTTP.platformTransport, allowInsecureHTTP: Bool = false
    ) async throws -> OIDCProviderMetadata {
        let text = issuer.absoluteString
        try checkSecure(issuer, allowInsecureHTTP: allowInsecureHTTP, what: "the issuer")
        guard issuer.query == nil, issuer.fragment == nil, issuer.user == nil else {
            throw AuthError(.configuration, "an issuer has no query, fragment or user info (OIDC Discovery §2)")
        }
        let trimmed = text.hasSuffix("/") ? String(text.dropLast()) : text
        var candidates = [trimmed + "/.well-known/openid-configuration"]
        if let components = URLComponents(url: issuer, resolvingAgainstBaseURL: false) {
            var rfc8414 = components
            let path = components.path == "/" ? "" : components.path
            rfc8414.path = "/.well-known/oauth-authorization-server" + path
            rfc8414.query = nil
            if let url = rfc8414.url?.absoluteString { candidates.append(url) }
        }
        var lastError: AuthError?
        for candidate in candidates {
            guard let url = URL(string: candidate) else { continue }
            let response = try await transport.send(
                SesameHTTP.Request(method: "GET", url: url, headers: ["Accept": "application/json"]))
            guard response.status == 200 else {
                let error = AuthError.unexpected(response)
                if error.isTransient { throw error }
                lastError = error
                continue
            }
            guard response.body.count <= 512 * 1024, let json = try? JOSEValue.parse(response.body),
                json.objectValue != nil
            else { throw AuthError(.invalidResponse, "the discovery document at \(candidate) is not a JSON object") }
            let metadata = try OIDCProviderMetadata(json: json)
            // An OpenID provider's configuration must name its keys (OIDC Discovery §3), or ID tokens go unverified.
            if candidate.hasSuffix("/.well-known/openid-configuration"), metadata.jwksURI == nil {
                throw AuthError(.invalidResponse, "the OpenID configuration at \(candidate) has no jwks_uri")
            }
            guard let stated = metadata.issuer, ByteExact.equals(stated, text) else {
                throw AuthError(
                    .issuerMismatch,
                    "the discovery document names the issuer \(metadata.issuer ?? "(none)"), not \(text)"
                        + " (give the issuer exactly as the provider states it)")
            }
            for endpoint in [
                metadata.authorizationEndpoint, metadata.tokenEndpoint, metadata.jwksURI, metadata.userInfoEndpoint,
                metadata.revocationEndpoint, metadata.endSessionEndpoint, metadata.deviceAuthorizationEndpoint,
                metadata.pushedAuthorizationRequestEndpoint,
            ].compactMap({ $0 }) {
                // A loopback issuer may use http for its own loopback endpoints only, never for another host.
                try checkSecure(endpoint, allowInsecureHTTP: allowInsecureHTTP, what: "an endpoint")
            }
            return metadata
        }
        throw lastError ?? AuthError(.invalidResponse, "no discovery document at \(text)")
    }

    /// Re-checks hand-made or stored metadata: every endpoint https, or http on loopback.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/insecureEndpoint``.
    public func checkEndpoints(allowInsecureHTTP: Bool = false) throws {
        for endpoint in [
            authorizationEndpoint, tokenEndpoint, jwksURI, userInfoEndpoint, revocationEndpoint, endSessionEndpoint,
            deviceAuthorizationEndpoint, pushedAuthorizationRequestEndpoint,
        ].compactMap({ $0 }) {
            try Self.checkSecure(endpoint, allowInsecureHTTP: allowInsecureHTTP, what: "an endpoint")
        }
    }

    static func checkSecure(_ url: URL, allowInsecureHTTP: Bool, what: String) throws {
        guard url.scheme?.lowercased() == "https" || isLoopback(url) || allowInsecureHTTP else {
            throw AuthError(
                .insecureEndpoint,
                "\(what) \(url.absoluteString) is not https (only loopback may be http, unless allowInsecureHTTP)")
        }
    }
}
