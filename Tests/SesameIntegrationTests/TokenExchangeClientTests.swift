import Foundation
import Sesame
import SesameDevServer
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import SesameTesting
import Testing

/// The client's side of RFC 8693 token exchange against the dev server (catalog TX-01..TX-05).
@Suite struct TokenExchangeClientTests {
    static let api = "https://api.example"

    @Test("TX-01 TX-02: exchanged once and cached until near expiry, then exchanged again; refused targets are typed")
    func cachedExchange() async throws {
        let oidc = try OIDCTestServer {
            $0.exchangeAudiences = [Self.api]
            $0.accessTokenTTL = 300
        }
        defer { oidc.stop() }
        let auth = OIDCAuth(provider: try await oidc.provider(), store: InMemoryTokenStore())
        try await auth.signIn(with: FormUserAgent(harness: oidc))
        let first = try await auth.exchangedToken(for: .audience(Self.api))
        #expect(first.issuedTokenType == "urn:ietf:params:oauth:token-type:access_token" && !first.isDPoPBound)
        #expect(try JWT.unverified(first.accessToken).claims.audience == [Self.api])
        #expect(!String(describing: first).contains(first.accessToken))
        #expect(try await auth.exchangedToken(for: .audience(Self.api)) == first)
        #expect(try oidc.browser.get("/_dev/counters").json?["tokenExchanges"] == 1)
        oidc.clock.advance(by: 280)
        let second = try await auth.exchangedToken(for: .audience(Self.api))
        let counters = try oidc.browser.get("/_dev/counters").json
        #expect(second != first && counters?["tokenExchanges"] == 2)
        do {
            _ = try await auth.exchangedToken(for: .audience("https://elsewhere.example"))
            Issue.record("an exchange for a target outside the policy succeeded")
        } catch let error as AuthError {
            #expect(error.code == .exchangeRejected && error.serverResponse?.error == "invalid_target")
        }
        _ = await auth.signOut()
        do {
            _ = try await auth.exchangedToken(for: .audience(Self.api))
            Issue.record("an exchanged token outlived the sign-out")
        } catch let error as AuthError {
            #expect(error.code == .notSignedIn)
        }
    }

