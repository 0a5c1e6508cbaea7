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
        "DPOP-03 DPOP-06 DPOP-07 DPOP-09: sign-in, UserInfo, refresh and an AuthorizedClient call, all DPoP-bound",
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
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<1000 { group.addTask { try await api.send(.get("/userinfo")).status } }
            var all: [Int] = []
            for try await status in group { all.append(status) }
            return all
        }
        #expect(
            statuses.count == 1000 && statuses.allSatisfy { $0 == 200 },
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

/// The FAPI 2.0 client tests with DPoP (SECURITY-CATALOG §1.5) and what the suite checks in every proof, against
/// scripted provider and resource answers (the conformance suite's behaviours, byte for byte where it matters).
@Suite struct FAPI2DPoPClientTests {
    struct Fixture {
        let transport = ScriptedTransport()
        let key: JWK
        let provider: OIDCAuthProvider
        let session: AuthSession
        let api: AuthorizedClient
        let clock = ManualTimeSource(Date())
        let resource: URL

        init() throws {
            func url(_ text: String) throws -> URL { try #require(URL(string: text)) }
            resource = try url("https://rs.example/accounts?page=2")
            key = try JWK.generate(for: .es256)
            var metadata = try OIDCProviderMetadata.scripted()
            metadata.dpopSigningAlgorithms = ["ES256", "PS256"]
            var configuration = OIDCAuthProvider.Configuration(
                clientID: "c", redirectURI: "https://app.example/cb", scopes: ["accounts"])
            configuration.dpopKey = key
            provider = OIDCAuthProvider(
                metadata: metadata, configuration: configuration, transport: transport, timeSource: clock)
            session = AuthSession(provider: provider, store: InMemoryTokenStore(), timeSource: clock)
            api = AuthorizedClient(
                session: session, baseURL: try url("https://rs.example"), transport: transport,
                dpop: DPoPAuthenticator(key: key, nonces: provider.dpopNonces, timeSource: clock))
        }

        func signIn(_ access: String = "at1") async throws -> TokenSet {
            let tokens = TokenSet(
                accessToken: access, tokenType: "DPoP", refreshToken: "rt1", receivedAt: clock.now,
                dpopKeyThumbprint: key.thumbprint)
            try await session.signIn(with: tokens)
            return tokens
        }

        /// The claims of the proof a request carried (its signature checked with the embedded key).
        func proof(_ request: SesameHTTP.Request) throws -> JOSEObject {
            let proof = try #require(request.headers["DPoP"])
            var verifier = DPoPProofVerifier()
            verifier.maximumAge = 300
            _ = try verifier.verify(proof, method: request.method, url: request.url, now: clock.now)
            return try JWT.unverifiedClaims(of: proof).values
        }
    }

