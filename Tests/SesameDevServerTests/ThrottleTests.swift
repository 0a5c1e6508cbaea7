import Foundation
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

@testable import SesameDevServer

/// Issue 20 #6–#8: limits that fall on whoever misbehaves — a browser guessing device codes, a client guessing one
/// account's password — and on nobody else.
@Suite struct ThrottleTests {
    static func counters(_ oidc: OIDCTestServer) throws -> JOSEValue {
        try #require(try oidc.browser.get("/_dev/counters").json)
    }

    static func login(_ oidc: OIDCTestServer, _ email: String, _ password: String) throws -> TestBrowser.Page {
        try oidc.browser.request(
            "POST", "/login", headers: [("Content-Type", "application/json")],
            body: JOSEValue.object(["email": .string(email), "password": .string(password)]).jsonBytes)
    }

    @Test(
        "#6: wrong device codes are limited per account (who guesses signs in first): nobody else is kept out, not even in a browser whose CSRF cookie the guesser planted"
    )
    func deviceCodesPerBrowserAndAccount() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let device = try #require(
            try oidc.browser.post("/device_authorization", form: [("client_id", "sesame-cli")]).json)
        func guess(_ browser: TestBrowser, _ code: String) throws -> Int {
            let form = try browser.get("/device").hiddenFields()
            return try browser.post(
                "/device",
                form: form + [
                    ("user_code", code), ("email", "bob@example.com"), ("password", "battery-staple"),
                    ("action", "approve"),
                ]
            ).status
        }
        let guesser = TestBrowser(port: oidc.browser.port)
        let statuses = try (0..<7).map { try guess(guesser, "BCDF-GH\($0)K") }
        #expect(statuses.prefix(5).allSatisfy { $0 == 200 } && statuses.suffix(2).allSatisfy { $0 == 429 })
        // Fresh cookies do not help: the account is limited too.
        #expect(try guess(TestBrowser(port: oidc.browser.port), "BCDF-GHZK") == 429)
        // Without signing in, no code is even looked up.
        let anonymous = TestBrowser(port: oidc.browser.port)
        let page = try anonymous.post(
            "/device", form: try anonymous.get("/device").hiddenFields() + [("user_code", "BCDF-GHJK")])
        #expect(page.body.contains("email or password is wrong"))
        // Alice, in her own browser — with the guesser's CSRF cookie planted in it — with the right code: the
        // confirmation, as if nobody had guessed.
        oidc.browser.setCookie("sesame_csrf", try #require(guesser.cookie("sesame_csrf")))
        let user = try oidc.browser.post(
            "/device",
            form: try oidc.browser.get("/device").hiddenFields() + [
                ("user_code", device["user_code"].string), ("email", OIDCTestServer.email),
                ("password", OIDCTestServer.password), ("action", "approve"),
            ])
        #expect(user.status == 200 && user.body.contains("Connect this device?"), "\(user.status)")
        oidc.clock.advance(by: 61)
        #expect(try guess(TestBrowser(port: oidc.browser.port), "BCDF-GHZK") == 200, "a minute later bob may try again")
    }

    @Test("FailureWindow: a flood of new keys never lifts a key at its limit")
    func failureWindowKeepsLimitedKeys() {
        var window = FailureWindow(limit: 5, window: 300)
        for _ in 0..<5 { window.record("alice", now: 1000) }
        for index in 0..<(FailureWindow.maximumKeys * 2) { window.record("flood-\(index)", now: 1001) }
        #expect(window.isOver("alice", now: 1002))
    }

    @Test(
        "FailureWindow: a table full of keys at their limit stays bounded, keeps their back-off, and locks no innocent key out"
    )
    func failureWindowStaysBounded() {
        var window = FailureWindow(limit: 2, window: 300)
        for index in 0..<FailureWindow.maximumKeys {
            window.record("k\(index)", now: 1000)
            window.record("k\(index)", now: 1000)
        }
        // New keys that each reach their limit, within one second and over several: the table does not grow.
        for second in Int64(1001)...1003 {
            for index in 0..<2000 {
                window.record("new-\(second)-\(index)", now: second)
                window.record("new-\(second)-\(index)", now: second)
            }
        }
        #expect(window.count <= FailureWindow.maximumKeys + 1)
        #expect(window.isOver("k1", now: 1004), "a back-off is never lifted")
        #expect(!window.isOver("alice", now: 1004), "an account that never failed is never judged by others' failures")
    }

    @Test("#7: GET /device?user_code= names no client and looks the same for a valid and an invalid code")
    func deviceLookUpIsNoOracle() throws {
        let oidc = try OIDCTestServer {
            $0.clients = [try RegisteredClient(specification: "tv-app:http://127.0.0.1/cb")]
        }
        defer { oidc.stop() }
        let device = try #require(try oidc.browser.post("/device_authorization", form: [("client_id", "tv-app")]).json)
        let valid = device["user_code"].string
        let invalid = "BCDF-GHJK" == valid ? "BCDF-GHJL" : "BCDF-GHJK"
        _ = try oidc.browser.get("/device")  // the CSRF cookie first, so both pages carry the same token
        let shown = try oidc.browser.get("/device?user_code=" + valid)
        let other = try oidc.browser.get("/device?user_code=" + invalid)
        #expect(!shown.body.contains("tv-app"))
        #expect(
            shown.body.replacingOccurrences(of: valid, with: "CODE")
                == other.body.replacingOccurrences(of: invalid, with: "CODE"))
    }

    @Test(
        "#8: after 5 wrong passwords an account is checked once a second (more answered 429 without hashing); other accounts are untouched; a correct password still gets in"
    )
    func passwordBackOff() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        // Empty passwords (a slip: Deny on the device page without signing in) do not count.
        for _ in 0..<8 { #expect(try Self.login(oidc, OIDCTestServer.email, "").status == 401) }
        #expect(try Self.login(oidc, OIDCTestServer.email, OIDCTestServer.password).status == 200)
        for _ in 0..<5 {
            #expect(try Self.login(oidc, OIDCTestServer.email, "wrong-password").status == 401)
        }
        let checked = try Self.counters(oidc)["passwordChecks"]?.doubleValue ?? -1
        let sixth = try Self.login(oidc, OIDCTestServer.email, "wrong-password")
        #expect(sixth.status == 401, "one check a second goes through")
        var refused: [TestBrowser.Page] = []
        for _ in 0..<20 { refused.append(try Self.login(oidc, OIDCTestServer.email, "wrong-password")) }
        #expect(refused.allSatisfy { $0.status == 429 && $0.header("Retry-After") == "1" })
        #expect(try Self.counters(oidc)["passwordChecks"]?.doubleValue == checked + 1, "the 429s hashed nothing")
        // Bob is not affected.
        #expect(try Self.login(oidc, "bob@example.com", "battery-staple").status == 200)
        // The sign-in form says the same for alice, and the device page too.
        let pkce = OIDCTestServer.PKCE()
        let form = try oidc.signIn(oidc.parameters(pkce))
        #expect(form.status == 429 && form.body.contains("Too many wrong passwords"))
        // A second later alice's correct password gets in, and her count starts over.
        oidc.clock.advance(by: 1)
        #expect(try Self.login(oidc, OIDCTestServer.email, OIDCTestServer.password).status == 200)
        #expect(try Self.login(oidc, OIDCTestServer.email, "wrong-password").status == 401)
        #expect(try Self.login(oidc, OIDCTestServer.email, "wrong-password").status == 401)
    }
}

