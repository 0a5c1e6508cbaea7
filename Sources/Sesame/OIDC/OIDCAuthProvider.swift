public import Foundation
public import SesameJOSE

/// An OpenID Connect (or plain OAuth 2.0) provider for a public client.
///
/// Authorization code with PKCE S256, ID tokens verified against the provider's keys, refresh, UserInfo,
/// revocation, RP-initiated logout and the device grant. It is the ``AuthProvider`` an ``AuthSession`` refreshes
/// and signs out through.
///
/// ```swift
/// let provider = try await OIDCAuthProvider.discover(
///     issuer: URL(string: "https://id.example.com")!,
///     configuration: .init(clientID: "my-app", redirectURI: "com.example.app:/callback"))
/// let pending = try await provider.authorizationRequest()
/// // open pending.url in a user agent; when the redirect arrives:
/// let tokens = try await provider.completeAuthorization(redirect: callbackURL, pending: pending)
/// ```
public struct OIDCAuthProvider: AuthProvider {
    /// The client's registration and choices.
    public struct Configuration: Sendable {
        /// The `client_id`.
        public var clientID: String
        /// The redirect URI, exactly as registered.
        public var redirectURI: String
        /// The scopes; `openid` makes it OpenID Connect (ID tokens), `offline_access` asks for a refresh token.
        public var scopes: [String] = ["openid", "profile", "email", "offline_access"]
        /// Use PAR (RFC 9126): ``PushedRequests/whenAdvertised`` by default, always when the provider requires it.
        public var pushedRequests: PushedRequests = .whenAdvertised
        /// Clock-skew allowance for ID tokens.
        ///
        /// Default 60 s.
        public var leeway: TimeInterval = 60
        /// A private key that makes the tokens sender-constrained (DPoP, RFC 9449): every token request carries a
        /// proof, the provider must answer `token_type: DPoP`, and resource requests need ``DPoPAuthenticator``.
        ///
        /// Default nil (Bearer tokens).
        public var dpopKey: JWK?
        /// A DPoP key kept elsewhere, prepared as a signer; takes precedence over ``dpopKey``.
        ///
        /// The Secure Enclave (`SesameApple`'s `SecureEnclaveKeys`) or any `DPoPSigningKey`; a ``DPoPKeyStore``
        /// hands these out.
        ///
        /// Default nil.
        public var dpopSigner: DPoPSigner?
        /// Where ``dpopSigner`` came from (``OIDCAuth`` sets it): when stored tokens turn out to be bound to
        /// another key, this store is read again before the session ends them — another process may have signed in
        /// again with a new key after this one read its key.
        ///
        /// Default nil.
        public var dpopKeySource: DPoPKeySource?
        /// Whether the tokens are DPoP-bound (a ``dpopKey`` or a ``dpopSigner`` is set).
        public var usesDPoP: Bool { dpopKey != nil || dpopSigner != nil }
        /// Learn the provider's clock from the HTTP `Date` header of token responses and validate ID tokens by it,
        /// for devices whose clock is wrong.
        ///
        /// Default on.
        public var learnsClockFromDateHeader = true
        /// How this client authenticates at the provider's token, PAR, revocation and device endpoints.
        ///
        /// Default ``ClientAuthentication/none`` (a public client, as native apps are).
        public var clientAuthentication: ClientAuthentication = .none

        /// When to push authorization requests.
        public enum PushedRequests: Sendable {
            /// When the provider lists a PAR endpoint.
            case whenAdvertised
            /// Always (an error if the provider has no PAR endpoint).
            case always
            /// Only when the provider requires it.
            case whenRequired
        }

        /// A configuration.
        public init(clientID: String, redirectURI: String, scopes: [String]? = nil) {
            self.clientID = clientID
            self.redirectURI = redirectURI
            if let scopes { self.scopes = scopes }
        }
    }

