import Foundation
import SesameDevServer
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import SesameTesting
import Testing

/// Regression tests for what the security review of the provider found; each failed before its fix.
@Suite struct OIDCAuditTests {
    @Test("a line break in redirect_uri or post_logout_redirect_uri never reaches a header (response splitting)")
    func headerInjection() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let injected = "http://127.0.0.1:1/%0aSet-Cookie:%20sesame_session=ATTACKER;%20Path=/;%20x="
        let page = try oidc.browser.get("/authorize?client_id=sesame-cli&redirect_uri=\(injected)")
        #expect(page.status == 400 && page.location == nil)
        #expect(!page.headers.contains { $0.value.contains("ATTACKER") })
        for uri in [
            "http://127.0.0.1:1/a b", "http://127.0.0.1:1/<x>", "http://127.0.0.1:1/\u{e9}", "http://127.0.0.1:1/a\\b",
        ] {
            let pairs = oidc.parameters(OIDCTestServer.PKCE(), ["redirect_uri": uri])
            #expect(try oidc.authorize(pairs).location == nil, "\(uri)")
        }
        let (tokens, _) = try oidc.signedInTokens()
        let logout = try oidc.browser.get(
            "/end-session?id_token_hint=\(tokens["id_token"].string)&post_logout_redirect_uri=\(injected)")
        #expect(logout.status == 400 && !logout.headers.contains { $0.value.contains("ATTACKER") })
        // And the HTTP layer itself refuses to write a header with a line break, whoever sets it.
        let server = try RecordingServer { _ in
            var response = HTTPServerResponse(status: 302)
            response.headers.set("Location", "http://x/\nSet-Cookie: a=b")
            return response
        }
        defer { server.stop() }
        let raw = try RawClient(port: server.port)
        raw.send("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        let text = raw.readToEnd()
        #expect(text.hasPrefix("HTTP/1.1 500") && !text.contains("Set-Cookie: a=b"))
    }

