import Foundation
import Sesame
import SesameDevServer
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import SesameTesting
import Testing

/// Service accounts from the SDK's side against the dev server: the client credentials grant with
/// `private_key_jwt` or a secret (catalog PKJ-01..PKJ-03).
@Suite struct ServiceAccountClientTests {
    static let secret = OIDCTestServer.serviceSecret

    /// A dev server with `nightly` (a key: `key`'s public half), `legacy` (Basic) and `legacy-post` (posted).
    static func server(key: JWK, configure: (inout DevServer.Configuration) -> Void = { _ in }) throws -> OIDCTestServer
    {
        let clients = try OIDCTestServer.serviceClients(key: key)
        return try OIDCTestServer { configuration in
            configuration.clients = clients
            configuration.accessTokenTTL = 300
            configure(&configuration)
        }
    }

    /// A service account that gets its token and renews it twice with the server in `mode`.
    ///
    /// Throws what the client throws. The refresh token a misbehaving server adds is never used.
    static func renewTwice(rpTest mode: RPTestMode) async throws {
        let key = try JWK.generate(for: .es256)
        let oidc = try Self.server(key: key) { $0.rpTest = mode }
        defer { oidc.stop() }
        let service = try await ServiceAccount.configure(
            issuer: oidc.issuer, clientID: "nightly", authentication: try .privateKeyJWT(key: key),
            timeSource: oidc.clock)
        _ = try await service.accessToken()
        for _ in 0..<2 {
            oidc.clock.advance(by: 290)
            _ = try await service.accessToken()
        }
        let counters = try oidc.browser.get("/_dev/counters").json
        #expect(counters?["clientCredentialsGrants"] == 3 && counters?["refreshes"] == 0)
        #expect(counters?["refreshFailures"] == 0)
    }