    /// The provider's metadata.
    public let metadata: OIDCProviderMetadata
    /// The configuration.
    public let configuration: Configuration
    /// The provider's keys (nil for plain OAuth 2.0).
    public let keys: JWKSCache?
    let transport: any HTTPTransport
    /// Where the provider's time comes from (ID-token checks, expiry).
    public let timeSource: any TimeSource
    let clock = LockedValue<TimeInterval>(0)
    /// The `state`s whose responses were completed (BCP-06), shared by copies of this provider.
    private let consumedStates = LockedValue(BoundedSet(capacity: 1024))
    /// The latest DPoP nonces per origin; give the same cache to ``DPoPAuthenticator``.
    public let dpopNonces = DPoPNonces()
    /// The DPoP key prepared for proofs: ``Configuration/dpopSigner``, else ``Configuration/dpopKey`` (nil without
    /// one, or for a key that cannot sign — then every token request fails rather than going out as Bearer).
    public let dpopSigner: DPoPSigner?
    /// The thumbprint of ``Configuration/dpopKey`` (what the tokens it gets are bound to).
    var dpopThumbprint: String? { dpopSigner?.thumbprint }
    /// A ``DPoPAuthenticator`` with this provider's key, nonces and clock (nil without DPoP): what an
    /// ``AuthorizedClient`` for the session's APIs needs.
    public func dpopAuthenticator() -> DPoPAuthenticator? {
        guard configuration.usesDPoP else { return nil }
        return DPoPAuthenticator(signer: dpopSigner, nonces: dpopNonces, timeSource: timeSource)
    }

    /// DPoP (proving this provider's key, with its nonces) when ``Configuration/usesDPoP``; else Bearer.
    public var credentialScheme: any Authenticator { dpopAuthenticator() ?? BearerAuthenticator() }
    /// How the device flow waits between polls (tests inject one that does not sleep).
    let sleep: @Sendable (TimeInterval) async throws -> Void

    /// A provider from metadata (discovered, or configured by hand).
    public init(
        metadata: OIDCProviderMetadata, configuration: Configuration,
        transport: any HTTPTransport = SesameHTTP.platformTransport, timeSource: any TimeSource = SystemTimeSource(),
        sleep: @escaping @Sendable (TimeInterval) async throws -> Void = { try await Task.sleep(for: .seconds($0)) }
    ) {
        self.metadata = metadata
        self.configuration = configuration
        self.transport = transport
        self.timeSource = timeSource
        self.sleep = sleep
        dpopSigner = configuration.dpopSigner ?? configuration.dpopKey.flatMap { try? DPoPSigner(key: $0) }
        keys = metadata.jwksURI.map { JWKSCache(url: $0, transport: transport, timeSource: timeSource) }
    }

    /// Discovers `issuer` (``OIDCProviderMetadata/discover(issuer:transport:allowInsecureHTTP:)``) and makes a
    /// provider.
    public static func discover(
        issuer: URL, configuration: Configuration, transport: any HTTPTransport = SesameHTTP.platformTransport,
        timeSource: any TimeSource = SystemTimeSource(), allowInsecureHTTP: Bool = false
    ) async throws -> OIDCAuthProvider {
        let metadata = try await OIDCProviderMetadata.discover(
            issuer: issuer, transport: transport, allowInsecureHTTP: allowInsecureHTTP)
        return OIDCAuthProvider(
            metadata: metadata, configuration: configuration, transport: transport, timeSource: timeSource)
    }

    var wantsOpenID: Bool { configuration.scopes.contains("openid") && metadata.isOpenIDConnect }

    var validator: IDTokenValidator? {
        guard let issuer = metadata.issuer, metadata.isOpenIDConnect else { return nil }
        var validator = IDTokenValidator(
            issuer: issuer, clientID: configuration.clientID, algorithms: metadata.idTokenSigningAlgorithms)
        validator.leeway = configuration.leeway
        validator.clockOffset = clock.withLock { $0 }
        return validator
    }

    // MARK: Authorization