    @Test("the provider's cookies are scoped to its pages, so a loopback redirect listener never receives them")
    func cookiePaths() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let pkce = OIDCTestServer.PKCE()
        let page = try oidc.authorize(oidc.parameters(pkce))
        let signedIn = try oidc.browser.post(
            "/authorize",
            form: page.hiddenFields() + [("email", OIDCTestServer.email), ("password", OIDCTestServer.password)])
        let cookies = page.headers("Set-Cookie") + signedIn.headers("Set-Cookie")
        #expect(!cookies.isEmpty)
        for cookie in cookies {
            #expect(!cookie.contains("Path=/;") && !cookie.hasSuffix("Path=/"), "\(cookie)")
            #expect(["/authorize", "/device", "/end-session"].contains { cookie.contains("Path=\($0);") }, "\(cookie)")
        }
    }

    @Test("a malformed dpop_jkt is refused (a well-formed one binds the code: DPoPProviderTests)")
    func dpopJKTShape() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let pairs = oidc.parameters(OIDCTestServer.PKCE(), ["dpop_jkt": "not-a-thumbprint"])
        #expect(try oidc.authorize(pairs).redirectParameters["error"] == "invalid_request")
    }

    @Test("a revoked OIDC grant's access token is refused at the REST /me too")
    func meChecksTheGrant() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let (tokens, _) = try oidc.signedInTokens()
        let access = tokens["access_token"].string
        #expect(try await oidc.running.client.send("GET", "/me", bearer: access).status == 200)
        _ = try oidc.browser.post(
            "/revoke", form: [("token", tokens["refresh_token"].string), ("client_id", "sesame-cli")])
        #expect(try await oidc.running.client.send("GET", "/me", bearer: access).status == 401)
    }

    @Test("concurrent replays of one code: one exchange passes, and the replays always revoke what it got")
    func concurrentCodeReplay() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        for trial in 0..<15 {
            let pkce = OIDCTestServer.PKCE()
            let (code, _) = try oidc.code(pkce)
            // Four threads of their own (blocking sockets stay off the concurrency pool), released together.
            let pages = LockedBox<[TestBrowser.Page?]>([])
            let errors = LockedBox<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 4) { _ in
                do {
                    let page = try oidc.exchange(code, pkce)
                    pages.mutate { $0.append(page) }
                } catch {
                    errors.mutate { $0.append("\(error)") }
                    pages.mutate { $0.append(nil) }
                }
            }
            let results = pages.value
            let winners = results.compactMap { $0 }.filter { $0.status == 200 }
            let seen = results.map { page in
                page.map { "\($0.status) \($0.error ?? "") \($0.json?["error_description"]?.stringValue ?? "")" }
                    ?? "no answer"
            }
            // Exactly one exchange passes the code checks. It either gets tokens (which the replays then revoke), or
            // — when a replay revokes its fresh grant before the tokens are signed — "the grant is gone".
            let revokedBeforeIssue = results.compactMap { $0 }.filter {
                $0.json?["error_description"]?.stringValue == "the grant is gone"
            }
            #expect(winners.count + revokedBeforeIssue.count == 1, "trial \(trial): \(seen) \(errors.value)")
            #expect(errors.value.isEmpty, "trial \(trial): \(errors.value)")
            if let token = winners.first?.json?["access_token"]?.stringValue {
                #expect(try oidc.userInfo(token).status == 401, "trial \(trial): the winner's grant survived a replay")
            }
        }
    }

    @Test("end-session with another user's ID token asks this browser's user first")
    func endSessionForeignHint() throws {
        let oidc = try OIDCTestServer { $0.rememberBrowser = true }
        defer { oidc.stop() }
        let bobBrowser = TestBrowser(port: oidc.browser.port)
        let pkce = OIDCTestServer.PKCE()
        let page = try oidc.authorize(oidc.parameters(pkce), browser: bobBrowser)
        let signedIn = try bobBrowser.post(
            "/authorize", form: page.hiddenFields() + [("email", "bob@example.com"), ("password", "battery-staple")])
        let bobCode = try #require(signedIn.redirectParameters["code"])
        let bobTokens = try #require(try oidc.exchange(bobCode, pkce).json)
        _ = try oidc.signedInTokens()  // alice, in the harness's browser
        let forced = try oidc.browser.get("/end-session?id_token_hint=\(bobTokens["id_token"].string)")
        #expect(forced.status == 200 && forced.body.contains("Sign out?"))
        #expect(oidc.browser.cookie("sesame_session") != nil, "alice is still signed in")
    }

    @Test(
        "within the reuse grace a spent refresh token comes back while no successor was presented; after one, never")
    func graceUntilASuccessorIsUsed() throws {
        let oidc = try OIDCTestServer { $0.refreshReuseGrace = 30 }
        defer { oidc.stop() }
        let (tokens, _) = try oidc.signedInTokens()
        let first = tokens["refresh_token"].string
        let rotated = try #require(try oidc.refresh(first).json)
        // Answers lost twice running (a client killed twice mid-refresh): a replacement each time.
        #expect(try oidc.refresh(first).status == 200)
        let newest = try #require(try oidc.refresh(first).json)["refresh_token"].string
        // The successors never presented are spent; the newest is presented; from then on the first is reuse.
        #expect(try oidc.refresh(newest).status == 200)
        #expect(try oidc.refresh(first).error == "invalid_grant")
        #expect(try oidc.refresh(rotated["refresh_token"].string).error == "invalid_grant", "the grant is revoked")
    }

    @Test("the device page: deny needs a sign-in too, and wrong codes are limited per minute")
    func devicePageProtections() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let device = try #require(
            try oidc.browser.post("/device_authorization", form: [("client_id", "sesame-cli")]).json)
        let page = try oidc.browser.get("/device")
        let anonymousDeny = try oidc.browser.post(
            "/device", form: page.hiddenFields() + [("user_code", device["user_code"].string), ("action", "deny")])
        #expect(anonymousDeny.body.contains("wrong"), "no decision without signing in")
        var last: TestBrowser.Page?
        let bob = [("email", "bob@example.com"), ("password", "battery-staple")]
        for guess in 0..<21 {
            last = try oidc.browser.post(
                "/device",
                form: page.hiddenFields() + bob + [("user_code", "BCDF-GH\(guess % 10)K"), ("action", "approve")])
        }
        #expect(last?.status == 429)
        oidc.clock.advance(by: 61)
        let later = try oidc.browser.post(
            "/device", form: page.hiddenFields() + bob + [("user_code", "BCDF-GHJK"), ("action", "approve")])
        #expect(later.status == 200)
    }

    @Test("a minted token keeps its key published after a rotation; protocol claims cannot be overridden")
    func mintedTokenKeyLifeAndClaims() throws {
        let oidc = try OIDCTestServer {
            $0.accessTokenTTL = 2
            $0.idTokenTTL = 2
        }
        defer { oidc.stop() }
        let minted = try #require(
            try oidc.dev("/_dev/token", ["sub": "x", "expiresIn": 3600, "claims": ["exp": 9_999_999_999]]).json)
        let token = minted["access_token"].string
        let claims = try JWT.unverifiedClaims(of: token)
        #expect((claims["exp"]?.doubleValue ?? 0) - (claims["iat"]?.doubleValue ?? 0) == 3600)
        let kid = try JWT.unverified(token).header.keyID
        _ = try oidc.dev("/_dev/rotate-keys", [:])
        oidc.clock.advance(by: 70)
        #expect(try oidc.jwks().keys.contains { $0.keyID == kid })

        // The dev panel cannot set nonce, exp or sub either.
        let pkce = OIDCTestServer.PKCE()
        let pairs = oidc.parameters(pkce, ["nonce": nil, "prompt": "consent"])
        let form = try oidc.authorize(pairs)
        #expect(form.status == 200, "prompt=consent shows the page")
        let alice = try #require(
            form.body.components(separatedBy: "name=\"sign_in_as\" value=\"").dropFirst().first {
                $0.contains("\">alice@example.com<")
            }.map { String($0.prefix { $0 != "\"" }) })
        let signedIn = try oidc.browser.post(
            "/authorize",
            form: form.hiddenFields(form: 1) + [
                ("sign_in_as", alice), ("claims", #"{"nonce":"x","exp":1,"role":"r"}"#),
            ])
        let code = try #require(signedIn.redirectParameters["code"])
        let idToken = try #require(try oidc.exchange(code, pkce).json)["id_token"].string
        let idClaims = try JWT.unverifiedClaims(of: idToken)
        #expect(idClaims["nonce"] == nil && idClaims["role"] == "r" && (idClaims["exp"]?.doubleValue ?? 0) > 1)
    }
}
