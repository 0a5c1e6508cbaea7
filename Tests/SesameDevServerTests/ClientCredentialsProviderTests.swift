import Foundation
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

@testable import SesameDevServer

/// The dev server's confidential clients: `private_key_jwt` (RFC 7523), client secrets, and the client credentials
/// grant (catalog PKJ-01..PKJ-03), request by request.
@Suite struct ClientCredentialsProviderTests {
    static let secret = OIDCTestServer.serviceSecret

    /// A server with a service account per method: `nightly` (a key), `legacy` (Basic), `legacy-post` (a posted
    /// secret); and the key `nightly` signs with.
    static func server(_ configure: (inout DevServer.Configuration) -> Void = { _ in }) throws -> (OIDCTestServer, JWK)
    {
        let key = try JWK.generate(for: .es256).with(keyID: "nightly-1", algorithm: nil)
        let clients = try OIDCTestServer.serviceClients(key: key)
        let oidc = try OIDCTestServer { configuration in
            configuration.clients = clients
            configure(&configuration)
        }
        return (oidc, key)
    }

    /// An assertion by `key`, with `changes` applied to its claims (nil removes one).
    static func assertion(
        _ oidc: OIDCTestServer, key: JWK, algorithm: JWSAlgorithm = .es256, _ changes: [String: JOSEValue?] = [:]
    ) throws -> String {
        let now = Int64(oidc.clock.now.timeIntervalSince1970)
        var claims: JOSEObject = [
            "iss": "nightly", "sub": "nightly", "aud": .string(oidc.issuerText), "iat": .integer(now),
            "exp": .integer(now + 60), "jti": .string(UUID().uuidString),
        ]
        for (name, value) in changes { claims[name] = value ?? nil }
        return try JWT.sign(JWTClaims(claims), key: key, algorithm: algorithm)
    }

    static func grant(_ oidc: OIDCTestServer, assertion: String, _ extra: [(String, String)] = []) throws
        -> TestBrowser.Page
    {
        try oidc.token(
            [
                ("grant_type", "client_credentials"),
                ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
                ("client_assertion", assertion),
            ] + extra)
    }

    @Test("PKJ-01 PKJ-03: a good assertion gets the client's own token: no user, no refresh token, no ID token")
    func goodAssertion() throws {
        let (oidc, key) = try Self.server()
        defer { oidc.stop() }
        for audience in [oidc.issuerText, oidc.issuerText + "/token"] {
            let answer = try Self.grant(oidc, assertion: try Self.assertion(oidc, key: key, ["aud": .string(audience)]))
            let body = try #require(answer.status == 200 ? answer.json : nil, "\(answer.body)")
            #expect(body["refresh_token"] == nil && body["id_token"] == nil && body["token_type"] == "Bearer")
            #expect(body["scope"] == "reports.read reports.write")
            let claims = try JWT.unverified(body["access_token"].string).claims
            #expect(claims.subject == "nightly" && claims["client_id"] == "nightly" && claims["gid"] == nil)
            // Signed by the issuer: an API verifies it with /jwks.
            var policy = ClaimValidationPolicy(issuer: oidc.issuerText)
            policy.acceptedTypes = ["at+jwt"]
            _ = try JWTVerifier(keys: try oidc.jwks(), policy: policy).verifiedClaims(
                of: body["access_token"].string, now: oidc.clock.now)
            // UserInfo is for users.
            #expect(try oidc.userInfo(body["access_token"].string).status == 401)
        }
        let narrower = try Self.grant(
            oidc, assertion: try Self.assertion(oidc, key: key), [("scope", "reports.read")])
        #expect(narrower.json?["scope"] == "reports.read")
        #expect(try oidc.browser.get("/_dev/counters").json?["clientCredentialsGrants"] == 3)
        let discovery = try #require(try oidc.browser.get("/.well-known/openid-configuration").json)
        #expect(discovery["token_endpoint_auth_methods_supported"]?.arrayValue?.contains("private_key_jwt") == true)
    }