    /// A new authorization request: fresh PKCE verifier, `state` and `nonce`; pushed first when PAR is chosen.
    ///
    /// - Throws: ``AuthError`` — ``AuthError/Code/configuration`` when the provider does not support S256 or PAR
    ///   is required but missing; the PAR endpoint's errors.
    public func authorizationRequest(_ options: AuthorizationOptions = AuthorizationOptions()) async throws
        -> PendingAuthorization
    {
        if !metadata.codeChallengeMethods.isEmpty, !metadata.codeChallengeMethods.contains("S256") {
            throw AuthError(.configuration, "the provider does not support PKCE S256")
        }
        try Self.checkRedirectURI(configuration.redirectURI)
        let verifier = PendingAuthorization.randomSecret()
        let state = PendingAuthorization.randomSecret()
        let nonce = configuration.scopes.contains("openid") ? PendingAuthorization.randomSecret() : nil
        var parameters: [(String, String)] = [
            ("response_type", "code"), ("client_id", configuration.clientID),
            ("redirect_uri", configuration.redirectURI), ("scope", configuration.scopes.joined(separator: " ")),
            ("state", state), ("code_challenge", PendingAuthorization.challenge(for: verifier)),
            ("code_challenge_method", "S256"),
        ]
        if let nonce { parameters.append(("nonce", nonce)) }
        if configuration.usesDPoP {
            // DPOP-08: an algorithm the provider lists; DPOP-10: the code bound to the key from the start.
            guard let dpopSigner else {
                throw AuthError(.configuration, "the DPoP key is not a private asymmetric key")
            }
            let algorithm = dpopSigner.algorithm.name
            if !metadata.dpopSigningAlgorithms.isEmpty, !metadata.dpopSigningAlgorithms.contains(algorithm) {
                throw AuthError(
                    .configuration, "the provider does not list the DPoP key's algorithm \(algorithm)")
            }
            parameters.append(("dpop_jkt", dpopSigner.thumbprint))
        }
        if let prompt = options.prompt { parameters.append(("prompt", prompt)) }
        if let maxAge = options.maxAge {
            guard maxAge.isFinite, maxAge >= 0 else {
                throw AuthError(.configuration, "max_age must be a number of seconds, zero or more")
            }
            parameters.append(("max_age", String(Int(min(maxAge, 10 * 365 * 86400)))))
        }
        if let hint = options.loginHint { parameters.append(("login_hint", hint)) }
        if let acrValues = options.acrValues, !acrValues.isEmpty {
            parameters.append(("acr_values", acrValues.joined(separator: " ")))
        }
        let reserved = Set(parameters.map(\.0))
        for (name, value) in options.additionalParameters.sorted(by: { $0.key < $1.key })
        where !reserved.contains(name) {
            parameters.append((name, value))
        }
        let push: Bool
        switch configuration.pushedRequests {
        case .always: push = true
        case .whenAdvertised: push = metadata.pushedAuthorizationRequestEndpoint != nil
        case .whenRequired: push = metadata.requiresPushedAuthorizationRequests
        }
        var query = parameters
        if push || metadata.requiresPushedAuthorizationRequests {
            guard let endpoint = metadata.pushedAuthorizationRequestEndpoint else {
                throw AuthError(.configuration, "PAR was chosen but the provider has no PAR endpoint")
            }
            let response = try await postWithProof(endpoint, parameters)
            guard response.status == 201 || response.status == 200,
                let json = try? JOSEValue.parse(response.body), let uri = json["request_uri"]?.stringValue
            else { throw Self.failure(response, "the pushed authorization request was refused") }
            query = [("client_id", configuration.clientID), ("request_uri", uri)]
        }
        guard var components = URLComponents(url: metadata.authorizationEndpoint, resolvingAgainstBaseURL: false)
        else { throw AuthError(.configuration, "the authorization endpoint is not a URL") }
        let existing = components.percentEncodedQuery.map { $0 + "&" } ?? ""
        components.percentEncodedQuery = existing + Self.formEncode(query)
        guard let url = components.url else { throw AuthError(.configuration, "the authorization URL is invalid") }
        SesameLog.log(
            .info, .oidc,
            "authorization request for \(public: configuration.clientID) (PKCE S256, state and nonce \(public: query.count == 2 ? "pushed (PAR)" : "in the URL"))"
        )
        return PendingAuthorization(
            url: url, redirectURI: configuration.redirectURI, codeVerifier: verifier, state: state, nonce: nonce,
            maxAge: options.maxAge, createdAt: timeSource.now, issuer: metadata.issuer,
            clientID: configuration.clientID,
            acrValues: options.acrValues.flatMap { $0.isEmpty ? nil : $0 })
    }

    /// Completes a sign-in from the redirect: checks `iss` (RFC 9207) first, then `state`, then an `error`, then
    /// exchanges the code once and validates the ID token.
    ///
    /// - Throws: ``AuthError`` — ``AuthError/Code/issuerMismatch``, ``AuthError/Code/invalidAuthorizationResponse``
    ///   (missing or different `state`, missing `iss` the provider promised, no code),
    ///   ``AuthError/Code/authorizationFailed`` (the provider's error and description),
    ///   ``AuthError/Code/idTokenRejected``, token-endpoint errors.
    public func completeAuthorization(redirect: URL, pending: PendingAuthorization) async throws -> TokenSet {
        try await completeAuthorization(redirect: redirect, pending: pending, deviceSecret: nil)
    }

