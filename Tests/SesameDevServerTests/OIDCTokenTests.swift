import Foundation
import SesameDevServer
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

@Suite struct OIDCTokenTests {
    @Test("code exchange: ID token verifies against /jwks with iss, aud, azp, nonce, auth_time and at_hash")
    func codeExchange() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let (tokens, nonce) = try oidc.signedInTokens()
        #expect(tokens["token_type"] == "Bearer" && tokens["expires_in"] == 900)
        #expect(tokens["scope"] == "openid email offline_access")
        let access = tokens["access_token"].string
        let claims = try oidc.verifyIDToken(tokens["id_token"].string, nonce: nonce)
        #expect(claims["email"] == "alice@example.com")
        #expect(claims["at_hash"] == .string(expectedAtHash(access)))
        #expect((tokens["refresh_token"]?.stringValue?.count ?? 0) >= 43)
        let info = try oidc.userInfo(access)
        #expect(info.status == 200 && info.json?["sub"] == claims["sub"] && info.json?["email"] == "alice@example.com")
        // No offline_access, no refresh token; no openid, no ID token.
        let (plain, _) = try oidc.signedInTokens(scope: "openid")
        #expect(plain["refresh_token"] == nil && plain["id_token"] != nil)
        let (oauthOnly, _) = try oidc.signedInTokens(scope: "email")
        #expect(oauthOnly["id_token"] == nil)
        #expect(try oidc.userInfo(oauthOnly["access_token"].string).status == 403)
    }

    @Test("a code is single use, and its second use revokes what the first issued")
    func codeReuse() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let pkce = OIDCTestServer.PKCE()
        let (code, _) = try oidc.code(pkce)
        let first = try #require(try oidc.exchange(code, pkce).json)
        #expect(try oidc.userInfo(first["access_token"].string).status == 200)
        let second = try oidc.exchange(code, pkce)
        #expect(second.status == 400 && second.error == "invalid_grant")
        #expect(second.header("Cache-Control") == "no-store")
        #expect(try oidc.userInfo(first["access_token"].string).status == 401)
        #expect(try oidc.refresh(first["refresh_token"].string).error == "invalid_grant")
        #expect(try await oidc.running.counters()["codeReuses"] == 1)
    }

    @Test("a code is bound to its client, redirect URI and verifier, and burnt by a wrong attempt")
    func codeBinding() throws {
        let oidc = try OIDCTestServer {
            $0.clients = [try RegisteredClient(specification: "other:http://127.0.0.1/cb")]
        }
        defer { oidc.stop() }
        let pkce = OIDCTestServer.PKCE()
        let attempts: [(String, (String) throws -> TestBrowser.Page)] = [
            ("wrong verifier", { try oidc.exchange($0, OIDCTestServer.PKCE()) }),
            ("wrong redirect", { try oidc.exchange($0, pkce, redirect: "http://127.0.0.1:5556/callback") }),
            ("wrong client", { try oidc.exchange($0, pkce, client: "other") }),
            (
                "no verifier",
                {
                    try oidc.token([
                        ("grant_type", "authorization_code"), ("code", $0), ("redirect_uri", OIDCTestServer.redirect),
                        ("client_id", "sesame-cli"),
                    ])
                }
            ),
            (
                "short verifier",
                {
                    try oidc.token([
                        ("grant_type", "authorization_code"), ("code", $0), ("redirect_uri", OIDCTestServer.redirect),
                        ("client_id", "sesame-cli"), ("code_verifier", "abc"),
                    ])
                }
            ),
        ]
        for (name, attempt) in attempts {
            let (code, _) = try oidc.code(pkce)
            let response = try attempt(code)
            #expect(response.status == 400, "\(name)")
            #expect(response.error == "invalid_grant" || response.error == "invalid_request", "\(name)")
            if response.error == "invalid_grant" {
                #expect(try oidc.exchange(code, pkce).error == "invalid_grant", "\(name): the code must be spent")
            }
        }
        let (code, _) = try oidc.code(pkce)
        oidc.clock.advance(by: 61)
        #expect(try oidc.exchange(code, pkce).error == "invalid_grant")
    }

    @Test("the token endpoint: form only, one of each parameter, registered public clients, known grants")
    func tokenEndpointErrors() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let json = try oidc.browser.request(
            "POST", "/token", headers: [("Content-Type", "application/json")],
            body: Array(#"{"grant_type":"refresh_token"}"#.utf8))
        #expect(json.status == 415)
        #expect(
            try oidc.token([("grant_type", "password"), ("client_id", "sesame-cli")]).error == "unsupported_grant_type")
        #expect(
            try oidc.token([("grant_type", "refresh_token"), ("client_id", "nobody"), ("refresh_token", "x")]).error
                == "invalid_client")
        #expect(try oidc.token([("grant_type", "refresh_token"), ("refresh_token", "x")]).error == "invalid_request")
        let twice = try oidc.token([
            ("grant_type", "refresh_token"), ("client_id", "sesame-cli"), ("client_id", "other"),
            ("refresh_token", "x"),
        ])
        #expect(twice.status == 400 && twice.error == "invalid_request")
        let basic = try oidc.browser.post(
            "/token", form: [("grant_type", "refresh_token"), ("refresh_token", "x"), ("client_id", "sesame-cli")],
            headers: [("Authorization", "Basic c2VzYW1lLWNsaTo=")])
        #expect(basic.status == 401 && basic.error == "invalid_client" && basic.header("WWW-Authenticate") != nil)
    }

    @Test("refresh: rotation, reuse revokes the grant, another client's token, scope can only narrow")
    func refreshRotation() async throws {
        let oidc = try OIDCTestServer {
            $0.clients = [try RegisteredClient(specification: "other:http://127.0.0.1/cb")]
        }
        defer { oidc.stop() }
        let (tokens, _) = try oidc.signedInTokens()
        let firstID = try JWT.unverifiedClaims(of: tokens["id_token"].string)
        let first = tokens["refresh_token"].string
        #expect(try oidc.refresh(first, client: "other").error == "invalid_grant")
        oidc.clock.advance(by: 5)
        let rotated = try #require(try oidc.refresh(first).json)
        let second = rotated["refresh_token"].string
        #expect(second != first && !second.isEmpty)
        let refreshedID = try oidc.verifyIDToken(rotated["id_token"].string, nonce: nil)
        #expect(refreshedID.subject == firstID.subject && refreshedID["nonce"] == nil)
        #expect(refreshedID["auth_time"] == firstID["auth_time"])
        #expect(try oidc.refresh(second, scope: "openid profile").error == "invalid_scope")
        let narrowed = try #require(try oidc.refresh(second, scope: "openid offline_access").json)
        #expect(narrowed["scope"] == "openid offline_access")
        // The spent `first` comes back: the whole grant is revoked, the newest token included.
        let reuse = try oidc.refresh(first)
        #expect(reuse.error == "invalid_grant")
        #expect(try oidc.refresh(narrowed["refresh_token"].string).error == "invalid_grant")
        #expect(try oidc.userInfo(narrowed["access_token"].string).status == 401)
        #expect(try await oidc.running.counters()["reuseDetections"] == 1)
        // Expiry, on the injected clock.
        let (later, _) = try oidc.signedInTokens()
        oidc.clock.advance(by: 30 * 86400 + 1)
        #expect(try oidc.refresh(later["refresh_token"].string).error == "invalid_grant")
    }

    @Test("--refresh-reuse-grace: a rotated token may come back within the grace, not after, and never forks the grant")
    func reuseGrace() async throws {
        let oidc = try OIDCTestServer { $0.refreshReuseGrace = 10 }
        defer { oidc.stop() }
        let (tokens, _) = try oidc.signedInTokens()
        let first = tokens["refresh_token"].string
        let rotated = try #require(try oidc.refresh(first).json)
        oidc.clock.advance(by: 5)
        let retried = try oidc.refresh(first)
        #expect(retried.status == 200, "within the grace")
        let second = try #require(retried.json)["refresh_token"].string
        // One chain only: the grace gave the client a replacement, so the first successor is spent now.
        #expect(try oidc.refresh(second).status == 200, "the replacement works")
        oidc.clock.advance(by: 6)
        #expect(try oidc.refresh(first).error == "invalid_grant", "after the grace: reuse")
        let counters = try await oidc.running.counters()
        #expect(counters["reuseGraceRefreshes"] == 1 && counters["reuseDetections"] == 1)
        _ = rotated
    }

    @Test("the grace never forks a grant: the first successor, shown after a grace re-issue, revokes the whole grant")
    func graceNeverForks() async throws {
        let oidc = try OIDCTestServer { $0.refreshReuseGrace = 30 }
        defer { oidc.stop() }
        let (tokens, _) = try oidc.signedInTokens()
        let first = tokens["refresh_token"].string
        let successor = try #require(try oidc.refresh(first).json)["refresh_token"].string  // the victim's
        let copy = try #require(try oidc.refresh(first).json)["refresh_token"].string  // a copy, within the grace
        #expect(try oidc.refresh(successor).error == "invalid_grant", "the first chain is spent: reuse")
        #expect(try oidc.refresh(copy).error == "invalid_grant", "and the grant is revoked: no second chain lives on")
        #expect(try await oidc.running.counters()["reuseDetections"] == 1)
    }

    @Test("REST and OIDC refresh tokens do not cross")
    func restAndOIDCSeparate() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let (tokens, _) = try oidc.signedInTokens()
        let rest = try #require(try await oidc.running.login(OIDCTestServer.email, OIDCTestServer.password).json)
        #expect(try await oidc.running.refresh(tokens["refresh_token"].string).status == 401)
        #expect(try oidc.refresh(rest["refreshToken"].string).error == "invalid_grant")
        #expect(try oidc.userInfo(rest["accessToken"].string).status == 401)
    }

    @Test("key rotation: the previous key stays published until its tokens expire, and its tokens stay valid")
    func keyRotation() throws {
        let oidc = try OIDCTestServer {
            $0.accessTokenTTL = 300
            $0.idTokenTTL = 300
        }
        defer { oidc.stop() }
        let (before, nonce) = try oidc.signedInTokens()
        let oldKid = try JWT.unverified(before["id_token"].string).header.keyID
        let rotated = try oidc.dev("/_dev/rotate-keys", [:])
        #expect(rotated.status == 200)
        let newKid = rotated.json?["kid"]?.stringValue
        #expect(newKid != nil && newKid != oldKid)
        #expect(try oidc.jwks().keys.map(\.keyID) == [newKid, oldKid])
        #expect(try oidc.userInfo(before["access_token"].string).status == 200)
        _ = try oidc.verifyIDToken(before["id_token"].string, nonce: nonce)
        let (after, _) = try oidc.signedInTokens()
        #expect(try JWT.unverified(after["id_token"].string).header.keyID == newKid)
        oidc.clock.advance(by: 361)
        #expect(try oidc.jwks().keys.map(\.keyID) == [newKid])
        #expect(try oidc.userInfo(before["access_token"].string).status == 401)

        let timed = try OIDCTestServer { $0.keyRotationInterval = 100 }
        defer { timed.stop() }
        let (one, _) = try timed.signedInTokens()
        timed.clock.advance(by: 101)
        let (two, _) = try timed.signedInTokens()
        let kids = try [one, two].map { try JWT.unverified($0["id_token"].string).header.keyID }
        #expect(kids[0] != kids[1])
        #expect(try timed.jwks().keys.count == 2)
    }

    @Test("device flow: pending, slow_down, approval on the device page, single hand-out, denial, expiry")
    func deviceFlow() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        func start(_ scope: String = "openid offline_access") throws -> JOSEValue {
            let response = try oidc.browser.post(
                "/device_authorization", form: [("client_id", "sesame-cli"), ("scope", scope)])
            #expect(response.status == 200)
            return try #require(response.json)
        }
        func poll(_ device: JOSEValue) throws -> TestBrowser.Page {
            try oidc.token([
                ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
                ("device_code", device["device_code"].string), ("client_id", "sesame-cli"),
            ])
        }
        let device = try start()
        let userCode = device["user_code"].string
        #expect(userCode.count == 9 && userCode.allSatisfy { "BCDFGHJKLMNPQRSTVWXZ-".contains($0) })
        #expect(device["verification_uri"] == .string(oidc.issuerText + "/device"))
        #expect(device["interval"] == 5 && device["expires_in"] == 600)
        #expect(try poll(device).error == "authorization_pending")
        #expect(try poll(device).error == "slow_down")
        oidc.clock.advance(by: 9)
        #expect(try poll(device).error == "slow_down", "the interval is now 10 s")
        oidc.clock.advance(by: 15)
        #expect(try poll(device).error == "authorization_pending")
        #expect(
            try oidc.browser.post("/device_authorization", form: [("client_id", "nobody")]).error == "invalid_client")

        // The user opens the verification URI, types the code in lower case without the dash, signs in.
        let page = try oidc.browser.get("/device?user_code=" + userCode)
        #expect(page.status == 200 && page.body.contains("value=\"\(userCode)\""))
        let typed = userCode.lowercased().replacingOccurrences(of: "-", with: "")
        let wrong = try oidc.browser.post(
            "/device",
            form: page.hiddenFields() + [
                ("user_code", typed), ("email", OIDCTestServer.email), ("password", "nope-nope"), ("action", "approve"),
            ])
        #expect(wrong.body.contains("wrong"))
        let noCSRF = try oidc.browser.post("/device", form: [("user_code", typed), ("action", "approve")])
        #expect(noCSRF.status == 403)
        // Signing in leads to a confirmation that names the client and the scopes (RFC 8628 §5.4).
        let confirmation = try oidc.browser.post(
            "/device",
            form: page.hiddenFields() + [
                ("user_code", typed), ("email", OIDCTestServer.email), ("password", OIDCTestServer.password),
                ("action", "approve"),
            ])
        #expect(confirmation.body.contains("Connect this device?") && confirmation.body.contains("sesame-cli"))
        #expect(confirmation.body.contains("offline_access") && confirmation.body.contains(userCode))
        #expect(try poll(device).error != nil, "nothing is approved before the confirmation")
        oidc.clock.advance(by: 10)
        let approved = try oidc.browser.post("/device", form: confirmation.hiddenFields() + [("action", "approve")])
        #expect(approved.status == 200 && approved.body.contains("Device connected"))
        oidc.clock.advance(by: 10)
        let tokens = try poll(device)
        #expect(tokens.status == 200 && tokens.json?["refresh_token"] != nil && tokens.json?["id_token"] != nil)
        oidc.clock.advance(by: 10)
        #expect(try poll(device).error == "invalid_grant", "handed out once")

        // Denied: no browser session is kept (issue 20 #1), so the password again.
        let denied = try start()
        let page2 = try oidc.browser.get("/device")
        #expect(!page2.body.contains("Signed in as") && oidc.browser.cookie("sesame_session") == nil)
        let confirm = try oidc.browser.post(
            "/device",
            form: page2.hiddenFields() + [
                ("user_code", denied["user_code"].string), ("email", OIDCTestServer.email),
                ("password", OIDCTestServer.password), ("action", "deny"),
            ])
        _ = try oidc.browser.post("/device", form: confirm.hiddenFields() + [("action", "deny")])
        #expect(try poll(denied).error == "access_denied")
        let expired = try start()
        oidc.clock.advance(by: 601)
        #expect(try poll(expired).error == "expired_token")
        let late = try oidc.browser.post(
            "/device",
            form: page2.hiddenFields() + [
                ("user_code", expired["user_code"].string), ("email", OIDCTestServer.email),
                ("password", OIDCTestServer.password), ("action", "approve"),
            ])
        #expect(late.body.contains("not valid or has expired"))
    }
}