    @Test(
        "RP-51 RP-53 RP-54 DPOP-02 DPOP-11: no nonce invented, token_type in any case, no expires_in, one proof per request"
    )
    func tokenResponses() async throws {
        let fixture = try Fixture()
        _ = try await fixture.signIn()
        fixture.transport.enqueue(.json(200, #"{"access_token":"at2","token_type":"dpOp","refresh_token":"rt2"}"#))
        let refreshed = try await fixture.session.forceRefresh()
        #expect(refreshed.tokenType == "dpOp" && refreshed.expiresAt == nil)  // RP-54: lifetime unknown, rely on 401
        #expect(refreshed.dpopKeyThumbprint == fixture.key.thumbprint)
        let request = try #require(fixture.transport.requests.last)
        let claims = try fixture.proof(request)
        #expect(claims["nonce"] == nil, "RP-51: no nonce when none was issued")
        #expect(claims["ath"] == nil, "token-endpoint proofs carry no ath")
        #expect(claims["htu"] == .string("https://as.example/token") && claims["htm"] == .string("POST"))
        #expect(request.headers.values("DPoP").count == 1)
    }

    @Test(
        "RP-52 DPOP-03 DPOP-04 DPOP-05 DPOP-09: a dPoP-cased nonce challenge is retried once with a new proof; htu without query; ath"
    )
    func resourceNonceChallenge() async throws {
        let fixture = try Fixture()
        let tokens = try await fixture.signIn()
        fixture.transport.enqueue(
            .json(
                401, #"{"error":"use_dpop_nonce"}"#,
                headers: [
                    "WWW-Authenticate": #"dPoP error="use_dpop_nonce", algs="ES256 PS256""#, "DPoP-Nonce": "rs-n1",
                ]),
            .json(200, "{}", headers: ["DPoP-Nonce": "rs-n2"]),
            .json(200, "{}"))
        let first = try await fixture.api.send(SesameHTTP.Request(method: "GET", url: fixture.resource))
        #expect(first.status == 200)
        let requests = fixture.transport.requests
        #expect(requests.count == 2, "one retry, no refresh")
        let proofs = try requests.map(fixture.proof)
        #expect(proofs[0]["nonce"] == nil && proofs[1]["nonce"] == .string("rs-n1"))
        #expect(proofs[0]["jti"] != proofs[1]["jti"], "a fresh proof for the retry")
        for (request, claims) in zip(requests, proofs) {
            #expect(request.headers["Authorization"] == "DPoP \(tokens.accessToken)")
            #expect(claims["htu"] == .string("https://rs.example/accounts") && claims["htm"] == .string("GET"))
            #expect(claims["ath"] == .string(DPoPProof.accessTokenHash(tokens.accessToken)))
        }
        // DPOP-04: the nonce of a 200 is the one used next.
        _ = try await fixture.api.send(SesameHTTP.Request(method: "GET", url: fixture.resource))
        #expect(try fixture.proof(fixture.transport.requests[2])["nonce"] == .string("rs-n2"))
    }

    @Test(
        "RP-68 HTTP-01: 401 invalid_token → one refresh and one retry; never a loop; a later 401 refreshes again with the rotated token"
    )
    func refreshOnInvalidToken() async throws {
        let fixture = try Fixture()
        _ = try await fixture.signIn()
        let invalid = SesameHTTP.Headers([
            "WWW-Authenticate": #"DPoP realm="conformancesuite", error="invalid_token", algs="ES256""#
        ])
        fixture.transport.enqueue(
            .json(401, "{}", headers: invalid),
            .json(200, #"{"access_token":"at2","token_type":"DPoP","refresh_token":"rt2","expires_in":300}"#),
            .json(401, "{}", headers: invalid))
        await #expect(throws: AuthError.self) {
            _ = try await fixture.api.send(SesameHTTP.Request(method: "GET", url: fixture.resource))
        }
        #expect(fixture.transport.requests.count == 3, "request, refresh, one retry: no loop")
        fixture.transport.enqueue(
            .json(401, "{}", headers: invalid),
            .json(200, #"{"access_token":"at3","token_type":"DPoP","expires_in":300}"#),
            .json(200, "{}"))
        #expect(try await fixture.api.send(SesameHTTP.Request(method: "GET", url: fixture.resource)).status == 200)
        let requests = fixture.transport.requests
        #expect(requests.count == 6)
        #expect(String(decoding: requests[4].body ?? Data(), as: UTF8.self).contains("refresh_token=rt2"))
        #expect(requests[5].headers["Authorization"] == "DPoP at3")
        let jtis = try requests.map { try fixture.proof($0)["jti"] }
        #expect(Set(jtis.compactMap { $0?.stringValue }).count == requests.count, "every proof has its own jti")
    }

    @Test("HTTP-07: a nonce demand and a rejected token in one exchange are both cured: separate budgets")
    func nonceAndRefreshBudgets() async throws {
        let fixture = try Fixture()
        _ = try await fixture.signIn()
        let nonceDemand = SesameHTTP.Headers([
            "WWW-Authenticate": #"DPoP error="use_dpop_nonce""#, "DPoP-Nonce": "rs-n1",
        ])
        let invalid = SesameHTTP.Headers(["WWW-Authenticate": #"DPoP error="invalid_token""#])
        // The nonce first, then the expired token.
        fixture.transport.enqueue(
            .json(401, "{}", headers: nonceDemand), .json(401, "{}", headers: invalid),
            .json(200, #"{"access_token":"at2","token_type":"DPoP","refresh_token":"rt2","expires_in":300}"#),
            .json(200, #"{"ok":true}"#))
        let first = try await fixture.api.send(SesameHTTP.Request(method: "GET", url: fixture.resource))
        #expect(first.status == 200, "the nonce retry did not use up the refresh retry")
        var requests = fixture.transport.requests
        #expect(requests.count == 4)
        #expect(requests[3].headers["Authorization"] == "DPoP at2")
        #expect(try fixture.proof(requests[3])["nonce"] == .string("rs-n1"), "the nonce outlives the refresh")
        // The expired token first, then a rotated nonce.
        let rotated = SesameHTTP.Headers(["WWW-Authenticate": #"DPoP error="use_dpop_nonce""#, "DPoP-Nonce": "rs-n2"])
        fixture.transport.enqueue(
            .json(401, "{}", headers: invalid),
            .json(200, #"{"access_token":"at3","token_type":"DPoP","refresh_token":"rt3","expires_in":300}"#),
            .json(401, "{}", headers: rotated), .json(200, #"{"ok":true}"#))
        let second = try await fixture.api.send(SesameHTTP.Request(method: "GET", url: fixture.resource))
        #expect(second.status == 200)
        requests = fixture.transport.requests
        #expect(requests.count == 8)
        #expect(try fixture.proof(requests[7])["nonce"] == .string("rs-n2"))
        // Each budget is still one: a second nonce demand after the nonce retry is the answer, not a loop.
        fixture.transport.enqueue(
            .json(401, "{}", headers: nonceDemand),
            .json(401, "{}", headers: ["WWW-Authenticate": #"DPoP error="use_dpop_nonce""#, "DPoP-Nonce": "rs-n3"]))
        await #expect(throws: AuthError.self) {
            _ = try await fixture.api.send(SesameHTTP.Request(method: "GET", url: fixture.resource))
        }
        #expect(fixture.transport.requests.count == 10)
    }

    @Test("The session's provider supplies the scheme: DPoP with no authenticator given; .bearer never downgrades")
    func providerSuppliesTheScheme() async throws {
        let fixture = try Fixture()
        _ = try await fixture.signIn()
        let api = AuthorizedClient(
            session: fixture.session, baseURL: try #require(URL(string: "https://rs.example")),
            transport: fixture.transport)
        fixture.transport.enqueue(.json(200, "{}"))
        #expect(try await api.send(.get("/accounts")).status == 200)
        let request = try #require(fixture.transport.requests.last)
        #expect(request.headers["Authorization"] == "DPoP at1")
        #expect(try fixture.proof(request)["htu"] == .string("https://rs.example/accounts"))
        do {
            _ = try await api.send(.get("/accounts", authorization: .bearer))
            Issue.record("DPoP-bound tokens went out as Bearer")
        } catch let error as AuthError {
            #expect(error.code == .dpopKeyMismatch)
        }
        #expect(fixture.transport.requests.count == 1, "nothing was sent as Bearer")
    }
}