    /// ``completeAuthorization(redirect:pending:)``, sending a Native SSO `device_secret` with the code (Native SSO
    /// §3.3): the provider may keep that device session rather than start another.
    func completeAuthorization(redirect: URL, pending: PendingAuthorization, deviceSecret: String?) async throws
        -> TokenSet
    {
        // The request must have been made here (BCP-08), and the response must arrive on its redirect URI
        // (NAT-13): a response meant for another provider is never exchanged at this one.
        guard
            pending.issuer.map({ stated in metadata.issuer.map { ByteExact.equals($0, stated) } ?? false })
                ?? (metadata.issuer == nil), ByteExact.equals(pending.clientID, configuration.clientID)
        else {
            throw AuthError(.issuerMismatch, "the pending request was made to another provider or client")
        }
        guard Self.sameEndpoint(redirect, pending.redirectURI) else {
            throw AuthError(.invalidAuthorizationResponse, "the response did not arrive on the request's redirect URI")
        }
        let response = try AuthorizationResponse(url: redirect)
        let parameters = response.parameters
        if let issuer = metadata.issuer {
            if let stated = parameters["iss"] {
                guard ByteExact.equals(stated, issuer) else {
                    throw AuthError(
                        .issuerMismatch, "the authorization response comes from \(stated), not \(issuer) (mix-up?)")
                }
            } else if metadata.authorizationResponseIssuerSupported {
                throw AuthError(
                    .invalidAuthorizationResponse, "the authorization response has no iss, which the provider promised")
            }
        }
        guard let state = parameters["state"] else {
            throw AuthError(.invalidAuthorizationResponse, "the authorization response has no state")
        }
        guard ConstantTime.equals(Array(state.utf8), Array(pending.state.utf8)) else {
            throw AuthError(.invalidAuthorizationResponse, "the authorization response's state is not this request's")
        }
        // A state is good for one response (BCP-06): a replayed redirect never reaches the token endpoint.
        guard consumedStates.withLock({ $0.insert(state) }) else {
            throw AuthError(.invalidAuthorizationResponse, "this authorization response was already used")
        }
        if let error = parameters["error"] {
            // Cleaned as an error body is (ServerErrorResponse(_:)): whoever sends the redirect chooses these.
            let body = ServerErrorResponse(
                statusCode: 0, error: PrintableText.sanitized(error, limit: 128),
                errorDescription: parameters["error_description"].map { PrintableText.sanitized($0, limit: 1024) },
                errorURI: parameters["error_uri"].map { PrintableText.sanitized($0, limit: 1024) })
            throw AuthError(
                error == "access_denied" ? .cancelled : .authorizationFailed, "the provider answered \(error)",
                serverResponse: body)
        }
        guard let code = parameters["code"], !code.isEmpty else {
            throw AuthError(.invalidAuthorizationResponse, "the authorization response has neither code nor error")
        }
        var pairs = [
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", pending.redirectURI),
            ("client_id", configuration.clientID), ("code_verifier", pending.codeVerifier),
        ]
        if let deviceSecret, configuration.scopes.contains("device_sso") {
            pairs.append(("device_secret", deviceSecret))
        }
        let answer = try await postWithProof(metadata.tokenEndpoint, pairs)
        guard answer.status == 200 else {
            let error = Self.failure(answer, "the code exchange was refused")
            SesameLog.log(.error, .oidc, "the code exchange was refused: \(error)")
            throw error
        }
        SesameLog.log(.info, .oidc, "authorization response checked (iss, state); code \(redacted: code) exchanged")
        return try await tokens(
            from: answer,
            expecting: IDTokenValidator.Expectations(
                nonce: pending.nonce, maxAge: pending.maxAge, acrValues: pending.acrValues),
            previous: nil)
    }

    // MARK: AuthProvider

