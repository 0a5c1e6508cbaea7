public import Foundation
public import SesameJOSE

/// What shows the provider's sign-in page and brings back the redirect: `ASWebAuthenticationSession` in
/// `SesameApple` (`WebAuthenticationSessionAgent`), the system browser and a loopback listener for desktop and
/// command-line apps (``LoopbackUserAgent``, which `sesame login` uses), or a test's agent that posts the provider's
/// sign-in form.
public protocol AuthorizationUserAgent: Sendable {
    /// Opens `url` and returns the URL the provider redirected to (at `redirectURI`), or throws ``AuthError`` with
    /// ``AuthError/Code/cancelled`` when the user gave up.
    func authorize(url: URL, redirectURI: String, state: String) async throws -> URL

    /// Opens the provider's logout page (RP-initiated logout) and returns the URL it redirected back to.
    ///
    /// The URL carries the ID token as `id_token_hint`. The default calls ``authorize(url:redirectURI:state:)``; an
    /// agent that shows or logs the URL implements this to say "sign out" and to leave the ID token out of what it
    /// shows (``LoopbackUserAgent`` does).
    func endSession(url: URL, redirectURI: String, state: String) async throws -> URL
}

extension AuthorizationUserAgent {
    /// The default: the page is opened as a sign-in's is.
    public func endSession(url: URL, redirectURI: String, state: String) async throws -> URL {
        try await authorize(url: url, redirectURI: redirectURI, state: state)
    }
}

/// The app-facing facade over an OpenID Connect provider: configure once, sign in, get a valid access token,
/// read UserInfo, sign out (with RP-initiated logout if you want it), and call APIs.
///
/// ```swift
/// let auth = try await OIDCAuth.configure(
///     issuer: URL(string: "https://id.example.com")!, clientID: "my-app",
///     redirectURI: "com.example.app:/oauth", store: KeychainTokenStore.keychain(service: "com.example.app"))
/// try await auth.signIn(with: WebAuthenticationSessionAgent(anchor: { window }))
/// let token = try await auth.accessToken()
/// ```
///
/// Unlike most vendor SDKs, `offline_access` works: the refresh token is kept in the store, and an expired access
/// token means a refresh — one for every caller and every process sharing the store — not a new sign-in.
///
/// To start without the network (an app with a stored session, offline), keep ``OIDCAuthProvider/metadata``
/// after ``configure(issuer:clientID:redirectURI:scopes:store:profile:dpopKeys:dpopAlgorithms:nativeSSO:transport:timeSource:retry:)``
/// and use ``restore(metadata:clientID:redirectURI:scopes:store:profile:dpopKeys:dpopAlgorithms:nativeSSO:transport:timeSource:retry:)``
/// next time; configure again when the network answers to pick up the provider's changes. `sesame` does exactly
/// this: `login` configures, every later command restores.
public final class OIDCAuth: Sendable {
    /// The provider.
    public let provider: OIDCAuthProvider
    /// The session: state, events, tokens; give it to an ``AuthorizedClient`` or an ``AuthState``.
    public let session: AuthSession
    /// Step-ups: one at a time, shared by callers with the same requirements (``stepUp(_:with:)``).
    let stepUps = StepUpCoordinator()
    /// Exchanged tokens (RFC 8693) by target and scope, until sign-out.
    let exchanged = LockedValue<[ExchangeCacheKey: ExchangedToken]>([:])
    /// Where the vendor's apps share a sign-in (OpenID Connect Native SSO), if they do.
    ///
    /// With it, a sign-in whose scope has `device_sso` keeps the ID token and device secret there for the other
    /// apps; ``signInWithNativeSSO(scope:)`` signs in from what another app kept; sign-out revokes the shared
    /// sign-in of the same user, ending it in every app.
    public let nativeSSO: NativeSSOStore?

    /// A facade over `provider`, keeping credentials in `store` under `profile` (and a shared sign-in in
    /// `nativeSSO`); the session keeps the provider's time source.
    public init(
        provider: OIDCAuthProvider, store: any TokenStore, profile: String = "default",
        nativeSSO: NativeSSOStore? = nil, retry: RetryPolicy = .none
    ) {
        self.provider = provider
        self.nativeSSO = nativeSSO
        session = AuthSession(
            provider: provider, store: store, profile: profile, timeSource: provider.timeSource, retry: retry)
    }