    @Test(
        "TX-05: the exchanged token goes to its API's origin only, never the session's token; DPoP-bound with a proof")
    func onlyToItsAPI() async throws {
        let api = try RecordingServer { _ in HTTPServerResponse(status: 200) }
        defer { api.stop() }
        let target = ExchangeTarget.resource(api.base.appendingPathComponent("v1"))
        let oidc = try OIDCTestServer { $0.exchangeAudiences = [api.base.appendingPathComponent("v1").absoluteString] }
        defer { oidc.stop() }
        for dpop in [false, true] {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-tx-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: folder) }
            let metadata = try await OIDCProviderMetadata.discover(issuer: oidc.issuer)
            let auth = try await OIDCAuth.restore(
                metadata: metadata, clientID: "sesame-cli", redirectURI: OIDCTestServer.redirect,
                scopes: ["openid", "offline_access"], store: InMemoryTokenStore(),
                dpopKeys: dpop ? try FileDPoPKeyStore(directory: folder) : nil, timeSource: oidc.clock)
            try await auth.signIn(with: FormUserAgent(harness: oidc))
            let session = try #require(try await auth.session.currentTokens)
            let client = try auth.client(exchangingFor: target, baseURL: api.base)
            #expect(try await client.send(.get("/v1/items")).status == 200)
            let sent = try #require(api.requests.last)
            let header = try #require(sent.headers["Authorization"])
            #expect(header.hasPrefix(dpop ? "DPoP " : "Bearer ") && !header.contains(session.accessToken))
            #expect((sent.headers["DPoP"] != nil) == dpop)
            let exchanged = try await auth.exchangedToken(for: target)
            #expect(header.hasSuffix(exchanged.accessToken) && exchanged.isDPoPBound == dpop)
            // Another origin gets nothing.
            let elsewhere = try RecordingServer { _ in HTTPServerResponse(status: 200) }
            defer { elsewhere.stop() }
            _ = try await client.send(
                SesameHTTP.Request(method: "GET", url: elsewhere.base.appendingPathComponent("x")))
            #expect(elsewhere.requests.first?.headers["Authorization"] == nil)
        }
        #expect(throws: AuthError.self) {
            _ = try OIDCAuth(
                provider: OIDCAuthProvider(
                    metadata: try OIDCProviderMetadata.scripted(),
                    configuration: OIDCAuthProvider.Configuration(clientID: "c", redirectURI: "app:/cb")),
                store: InMemoryTokenStore()
            ).client(
                exchangingFor: .resource(URL(string: "https://a.example/x")!),
                baseURL: URL(string: "https://b.example")!)
        }
    }

    @Test("Token exchange article: its snippet runs as written")
    func article() async throws {
        let server = try RecordingServer { _ in HTTPServerResponse(status: 200) }
        defer { server.stop() }
        let reportsAPI = server.base
        let oidc = try OIDCTestServer { $0.exchangeAudiences = [reportsAPI.absoluteString] }
        defer { oidc.stop() }
        let auth = OIDCAuth(provider: try await oidc.provider(), store: InMemoryTokenStore())
        try await auth.signIn(with: FormUserAgent(harness: oidc))

        let reports = try auth.client(exchangingFor: .audience(reportsAPI.absoluteString), baseURL: reportsAPI)
        let response = try await reports.send(.get("/v1/reports"))
        #expect(response.status == 200 && server.requests.first?.path == "/v1/reports")
    }

    @Test("the cache is per user and forgets a token its API rejected")
    func cacheOwnership() async throws {
        let rejections = LockedBox(1)
        let api = try RecordingServer { _ in
            var first = false
            rejections.mutate { count in
                first = count > 0
                count -= 1
            }
            var response = HTTPServerResponse(status: first ? 401 : 200)
            if first { response.headers.set("WWW-Authenticate", #"Bearer error="invalid_token""#) }
            return response
        }
        defer { api.stop() }
        let oidc = try OIDCTestServer { $0.exchangeAudiences = [api.base.absoluteString] }
        defer { oidc.stop() }
        let auth = OIDCAuth(provider: try await oidc.provider(), store: InMemoryTokenStore())
        try await auth.signIn(with: FormUserAgent(harness: oidc))
        let target = ExchangeTarget.audience(api.base.absoluteString)
        let alice = try await auth.exchangedToken(for: target)
        var bob = StepUpClientTests.CountingAgent(harness: oidc)
        bob.email = "bob@example.com"
        bob.password = "battery-staple"
        oidc.browser.clearCookies()
        try await auth.signIn(with: bob)
        let bobs = try await auth.exchangedToken(for: target)
        #expect(bobs != alice)
        #expect(try JWT.unverified(bobs.accessToken).claims.subject != JWT.unverified(alice.accessToken).claims.subject)
        // The API rejects the token once: it is forgotten, and the next call exchanges again.
        let client = try auth.client(exchangingFor: target, baseURL: api.base)
        #expect(try await client.send(.get("/x")).status == 401)
        #expect(try await client.send(.get("/x")).status == 200)
        #expect(try await auth.exchangedToken(for: target) != bobs)
    }

    @Test("TX-02: an answer without issued_token_type, or with N_A, is invalid_response")
    func strictAnswers() async throws {
        for body in [
            #"{"access_token":"t","token_type":"Bearer"}"#,
            "{\"access_token\":\"a\\u001b]0;PWNED\\u0007\",\"issued_token_type\":\"urn:ietf:params:oauth:token-type:access_token\",\"token_type\":\"Bearer\"}",
            #"{"access_token":"t","issued_token_type":"urn:ietf:params:oauth:token-type:id_token","token_type":"N_A"}"#,
            #"{"issued_token_type":"urn:ietf:params:oauth:token-type:access_token","token_type":"Bearer"}"#,
        ] {
            let transport = ScriptedTransport()
            transport.enqueue(.json(200, body))
            let provider = OIDCAuthProvider(
                metadata: try OIDCProviderMetadata.scripted(),
                configuration: OIDCAuthProvider.Configuration(clientID: "c", redirectURI: "app:/cb"),
                transport: transport)
            do {
                _ = try await provider.exchange(TokenSet(accessToken: "subject"), for: .audience(Self.api))
                Issue.record("accepted: \(body)")
            } catch let error as AuthError {
                #expect(error.code == .invalidResponse, "\(body)")
            }
            // With a DPoP key, a Bearer answer would drop the binding: refused.
            let dpopTransport = ScriptedTransport()
            dpopTransport.enqueue(
                .json(
                    200,
                    #"{"access_token":"t","issued_token_type":"urn:ietf:params:oauth:token-type:access_token","token_type":"Bearer"}"#
                ))
            var configuration = OIDCAuthProvider.Configuration(clientID: "c", redirectURI: "app:/cb")
            configuration.dpopKey = try JWK.generate(for: .es256)
            let bound = OIDCAuthProvider(
                metadata: try OIDCProviderMetadata.scripted(), configuration: configuration, transport: dpopTransport)
            await #expect(throws: AuthError.self) {
                _ = try await bound.exchange(TokenSet(accessToken: "subject"), for: .audience(Self.api))
            }
            let form = String(decoding: transport.requests.first?.body ?? Data(), as: UTF8.self)
            #expect(form.contains("subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_token"))
        }
    }

    @Test("an exchanged JWT's own exp is a schedule only within a year: exp 9999 is not kept until then")
    func farExpiry() async throws {
        let key = try JWK.generate(for: .es256)
        for (exp, expected) in [(253_402_300_799.0, nil), (1e12, nil)] as [(Double, Date?)] {
            let token = try JWT.sign(JWTClaims(["exp": .number(exp)]), key: key, algorithm: .es256)
            let transport = ScriptedTransport()
            transport.enqueue(
                .json(
                    200,
                    #"{"access_token":"\#(token)","issued_token_type":"urn:ietf:params:oauth:token-type:access_token","token_type":"Bearer"}"#
                ))
            let provider = OIDCAuthProvider(
                metadata: try OIDCProviderMetadata.scripted(),
                configuration: OIDCAuthProvider.Configuration(clientID: "c", redirectURI: "app:/cb"),
                transport: transport)
            let exchanged = try await provider.exchange(TokenSet(accessToken: "subject"), for: .audience(Self.api))
            #expect(exchanged.expiresAt == expected, "exp \(exp)")
        }
    }

    @Test("a resource target's description (in errors and diagnostics) keeps no user information or query")
    func targetDescription() throws {
        let url = try #require(URL(string: "https://svc:hunter2@api.example.com/v1?api_key=SECRETKEY"))
        let text = ExchangeTarget.resource(url).description
        #expect(!text.contains("hunter2") && !text.contains("SECRETKEY") && text.contains("api.example.com/v1"))
    }
}
