import Foundation
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import SesameTesting
import Testing

@testable import SesameDevServer

/// Several issuers on one server, the configuration file, and the debugger page (DESIGN §4).
@Suite struct IssuersAndDebuggerTests {
    static let partnerConfiguration = #"""
        {
          "users": [{"email": "pat@partner.example", "password": "partner-password", "sub": "pat"}],
          "clients": [{"client_id": "partner-app", "redirect_uris": ["https://partner.example/cb"]}],
          "issuers": {
            "partner": {
              "users": [{"email": "pat@partner.example", "password": "other-password", "sub": "pat-at-partner",
                         "claims": {"given_name": "Pat"}}],
              "clients": [{"client_id": "partner-app", "redirect_uris": ["https://partner.example/cb"],
                           "id_token_signed_response_alg": "ES256"}],
              "claims": {"org": "partner"}
            }
          }
        }
        """#

    @Test("issuers: each under /NAME with its own discovery, keys, users, clients and tokens; RFC 8414 path too")
    func issuers() throws {
        let oidc = try OIDCTestServer { try $0.load(json: Data(Self.partnerConfiguration.utf8)) }
        defer { oidc.stop() }
        let partner = oidc.issuerText + "/partner"
        let document = try #require(try oidc.browser.get("/partner/.well-known/openid-configuration").json)
        #expect(document["issuer"] == .string(partner))
        #expect(document["token_endpoint"] == .string(partner + "/token"))
        let rfc8414 = try oidc.browser.get("/.well-known/oauth-authorization-server/partner")
        #expect(rfc8414.json?["issuer"] == .string(partner))
        let mainKeys = Set(try oidc.jwks().keys.compactMap(\.keyID))
        let partnerKeys = try JWKSet(json: Array(try oidc.browser.get("/partner/jwks").body.utf8))
        #expect(mainKeys.isDisjoint(with: Set(partnerKeys.keys.compactMap(\.keyID))))
        #expect(try oidc.browser.get("/nobody/.well-known/openid-configuration").status == 404)

        // The code flow at the partner issuer, with its own password for the same email.
        let pkce = OIDCTestServer.PKCE()
        let pairs: [(String, String)] = [
            ("client_id", "partner-app"), ("redirect_uri", "https://partner.example/cb"), ("response_type", "code"),
            ("scope", "openid profile"), ("state", "st"), ("nonce", "nn"), ("code_challenge", pkce.challenge),
            ("code_challenge_method", "S256"),
        ]
        let form = try oidc.browser.get("/partner/authorize?" + OIDCTestServer.query(pairs))
        #expect(form.status == 200 && form.body.contains("action=\"authorize\""))
        #expect(form.headers("Set-Cookie").allSatisfy { $0.contains("Path=/partner/") })
        let wrong = try oidc.browser.post(
            "/partner/authorize",
            form: form.hiddenFields() + [("email", "pat@partner.example"), ("password", "partner-password")])
        #expect(wrong.status == 200 && wrong.location == nil, "the main issuer's password is not the partner's")
        let page = try oidc.browser.post(
            "/partner/authorize",
            form: form.hiddenFields() + [("email", "pat@partner.example"), ("password", "other-password")])
        #expect(page.redirectParameters["iss"] == partner)
        let code = try #require(page.redirectParameters["code"])
        #expect(
            try oidc.exchange(code, pkce, client: "partner-app", redirect: "https://partner.example/cb").status == 400,
            "a partner code is nothing at the main issuer")
        let tokens = try #require(
            try oidc.browser.post(
                "/partner/token",
                form: [
                    ("grant_type", "authorization_code"), ("code", code),
                    ("redirect_uri", "https://partner.example/cb"),
                    ("client_id", "partner-app"), ("code_verifier", pkce.verifier),
                ]
            ).json)
        var policy = ClaimValidationPolicy(issuer: partner, audience: "partner-app", nonce: "nn")
        policy.leeway = 5
        let claims = try JWTVerifier(keys: partnerKeys, policy: policy).verifiedClaims(
            of: tokens["id_token"].string, now: oidc.clock.now)
        #expect(claims.subject == "pat-at-partner" && claims["org"] == "partner")
        #expect(try JWT.unverified(tokens["id_token"].string).header.algorithmName == "ES256")
        let access = tokens["access_token"].string
        let info = try oidc.browser.get("/partner/userinfo", headers: [("Authorization", "Bearer \(access)")])
        #expect(info.json?["given_name"] == "Pat" && info.json?["sub"] == "pat-at-partner")
        #expect(try oidc.userInfo(access).status == 401, "a partner token is nothing at the main issuer")
    }

    @Test("Cookies are read on bytes: a mark next to ';' or '=' hides no separator and makes no other cookie first")
    func cookieBytes() throws {
        let server = try DevServer()
        func csrf(_ header: String) -> String? {
            let headers = HTTPServerHeaders([(name: "Cookie", value: header)])
            return server.cookie(
                DevServer.csrfCookie, in: HTTPServerRequest(method: "GET", target: "/", headers: headers, body: Data()))
        }
        // U+0600 (a prepended mark) joins the ';' after it into one Swift Character: the first csrf cookie was missed.
        #expect(csrf("a=1\u{600}; sesame_csrf=REAL; sesame_csrf=EVIL") == "REAL")
        #expect(csrf("sesame_csrf=\u{301}v") == "\u{301}v")
        #expect(csrf("  sesame_csrf=v1 \t;x=2") == "v1")
        #expect(csrf("sesame_csrfx=1; xsesame_csrf=2") == nil)
    }

    @Test(
        "issuers: a name that is a route, not a-z0-9-_, or nested is refused at start",
        arguments: ["authorize", "_dev", "Partner", "a/b", "", String(repeating: "x", count: 65)])
    func issuerNames(name: String) throws {
        var configuration = DevServer.Configuration()
        configuration.issuers = [name: DevServer.Configuration()]
        #expect(throws: DevServerError.self) { try DevServer(configuration: configuration) }
        var nested = DevServer.Configuration()
        var child = DevServer.Configuration()
        child.issuers = ["inner": DevServer.Configuration()]
        nested.issuers = ["outer": child]
        #expect(throws: DevServerError.self) { try DevServer(configuration: nested) }
    }

    @Test(
        "the configuration file: a typed error naming the member for each mistake",
        arguments: [
            (#"[]"#, "not a JSON object"), (#"{"user": []}"#, "user: unknown member"),
            (#"{"users": [],}"#, "not valid JSON"),
            (
                #"{"users": [{"email": "a@b.c", "password": "long-enough", "claims": {"sub": "x"}}]}"#,
                "users[0].claims.sub: the server sets this claim itself"
            ),
            (#"{"claims": {"acr": "x"}}"#, "claims.acr: the server sets"),
            (
                #"{"clients": [{"client_id": "c", "redirect_uris": ["https://a/cb"], "claims": {"iss": "x"}}]}"#,
                "clients[0].claims.iss"
            ),
            (
                #"{"clients": [{"client_id": "c", "redirect_uri": "https://a/cb"}]}"#,
                "clients[0].redirect_uri: unknown member"
            ),
            (
                #"{"clients": [{"client_id": "c", "redirect_uris": ["https://a/cb"], "grant_types": ["implicit"]}]}"#,
                "clients[0].grant_types"
            ),
            (
                #"{"users": [{"email": "a@b.c", "password": "long-enough"}, {"email": "A@b.c", "password": "long-enough"}]}"#,
                "appears twice"
            ),
            (#"{"users": [{"email": "a@b.c"}]}"#, "users[0]"),
            (#"{"users": [{"email": "a@b.c", "password": "long-enough", "role": "x"}]}"#, "users[0].role"),
            (
                #"{"clients": [{"client_id": "c", "redirect_uris": ["https://a/cb"], "id_token_signed_response_alg": "HS256"}]}"#,
                "clients[0].id_token_signed_response_alg"
            ),
            (#"{"clients": [{"client_id": "c", "redirect_uris": ["no scheme"]}]}"#, "not an absolute URI"),
            (#"{"issuers": {"p": {"issuers": {}}}}"#, "issuers.p.issuers: unknown member"),
            (#"{"dynamic_registration": "yes"}"#, "dynamic_registration"),
        ])
    func configurationErrors(json: String, mentions: String) throws {
        var configuration = DevServer.Configuration()
        do {
            try configuration.load(json: Data(json.utf8))
            Issue.record("\(json) was accepted")
        } catch let error as DevServerError {
            #expect("\(error)".contains(mentions), "\(error)")
        }
    }

    @Test("issuers take the server's settings unless they say otherwise; grant_types from a file are honoured")
    func inheritance() throws {
        var configuration = DevServer.Configuration()
        configuration.dynamicRegistration = true
        try configuration.load(
            json: Data(
                #"{"issuers": {"a": {}, "b": {"dynamic_registration": false}}, "clients": [{"client_id": "c", "redirect_uris": ["https://a.example/cb"], "grant_types": ["authorization_code"]}]}"#
                    .utf8))
        #expect(configuration.issuers["a"]?.dynamicRegistration == true)
        #expect(configuration.issuers["b"]?.dynamicRegistration == false)
        #expect(configuration.clients.first?.grantTypes == ["authorization_code"])
        let oidc = try OIDCTestServer {
            $0 = configuration
            $0.passwordIterations = 1000
        }
        defer { oidc.stop() }
        let register: JOSEValue = ["redirect_uris": ["https://x.example/cb"]]
        #expect(try oidc.dev("/a/connect/register", register).status == 201)
        let off = try oidc.dev("/b/connect/register", register)
        #expect(off.status == 404 && off.body.contains("off for this issuer"))
        let device = try oidc.browser.post("/device_authorization", form: [("client_id", "c")])
        #expect(device.status == 400 && device.error == "unauthorized_client")
        let unknown = try oidc.browser.get("/nosuch/.well-known/openid-configuration")
        #expect(unknown.status == 404 && unknown.body.contains("no issuer at /nosuch") && unknown.body.contains("/a"))
    }

    @Test("a seeded user's sub must stay its sub: a database that knows the email under another sub refuses to start")
    func seededSubject() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-sub-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        var configuration = DevServer.Configuration()
        configuration.databasePath = folder.appendingPathComponent("dev.sqlite").path
        configuration.passwordIterations = 1000
        configuration.seededUsers = [
            DevServer.SeededUser(email: "a@example.com", password: "long-enough", subject: "one")
        ]
        _ = try DevServer(configuration: configuration)
        _ = try DevServer(configuration: configuration)
        configuration.seededUsers[0].subject = "two"
        #expect(throws: DevServerError.self) { try DevServer(configuration: configuration) }
        configuration.seededUsers = [
            DevServer.SeededUser(email: "b@example.com", password: "long-enough", subject: "one")
        ]
        #expect(throws: DevServerError.self) { try DevServer(configuration: configuration) }
    }

    @Test("the debugger page: the last tokens decoded and escaped, never a token itself; off with the dev endpoints")
    func debugger() throws {
        let bed = try ConformanceBed { $0.claims = ["motto": "<script>alert(1)</script>"] }
        defer { bed.stop() }
        let empty = try bed.browser.get("/_dev/debugger")
        #expect(empty.status == 200 && empty.body.contains("No token issued yet"))
        let (tokens, _, _, _) = try bed.codeFlow(scope: "openid offline_access")
        let page = try bed.browser.get("/_dev/debugger")
        #expect(page.status == 200 && page.header("Content-Type")?.hasPrefix("text/html") == true)
        #expect(page.body.contains("ID token for <code>op-rs256</code>"))
        #expect(page.body.contains("alice-0001") && page.body.contains("oidcc-client-test-invalid-iss"))
        #expect(page.body.contains("&lt;script&gt;") && !page.body.contains("<script>alert"))
        for token in [tokens["access_token"].string, tokens["id_token"].string, tokens["refresh_token"].string] {
            let signature = String(token.split(separator: ".").last ?? "")
            #expect(!page.body.contains(signature), "no token or signature on the page")
        }
        for _ in 0..<25 { _ = try bed.codeFlow() }
        let full = try bed.browser.get("/_dev/debugger")
        #expect(full.body.components(separatedBy: "<section class=\"token\">").count - 1 == DevServer.debuggerCapacity)

        let quiet = try ConformanceBed { $0.devEndpoints = false }
        defer { quiet.stop() }
        _ = try quiet.codeFlow()
        #expect(try quiet.browser.get("/_dev/debugger").status == 404)
        #expect(quiet.oidc.server.issuedTokens.withLock { $0.isEmpty }, "nothing kept when the page is off")
    }
}