@Suite struct KnownBrowserTests {
    @Test(
        "#8: a browser where the account signed in before has a bucket of its own: a guesser elsewhere does not keep the owner out"
    )
    func ownerIsNotLockedOut() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        _ = try oidc.code(OIDCTestServer.PKCE())  // alice signs in, in her browser
        #expect(oidc.browser.cookie("sesame_known") != nil)
        // Someone else guesses her password as fast as they can (the REST route: the account's shared bucket).
        for _ in 0..<30 { _ = try ThrottleTests.login(oidc, OIDCTestServer.email, "a-guess") }
        #expect(try ThrottleTests.login(oidc, OIDCTestServer.email, "a-guess").status == 429)
        // Alice, in her browser, gets in at once, every time.
        for _ in 0..<3 {
            let page = try oidc.signIn(oidc.parameters(OIDCTestServer.PKCE()))
            #expect(page.status == 303 && page.redirectParameters["code"] != nil, "\(page.status)")
        }
        // A browser without the cookie, with a forged one, or with the tag of another account is the guesser's.
        let known = try #require(oidc.browser.cookie("sesame_known"))
        let tag = String(known.split(separator: ".")[0])
        for planted in [nil, "\(tag).forged", "x.y"] {
            let stranger = TestBrowser(port: oidc.browser.port)
            if let planted { stranger.setCookie("sesame_known", planted) }
            let form = try oidc.authorize(oidc.parameters(OIDCTestServer.PKCE()), browser: stranger)
            let tried = try stranger.post(
                "/authorize",
                form: form.hiddenFields() + [("email", OIDCTestServer.email), ("password", OIDCTestServer.password)])
            #expect(tried.status == 429, "\(planted ?? "none")")
        }
    }
}