    @Test(
        "PKJ-02: an expired or long-lived assertion, a wrong aud, a reused jti, an unregistered key, none or a MAC, another iss: refused"
    )
    func badAssertions() throws {
        let (oidc, key) = try Self.server()
        defer { oidc.stop() }
        let now = Int64(oidc.clock.now.timeIntervalSince1970)
        func refused(_ assertion: String, _ extra: [(String, String)] = []) throws -> String? {
            let answer = try Self.grant(oidc, assertion: assertion, extra)
            #expect(answer.status == 401 || answer.status == 400, "\(answer.body)")
            return answer.json?["error"]?.stringValue
        }
        #expect(try refused(Self.assertion(oidc, key: key, ["exp": .integer(now - 30)])) == "invalid_client")
        #expect(try refused(Self.assertion(oidc, key: key, ["exp": .integer(now + 3600)])) == "invalid_client")
        #expect(try refused(Self.assertion(oidc, key: key, ["exp": nil])) == "invalid_client")
        #expect(try refused(Self.assertion(oidc, key: key, ["aud": "https://elsewhere.example"])) == "invalid_client")
        #expect(try refused(Self.assertion(oidc, key: key, ["aud": nil])) == "invalid_client")
        #expect(try refused(Self.assertion(oidc, key: key, ["jti": nil])) == "invalid_client")
        #expect(try refused(Self.assertion(oidc, key: key, ["iss": "legacy"])) == "invalid_client")
        #expect(try refused(Self.assertion(oidc, key: key, ["iat": .integer(now + 3600)])) == "invalid_client")
        // A reused jti: the first use works, the second is refused — also just after exp, within the leeway.
        let once = try Self.assertion(oidc, key: key, ["exp": .integer(now + 2)])
        #expect(try Self.grant(oidc, assertion: once).status == 200)
        #expect(try refused(once) == "invalid_client")
        oidc.clock.advance(by: 4)
        #expect(try refused(once) == "invalid_client")
        oidc.clock.advance(by: -4)
        // A key the client did not register (the same kid, another key).
        let stranger = try JWK.generate(for: .es256).with(keyID: "nightly-1", algorithm: nil)
        #expect(try refused(Self.assertion(oidc, key: stranger)) == "invalid_client")
        // A MAC with the public key's bytes as its secret, and an unsigned assertion.
        let mac = try JWK(
            symmetricKey: Array(try key.publicKey().jsonValue().jsonBytes), algorithm: .hs256, keyID: "nightly-1")
        #expect(try refused(Self.assertion(oidc, key: mac, algorithm: .hs256)) == "invalid_client")
        let unsigned = try Self.assertion(oidc, key: key).split(separator: ".").prefix(2).joined(separator: ".")
        let none = Base64URL.encode(Array(#"{"alg":"none"}"#.utf8)) + "." + unsigned.split(separator: ".")[1] + "."
        #expect(try refused(none) == "invalid_client")
        // The wrong assertion type; two methods at once; a client_id that is not the assertion's.
        let good = try Self.assertion(oidc, key: key)
        let wrongType = try oidc.token([
            ("grant_type", "client_credentials"), ("client_assertion_type", "urn:example:other"),
            ("client_assertion", good),
        ])
        #expect(wrongType.status == 401 && wrongType.json?["error"] == "invalid_client")
        #expect(try refused(good, [("client_secret", Self.secret)]) == "invalid_request")
        #expect(try refused(Self.assertion(oidc, key: key), [("client_id", "legacy")]) == "invalid_client")
        // A scope it may not have.
        let scope = try Self.grant(oidc, assertion: try Self.assertion(oidc, key: key), [("scope", "admin")])
        #expect(scope.status == 400 && scope.json?["error"] == "invalid_scope")
        #expect(try oidc.browser.get("/_dev/counters").json?["clientCredentialsGrants"] == 1)
    }

    @Test("client secrets: Basic and posted, each only as registered; public clients cannot use the grant")
    func secrets() throws {
        let (oidc, _) = try Self.server()
        defer { oidc.stop() }
        func basic(_ id: String, _ secret: String) -> (String, String) {
            ("Authorization", "Basic " + Data("\(id):\(secret)".utf8).base64EncodedString())
        }
        let grant = [("grant_type", "client_credentials")]
        let good = try oidc.browser.post("/token", form: grant, headers: [basic("legacy", Self.secret)])
        #expect(good.status == 200 && good.json?["scope"] == "reports.read", "\(good.body)")
        let wrong = try oidc.browser.post("/token", form: grant, headers: [basic("legacy", "guess")])
        #expect(wrong.status == 401 && wrong.json?["error"] == "invalid_client")
        #expect(wrong.header("WWW-Authenticate")?.hasPrefix("Basic") == true)
        // Registered for Basic, sent in the body: refused; and the reverse.
        let posted = try oidc.token(grant + [("client_id", "legacy"), ("client_secret", Self.secret)])
        #expect(posted.status == 401)
        let post = try oidc.token(grant + [("client_id", "legacy-post"), ("client_secret", Self.secret)])
        #expect(post.status == 200, "\(post.body)")
        let asBasic = try oidc.browser.post("/token", form: grant, headers: [basic("legacy-post", Self.secret)])
        #expect(asBasic.status == 401)
        // The client ID byte for byte: a leading U+FEFF (raw or %-encoded) or bytes that are not UTF-8 name no client.
        for id in ["\u{FEFF}legacy", "%EF%BB%BFlegacy"] {
            #expect(try oidc.browser.post("/token", form: grant, headers: [basic(id, Self.secret)]).status == 401)
        }
        let notUTF8 = Data([0xFF]) + Data("legacy:\(Self.secret)".utf8)
        let broken = ("Authorization", "Basic " + notUTF8.base64EncodedString())
        #expect(try oidc.browser.post("/token", form: grant, headers: [broken]).status == 401)
        // No credentials at all for a confidential client; a public client asking for the grant.
        #expect(try oidc.token(grant + [("client_id", "legacy")]).status == 401)
        let public_ = try oidc.token(grant + [("client_id", "sesame-cli")])
        #expect(public_.status == 400 && public_.json?["error"] == "unauthorized_client")
        // A public client sending a secret is refused, not ignored.
        #expect(try oidc.token(grant + [("client_id", "sesame-cli"), ("client_secret", "x")]).status == 401)
        // Revocation needs the client's authentication too.
        let token = try #require(good.json?["access_token"]?.stringValue)
        #expect(try oidc.browser.post("/revoke", form: [("client_id", "legacy"), ("token", token)]).status == 401)
        let revoked = try oidc.browser.post(
            "/revoke", form: [("token", token)], headers: [basic("legacy", Self.secret)])
        #expect(revoked.status == 200)
    }

    @Test("L9: revoking a client credentials token lists it as revoked; another client's is left alone")
    func revokeServiceToken() throws {
        let (oidc, key) = try Self.server()
        defer { oidc.stop() }
        let token = try #require(
            try Self.grant(oidc, assertion: try Self.assertion(oidc, key: key)).json?["access_token"]?.stringValue)
        let claims = try JWT.unverified(token).claims
        let basic = ("Authorization", "Basic " + Data("legacy:\(Self.secret)".utf8).base64EncodedString())
        _ = try oidc.browser.post("/revoke", form: [("token", token)], headers: [basic])
        #expect(!oidc.server.isRevoked(claims))
        let revoked = try oidc.browser.post(
            "/revoke",
            form: [
                ("token", token), ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
                ("client_assertion", try Self.assertion(oidc, key: key)),
            ])
        #expect(revoked.status == 200 && oidc.server.isRevoked(claims))
    }

    @Test("a DPoP nonce demand does not spend the client's assertion: the retry with the same one works")
    func dpopNonceBeforeAssertion() throws {
        let (oidc, key) = try Self.server { $0.dpopNonce = true }
        defer { oidc.stop() }
        let dpopKey = try JWK.generate(for: .es256)
        let assertion = try Self.assertion(oidc, key: key)
        let url = try #require(URL(string: oidc.issuerText + "/token"))
        func proof(_ nonce: String?) throws -> String {
            try DPoPProof.make(key: dpopKey, method: "POST", url: url, nonce: nonce, issuedAt: oidc.clock.now)
        }
        let form = [
            ("grant_type", "client_credentials"),
            ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
            ("client_assertion", assertion),
        ]
        let demand = try oidc.browser.post("/token", form: form, headers: [("DPoP", try proof(nil))])
        #expect(demand.status == 400 && demand.json?["error"] == "use_dpop_nonce")
        let nonce = try #require(demand.header("DPoP-Nonce"))
        let answer = try oidc.browser.post("/token", form: form, headers: [("DPoP", try proof(nonce))])
        #expect(answer.status == 200 && answer.json?["token_type"] == "DPoP", "\(answer.body)")
    }

    @Test("the configuration file's confidential clients: read, and a bad one named")
    func configurationFile() throws {
        let key = try JWK.generate(for: .es256)
        let jwks = String(decoding: try JWKSet(keys: [key.publicKey()]).jsonValue.jsonBytes, as: UTF8.self)
        let privateJWKS = String(
            decoding: JOSEValue.object(["keys": [key.jsonValue(includingPrivate: true)]]).jsonBytes, as: UTF8.self)
        func load(_ client: String) throws -> DevServer.Configuration {
            var configuration = DevServer.Configuration()
            try configuration.load(json: Data(#"{"clients": [\#(client)]}"#.utf8))
            return configuration
        }
        let service = try load(
            #"{"client_id": "ci", "grant_types": ["client_credentials"], "token_endpoint_auth_method": "private_key_jwt", "jwks": \#(jwks), "scope": "deploy"}"#
        )
        #expect(service.clients.first?.tokenEndpointAuthentication.methodName == "private_key_jwt")
        #expect(service.clients.first?.allowedScopes == ["deploy"])
        do {
            _ = try load(#"{"client_id": "ci", "grant_types": ["client_credentials"]}"#)
        } catch let error as DevServerError {
            #expect(error.description.contains("confidential") && error.description.contains("private_key_jwt"))
        }
        do {
            _ = try load(#"{"client_id": "ci", "grant_types": ["client_credential"]}"#)
        } catch let error as DevServerError {
            #expect(error.description.contains("grant_types"))
        }
        for bad in [
            #"{"client_id": "ci", "grant_types": ["client_credentials"], "token_endpoint_auth_method": "private_key_jwt", "jwks": \#(privateJWKS)}"#,
            #"{"client_id": "ci", "grant_types": ["client_credentials"], "token_endpoint_auth_method": "client_secret_basic", "client_secret": "short"}"#,
            #"{"client_id": "ci", "grant_types": ["client_credentials"], "token_endpoint_auth_method": "magic"}"#,
            #"{"client_id": "ci", "grant_types": ["client_credentials"], "client_secret": "a-long-enough-secret"}"#,
            #"{"client_id": "web", "token_endpoint_auth_method": "client_secret_post", "client_secret": "a-long-enough-secret"}"#,
            #"{"client_id": "ci", "grant_types": ["client_credentials"]}"#,
            #"{"client_id": "ci", "grant_types": ["client_credential"], "token_endpoint_auth_method": "client_secret_post", "client_secret": "a-long-enough-secret"}"#,
        ] {
            #expect(throws: DevServerError.self, "\(bad)") { _ = try load(bad) }
        }
    }
}