    /// A facade over endpoints configured by hand (a provider without discovery, or plain OAuth 2.0).
    public convenience init(
        metadata: OIDCProviderMetadata, configuration: OIDCAuthProvider.Configuration, store: any TokenStore,
        profile: String = "default", transport: any HTTPTransport = SesameHTTP.platformTransport
    ) {
        self.init(
            provider: OIDCAuthProvider(metadata: metadata, configuration: configuration, transport: transport),
            store: store, profile: profile)
    }

    /// Discovers the provider and makes the facade.
    ///
    /// - Parameters:
    ///   - issuer: the issuer URL (https, or http on loopback).
    ///   - clientID: the registered public client.
    ///   - redirectURI: the registered redirect URI, exactly (``LoopbackUserAgent/redirectURI`` on a desktop). Leave it
    ///     out for flows that have no redirect — the device flow (``signInOnAnotherDevice(_:)``), a
    ///     refresh of a restored session — and ``signIn(with:options:)`` refuses to start without one.
    ///   - scopes: the scopes; `offline_access` asks for a refresh token.
    ///   - store: where the credentials are kept.
    ///   - profile: the key in the store (and in `dpopKeys`).
    ///   - dpopKeys: makes the tokens DPoP-bound (RFC 9449) to the profile's key in this store, made on first
    ///     use (`SesameApple`'s `KeychainDPoPKeyStore.keychain(service:)`: the Secure Enclave when there is one;
    ///     ``FileDPoPKeyStore`` on Linux).
    ///   - dpopAlgorithms: for a key made now, the first of these the provider lists (all of them when it lists
    ///     none; catalog DPOP-08). An existing key is kept whatever its algorithm.
    ///   - nativeSSO: where the vendor's apps share a sign-in (OpenID Connect Native SSO; ``nativeSSO``); the
    ///     `device_sso` scope is then added to `scopes`.
    ///   - transport: the HTTP transport.
    ///   - timeSource: the clock for ID tokens, proofs and expiry (default the system's).
    ///   - retry: how a refresh that failed transiently is tried again (``AuthSession``'s `retry:`).
    /// - Returns: the facade.
    /// - Throws: discovery's ``AuthError``s (``AuthError/Code/issuerMismatch``, ``AuthError/Code/insecureEndpoint``,
    ///   transport); ``AuthError/Code/configuration`` when the provider lists none of `dpopAlgorithms`; the key
    ///   store's (``AuthError/Code/storeUnavailable`` on a locked device: try again later — no new key is made then).
    public static func configure(
        issuer: URL, clientID: String, redirectURI: String = "",
        scopes: [String] = ["openid", "profile", "email", "offline_access"], store: any TokenStore,
        profile: String = "default", dpopKeys: (any DPoPKeyStore)? = nil, dpopAlgorithms: [JWSAlgorithm] = [.es256],
        nativeSSO: NativeSSOStore? = nil, transport: any HTTPTransport = SesameHTTP.platformTransport,
        timeSource: any TimeSource = SystemTimeSource(), retry: RetryPolicy = .none
    ) async throws -> OIDCAuth {
        let metadata = try await OIDCProviderMetadata.discover(issuer: issuer, transport: transport)
        return try await restore(
            metadata: metadata, clientID: clientID, redirectURI: redirectURI, scopes: scopes, store: store,
            profile: profile, dpopKeys: dpopKeys, dpopAlgorithms: dpopAlgorithms, nativeSSO: nativeSSO,
            transport: transport, timeSource: timeSource, retry: retry)
    }

