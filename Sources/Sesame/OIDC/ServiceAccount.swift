public import Foundation
public import SesameJOSE

/// The client credentials grant (RFC 6749 §4.4) as an ``AuthProvider``: a service's own access token, with no user,
/// obtained again — never refreshed — when it expires or an API refuses it.
///
/// The client authenticates as ``OIDCAuthProvider/Configuration/clientAuthentication`` says; with a DPoP key the
/// tokens are bound to it. A refresh token the provider sends anyway is kept but never used: the client can
/// authenticate again (catalog PKJ-03).
public struct ClientCredentialsProvider: AuthProvider {
    /// The provider's endpoints, the client's authentication, transport and DPoP key.
    public let provider: OIDCAuthProvider

    /// Client credentials from `provider`'s configuration (its scopes are asked for; none: the client's default).
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/configuration`` for a public client.
    public init(provider: OIDCAuthProvider) throws {
        guard provider.configuration.clientAuthentication.isConfidential else {
            throw AuthError(
                .configuration, "the client credentials grant needs client authentication (a key or a secret)")
        }
        self.provider = provider
    }

    /// A new access token for the client.
    ///
    /// - Throws: ``AuthError`` — ``AuthError/Code/authorizationFailed`` with the provider's OAuth error
    ///   (`invalid_client`: the key or secret is not accepted; `unauthorized_client`, `invalid_scope`) or its 403,
    ///   ``AuthError/Code/invalidResponse``, transport errors.
    public func token() async throws -> TokenSet {
        var pairs = [("grant_type", "client_credentials"), ("client_id", provider.configuration.clientID)]
        let scopes = provider.configuration.scopes
        if !scopes.isEmpty { pairs.append(("scope", scopes.joined(separator: " "))) }
        let response = try await provider.postWithProof(provider.metadata.tokenEndpoint, pairs)
        guard response.status == 200 else {
            if [400, 401].contains(response.status), let body = ServerErrorResponse(response) {
                throw AuthError(
                    .authorizationFailed, "the provider refused the client credentials",
                    statusCode: response.status, serverResponse: body)
            }
            // Some providers (Glewlwyd) refuse a client with a bare 403. Nothing is lost by taking it as a refusal:
            // a service account gets a new token by asking again, with no user involved.
            if response.status == 403 {
                throw AuthError(
                    .authorizationFailed, "the provider refused the client credentials (403)", statusCode: 403,
                    serverResponse: ServerErrorResponse(response))
            }
            throw OIDCAuthProvider.failure(response, "the client credentials grant failed")
        }
        SesameLog.log(
            .info, .oidc,
            "client credentials granted to \(public: provider.configuration.clientID) (\(public: provider.configuration.clientAuthentication.methodName))"
        )
        return try await provider.tokens(from: response, expecting: IDTokenValidator.Expectations(), previous: nil)
    }

    /// A new token by the grant again (the refresh token, if any, is not used).
    ///
    /// - Throws: ``AuthError/Code/refreshRejected`` when the provider refuses the client (the session ends; the
    ///   next ``ServiceAccount/accessToken(forceRefresh:)`` tries again), transient errors.
    public func refresh(_ tokens: TokenSet) async throws -> TokenSet {
        do {
            return try await token()
        } catch let error as AuthError where error.code == .authorizationFailed {
            throw AuthError(
                .refreshRejected, error.message, statusCode: error.statusCode, serverResponse: error.serverResponse)
        }
    }

    /// Revokes the access token (RFC 7009), authenticated as the client.
    ///
    /// - Throws: ``AuthError`` when the provider has no revocation endpoint or did not confirm.
    public func signOut(_ tokens: TokenSet) async throws {
        var access = tokens
        access.refreshToken = nil
        try await provider.signOut(access)
    }

    /// Refuses stored tokens bound to another DPoP key (as the provider does).
    public func checkStoredCredentials(_ tokens: TokenSet) throws { try provider.checkStoredCredentials(tokens) }

    /// DPoP with the provider's key when it has one; else Bearer.
    public var credentialScheme: any Authenticator { provider.credentialScheme }

    /// True: a new token comes from the grant itself, so the session renews it before it expires.
    public var renewsWithoutRefreshToken: Bool { true }
}

/// A service account: a CI job's or a server's own access to APIs with the client credentials grant, a
/// `private_key_jwt` key (or a secret where the provider offers nothing better), and everything an app's session
/// has — one token request for all concurrent callers, a new token on expiry or on an API's 401, DPoP.
///
/// ```swift
/// let keyFile = try Data(contentsOf: URL(fileURLWithPath: "/run/secrets/nightly-report.jwk"))  // a private JWK
/// let service = try await ServiceAccount.configure(
///     issuer: URL(string: "https://id.example.com")!, clientID: "nightly-report",
///     authentication: try .privateKeyJWT(key: try JWK(json: keyFile)), scopes: ["reports.read"])
/// let response = try await service.client(for: reportsAPI).send(.get("/v1/reports"))
/// ```
public final class ServiceAccount: Sendable {
    /// The grant.
    public let provider: ClientCredentialsProvider
    /// The session holding the current token; give it to an ``AuthorizedClient`` or an ``AuthState``.
    public let session: AuthSession
    /// The first token request in flight, shared by its concurrent callers.
    private let first = LockedValue<Task<TokenSet, any Error>?>(nil)