    @Test(
        "PKJ-01 PKJ-03: one token for 50 concurrent callers, a new one (new assertion) on expiry and on an API's 401; no refresh token"
    )
    func privateKeyJWT() async throws {
        let key = try JWK.generate(for: .es256)
        let oidc = try Self.server(key: key)
        defer { oidc.stop() }
        let service = try await ServiceAccount.configure(
            issuer: oidc.issuer, clientID: "nightly", authentication: try .privateKeyJWT(key: key),
            scopes: ["reports.read"], timeSource: oidc.clock)
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<50 { group.addTask { try await service.accessToken() } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(tokens.count == 1)
        let claims = try JWT.unverified(try #require(tokens.first)).claims
        #expect(claims.subject == "nightly" && claims["scope"] == "reports.read")
        #expect(try await service.session.currentTokens?.refreshToken == nil)
        #expect(try oidc.browser.get("/_dev/counters").json?["clientCredentialsGrants"] == 1)
        // Expiry: a new grant (a new assertion: the server refuses a replayed jti).
        oidc.clock.advance(by: 290)
        let renewed = try await service.accessToken()
        #expect(renewed != tokens.first)
        // An API that refuses the token once: a new one, and one retry.
        let refusals = LockedBox(1)
        let api = try RecordingServer { _ in
            if refusals.value > 0 {
                refusals.value -= 1
                var response = HTTPServerResponse(status: 401)
                response.headers.set("WWW-Authenticate", "Bearer error=\"invalid_token\"")
                return response
            }
            return HTTPServerResponse(status: 200)
        }
        defer { api.stop() }
        let client = try await service.client(for: api.base)
        #expect(try await client.send(.get("/v1/reports")).status == 200)
        #expect(try oidc.browser.get("/_dev/counters").json?["clientCredentialsGrants"] == 3)
        // The API sees the access token only: never the assertion or the key.
        for request in api.requests {
            #expect(request.headers["Authorization"]?.hasPrefix("Bearer ") == true)
            #expect(!String(decoding: request.body, as: UTF8.self).contains("client_assertion"))
        }
        #expect(!"\(ClientAuthentication.clientSecretBasic(Self.secret))".contains(Self.secret))
        var dumped = ""
        dump(ClientAuthentication.clientSecretPost(Self.secret), to: &dumped)
        #expect(!dumped.contains(Self.secret))
    }

    @Test(
        "RP-25: secrets (Basic and posted), an assertion for the token endpoint, a Secure Enclave-style key, DPoP-bound tokens"
    )
    func otherMethods() async throws {
        let enclave = EmulatedSecureEnclave()
        let (hardwareKey, _) = try enclave.createP256Key()
        let key = try JWK.generate(for: .es256)
        // The server knows both keys for nightly.
        let jwks = String(
            decoding: try JWKSet(keys: [key.publicKey(), hardwareKey.publicKey]).jsonValue.jsonBytes, as: UTF8.self)
        let oidc = try Self.server(key: key) { configuration in
            configuration.clients[0].tokenEndpointAuthentication = .privateKeyJWT(jwks: jwks)
        }
        defer { oidc.stop() }
        let methods: [(String, ClientAuthentication)] = [
            ("legacy", .clientSecretBasic(Self.secret)), ("legacy-post", .clientSecretPost(Self.secret)),
            ("nightly", try .privateKeyJWT(key: key, audience: .tokenEndpoint)),
            ("nightly", try .privateKeyJWT(signingKey: hardwareKey)),
        ]
        for (client, authentication) in methods {
            let service = try await ServiceAccount.configure(
                issuer: oidc.issuer, clientID: client, authentication: authentication, timeSource: oidc.clock)
            let token = try await service.accessToken()
            #expect(try JWT.unverified(token).claims.subject == client, "\(authentication)")
        }
        let dpopKey = try JWK.generate(for: .es256)
        let bound = try await ServiceAccount.configure(
            issuer: oidc.issuer, clientID: "nightly", authentication: try .privateKeyJWT(key: key), dpopKey: dpopKey,
            timeSource: oidc.clock)
        let token = try await bound.accessToken()
        #expect(try JWT.unverified(token).claims["cnf"]?["jkt"]?.stringValue == (try dpopKey.publicKey().thumbprint))
        #expect(try await bound.session.currentTokens?.tokenType == "DPoP")
    }

    @Test("refusals are typed: a wrong secret, an unregistered key, a public client; nothing is kept")
    func refusals() async throws {
        let key = try JWK.generate(for: .es256)
        let oidc = try Self.server(key: key)
        defer { oidc.stop() }
        for (client, authentication) in [
            ("legacy", ClientAuthentication.clientSecretBasic("guess")),
            ("nightly", try .privateKeyJWT(key: try JWK.generate(for: .es256))),
        ] {
            let service = try await ServiceAccount.configure(
                issuer: oidc.issuer, clientID: client, authentication: authentication, timeSource: oidc.clock)
            do {
                _ = try await service.accessToken()
                Issue.record("\(authentication) was accepted")
            } catch let error as AuthError {
                #expect(error.code == .authorizationFailed && error.serverResponse?.error == "invalid_client")
                #expect(!error.message.contains(Self.secret) && !"\(error)".contains("guess"))
            }
            #expect(try await service.session.currentTokens == nil)
        }
        await #expect(throws: AuthError.self) {
            _ = try await ServiceAccount.configure(
                issuer: oidc.issuer, clientID: "sesame-cli", authentication: .none, timeSource: oidc.clock)
        }
    }

    @Test("a DPoP nonce demand at the token endpoint: the retry carries a new assertion and a proof with the nonce")
    func dpopNonceWithAssertion() async throws {
        let key = try JWK.generate(for: .es256)
        let oidc = try Self.server(key: key) { $0.dpopNonce = true }
        defer { oidc.stop() }
        let service = try await ServiceAccount.configure(
            issuer: oidc.issuer, clientID: "nightly", authentication: try .privateKeyJWT(key: key),
            dpopKey: try JWK.generate(for: .es256), timeSource: oidc.clock)
        _ = try await service.accessToken()
        _ = try await service.accessToken(forceRefresh: true)
        #expect(try await service.session.currentTokens?.tokenType == "DPoP")
        #expect(try oidc.browser.get("/_dev/counters").json?["clientAuthenticationFailures"] == 0)
    }

    @Test("an assertion naming a token endpoint on another origin than the issuer is never made (mix-up)")
    func tokenEndpointOnAnotherOrigin() async throws {
        let key = try JWK.generate(for: .es256)
        let honest = try RecordingServer { _ in HTTPServerResponse(status: 500) }
        defer { honest.stop() }
        let metadata = OIDCProviderMetadata(
            issuer: "https://hostile.example",
            authorizationEndpoint: try #require(URL(string: "https://hostile.example/a")),
            tokenEndpoint: honest.base.appendingPathComponent("token"))
        var configuration = OIDCAuthProvider.Configuration(clientID: "nightly", redirectURI: "")
        configuration.clientAuthentication = try .privateKeyJWT(key: key, audience: .tokenEndpoint)
        let provider = try ClientCredentialsProvider(
            provider: OIDCAuthProvider(metadata: metadata, configuration: configuration))
        do {
            _ = try await provider.token()
            Issue.record("an assertion for another origin's token endpoint was sent")
        } catch let error as AuthError {
            #expect(error.code == .configuration)
        }
        #expect(honest.requests.isEmpty)
    }

    @Test("a confidential client of the code flow: Basic at PAR (with its client_id) and at the token endpoint")
    func confidentialCodeFlow() async throws {
        let oidc = try OIDCTestServer { configuration in
            var web = RegisteredClient(id: "web", redirectURIs: [OIDCTestServer.redirect])
            web.tokenEndpointAuthentication = .clientSecretBasic(secret: Self.secret)
            configuration.clients = [web]
        }
        defer { oidc.stop() }
        let metadata = try await OIDCProviderMetadata.discover(issuer: oidc.issuer)
        var configuration = OIDCAuthProvider.Configuration(
            clientID: "web", redirectURI: OIDCTestServer.redirect, scopes: ["openid", "email", "offline_access"])
        configuration.pushedRequests = .always
        configuration.clientAuthentication = .clientSecretBasic(Self.secret)
        let provider = OIDCAuthProvider(metadata: metadata, configuration: configuration, timeSource: oidc.clock)
        let tokens = try await oidc.signIn(provider)
        #expect(try JWT.unverified(try #require(tokens.idToken)).claims.audience == ["web"])
        _ = try await provider.refresh(tokens)
        // Without the secret the same client is refused.
        var publicConfiguration = configuration
        publicConfiguration.clientAuthentication = .none
        let unauthenticated = OIDCAuthProvider(metadata: metadata, configuration: publicConfiguration)
        await #expect(throws: AuthError.self) { _ = try await unauthenticated.refresh(tokens) }
    }
}