    /// Makes the facade from metadata kept from an earlier
    /// ``configure(issuer:clientID:redirectURI:scopes:store:profile:dpopKeys:dpopAlgorithms:nativeSSO:transport:timeSource:retry:)``
    /// (``OIDCAuthProvider/metadata``, `Codable`), without the network: a stored session is usable offline.
    ///
    /// The metadata's endpoints are checked again (https, or http on loopback): a tampered copy cannot send tokens
    /// over plain http. The parameters are `configure`'s.
    ///
    /// - Returns: the facade.
    /// - Throws: ``AuthError`` — ``AuthError/Code/insecureEndpoint``, ``AuthError/Code/configuration``; the key
    ///   store's (``AuthError/Code/storeUnavailable``, ``AuthError/Code/storeCorrupt`` for a key file it will
    ///   not use).
    public static func restore(
        metadata: OIDCProviderMetadata, clientID: String, redirectURI: String = "",
        scopes: [String] = ["openid", "profile", "email", "offline_access"], store: any TokenStore,
        profile: String = "default", dpopKeys: (any DPoPKeyStore)? = nil, dpopAlgorithms: [JWSAlgorithm] = [.es256],
        nativeSSO: NativeSSOStore? = nil, transport: any HTTPTransport = SesameHTTP.platformTransport,
        timeSource: any TimeSource = SystemTimeSource(), retry: RetryPolicy = .none
    ) async throws -> OIDCAuth {
        try metadata.checkEndpoints()
        // Sharing a sign-in needs the provider to issue a device secret: device_sso is asked for.
        let scopes = nativeSSO != nil && !scopes.contains("device_sso") ? scopes + ["device_sso"] : scopes
        var configuration = OIDCAuthProvider.Configuration(clientID: clientID, redirectURI: redirectURI, scopes: scopes)
        if let dpopKeys {
            configuration.dpopSigner = try await dpopKeys.key(profile: profile)
            if configuration.dpopSigner == nil {
                let listed = metadata.dpopSigningAlgorithms
                guard let algorithm = dpopAlgorithms.first(where: { listed.isEmpty || listed.contains($0.name) })
                else {
                    throw AuthError(
                        .configuration,
                        "the provider accepts no DPoP algorithm of \(dpopAlgorithms.map(\.name).joined(separator: ", "))"
                            + " (it lists \(listed.map { PrintableText.sanitized($0, limit: 32) }.joined(separator: ", ")))"
                    )
                }
                configuration.dpopSigner = try await dpopKeys.createKey(profile: profile, algorithm: algorithm)
            }
            configuration.dpopKeySource = DPoPKeySource(store: dpopKeys, profile: profile)
        }
        let provider = OIDCAuthProvider(
            metadata: metadata, configuration: configuration, transport: transport, timeSource: timeSource)
        return OIDCAuth(provider: provider, store: store, profile: profile, nativeSSO: nativeSSO, retry: retry)
    }

    /// Signs in through `agent`.
    ///
    /// A fresh request (PKCE, state, nonce), the redirect checked, the code exchanged, the ID token verified, the
    /// credentials stored. The pending request lives only in this call.
    ///
    /// - Throws: ``AuthError`` (``AuthError/Code/cancelled`` when the user gave up), and the store's errors.
    @discardableResult
    public func signIn(with agent: some AuthorizationUserAgent, options: AuthorizationOptions = AuthorizationOptions())
        async throws -> TokenSet
    {
        let pending = try await provider.authorizationRequest(options)
        let redirect = try await agent.authorize(
            url: pending.url, redirectURI: pending.redirectURI, state: pending.state)
        return try await finishSignIn(
            try await provider.completeAuthorization(
                redirect: redirect, pending: pending, deviceSecret: await sharedDeviceSecret()))
    }

    /// Signs in with the device flow: `show` gets the code and where to enter it (display both, RFC 8628 §3.3), and
    /// then every polling step; returns when the user approved.
    ///
    /// - Throws: ``AuthError`` — ``AuthError/Code/cancelled`` (denied), ``AuthError/Code/deviceCodeExpired``.
    @discardableResult
    public func signInOnAnotherDevice(
        _ show: @Sendable (DeviceAuthorization, DeviceFlowProgress?) async -> Void
    ) async throws -> TokenSet {
        let authorization = try await provider.deviceAuthorization()
        await show(authorization, nil)
        for try await progress in provider.deviceTokens(for: authorization) {
            switch progress {
            case .waiting: await show(authorization, progress)
            case .signedIn(let tokens):
                return try await finishSignIn(tokens)
            }
        }
        throw AuthError(.invalidResponse, "the device flow ended without tokens")
    }

    /// A valid access token, refreshed first when it is about to expire (or now, with `forceRefresh`).
    ///
    /// - Throws: ``AuthError`` — ``AuthError/Code/notSignedIn``, ``AuthError/Code/sessionExpired`` (the refresh was
    ///   rejected: sign in again), transient errors (credentials kept: try later).
    public func accessToken(forceRefresh: Bool = false) async throws -> String {
        try await (forceRefresh ? session.forceRefresh() : session.validTokens()).accessToken
    }