/// A security audit's findings on the remembered browser (issue 20 #2): every spelling of "this machine" needs the
/// user's consent, consent forms expire, and a device is approved only from the user's own confirmation page.
@Suite struct RememberedBrowserAuditTests {
    @Test(
        "only https on a public DNS name reaches only its client; loopback in any spelling, IPs, local names and private-use schemes do not",
        arguments: [
            ("https://app.example/cb", true), ("https://app.example./cb", true), ("https://a.b.example:8443/x", true),
            ("http://app.example/cb", false), ("http://127.1:7001/cb", false), ("http://0x7f000001/cb", false),
            ("http://2130706433/cb", false), ("http://127.0.0.1./cb", false), ("http://localhost./cb", false),
            ("http://app.localhost:7001/cb", false), ("https://app.localhost/cb", false), ("http://0.0.0.0/cb", false),
            ("http://[0:0:0:0:0:0:0:1]/cb", false), ("http://[::ffff:127.0.0.1]/cb", false),
            ("https://localhost:7001/cb", false), ("https://127.0.0.1/cb", false), ("https://intranet/cb", false),
            ("https://10.0.0.1/cb", false), ("com.example.app:/cb", false), ("https://u@127.0.0.1/cb", false),
        ])
    func reachesOnlyItsClient(uri: String, expected: Bool) {
        #expect(AuthorizationRequest.reachesOnlyItsClient(uri) == expected)
    }

    @Test("a remembered browser: a registered 127.1 redirect gets the consent page, and prompt=none consent_required")
    func otherLoopbackSpellings() throws {
        let oidc = try OIDCTestServer {
            $0.rememberBrowser = true
            $0.clients = [
                try RegisteredClient(specification: "web:http://127.1:7001/cb,http://app.localhost:7001/cb")
            ]
        }
        defer { oidc.stop() }
        let pkce = OIDCTestServer.PKCE()
        for redirect in ["http://127.1:7001/cb", "http://app.localhost:7001/cb"] {
            let web = ["client_id": "web", "redirect_uri": redirect]
            _ = try oidc.code(pkce, web)
            let page = try oidc.authorize(oidc.parameters(pkce, web))
            #expect(page.status == 200 && OIDCTestServer.isConsentPage(page), "\(redirect): \(page.status)")
            let none = try oidc.authorize(oidc.parameters(pkce, web.merging(["prompt": "none"]) { $1 }))
            #expect(none.redirectParameters["error"] == "consent_required", "\(redirect)")
        }
    }

    @Test("a consent form expires after ten minutes")
    func consentExpires() throws {
        let oidc = try OIDCTestServer { $0.rememberBrowser = true }
        defer { oidc.stop() }
        let pkce = OIDCTestServer.PKCE()
        _ = try oidc.code(pkce)
        let page = try oidc.authorize(oidc.parameters(pkce))
        #expect(OIDCTestServer.isConsentPage(page))
        oidc.clock.advance(by: 601)
        let late = try oidc.browser.post("/authorize", form: page.hiddenFields() + [("action", "continue")])
        #expect(late.status == 403 && late.location == nil)
    }

    @Test(
        "the device decision takes the confirmation's ticket only: not a session, not a password in the same post")
    func deviceDecisionNeedsTheTicket() throws {
        let oidc = try OIDCTestServer { $0.rememberBrowser = true }
        defer { oidc.stop() }
        _ = try oidc.code(OIDCTestServer.PKCE())  // alice's remembered browser
        let device = try #require(
            try oidc.browser.post("/device_authorization", form: [("client_id", "sesame-cli")]).json)
        let code = device["user_code"].string
        let form = try oidc.browser.get("/device").hiddenFields()
        // A page elsewhere posting the decision straight away, with alice's session (and with a password): refused.
        for extra in [[], [("email", OIDCTestServer.email), ("password", OIDCTestServer.password)]] {
            let forged = try oidc.browser.post(
                "/device", form: form + [("user_code", code), ("confirmed", "1"), ("action", "approve")] + extra)
            #expect(forged.status == 403 && !forged.body.contains("Device connected"))
        }
        let poll = try oidc.browser.post(
            "/token",
            form: [
                ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("client_id", "sesame-cli"),
                ("device_code", device["device_code"].string),
            ])
        #expect(poll.error == "authorization_pending")
        // Alice's own way: the first step shows the confirmation (with its ticket); she decides there.
        let confirmation = try oidc.browser.post("/device", form: form + [("user_code", code), ("action", "approve")])
        #expect(confirmation.body.contains("Connect this device?"))
        let approved = try oidc.browser.post("/device", form: confirmation.hiddenFields() + [("action", "approve")])
        #expect(approved.body.contains("Device connected"))
    }
}
