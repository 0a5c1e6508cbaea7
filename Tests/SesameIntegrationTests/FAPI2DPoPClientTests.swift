import Foundation
import Sesame
import SesameDevServer
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

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
        "RP-68 HTTP-01 BCP-16: 401 invalid_token → one refresh and one retry; never a loop; a later 401 refreshes again with the rotated token"
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

    @Test("Authorization.authenticator(for:) — what other HTTP stacks (the Alamofire interceptor) resolve it with")
    func authorizationResolvesPerSession() throws {
        let fixture = try Fixture()
        #expect(AuthorizedClient.Authorization.session.authenticator(for: fixture.session) is DPoPAuthenticator)
        #expect(AuthorizedClient.Authorization.bearer.authenticator(for: fixture.session) is BearerAuthenticator)
        #expect(AuthorizedClient.Authorization.none.authenticator(for: fixture.session) == nil)
        let rest = AuthSession(
            provider: RESTAuthProvider(baseURL: try #require(URL(string: "https://api.example"))),
            store: InMemoryTokenStore())
        #expect(AuthorizedClient.Authorization.session.authenticator(for: rest) is BearerAuthenticator)
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
