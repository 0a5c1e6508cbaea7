import Foundation
import Sesame
import SesameDevServer
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

/// The client's DPoP against the dev server: proofs on token requests, DPoP tokens, resource requests through
/// `DPoPAuthenticator`, nonces, and key binding.
@Suite struct DPoPClientTests {
    static func provider(_ oidc: OIDCTestServer, key: JWK) async throws -> OIDCAuthProvider {
        let metadata = try await OIDCProviderMetadata.discover(issuer: oidc.issuer)
        var configuration = OIDCAuthProvider.Configuration(
            clientID: "sesame-cli", redirectURI: "http://127.0.0.1:5555/callback",
            scopes: ["openid", "email", "offline_access"])
        configuration.dpopKey = key
        return OIDCAuthProvider(metadata: metadata, configuration: configuration, timeSource: oidc.clock)
    }

    @Test(
        "BCP-17 DPOP-03 DPOP-06 DPOP-07 DPOP-09: sign-in, UserInfo, refresh and an AuthorizedClient call, all DPoP-bound",
        arguments: [false, true])
    func roundTrip(nonces: Bool) async throws {
        let oidc = try OIDCTestServer { $0.dpopNonce = nonces }
        defer { oidc.stop() }
        let key = try JWK.generate(for: .es256)
        let provider = try await Self.provider(oidc, key: key)
        let signIn = OIDCAuth(provider: provider, store: InMemoryTokenStore())
        let tokens = try await signIn.signIn(with: FormUserAgent(harness: oidc))
        #expect(tokens.tokenType == "DPoP")
        #expect(try JWT.unverifiedClaims(of: tokens.accessToken)["cnf"]?["jkt"] == .string(key.thumbprint))
        #expect(try await signIn.userInfo()["email"] == "alice@example.com")
        let dpop = DPoPAuthenticator(key: key, nonces: provider.dpopNonces, timeSource: oidc.clock)
        let api = signIn.client(for: oidc.issuer)
        let response = try await api.send(.get("/userinfo", authorization: .dpop(dpop)))
        #expect(response.status == 200)
        let refreshed = try await signIn.session.forceRefresh()
        #expect(refreshed.tokenType == "DPoP" && refreshed.accessToken != tokens.accessToken)
        #expect(try await api.send(.get("/userinfo", authorization: .dpop(dpop))).status == 200)
        // The facade's client proves the key for session-authorized endpoints (the default), and so does a plain
        // client: the session's provider supplies the scheme. Asked for Bearer, the bound token is never sent.
        #expect(try await api.send(.get("/userinfo")).status == 200)
        let plain = AuthorizedClient(session: signIn.session, baseURL: oidc.issuer)
        #expect(try await plain.send(.get("/userinfo")).status == 200)
        await #expect(throws: AuthError.self) { _ = try await plain.send(.get("/userinfo", authorization: .bearer)) }
    }

