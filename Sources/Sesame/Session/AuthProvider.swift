/// What an ``AuthSession`` needs from a backend: refreshing and ending a session.
///
/// ``RESTAuthProvider`` implements it for the proprietary REST contract; the OIDC client implements it for
/// OpenID Connect providers.
public protocol AuthProvider: Sendable {
    /// Exchanges the refresh token for new credentials.
    ///
    /// - Throws: ``AuthError``: a definitive rejection carries a server response whose error is
    ///   ``OAuthErrorCode/invalidGrant`` (``AuthError/requiresReauthentication``); anything transient has
    ///   ``AuthError/isTransient``.
    func refresh(_ tokens: TokenSet) async throws -> TokenSet

    /// Tells the server the session is over (best effort: errors are ignored by ``AuthSession/signOut()``).
    func signOut(_ tokens: TokenSet) async throws
}