    /// Refreshes: the old refresh token is kept when none is returned; a returned ID token is validated (no nonce)
    /// and must name the same `iss` and `sub` as the original (OIDC Core §12.2).
    ///
    /// - Throws: ``AuthError`` — ``AuthError/Code/refreshRejected`` for a 400 or 401 with an OAuth error body, whatever
    ///   its code (``ServerErrorResponse/isDefinitiveRefreshRejection(_:)``), ``AuthError/Code/noRefreshToken``,
    ///   ``AuthError/Code/idTokenRejected``, ``AuthError/Code/dpopKeyMismatch`` (tokens bound to another key or
    ///   to none configured), transient errors.
    public func refresh(_ tokens: TokenSet) async throws -> TokenSet {
        guard let refreshToken = tokens.refreshToken else {
            throw AuthError(.noRefreshToken, "there is no refresh token; sign in again")
        }
        // A refresh token bound to a key only that key can use (RFC 9449 §5): a missing or replaced key is
        // reported here, before a request that would get the grant revoked.
        try DPoPAuthenticator.check(tokens, boundTo: dpopThumbprint)
        let response = try await postWithProof(
            metadata.tokenEndpoint,
            [("grant_type", "refresh_token"), ("refresh_token", refreshToken), ("client_id", configuration.clientID)])
        guard response.status == 200 else {
            let error = Self.failure(response, "the refresh was refused")
            if ServerErrorResponse.isDefinitiveRefreshRejection(response) {
                throw AuthError(
                    .refreshRejected, "the provider rejected the refresh token", serverResponse: error.serverResponse)
            }
            // Anything else may go differently next time (DESIGN §3): a proxy's 403, a captive portal's page.
            guard error.isTransient else {
                throw AuthError(
                    .transport, "\(error.message) (not an OAuth error answer; the session is kept, try again later)",
                    statusCode: response.status, serverResponse: error.serverResponse)
            }
            throw error
        }
        let original = tokens.idToken.flatMap { try? JWT.unverifiedClaims(of: $0) }
        return try await self.tokens(
            from: response, expecting: IDTokenValidator.Expectations(original: original), previous: tokens)
    }

    /// Whether the key store (``Configuration/dpopKeySource``) now holds the key `tokens` are bound to — another
    /// process signed in again with a new key after this provider read its own — or cannot answer right now.
    public func storedCredentialsMayBeUsable(_ tokens: TokenSet) async -> Bool {
        guard let source = configuration.dpopKeySource, let bound = tokens.dpopKeyThumbprint else { return false }
        let current: DPoPSigner?
        do {
            current = try await source.store.key(profile: source.profile)
        } catch {
            return true  // the key store cannot answer now (locked, unreadable): nothing is ended on a guess
        }
        guard let current else { return false }
        return ByteExact.equals(current.thumbprint, bound) && !ByteExact.equals(bound, dpopThumbprint ?? "")
    }

    /// Refuses stored tokens bound to another DPoP key than this provider's, or none; and, with DPoP on, Bearer
    /// tokens (issued before DPoP was turned on: they would be refused as not sender-constrained).
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/dpopKeyMismatch``.
    public func checkStoredCredentials(_ tokens: TokenSet) throws {
        try DPoPAuthenticator.check(tokens, boundTo: dpopThumbprint)
        if configuration.usesDPoP, tokens.tokenType.lowercased() != "dpop" {
            throw AuthError(.dpopKeyMismatch, "the stored tokens are not DPoP-bound and DPoP is on; sign in again")
        }
    }

    /// Revokes the refresh token, then the access token (RFC 7009).
    ///
    /// - Throws: ``AuthError`` when the provider has no revocation endpoint or did not confirm.
    public func signOut(_ tokens: TokenSet) async throws {
        guard let endpoint = metadata.revocationEndpoint else {
            throw AuthError(
                .configuration, "the provider has no revocation endpoint; the tokens stay valid until they expire")
        }
        var revoke: [(String, String)] = []
        if let refresh = tokens.refreshToken { revoke.append((refresh, "refresh_token")) }
        revoke.append((tokens.accessToken, "access_token"))
        // Both are tried whatever the first answer (REV-03); the first failure is reported after.
        var failure: (any Error)?
        for (token, hint) in revoke {
            do {
                let response = try await postForm(
                    endpoint, [("token", token), ("token_type_hint", hint), ("client_id", configuration.clientID)])
                // `unsupported_token_type`: this provider cannot revoke that kind (an access token); not a failure.
                if response.status == 200 || ServerErrorResponse(response)?.error == "unsupported_token_type" {
                    continue
                }
                failure = failure ?? Self.failure(response, "the revocation was refused")
            } catch {
                failure = failure ?? error
            }
        }
        if let failure { throw failure }
    }
}
