/// What an ``AuthSession`` needs from a backend: refreshing and ending a session.
///
/// ``RESTAuthProvider`` implements it for the proprietary REST contract; the OIDC client implements it for
/// OpenID Connect providers.
public protocol AuthProvider: Sendable {
    /// Exchanges the refresh token for new credentials.
    ///
    /// - Throws: ``AuthError``: ``AuthError/Code/refreshRejected`` when the server definitively rejected the
    ///   refresh token (the session then ends); ``AuthError/Code/noRefreshToken`` when there is none; anything
    ///   transient with ``AuthError/isTransient`` (credentials are kept); `CancellationError`.
    func refresh(_ tokens: TokenSet) async throws -> TokenSet

    /// Tells the server the session is over (``AuthSession/signOut(revoke:)`` reports whether it confirmed).
    ///
    /// - Throws: ``AuthError`` when the server did not confirm.
    func signOut(_ tokens: TokenSet) async throws

    /// Checks credentials read from the store before the session uses them, without the network.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/dpopKeyMismatch`` when they cannot be used by this provider
    ///   at all (bound to another DPoP key); the session then ends
    ///   (``AuthEvent/SignOutReason/dpopKeyLost``) and deletes them. Any other error is passed on and the
    ///   credentials are kept (the next call checks again).
    func checkStoredCredentials(_ tokens: TokenSet) throws

    /// Whether credentials that ``checkStoredCredentials(_:)`` refused as bound to another key may be usable after
    /// all: another process signed in again with a new key after this provider read its own. The session then
    /// reports ``AuthError/Code/storeUnavailable`` (try again with a fresh provider) instead of ending a session
    /// that is not lost.
    func storedCredentialsMayBeUsable(_ tokens: TokenSet) async -> Bool

    /// How this provider's tokens go on a request: ``AuthorizedClient``'s ``AuthorizedClient/Authorization/session``
    /// and UserInfo use it. Bearer unless the provider binds its tokens to a key (DPoP).
    var credentialScheme: any Authenticator { get }
    /// Whether ``refresh(_:)`` gets new credentials without a refresh token (the client credentials grant): the
    /// session then renews them before they expire, as it does refreshable ones. False by default.
    var renewsWithoutRefreshToken: Bool { get }
}

extension AuthProvider {
    /// Accepts every stored credential.
    public func checkStoredCredentials(_ tokens: TokenSet) throws {}

    /// False: a refusal stands.
    public func storedCredentialsMayBeUsable(_ tokens: TokenSet) async -> Bool { false }

    /// `Authorization: Bearer` (``BearerAuthenticator``).
    public var credentialScheme: any Authenticator { BearerAuthenticator() }
    /// False: without a refresh token, credentials are used until they expire.
    public var renewsWithoutRefreshToken: Bool { false }
}
