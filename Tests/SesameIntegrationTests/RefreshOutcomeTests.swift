import Foundation
import Sesame
import SesameJOSE
import SesameTesting
import Testing

/// How a refused refresh is classified (DESIGN §3): definitive ends the session, transient keeps it; and how a
/// token response's `expires_in` becomes an expiry.
@Suite struct RefreshOutcomeTests {
    static func provider(_ transport: ScriptedTransport) throws -> OIDCAuthProvider {
        OIDCAuthProvider(
            metadata: try OIDCProviderMetadata.scripted(),
            configuration: .init(clientID: "c", redirectURI: "https://app.example/cb", scopes: ["offline_access"]),
            transport: transport)
    }

    static let stored = TokenSet(accessToken: "a-0", refreshToken: "r-0")

    /// A session signed in with ``stored`` over a scripted provider, and its store.
    static func signedIn() async throws -> (ScriptedTransport, InMemoryTokenStore, AuthSession) {
        let transport = ScriptedTransport()
        let store = InMemoryTokenStore()
        let session = AuthSession(provider: try provider(transport), store: store)
        try await session.signIn(with: stored)
        return (transport, store, session)
    }

    @Test(
        "HTTP-04: a 400/401 with an OAuth error body is definitive whatever the code; use_dpop_nonce is not",
        arguments: [
            (400, #"{"error":"invalid_grant"}"#, true),
            (400, #"{"error":"invalid_request","error_description":"unknown refresh token"}"#, true),
            (401, #"{"error":"invalid_client"}"#, true),
            (400, #"{"error":"unauthorized_client"}"#, true),
            (400, #"{"error":"made_up_by_the_provider"}"#, true),
            (400, #"{"error":"use_dpop_nonce"}"#, false),
            (400, #"{"error":"invalid_dpop_proof","error_description":"iat in the future"}"#, false),
            (400, #"{"error":"temporarily_unavailable"}"#, false),
            (400, #"{"error":"server_error"}"#, false),
            (400, #"{"timestamp":"2026-01-01","status":400,"error":"Bad Request","path":"/token"}"#, false),
            (400, #"{"error":""}"#, false),
            (400, #"{"error":"bad\"quote"}"#, false),
            (400, #"{"error":42}"#, false),
            (400, #"["invalid_grant"]"#, false),
            (403, #"{"error":"invalid_grant"}"#, false),
            (500, #"{"error":"invalid_grant"}"#, false),
            (503, #"{"error":"temporarily_unavailable"}"#, false),
            (408, "", false),
            (429, #"{"error":"slow_down"}"#, false),
            (400, "<html><body>Sign in to the hotel Wi-Fi</body></html>", false),
            (401, "", false),
        ])
    func classification(status: Int, body: String, definitive: Bool) async throws {
        let transport = ScriptedTransport()
        transport.enqueue(.json(status, body))
        do {
            _ = try await Self.provider(transport).refresh(Self.stored)
            Issue.record("a refused refresh succeeded")
        } catch let error as AuthError {
            #expect((error.code == .refreshRejected) == definitive, "\(status) \(body): \(error.code)")
            #expect(error.requiresReauthentication == definitive, "\(status) \(body)")
            #expect(error.isTransient == !definitive, "\(status) \(body)")
        }
    }

    @Test("HTTP-04: a dead refresh token answered invalid_request ends the session instead of leaving it stuck")
    func invalidRequestEndsTheSession() async throws {
        let (transport, store, session) = try await Self.signedIn()
        transport.enqueue(.json(400, #"{"error":"invalid_request","error_description":"Invalid refresh token"}"#))
        await #expect(throws: AuthError.self) { _ = try await session.forceRefresh() }
        #expect(await session.status == .signedOut(reason: .sessionExpired))
        #expect(try await store.load(profile: "default") == nil, "the dead credentials are deleted")
    }

    @Test("HTTP-04: a captive portal's page keeps the session and its credentials")
    func captivePortalKeepsTheSession() async throws {
        let (transport, store, session) = try await Self.signedIn()
        transport.enqueue(
            .response(
                SesameHTTP.Response(
                    status: 400, headers: ["Content-Type": "text/html"], body: Data("<html>log in</html>".utf8))))
        await expectAuthError(.transport, "the portal's page") { try await session.forceRefresh() }
        #expect(await session.status == .signedIn)
        #expect(try await store.load(profile: "default")?.refreshToken == "r-0")
    }

    @Test(
        "HTTP-05: expires_in ≤ 0 is expired now; a non-number or beyond a year is absent (the JWT's exp, else unknown)",
        arguments: [
            (#"-100"#, 0.0 as Double?),
            (#"0"#, 0),
            (#"-1e308"#, 0),
            (#"3600"#, 3600),
            (#"31536000"#, 31_536_000),
            (#"31536001"#, nil),
            (#"1e308"#, nil),
            (#"1000000000000000000000000000000"#, nil),
            (#""3600""#, nil),
            (#"null"#, nil),
            (#"true"#, nil),
        ])
    func expiresIn(json: String, seconds: Double?) async throws {
        let transport = ScriptedTransport()
        let provider = try Self.provider(transport)
        transport.enqueue(.json(200, #"{"access_token":"opaque","token_type":"Bearer","expires_in":\#(json)}"#))
        let tokens = try await provider.refresh(Self.stored)
        let receivedAt = try #require(tokens.receivedAt)
        #expect(tokens.expiresAt.map { $0.timeIntervalSince(receivedAt) } == seconds, "expires_in \(json)")
        if seconds == 0 { #expect(tokens.needsRefresh(at: receivedAt), "expired now means refresh before use") }
    }

    @Test("HTTP-05: a nonsense expires_in falls back to the JWT access token's own exp")
    func nonsenseExpiresInUsesTheJWTsExp() throws {
        let receivedAt = Date(timeIntervalSince1970: 1_700_000_000)
        let header = Base64URL.encode(Data(#"{"alg":"none"}"#.utf8))
        let claims = Base64URL.encode(Data(#"{"exp":1700000600}"#.utf8))
        let jwt = "\(header).\(claims).c2ln"
        for nonsense in [Double.infinity, .nan, 1e308, 2 * TokenSet.maximumLifetime] {
            let expiry = TokenSet.expiry(expiresIn: nonsense, accessToken: jwt, receivedAt: receivedAt)
            #expect(expiry == Date(timeIntervalSince1970: 1_700_000_600), "\(nonsense)")
        }
        #expect(TokenSet.expiry(expiresIn: nil, accessToken: "opaque", receivedAt: receivedAt) == nil)
    }
}

/// What an earlier security review found in the REST contract's expiry.
extension RefreshOutcomeTests {
    @Test(
        "Absurd expires_in values are an unknown expiry, never a trap",
        arguments: ["1e300", "9223372036854775807", "1.7976931348623157e308", "315360001"])
    func hostileExpiry(value: String) throws {
        let json = try JOSEValue.parse(Data(#"{"accessToken":"a","refreshToken":"r","expiresIn":\#(value)}"#.utf8))
        let tokens = try #require(RESTAuthProvider.parseAuthResponse(json, receivedAt: Date()))
        #expect(tokens.expiresAt == nil)
        _ = try JSONEncoder().encode(tokens)
    }
}