    /// UserInfo's claims for the signed-in user (`sub` checked against the ID token, OIDC Core §5.3.2).
    ///
    /// Sent with the session's credentials in the provider's scheme (DPoP when bound); an access token the
    /// endpoint rejects is refreshed and the request retried once, a nonce demand retried apart.
    ///
    /// - Throws: ``AuthError`` — ``AuthError/Code/userInfoRejected`` (reason `subject_mismatch`),
    ///   ``AuthError/Code/notSignedIn``, ``AuthError/Code/sessionExpired``, ``AuthError/Code/unauthorized``,
    ///   transient errors.
    public func userInfo() async throws -> JOSEObject {
        try await provider.userInfo(from: session)
    }

    /// UserInfo's claims decoded as your type, after the same checks as ``userInfo()``.
    ///
    /// ```swift
    /// struct Profile: Decodable { let sub: String; let email: String?; let name: String? }
    /// let profile = try await auth.userInfo(as: Profile.self)
    /// ```
    ///
    /// - Throws: as ``userInfo()``, and ``AuthError/Code/decoding`` when the claims are not a `T`.
    public func userInfo<T: Decodable>(as type: T.Type, decoder: JSONDecoder = JSONDecoder()) async throws -> T {
        let claims = try await userInfo()
        do {
            return try decoder.decode(T.self, from: Data(JOSEValue.object(claims).jsonBytes))
        } catch {
            throw AuthError(.decoding, "the UserInfo claims are not a \(T.self)")
        }
    }

    /// Signs out: the tokens are revoked at the provider (reported in the result) and deleted here.
    ///
    /// With an `endSession` agent, the provider's logout page is opened first (RP-initiated logout) to end the browser
    /// session too; its outcome does not stop the local sign-out. A ``LoopbackUserAgent`` serves one sign-in or one
    /// sign-out — make a new one for this — and is its own post-logout redirect URI unless you give another (the
    /// provider sends the browser back to it, so the call returns at once).
    public func signOut(endSession agent: (any AuthorizationUserAgent)? = nil, postLogoutRedirectURI: String? = nil)
        async -> AuthSession.SignOutResult
    {
        if let agent, let tokens = try? await session.currentTokens {
            let state = PendingAuthorization.randomSecret()
            // The post-logout URI only when given (it must be registered for logout, which the sign-in one may not
            // be), or the loopback agent's own: a loopback redirect matches on any port (RFC 8252 §7.3).
            let postLogoutRedirectURI = postLogoutRedirectURI ?? (agent as? LoopbackUserAgent)?.redirectURI
            if let url = provider.endSessionURL(for: tokens, postLogoutRedirectURI: postLogoutRedirectURI, state: state)
            {
                _ = try? await agent.endSession(
                    url: url, redirectURI: postLogoutRedirectURI ?? provider.configuration.redirectURI, state: state)
            }
        }
        exchanged.withLock { $0 = [:] }
        await endSharedSignIn(for: try? await session.currentTokens)
        return await session.signOut(revoke: true)
    }

    /// A client for an API that takes these credentials: `baseURL`'s origin and `additionalOrigins` only, over the
    /// provider's transport.
    ///
    /// With a DPoP key (``OIDCAuthProvider/Configuration/usesDPoP``) the client proves it on every request. With
    /// `agent`, a resource's step-up challenge (RFC 9470) is met by ``stepUp(_:with:)`` through it and the call
    /// retried once; without, it is thrown as ``AuthError/Code/stepUpRequired``.
    public func client(
        for baseURL: URL, additionalOrigins: [URL] = [], stepUpWith agent: (any AuthorizationUserAgent)? = nil
    ) -> AuthorizedClient {
        var handler: AuthorizedClient.StepUpHandler?
        if let agent {
            handler = { [self] challenge in _ = try await self.stepUp(challenge, with: agent) }
        }
        // The provider's transport: whatever the app gave `configure` (pinning, a proxy) carries its API calls too.
        return AuthorizedClient(
            session: session, baseURL: baseURL, additionalOrigins: additionalOrigins, transport: provider.transport,
            stepUp: handler)
    }

}

/// The facade's earlier name.
@available(*, deprecated, renamed: "OIDCAuth")
public typealias OIDCSignIn = OIDCAuth
