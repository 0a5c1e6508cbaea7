import Foundation
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

@testable import SesameDevServer

@Suite struct OIDCAuthorizeTests {
    @Test("discovery lists exactly what is supported, at both well-known paths")
    func discovery() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let openid = try oidc.browser.get("/.well-known/openid-configuration")
        let oauth = try oidc.browser.get("/.well-known/oauth-authorization-server")
        #expect(openid.status == 200 && openid.body == oauth.body)
        let document = try #require(openid.json)
        #expect(document["issuer"] == .string(oidc.issuerText))
        #expect(document["code_challenge_methods_supported"] == ["S256"])
        #expect(document["authorization_response_iss_parameter_supported"] == true)
        #expect(document["response_types_supported"] == ["code"])
        #expect(
            document["token_endpoint_auth_methods_supported"]
                == ["none", "private_key_jwt", "client_secret_basic", "client_secret_post"])
        #expect(document["token_endpoint_auth_signing_alg_values_supported"] == ["RS256", "PS256", "ES256", "EdDSA"])
        #expect(document["native_sso_supported"] == true)
        // RS256 is mandatory (OIDC Core §15.1); each client gets its registered algorithm.
        #expect(document["id_token_signing_alg_values_supported"] == ["RS256", "ES256", "EdDSA"])
        #expect(document["dpop_signing_alg_values_supported"]?.arrayValue?.contains("ES256") == true)
        #expect(
            document["grant_types_supported"]
                == [
                    "authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code",
                    "urn:ietf:params:oauth:grant-type:token-exchange", "client_credentials",
                ])
        for (name, path) in [
            ("authorization_endpoint", "/authorize"), ("token_endpoint", "/token"), ("jwks_uri", "/jwks"),
            ("userinfo_endpoint", "/userinfo"), ("revocation_endpoint", "/revoke"),
            ("end_session_endpoint", "/end-session"), ("device_authorization_endpoint", "/device_authorization"),
            ("pushed_authorization_request_endpoint", "/par"),
        ] {
            #expect(document[name] == .string(oidc.issuerText + path))
        }
    }

    @Test("BCP-24: an unknown client or a redirect URI not registered exactly is shown as a page, never redirected")
    func unredirectableErrors() throws {
        let oidc = try OIDCTestServer {
            $0.clients = [try RegisteredClient(specification: "web:https://app.example/cb")]
        }
        defer { oidc.stop() }
        let pkce = OIDCTestServer.PKCE()
        for overrides: [String: String?] in [
            ["client_id": "nobody"], ["client_id": nil], ["redirect_uri": nil],
            ["redirect_uri": "https://evil.example/callback"], ["redirect_uri": "http://localhost:5555/callback"],
            ["redirect_uri": "http://127.0.0.1.evil.example:5555/cb"], ["redirect_uri": "http://127.0.0.1:5555/cb#x"],
            ["client_id": "web", "redirect_uri": "https://app.example/cb/other"],
            ["client_id": "web", "redirect_uri": "https://APP.example/cb"],
        ] {
            let page = try oidc.authorize(oidc.parameters(pkce, overrides))
            #expect(page.status == 400, "\(overrides)")
            #expect(page.location == nil, "\(overrides)")
            #expect(page.header("Content-Type")?.hasPrefix("text/html") == true)
        }
        // A registered client's exact URI works, and a loopback one matches on any port (RFC 8252 §7.3).
        let web = try oidc.authorize(
            oidc.parameters(pkce, ["client_id": "web", "redirect_uri": "https://app.example/cb"]))
        #expect(web.status == 200)
        let repeated = try oidc.browser.get(
            "/authorize?" + OIDCTestServer.query(oidc.parameters(pkce)) + "&scope=openid")
        #expect(repeated.status == 400 && repeated.location == nil && repeated.body.contains("repeated"))
    }

    @Test("PKCE S256 is required: missing or plain is an error redirected with state and iss")
    func redirectedErrors() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let pkce = OIDCTestServer.PKCE()
        let cases: [([String: String?], String)] = [
            (["code_challenge": nil, "code_challenge_method": nil], "invalid_request"),
            (["code_challenge_method": "plain"], "invalid_request"),
            (["code_challenge_method": nil], "invalid_request"),
            (["code_challenge": "short"], "invalid_request"),
            (["response_type": "token"], "unsupported_response_type"),
            (["response_type": "code id_token"], "unsupported_response_type"),
            (["scope": "openid admin"], "invalid_scope"),
            (["prompt": "none login"], "invalid_request"),
            (["max_age": "-1"], "invalid_request"),
            (["request": "eyJ.x.y"], "request_not_supported"),
        ]
        for (overrides, error) in cases {
            let pairs = oidc.parameters(pkce, overrides)
            let page = try oidc.authorize(pairs)
            #expect(page.status == 302, "\(overrides)")
            let response = page.redirectParameters
            #expect(response["error"] == error, "\(overrides)")
            #expect(response["state"] == pairs.first { $0.0 == "state" }?.1)
            #expect(response["iss"] == oidc.issuerText)
            #expect(response["code"] == nil)
            #expect(page.location?.hasPrefix(OIDCTestServer.redirect + "?") == true)
        }
    }

    @Test("the sign-in page: escaped, framed by nothing, a visible dev banner, scopes, CSRF token, login_hint")
    func signInPage() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let pkce = OIDCTestServer.PKCE()
        let page = try oidc.authorize(
            oidc.parameters(pkce, ["state": "\"><script>alert(1)</script>", "login_hint": "bob@example.com"]))
        #expect(page.status == 200)
        #expect(!page.body.contains("<script>"))
        #expect(page.body.contains("&quot;&gt;&lt;script&gt;"))
        #expect(page.body.contains("Development server"))
        #expect(page.body.contains("offline_access"))
        #expect(page.body.contains("value=\"bob@example.com\""))
        #expect(page.header("X-Frame-Options") == "DENY")
        #expect(page.header("Content-Security-Policy")?.contains("frame-ancestors 'none'") == true)
        #expect(page.header("Cache-Control") == "no-store")
        #expect(page.hiddenFields().contains { $0.0 == "csrf" && $0.1.count == 43 })
        let csrfCookie = try #require(page.headers("Set-Cookie").first { $0.hasPrefix("sesame_csrf=") })
        #expect(csrfCookie.contains("HttpOnly") && csrfCookie.contains("SameSite=Lax"))
        // The dev panel lists the seeded users.
        #expect(page.body.contains("sign in as") && page.body.contains("alice@example.com"))
    }

    @Test("wrong password: the form again with a readable error and no code; CSRF is checked")
    func badCredentialsAndCSRF() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let pkce = OIDCTestServer.PKCE()
        let pairs = oidc.parameters(pkce)
        let wrong = try oidc.signIn(pairs, password: "wrong-password")
        #expect(wrong.status == 200 && wrong.location == nil)
        #expect(wrong.body.contains("role=\"alert\"") && wrong.body.contains("email or password is wrong"))
        #expect(wrong.body.contains("value=\"alice@example.com\""))
        let unknown = try oidc.signIn(pairs, email: "nobody@example.com")
        #expect(unknown.status == 200 && unknown.location == nil)

        let page = try oidc.authorize(pairs)
        let fields = page.hiddenFields()
        let credentials = [("email", OIDCTestServer.email), ("password", OIDCTestServer.password)]
        // No token, a token for other request parameters, or another browser's cookie: 403, no code.
        let tampered = fields.map { $0.0 == "state" ? ($0.0, "other") : $0 }
        let forged = fields.map { $0.0 == "csrf" ? ($0.0, Base64URL.encode(JOSECrypto.randomBytes(32))) : $0 }
        for form in [fields.filter { $0.0 != "csrf" } + [("csrf", "")], tampered, forged] {
            let response = try oidc.browser.post("/authorize", form: form + credentials)
            #expect(response.status == 403 || response.location.map { !$0.contains("code=") } == true)
            #expect(response.location == nil)
        }
        let otherBrowser = TestBrowser(port: oidc.browser.port)
        _ = try oidc.authorize(pairs, browser: otherBrowser)
        let crossBrowser = try otherBrowser.post("/authorize", form: fields + credentials)
        #expect(crossBrowser.status == 403 && crossBrowser.location == nil)
        // The right form from the right browser works.
        let good = try oidc.browser.post("/authorize", form: fields + credentials)
        #expect(good.status == 303 && good.redirectParameters["code"] != nil)
    }

    @Test(
        "by default no browser session: no session cookie is set, a planted one is ignored, every sign-in asks for the password"
    )
    func noBrowserSessionByDefault() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let pkce = OIDCTestServer.PKCE()
        _ = try oidc.code(pkce)
        #expect(oidc.browser.cookie("sesame_session") == nil, "issue 20 #1: nothing for another port to steal")
        // A real session (as a remembered browser would have), planted by a page on another loopback port (#3).
        let planted = try oidc.server.store.createSession(
            userID: try #require(try oidc.server.store.passwordRecord(email: "bob@example.com")).user.id,
            authTime: Int64(oidc.clock.now.timeIntervalSince1970), ttl: 3600,
            now: Int64(oidc.clock.now.timeIntervalSince1970))
        oidc.browser.setCookie("sesame_session", planted)
        let page = try oidc.authorize(oidc.parameters(pkce))
        #expect(page.status == 200 && page.body.contains("id=\"password\""), "the form, not bob's code (#2, #3)")
        #expect(page.body.contains("127.0.0.1:5555"), "the form names where the answer goes")
        let none = try oidc.authorize(oidc.parameters(pkce, ["prompt": "none"]))
        #expect(none.status == 302 && none.redirectParameters["error"] == "login_required")
    }

    @Test(
        "a remembered browser: silent for a redirect that is not loopback; a loopback one gets a consent page naming the port (prompt=none: consent_required); prompt=login; max_age"
    )
    func rememberedBrowser() throws {
        let oidc = try OIDCTestServer {
            $0.rememberBrowser = true
            $0.clients = [try RegisteredClient(specification: "web:https://app.example/cb")]
        }
        defer { oidc.stop() }
        let pkce = OIDCTestServer.PKCE()
        let web = ["client_id": "web", "redirect_uri": "https://app.example/cb"]
        let none = try oidc.authorize(oidc.parameters(pkce, web.merging(["prompt": "none"]) { $1 }))
        #expect(none.status == 302 && none.redirectParameters["error"] == "login_required")

        _ = try oidc.code(pkce, web)
        let session = try #require(oidc.browser.cookie("sesame_session"))
        #expect(session.count == 43)
        let again = try oidc.authorize(oidc.parameters(pkce, web))
        #expect(
            again.status == 302 && again.redirectParameters["code"] != nil
                && again.redirectParameters["iss"] == oidc.issuerText)
        let silent = try oidc.authorize(oidc.parameters(pkce, web.merging(["prompt": "none"]) { $1 }))
        #expect(silent.status == 302 && silent.redirectParameters["code"] != nil)
        // A loopback redirect (any local process may listen there): never a code without the user (RFC 8252 §8.6).
        let loopback = try oidc.authorize(oidc.parameters(pkce))
        #expect(loopback.status == 200 && OIDCTestServer.isConsentPage(loopback) && loopback.location == nil)
        #expect(loopback.body.contains("127.0.0.1:5555") && loopback.body.contains("sesame-cli"))
        #expect(loopback.body.contains(OIDCTestServer.email))
        let loopbackNone = try oidc.authorize(oidc.parameters(pkce, ["prompt": "none"]))
        #expect(loopbackNone.status == 302 && loopbackNone.redirectParameters["error"] == "consent_required")
        let continued = try oidc.complete(loopback)
        #expect(continued.status == 303 && continued.redirectParameters["code"] != nil)
        let cancelled = try oidc.browser.post(
            "/authorize", form: try oidc.authorize(oidc.parameters(pkce)).hiddenFields() + [("action", "cancel")])
        #expect(cancelled.redirectParameters["error"] == "access_denied")
        let forced = try oidc.authorize(oidc.parameters(pkce, web.merging(["prompt": "login"]) { $1 }))
        #expect(forced.status == 200 && forced.body.contains("id=\"password\""))

        oidc.clock.advance(by: 120)
        let stale = try oidc.authorize(oidc.parameters(pkce, web.merging(["max_age": "60"]) { $1 }))
        #expect(stale.status == 200 && stale.body.contains("id=\"password\""))
        let staleSilent = try oidc.authorize(
            oidc.parameters(pkce, web.merging(["max_age": "60", "prompt": "none"]) { $1 }))
        #expect(staleSilent.redirectParameters["error"] == "login_required")
        let recentEnough = try oidc.authorize(oidc.parameters(pkce, web.merging(["max_age": "600"]) { $1 }))
        #expect(recentEnough.status == 302)
        // auth_time is the sign-in's time, not the code's.
        let signInTime = Int64(oidc.clock.now.timeIntervalSince1970) - 120
        let code = try #require(recentEnough.redirectParameters["code"])
        let tokens = try #require(try oidc.exchange(code, pkce, client: "web", redirect: "https://app.example/cb").json)
        let claims = try JWT.unverifiedClaims(of: tokens["id_token"].string)
        #expect(abs((claims["auth_time"]?.doubleValue ?? 0) - Double(signInTime)) <= 1)
        // A forged session cookie is no session.
        oidc.browser.setCookie("sesame_session", Base64URL.encode(JOSECrypto.randomBytes(32)))
        #expect(try oidc.authorize(oidc.parameters(pkce, web)).status == 200)
    }

    @Test(
        "the consent form is good only for the session it was shown to: a planted CSRF cookie with its own token, or another session, gets 403"
    )
    func consentBoundToSession() throws {
        let oidc = try OIDCTestServer { $0.rememberBrowser = true }
        defer { oidc.stop() }
        let pkce = OIDCTestServer.PKCE()
        _ = try oidc.code(pkce)
        let pairs = oidc.parameters(pkce, ["redirect_uri": "http://127.0.0.1:6001/evil"])
        // The attacker's own browser (another session, its own CSRF cookie) fetches a consent form for its request.
        let attacker = TestBrowser(port: oidc.browser.port)
        let signIn = try oidc.authorize(pairs, browser: attacker)
        _ = try attacker.post(
            "/authorize", form: signIn.hiddenFields() + [("email", "bob@example.com"), ("password", "battery-staple")])
        let attackerConsent = try oidc.authorize(pairs, browser: attacker)
        #expect(OIDCTestServer.isConsentPage(attackerConsent))
        // Planted in the victim's browser (cookie tossing from another port): the attacker's CSRF cookie and token.
        oidc.browser.setCookie("sesame_csrf", try #require(attacker.cookie("sesame_csrf")))
        let forged = try oidc.browser.post(
            "/authorize", form: attackerConsent.hiddenFields() + [("action", "continue")])
        #expect(forged.status == 403 && forged.location == nil, "no code for alice to the attacker's port")
        let noSession = TestBrowser(port: oidc.browser.port)
        noSession.setCookie("sesame_csrf", try #require(attacker.cookie("sesame_csrf")))
        let orphan = try noSession.post("/authorize", form: attackerConsent.hiddenFields() + [("action", "continue")])
        #expect(orphan.status == 403)
    }

    @Test("the dev panel signs in as a listed user with extra claims; without dev endpoints it is gone")
    func signInAs() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let pkce = OIDCTestServer.PKCE()
        let pairs = oidc.parameters(pkce)
        let page = try oidc.authorize(pairs)
        let bob = try #require(
            page.body.components(separatedBy: "name=\"sign_in_as\" value=\"").dropFirst().first {
                $0.contains("\">bob@example.com<")
            }.map { String($0.prefix { $0 != "\"" }) })
        let bad = try oidc.browser.post(
            "/authorize", form: page.hiddenFields(form: 1) + [("sign_in_as", bob), ("claims", "[1,2]")])
        #expect(bad.status == 200 && bad.body.contains("JSON object"))
        let response = try oidc.browser.post(
            "/authorize",
            form: page.hiddenFields(form: 1) + [("sign_in_as", bob), ("claims", #"{"role":"admin","sub":"x"}"#)])
        let code = try #require(response.redirectParameters["code"])
        let tokens = try #require(try oidc.exchange(code, pkce).json)
        let claims = try oidc.verifyIDToken(tokens["id_token"].string, nonce: pairs.first { $0.0 == "nonce" }?.1)
        #expect(claims["role"] == "admin")
        #expect(claims.subject == bob)  // extra claims never override the protocol's
        #expect(claims["email"] == "bob@example.com")

        let strict = try OIDCTestServer { $0.devEndpoints = false }
        defer { strict.stop() }
        let plain = try strict.authorize(strict.parameters(pkce))
        #expect(!plain.body.contains("sign_in_as"))
        let attempt = try strict.browser.post("/authorize", form: plain.hiddenFields() + [("sign_in_as", bob)])
        #expect(attempt.location == nil)
    }

    @Test("cancel redirects access_denied; PAR: pushed once, by its client, short-lived")
    func cancelAndPAR() throws {
        let oidc = try OIDCTestServer {
            $0.clients = [try RegisteredClient(specification: "other:http://127.0.0.1/cb")]
        }
        defer { oidc.stop() }
        let pkce = OIDCTestServer.PKCE()
        let page = try oidc.authorize(oidc.parameters(pkce))
        let cancelled = try oidc.browser.post("/authorize", form: page.hiddenFields() + [("action", "cancel")])
        #expect(cancelled.redirectParameters["error"] == "access_denied")

        let pushed = try oidc.browser.post("/par", form: oidc.parameters(pkce))
        #expect(pushed.status == 201)
        let uri = try #require(pushed.json?["request_uri"]?.stringValue)
        #expect(uri.hasPrefix("urn:ietf:params:oauth:request_uri:") && pushed.json?["expires_in"] == 60)
        let wrongClient = try oidc.authorize([("client_id", "other"), ("request_uri", uri)])
        #expect(wrongClient.status == 400 && wrongClient.location == nil)
        // A pushed request is for its own client only, and for one use.
        let pushed2 = try oidc.browser.post("/par", form: oidc.parameters(pkce))
        let uri2 = try #require(pushed2.json?["request_uri"]?.stringValue)
        let form = try oidc.authorize([("client_id", "sesame-cli"), ("request_uri", uri2)])
        #expect(form.status == 200 && form.body.contains("id=\"password\""))
        let reused = try oidc.authorize([("client_id", "sesame-cli"), ("request_uri", uri2)])
        #expect(reused.status == 400 && reused.body.contains("invalid_request_uri"))
        // The form from the pushed request completes the flow.
        let signedIn = try oidc.browser.post(
            "/authorize",
            form: form.hiddenFields() + [("email", OIDCTestServer.email), ("password", OIDCTestServer.password)])
        let code = try #require(signedIn.redirectParameters["code"])
        #expect(try oidc.exchange(code, pkce).status == 200)

        let pushed3 = try oidc.browser.post("/par", form: oidc.parameters(pkce))
        oidc.clock.advance(by: 61)
        let expired = try oidc.authorize(
            [("client_id", "sesame-cli"), ("request_uri", try #require(pushed3.json?["request_uri"]?.stringValue))])
        #expect(expired.status == 400)
        let invalid = try oidc.browser.post("/par", form: oidc.parameters(pkce, ["code_challenge_method": "plain"]))
        #expect(invalid.status == 400 && invalid.error == "invalid_request")
        let json = try oidc.browser.request(
            "POST", "/par", headers: [("Content-Type", "application/json")], body: Array("{}".utf8))
        #expect(json.status == 415)
    }
}
