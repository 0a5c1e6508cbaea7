public import Foundation
public import SesameJOSE

// UserInfo (its `sub` checked) and RP-initiated logout; the protocol steps before them are in OIDCAuthProvider.swift.
extension OIDCAuthProvider {
    /// UserInfo's claims, with `sub` checked against the ID token's (OIDC Core §5.3.2).
    ///
    /// - Throws: ``AuthError`` — ``AuthError/Code/userInfoRejected`` (reason `subject_mismatch`), server errors.
    public func userInfo(for tokens: TokenSet) async throws -> JOSEObject {
        try await userInfo(tokens.idToken, credentials: .fixed(tokens))
    }

    /// UserInfo with the session's tokens: refreshed and retried once when rejected, a nonce retry apart.
    package func userInfo(from session: AuthSession) async throws -> JOSEObject {
        try await userInfo(try await session.currentTokens?.idToken, credentials: .session(session))
    }

    private func userInfo(_ idToken: String?, credentials: AuthenticatedExchange.Credentials) async throws
        -> JOSEObject
    {
        guard let endpoint = metadata.userInfoEndpoint else {
            throw AuthError(.configuration, "the provider has no UserInfo endpoint")
        }
        let request = SesameHTTP.Request(method: "GET", url: endpoint, headers: ["Accept": "application/json"])
        // BearerAuthenticator refuses DPoP-bound tokens: they are never sent as Bearer.
        var exchange = AuthenticatedExchange(request, authenticator: credentialScheme, credentials: credentials)
        let response = try await exchange.run(on: transport)
        guard response.status == 200 else { throw Self.failure(response, "UserInfo refused the request") }
        guard let json = try? JOSEValue.parse(response.body), let object = json.objectValue else {
            throw AuthError(.invalidResponse, "the UserInfo response is not a JSON object")
        }
        // With an ID token (OpenID Connect), UserInfo must describe its subject; plain OAuth 2.0 has none to compare.
        guard let expected = idToken.flatMap({ try? JWT.unverifiedClaims(of: $0) })?.subject else {
            return object
        }
        guard let sub = object["sub"]?.stringValue, ByteExact.equals(sub, expected) else {
            var error = AuthError(.userInfoRejected, "UserInfo describes another subject than the ID token")
            error.reason = "subject_mismatch"
            throw error
        }
        return object
    }

    /// The RP-initiated logout URL (`id_token_hint`, a registered `post_logout_redirect_uri`, `state`), or nil
    /// when the provider has no end-session endpoint.
    public func endSessionURL(for tokens: TokenSet, postLogoutRedirectURI: String? = nil, state: String? = nil) -> URL?
    {
        guard let endpoint = metadata.endSessionEndpoint,
            var components = URLComponents(url: endpoint, resolvingAgainstBaseURL: false)
        else { return nil }
        var pairs: [(String, String)] = [("client_id", configuration.clientID)]
        if let idToken = tokens.idToken { pairs.append(("id_token_hint", idToken)) }
        if let postLogoutRedirectURI { pairs.append(("post_logout_redirect_uri", postLogoutRedirectURI)) }
        if let state { pairs.append(("state", state)) }
        let existing = components.percentEncodedQuery.map { $0 + "&" } ?? ""
        components.percentEncodedQuery = existing + Self.formEncode(pairs)
        return components.url
    }
}