    /// A service account over `provider`, its token kept in `store` under `profile` (in memory by default: a new
    /// process asks for a new token; give a shared store to share one between processes); `retry` tries a renewal
    /// again when the provider answered 408, 429 or 503 (``AuthSession``'s `retry:`).
    public init(
        provider: ClientCredentialsProvider, store: any TokenStore = InMemoryTokenStore(), profile: String = "service",
        retry: RetryPolicy = .none
    ) {
        self.provider = provider
        session = AuthSession(
            provider: provider, store: store, profile: profile, timeSource: provider.provider.timeSource, retry: retry)
    }

    /// Discovers the provider and makes the service account.
    ///
    /// - Parameters:
    ///   - issuer: the issuer URL (https, or http on loopback).
    ///   - clientID: the registered confidential client.
    ///   - authentication: how it proves itself (``ClientAuthentication/privateKeyJWT(key:keyID:audience:)``…).
    ///   - scopes: the scopes to ask for (none: the client's default).
    ///   - store: where the token is kept.
    ///   - profile: the key in the store.
    ///   - dpopKey: binds the tokens to this key (DPoP, RFC 9449).
    ///   - transport: the HTTP transport.
    ///   - timeSource: the clock for assertions, proofs and expiry.
    /// - Returns: the service account.
    /// - Throws: discovery's ``AuthError``s; ``AuthError/Code/configuration`` for a public client.
    public static func configure(
        issuer: URL, clientID: String, authentication: ClientAuthentication, scopes: [String] = [],
        store: any TokenStore = InMemoryTokenStore(), profile: String = "service", dpopKey: JWK? = nil,
        transport: any HTTPTransport = SesameHTTP.platformTransport, timeSource: any TimeSource = SystemTimeSource()
    ) async throws -> ServiceAccount {
        let metadata = try await OIDCProviderMetadata.discover(issuer: issuer, transport: transport)
        var configuration = OIDCAuthProvider.Configuration(clientID: clientID, redirectURI: "", scopes: scopes)
        configuration.clientAuthentication = authentication
        configuration.dpopKey = dpopKey
        let provider = OIDCAuthProvider(
            metadata: metadata, configuration: configuration, transport: transport, timeSource: timeSource)
        return ServiceAccount(
            provider: try ClientCredentialsProvider(provider: provider), store: store, profile: profile)
    }

    /// A valid access token: the current one, or a new one when there is none, it is about to expire, or
    /// `forceRefresh`.
    ///
    /// - Throws: ``AuthError`` — ``AuthError/Code/authorizationFailed`` when the provider refuses the client's
    ///   credentials, transient errors, the store's errors.
    public func accessToken(forceRefresh: Bool = false) async throws -> String {
        do {
            return try await (forceRefresh ? session.forceRefresh() : session.validTokens()).accessToken
        } catch let error as AuthError where error.code == .notSignedIn || error.code == .sessionExpired {
            return try await firstToken().accessToken
        }
    }

    /// A client for an API that takes the service's tokens: `baseURL`'s origin and `additionalOrigins` only; an
    /// expired token or a 401 gets a new token (once for all concurrent callers) and one retry.
    ///
    /// Gets the first token if there is none yet.
    ///
    /// - Throws: as ``accessToken(forceRefresh:)``.
    public func client(for baseURL: URL, additionalOrigins: [URL] = []) async throws -> AuthorizedClient {
        _ = try await accessToken()
        return AuthorizedClient(
            session: session, baseURL: baseURL, additionalOrigins: additionalOrigins,
            transport: provider.provider.transport)
    }

    /// Revokes the current token at the provider and forgets it.
    public func signOut() async -> AuthSession.SignOutResult { await session.signOut(revoke: true) }

    /// The grant, once for every concurrent caller, its token stored in the session.
    private func firstToken() async throws -> TokenSet {
        let (task, started) = first.withLock { current -> (Task<TokenSet, any Error>, Bool) in
            if let current { return (current, false) }
            let provider = provider
            let session = session
            let task = Task {
                let tokens = try await provider.token()
                try await session.signIn(with: tokens)
                return tokens
            }
            current = task
            return (task, true)
        }
        defer { if started { first.withLock { $0 = nil } } }
        return try await task.value
    }
}