    @Test(
        "a refresh with another key is refused (the session ends); a Bearer session is never sent as DPoP or the reverse"
    )
    func keyBinding() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let key = try JWK.generate(for: .es256)
        let provider = try await Self.provider(oidc, key: key)
        let tokens = try await oidc.signIn(provider)
        let thief = try await Self.provider(oidc, key: try JWK.generate(for: .es256))
        // A thief has the refresh token, not our record of the key: the provider itself must refuse.
        var stolen = tokens
        stolen.dpopKeyThumbprint = nil
        do {
            _ = try await thief.refresh(stolen)
            Issue.record("a refresh token was used with another key")
        } catch let error as AuthError {
            #expect(error.code == .refreshRejected)
        }
        let bearerProvider = try await oidc.provider()
        let bearer = try await oidc.signIn(bearerProvider)
        let dpop = DPoPAuthenticator(key: key)
        await #expect(throws: AuthError.self) {
            _ = try await dpop.authenticate(
                SesameHTTP.Request(method: "GET", url: oidc.issuer), context: AuthenticationContext(tokens: bearer))
        }
    }

    @Test(
        "DPOP-06: a deleted or replaced key is found before anything is sent; the session ends (dpop_key_mismatch), never a Bearer request"
    )
    func lostOrReplacedKey() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let key = try JWK.generate(for: .es256)
        let store = InMemoryTokenStore()
        let signIn = OIDCAuth(provider: try await Self.provider(oidc, key: key), store: store)
        let tokens = try await signIn.signIn(with: FormUserAgent(harness: oidc))
        #expect(tokens.dpopKeyThumbprint == key.thumbprint)
        let metadata = try await OIDCProviderMetadata.discover(issuer: oidc.issuer)
        for replacement in [try JWK.generate(for: .es256), nil] {
            try await store.save(tokens, profile: "default")  // what the app finds at its next launch
            let transport = ScriptedTransport()  // records every request; there must be none
            var configuration = OIDCAuthProvider.Configuration(
                clientID: "sesame-cli", redirectURI: "http://127.0.0.1:5555/callback")
            configuration.dpopKey = replacement
            let provider = OIDCAuthProvider(
                metadata: metadata, configuration: configuration, transport: transport, timeSource: oidc.clock)
            let session = AuthSession(provider: provider, store: store, timeSource: oidc.clock)
            let events = session.events()
            let api = AuthorizedClient(
                session: session, baseURL: oidc.issuer, transport: transport,
                dpop: provider.dpopAuthenticator())
            let what = replacement == nil ? "no key" : "another key"
            do {
                _ = try await api.send(.get("/userinfo"))
                Issue.record("a request went out with \(what)")
            } catch let error as AuthError {
                #expect(error.code == .dpopKeyMismatch && error.requiresReauthentication, "\(what): \(error)")
            }
            await #expect(throws: AuthError.self) { _ = try await session.forceRefresh() }
            // Only revocation went out (best effort: the grant must not outlive its key); nothing carried a token
            // as a credential.
            #expect(!transport.requests.isEmpty, "\(what): the grant was revoked")
            for request in transport.requests {
                #expect(request.url == metadata.revocationEndpoint, "\(what): \(request.url)")
                #expect(request.headers["Authorization"] == nil && request.headers["DPoP"] == nil)
            }
            #expect(try await store.load(profile: "default") == nil, "unusable credentials are gone")
            var iterator = events.makeAsyncIterator()
            #expect(await iterator.next() == .signedOut(.dpopKeyLost))
        }
        // The same tokens with the right key still work (the provider never saw the attempts).
        try await store.save(tokens, profile: "default")
        let again = OIDCAuth(provider: try await Self.provider(oidc, key: key), store: store)
        #expect(try await again.client(for: oidc.issuer).send(.get("/userinfo")).status == 200)
        // DPoP turned on for a user signed in with Bearer: the same, sign in again.
        let bearer = try await oidc.signIn(try await oidc.provider())
        try await store.save(bearer, profile: "default")
        let upgraded = OIDCAuth(provider: try await Self.provider(oidc, key: key), store: store)
        await #expect(throws: AuthError.self) { _ = try await upgraded.accessToken() }
        #expect(try await store.load(profile: "default") == nil)
    }

    @Test("DPOP-04 DPOP-05: a nonce rotating mid-session is followed at the resource and at the token endpoint")
    func nonceRotation() async throws {
        let oidc = try OIDCTestServer {
            $0.dpopNonce = true
            $0.accessTokenTTL = 3600
        }
        defer { oidc.stop() }
        let provider = try await Self.provider(oidc, key: try JWK.generate(for: .es256))
        let signIn = OIDCAuth(provider: provider, store: InMemoryTokenStore())
        try await signIn.signIn(with: FormUserAgent(harness: oidc))
        let api = signIn.client(for: oidc.issuer)
        #expect(try await api.send(.get("/userinfo")).status == 200)
        let first = provider.dpopNonces.nonce(for: oidc.issuer)
        oidc.clock.advance(by: 700)  // two nonce windows: the remembered nonce is refused now
        #expect(try await api.send(.get("/userinfo")).status == 200, "one retry with the new nonce")
        let second = provider.dpopNonces.nonce(for: oidc.issuer)
        #expect(second != nil && second != first)
        oidc.clock.advance(by: 700)
        #expect(try await signIn.session.forceRefresh().tokenType == "DPoP", "the token endpoint's challenge too")
        #expect(provider.dpopNonces.nonce(for: oidc.issuer) != second)
        #expect(try await api.send(.get("/userinfo")).status == 200)
    }

    @Test(
        "DPOP-05: a resource server's use_dpop_nonce is answered once with its nonce, then remembered for that origin")
    func resourceNonce() async throws {
        let oidc = try OIDCTestServer { $0.dpopNonce = true }
        defer { oidc.stop() }
        let key = try JWK.generate(for: .es256)
        let provider = try await Self.provider(oidc, key: key)
        let tokens = try await oidc.signIn(provider)
        let nonces = DPoPNonces()  // this client has never talked to the resource server
        let dpop = DPoPAuthenticator(key: key, nonces: nonces, timeSource: oidc.clock)
        let request = SesameHTTP.Request(method: "GET", url: oidc.issuer.appendingPathComponent("userinfo"))
        let first = try await SesameHTTP.platformTransport.send(
            try await dpop.authenticate(request, context: AuthenticationContext(tokens: tokens)))
        guard case .retry(let nonce) = dpop.classify(first, for: request) else {
            Issue.record("no nonce retry for \(first.status)")
            return
        }
        let second = try await SesameHTTP.platformTransport.send(
            try await dpop.authenticate(request, context: AuthenticationContext(tokens: tokens, nonce: nonce)))
        #expect(second.status == 200)
        #expect(nonces.nonce(for: request.url) != nil)
    }
}

