import Foundation
import SesameDevServer
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

@Suite struct OIDCResourceTests {
    @Test("/userinfo: Bearer only; no token, a bad token, a REST token and a revoked grant are 401")
    func userInfo() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let none = try oidc.browser.get("/userinfo")
        #expect(none.status == 401 && none.header("WWW-Authenticate") == "Bearer realm=\"sesame\"")
        let bad = try oidc.userInfo("not-a-token")
        #expect(bad.status == 401 && bad.header("WWW-Authenticate")?.contains("invalid_token") == true)
        let (tokens, _) = try oidc.signedInTokens(scope: "openid profile email")
        let info = try #require(try oidc.userInfo(tokens["access_token"].string).json)
        #expect(info["name"] == "alice" && info["email"] == "alice@example.com" && info["email_verified"] == false)
        let posted = try oidc.browser.post(
            "/userinfo", form: [], headers: [("Authorization", "Bearer " + tokens["access_token"].string)])
        #expect(posted.status == 200)
        oidc.clock.advance(by: 901)
        #expect(try oidc.userInfo(tokens["access_token"].string).status == 401)
    }

    @Test(
        "/revoke (RFC 7009): a refresh token ends its grant, an access token only itself; unknown is 200; other clients' stay"
    )
    func revoke() throws {
        let oidc = try OIDCTestServer {
            $0.clients = [try RegisteredClient(specification: "other:http://127.0.0.1/cb")]
        }
        defer { oidc.stop() }
        func revoke(_ token: String, client: String = "sesame-cli") throws -> TestBrowser.Page {
            try oidc.browser.post("/revoke", form: [("token", token), ("client_id", client)])
        }
        let (a, _) = try oidc.signedInTokens()
        #expect(try revoke(a["refresh_token"].string, client: "other").status == 200)
        #expect(try oidc.userInfo(a["access_token"].string).status == 200, "another client cannot revoke it")
        #expect(try revoke(a["refresh_token"].string).status == 200)
        #expect(try oidc.refresh(a["refresh_token"].string).error == "invalid_grant")
        #expect(try oidc.userInfo(a["access_token"].string).status == 401, "the grant's access token ends too")
        // An access token revokes that token only (issue 20 #11): ending the grant takes its refresh token.
        let (b, _) = try oidc.signedInTokens()
        #expect(try revoke(b["access_token"].string).status == 200)
        #expect(try oidc.userInfo(b["access_token"].string).status == 401)
        let me = try oidc.browser.get("/me", headers: [("Authorization", "Bearer \(b["access_token"].string)")])
        #expect(me.status == 401, "every route that takes the token refuses it, /me too")
        let renewed = try oidc.refresh(b["refresh_token"].string)
        #expect(renewed.status == 200, "the grant lives on")
        #expect(try oidc.userInfo(renewed.json?["access_token"].string ?? "").status == 200)
        #expect(try revoke("never-issued").status == 200)
        #expect(try oidc.browser.post("/revoke", form: [("client_id", "sesame-cli")]).error == "invalid_request")
        #expect(try oidc.browser.post("/revoke", form: [("token", "x")]).error == "invalid_client")
    }

    @Test("/end-session: id_token_hint and a registered post_logout_redirect_uri, state; clears the session")
    func endSession() throws {
        let oidc = try OIDCTestServer {
            $0.rememberBrowser = true
            $0.clients = [try RegisteredClient(specification: "web:https://app.example/out")]
        }
        defer { oidc.stop() }
        let (tokens, _) = try oidc.signedInTokens()
        #expect(oidc.browser.cookie("sesame_session") != nil)
        let hint = tokens["id_token"].string
        func end(_ pairs: [(String, String)]) throws -> TestBrowser.Page {
            try oidc.browser.get("/end-session?" + OIDCTestServer.query(pairs))
        }
        for pairs in [
            [("id_token_hint", hint), ("post_logout_redirect_uri", "https://evil.example/")],
            [("post_logout_redirect_uri", "http://127.0.0.1:5555/bye")],
            [("id_token_hint", hint), ("client_id", "web"), ("post_logout_redirect_uri", "https://app.example/out")],
            [("id_token_hint", "eyJhbGciOiJub25lIn0.e30.")],
        ] {
            let page = try end(pairs)
            #expect(page.status == 400 && page.location == nil, "\(pairs.map(\.0))")
        }
        #expect(oidc.browser.cookie("sesame_session") != nil, "no refused request signed anyone out")
        oidc.clock.advance(by: 4000)  // an expired ID token is still a good hint
        let page = try end([
            ("id_token_hint", hint), ("post_logout_redirect_uri", "http://127.0.0.1:6000/bye"), ("state", "s-1"),
        ])
        #expect(page.status == 302 && page.location == "http://127.0.0.1:6000/bye?state=s-1")
        #expect(oidc.browser.cookie("sesame_session") == nil)
        let pkce = OIDCTestServer.PKCE()
        #expect(try oidc.authorize(oidc.parameters(pkce)).status == 200, "the form again")

        // Without a hint, the user confirms first (a forged link signs nobody out).
        _ = try oidc.code(pkce)
        let confirm = try end([])
        #expect(confirm.status == 200 && confirm.body.contains("Sign out?"))
        #expect(oidc.browser.cookie("sesame_session") != nil)
        let forged = try oidc.browser.post("/end-session", form: [("csrf", "x")])
        #expect(forged.status == 200 && oidc.browser.cookie("sesame_session") != nil)
        let done = try oidc.browser.post("/end-session", form: confirm.hiddenFields())
        #expect(done.status == 200 && done.body.contains("Signed out"))
        #expect(oidc.browser.cookie("sesame_session") == nil)
    }

    @Test("POST /_dev/token mints verifiable tokens with any claims; bad input is a 400, not JSON a 415")
    func mintToken() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let minted = try oidc.dev(
            "/_dev/token", ["sub": "user-42", "claims": ["role": "admin"], "aud": "my-api", "expiresIn": 120])
        #expect(minted.status == 200)
        let body = try #require(minted.json)
        var policy = ClaimValidationPolicy(issuer: oidc.issuerText, audience: "my-api", requiredClaims: ["exp", "sub"])
        policy.acceptedTypes = ["at+jwt"]
        let claims = try JWTVerifier(keys: try oidc.jwks(), policy: policy)
            .verifiedClaims(of: body["access_token"].string, now: oidc.clock.now)
        #expect(claims.subject == "user-42" && claims["role"] == "admin")
        #expect((claims["exp"]?.doubleValue ?? 0) - (claims["iat"]?.doubleValue ?? 0) == 120)
        for bad: JOSEValue in [
            ["sub": "x", "expiresIn": 1e300], ["sub": "x", "expiresIn": -1], ["sub": "x", "expiresIn": 1.5],
            ["claims": [:]], ["sub": "x", "claims": [1]], ["sub": "x", "aud": 7],
        ] {
            #expect(try oidc.dev("/_dev/token", bad).status == 400, "\(bad)")
        }
        let text = try oidc.browser.request(
            "POST", "/_dev/token", headers: [("Content-Type", "text/plain")], body: Array(#"{"sub":"x"}"#.utf8))
        #expect(text.status == 415)
    }

    @Test("CORS for the API endpoints only: a preflight for /token and /userinfo, none for the pages or /_dev/")
    func cors() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        for path in ["/token", "/userinfo", "/jwks", "/.well-known/openid-configuration", "/revoke"] {
            let preflight = try oidc.browser.request(
                "OPTIONS", path,
                headers: [("Origin", "http://localhost:3000"), ("Access-Control-Request-Method", "POST")])
            #expect(preflight.status == 204 && preflight.header("Access-Control-Allow-Origin") == "*", "\(path)")
            #expect(preflight.header("Access-Control-Allow-Headers")?.contains("Authorization") == true)
        }
        let jwks = try oidc.browser.get("/jwks", headers: [("Origin", "http://localhost:3000")])
        #expect(jwks.header("Access-Control-Allow-Origin") == "*")
        for path in ["/authorize", "/device", "/end-session", "/_dev/token", "/_dev/rp-test"] {
            let page = try oidc.browser.request("OPTIONS", path, headers: [("Origin", "http://localhost:3000")])
            #expect(page.header("Access-Control-Allow-Origin") == nil, "\(path)")
        }
        let form = try oidc.authorize(oidc.parameters(OIDCTestServer.PKCE()))
        #expect(form.header("Access-Control-Allow-Origin") == nil)
    }

    @Test("an RP test mode is named on every page; POST /_dev/rp-test needs a test member; sesame-cli is reserved")
    func rpTestVisibleAndReserved() throws {
        let oidc = try OIDCTestServer { $0.rpTest = .invalidAudience }
        defer { oidc.stop() }
        let page = try oidc.authorize(oidc.parameters(OIDCTestServer.PKCE()))
        #expect(page.body.contains("RP test mode oidcc-client-test-invalid-aud"))
        #expect(try oidc.dev("/_dev/rp-test", [:]).status == 400)
        #expect(throws: DevServerError.self) {
            _ = try DevServer(
                configuration: {
                    var configuration = DevServer.Configuration()
                    configuration.clients = [try RegisteredClient(specification: "sesame-cli:https://x.example/cb")]
                    return configuration
                }())
        }
    }

    @Test("OIDC routes are behind the Host check and the fault plan too")
    func hardeningApplies() throws {
        let oidc = try OIDCTestServer { $0.faults = try! FaultPlan(spec: "/token:status=503") }
        defer { oidc.stop() }
        let rebound = try oidc.browser.get("/.well-known/openid-configuration", headers: [("Host", "evil.example")])
        #expect(rebound.status == 400 || rebound.status == 421)
        let client = try RawClient(port: oidc.server.port)
        client.send("GET /authorize HTTP/1.1\r\nHost: attacker.example\r\nConnection: close\r\n\r\n")
        #expect(client.readToEnd().hasPrefix("HTTP/1.1 421"))
        #expect(try oidc.token([("grant_type", "refresh_token")]).status == 503)
    }
}