@Suite struct DPoPConcurrencyTests {
    @Test(
        "1,000 concurrent DPoP requests across an expiry, with nonces: one refresh, every request succeeds",
        .timeLimit(.minutes(2)))
    func thousandAcrossExpiry() async throws {
        let oidc = try OIDCTestServer {
            $0.dpopNonce = true
            $0.accessTokenTTL = 120
        }
        defer { oidc.stop() }
        let key = try JWK.generate(for: .es256)
        let provider = try await DPoPClientTests.provider(oidc, key: key)
        let signIn = OIDCAuth(provider: provider, store: InMemoryTokenStore())
        try await signIn.signIn(with: FormUserAgent(harness: oidc))
        let api = signIn.client(for: oidc.issuer)
        oidc.clock.advance(by: 100)  // inside the leeway: the first request refreshes, for everyone
        let before = try await oidc.counters()["refreshes"]?.doubleValue ?? 0
        // Under a sanitizer 250 (still far more than the pools' threads): 1,000 DPoP-signed calls, each verified by the
        // server, outlast the transport's timeout at ThreadSanitizer's speed; the race is the same.
        let count = underSanitizer ? 250 : 1000
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<count { group.addTask { try await api.send(.get("/userinfo")).status } }
            var all: [Int] = []
            for try await status in group { all.append(status) }
            return all
        }
        #expect(
            statuses.count == count && statuses.allSatisfy { $0 == 200 },
            "\(Dictionary(grouping: statuses) { $0 }.mapValues(\.count))")
        let after = try await oidc.counters()["refreshes"]?.doubleValue ?? 0
        #expect(after - before == 1)
    }
}

@Suite struct DPoPClientRuleTests {
    @Test("DPOP-07: with a DPoP key, a Bearer answer is refused (no silent downgrade); DPOP-10: dpop_jkt is sent")
    func strictTokenType() async throws {
        let metadata = try OIDCProviderMetadata.scripted()
        let transport = ScriptedTransport()
        let key = try JWK.generate(for: .es256)
        var configuration = OIDCAuthProvider.Configuration(
            clientID: "c", redirectURI: "https://app.example/cb", scopes: ["offline_access"])
        configuration.dpopKey = key
        let provider = OIDCAuthProvider(metadata: metadata, configuration: configuration, transport: transport)
        transport.enqueue(.json(200, #"{"access_token":"a","token_type":"Bearer","refresh_token":"r2"}"#))
        await #expect(throws: AuthError.self) {
            _ = try await provider.refresh(TokenSet(accessToken: "old", tokenType: "DPoP", refreshToken: "r1"))
        }
        #expect(transport.requests.first?.headers["DPoP"] != nil, "the refresh carried a proof")
        let pending = try await provider.authorizationRequest()
        let items = URLComponents(url: pending.url, resolvingAgainstBaseURL: false)?.queryItems ?? []
        #expect(items.contains { $0.name == "dpop_jkt" && $0.value == key.thumbprint })
    }

    @Test("UserInfo without a DPoP key never sends DPoP-bound tokens as Bearer")
    func userInfoNeverBearer() async throws {
        var metadata = try OIDCProviderMetadata.scripted()
        metadata.userInfoEndpoint = URL(string: "https://as.example/userinfo")
        let transport = ScriptedTransport()
        let provider = OIDCAuthProvider(
            metadata: metadata, configuration: .init(clientID: "c", redirectURI: "https://app.example/cb"),
            transport: transport)
        for tokens in [
            TokenSet(accessToken: "a", tokenType: "DPoP"), TokenSet(accessToken: "a", dpopKeyThumbprint: "jkt"),
        ] {
            await #expect(throws: AuthError.self) { _ = try await provider.userInfo(for: tokens) }
        }
        #expect(transport.requests.isEmpty)
    }

    @Test("a DPoP-Nonce that is not NQCHAR (control characters, a quote, over 1 KiB) is never echoed nor retried")
    func hostileNonces() async throws {
        for nonce in ["a\u{1}b", "a\"b", String(repeating: "n", count: 2000)] {
            let fixture = try FAPI2DPoPClientTests.Fixture()
            _ = try await fixture.signIn()
            fixture.transport.enqueue(
                .json(401, "{}", headers: ["WWW-Authenticate": #"DPoP error="use_dpop_nonce""#, "DPoP-Nonce": nonce]),
                .json(200, "{}"))
            let response = try await fixture.api.send(SesameHTTP.Request(method: "GET", url: fixture.resource))
            #expect(response.status == 401 && fixture.transport.requests.count == 1)
            #expect(fixture.provider.dpopNonces.nonce(for: fixture.resource) == nil)
        }
    }

    @Test("DPOP-08: a key whose algorithm the provider does not list is refused before anything is sent")
    func advertisedAlgorithms() async throws {
        var metadata = try OIDCProviderMetadata.scripted()
        metadata.dpopSigningAlgorithms = ["RS256"]
        var configuration = OIDCAuthProvider.Configuration(clientID: "c", redirectURI: "https://app.example/cb")
        configuration.dpopKey = try JWK.generate(for: .es256)
        let provider = OIDCAuthProvider(
            metadata: metadata, configuration: configuration, transport: ScriptedTransport())
        await #expect(throws: AuthError.self) { _ = try await provider.authorizationRequest() }
    }
}
