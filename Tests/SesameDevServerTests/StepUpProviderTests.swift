import Foundation
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

@testable import SesameDevServer

/// The provider's side of RFC 9470 step-up (catalog STEP-05): the second step, `acr`/`amr`/`auth_time` in the
/// tokens, and `/protected`'s challenge.
@Suite struct StepUpProviderTests {
    static let mfa = DevServer.mfaACR

    /// The code flow asking for `acr_values`, through password and (when shown) second step; the token response.
    static func tokens(_ oidc: OIDCTestServer, acrValues: String? = nil, code: String? = nil) throws -> JOSEValue {
        let pkce = OIDCTestServer.PKCE()
        var overrides: [String: String?] = [:]
        if let acrValues { overrides["acr_values"] = acrValues }
        let pairs = oidc.parameters(pkce, scope: "openid offline_access", overrides)
        var page = try oidc.browser.post(
            "/authorize",
            form: try oidc.authorize(pairs).hiddenFields() + [
                ("email", OIDCTestServer.email), ("password", OIDCTestServer.password),
            ])
        if OIDCTestServer.isSecondStep(page) { page = try oidc.secondStep(page, code: code) }
        guard let code = page.redirectParameters["code"] else {
            throw HarnessError("no code: \(page.status) \(page.redirectParameters)")
        }
        return try #require(try oidc.exchange(code, pkce).json)
    }

    static func protected(_ oidc: OIDCTestServer, _ accessToken: String) throws -> TestBrowser.Page {
        try oidc.browser.get("/protected", headers: [("Authorization", "Bearer \(accessToken)")])
    }

    @Test("STEP-05: /protected challenges a password sign-in with acr_values, and accepts the second step's token")
    func challengeAndStepUp() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let plain = try Self.tokens(oidc)
        let refused = try Self.protected(oidc, plain["access_token"].string)
        #expect(refused.status == 401 && refused.error == "insufficient_user_authentication")
        let challenge = try #require(refused.header("WWW-Authenticate"))
        #expect(challenge.hasPrefix("Bearer error=\"insufficient_user_authentication\""))
        #expect(challenge.contains("acr_values=\"\(Self.mfa)\""))
        #expect(try JWT.unverified(plain["access_token"].string).claims["acr"] == .string(DevServer.passwordACR))

        let stepped = try Self.tokens(oidc, acrValues: Self.mfa)
        #expect(oidc.oneTimeCodes.value.count == 1, "the code went to the log")
        let access = try JWT.unverified(stepped["access_token"].string).claims
        #expect(access["acr"] == .string(Self.mfa) && access["amr"] == ["pwd", "otp"] && access["auth_time"] != nil)
        let id = try oidc.verifyIDToken(stepped["id_token"].string, nonce: nil)
        #expect(id["acr"] == .string(Self.mfa) && id["amr"] == ["pwd", "otp"])
        let allowed = try Self.protected(oidc, stepped["access_token"].string)
        #expect(allowed.status == 200 && allowed.json?["acr"] == .string(Self.mfa))
        // A refresh keeps how the user signed in.
        let refreshed = try #require(try oidc.refresh(stepped["refresh_token"].string).json)
        #expect(try Self.protected(oidc, refreshed["access_token"].string).status == 200)
    }

    @Test("the second step: a wrong code asks again, five wrong codes or an expired one end it; never silent")
    func secondStepFailures() throws {
        let oidc = try OIDCTestServer { $0.rememberBrowser = true }
        defer { oidc.stop() }
        let pkce = OIDCTestServer.PKCE()
        let pairs = oidc.parameters(pkce, scope: "openid", ["acr_values": Self.mfa])
        let signIn: () throws -> TestBrowser.Page = {
            try oidc.browser.post(
                "/authorize",
                form: try oidc.authorize(pairs).hiddenFields() + [
                    ("email", OIDCTestServer.email), ("password", OIDCTestServer.password),
                ])
        }
        var page = try signIn()
        #expect(OIDCTestServer.isSecondStep(page))
        for attempt in 1...5 {
            page = try oidc.secondStep(page, code: "000000" == oidc.oneTimeCodes.value.last ? "111111" : "000000")
            if attempt < 5 {
                #expect(page.status == 400 && page.body.contains("id=\"otp\""), "attempt \(attempt)")
            }
        }
        #expect(page.redirectParameters["error"] == "access_denied")
        // Expired: five minutes later the right code is refused.
        let fresh = try signIn()
        oidc.clock.advance(by: 301)
        let late = try oidc.secondStep(fresh)
        #expect(late.redirectParameters["error"] == "access_denied" && late.redirectParameters["code"] == nil)
        // A remembered browser never skips the second step, and prompt=none cannot do it.
        let silent = try oidc.authorize(
            oidc.parameters(pkce, scope: "openid", ["acr_values": Self.mfa, "prompt": "none"]))
        #expect(silent.redirectParameters["error"] == "interaction_required")
        // A code typed into another request's form is refused (the ticket is bound to its request).
        let first = try signIn()
        let other = oidc.parameters(OIDCTestServer.PKCE(), scope: "openid", ["acr_values": Self.mfa])
        let otherForm = try oidc.authorize(other)
        #expect(otherForm.body.contains("id=\"password\""))
        let ticket = first.hiddenFields().first { $0.0 == "ticket" }?.1 ?? ""
        let swapped = try oidc.browser.post(
            "/authorize",
            form: otherForm.hiddenFields().filter { $0.0 != "csrf" }
                + [
                    ("csrf", first.hiddenFields().first { $0.0 == "csrf" }?.1 ?? ""), ("ticket", ticket),
                    ("second_step", "1"), ("otp", oidc.oneTimeCodes.value.last ?? ""), ("action", "verify"),
                ])
        #expect(swapped.status == 403 && swapped.location == nil)
    }

    @Test("/protected: max_age challenges an old sign-in; a DPoP token gets the challenge in the DPoP scheme")
    func maxAgeAndSchemes() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let set = try oidc.dev("/_dev/protected", ["acrValues": .null, "maxAge": 60])
        #expect(set.status == 200)
        let tokens = try Self.tokens(oidc)
        #expect(try Self.protected(oidc, tokens["access_token"].string).status == 200)
        oidc.clock.advance(by: 61)
        let old = try Self.protected(oidc, tokens["access_token"].string)
        #expect(old.status == 401 && old.header("WWW-Authenticate")?.contains("max_age=\"60\"") == true)
        #expect(old.header("WWW-Authenticate")?.contains("acr_values") == false)
        #expect(try oidc.browser.get("/_dev/protected").json == ["acrValues": [], "maxAge": 60])
        for bad: JOSEValue in [
            ["maxAge": -1], ["maxAge": 1.5], ["acrValues": "x"], ["acrValues": [""]], ["max_age": 60],
        ] {
            #expect(try oidc.dev("/_dev/protected", bad).status == 400, "\(bad)")
        }
        // An unknown token is invalid_token, not a step-up.
        let unknown = try Self.protected(oidc, "nonsense")
        #expect(unknown.status == 401 && unknown.header("WWW-Authenticate")?.contains("invalid_token") == true)
    }

    @Test(
        "an attacker pass: absurd auth_time never crashes /protected; tickets and wrong codes are limited per account")
    func hostile() throws {
        let oidc = try OIDCTestServer { $0.rememberBrowser = false }
        defer { oidc.stop() }
        let tokens = try Self.tokens(oidc)
        let claims = try JWT.unverified(tokens["access_token"].string).claims
        let gid = try #require(claims["gid"])
        let sub = try #require(claims["sub"])
        #expect(try oidc.dev("/_dev/protected", ["acrValues": .null, "maxAge": 60]).status == 200)
        for authTime: JOSEValue in [1e300, -9.2e18, 4_000_000_000, "x"] {
            let minted = try #require(
                try oidc.dev("/_dev/token", ["sub": sub, "claims": ["gid": gid, "auth_time": authTime]]).json)
            let page = try Self.protected(oidc, minted["access_token"].string)
            #expect(page.status == 401, "\(authTime)")
        }
        #expect(try oidc.browser.get("/jwks").status == 200, "still serving")
        for bad: JOSEValue in [
            ["acrValues": ["a\"b"]], ["acrValues": ["a b"]], ["acrValues": ["a\r\nX: y"]],
            ["acrValues": [.string(String(repeating: "a", count: 300))]],
        ] {
            #expect(try oidc.dev("/_dev/protected", bad).status == 400, "\(bad)")
        }

        // Many sign-ins of one account keep 3 tickets; guesses count per account across them.
        let pairs = oidc.parameters(OIDCTestServer.PKCE(), scope: "openid", ["acr_values": Self.mfa])
        var pages: [TestBrowser.Page] = []
        for _ in 0..<6 {
            pages.append(
                try oidc.browser.post(
                    "/authorize",
                    form: try oidc.authorize(pairs).hiddenFields() + [
                        ("email", OIDCTestServer.email), ("password", OIDCTestServer.password),
                    ]))
        }
        #expect(oidc.server.secondSteps.withLock { $0.count } == 3)
        var guesses = 0
        for page in pages.suffix(3) {
            var current = page
            for _ in 0..<4 {
                current = try oidc.secondStep(
                    current, code: "999999" == oidc.oneTimeCodes.value.last ? "888888" : "999999")
                guesses += 1
            }
        }
        #expect(guesses == 12)
        let locked = try oidc.secondStep(pages[5])
        #expect(
            locked.redirectParameters["error"] == "access_denied",
            "the right code after 10 wrong ones: \(locked.status) \(locked.body.prefix(400))")
        // Another account is not locked out.
        let bob = try oidc.browser.post(
            "/authorize",
            form: try oidc.authorize(pairs).hiddenFields() + [
                ("email", "bob@example.com"), ("password", "battery-staple"),
            ])
        #expect(try oidc.secondStep(bob).redirectParameters["code"] != nil)
    }

    @Test("the dev panel cannot set amr or acr; with the dev endpoints off sign_in_as skips nothing")
    func devPanel() throws {
        let quiet = try OIDCTestServer { $0.devEndpoints = false }
        defer { quiet.stop() }
        let pairs = quiet.parameters(OIDCTestServer.PKCE(), scope: "openid", ["acr_values": Self.mfa])
        let page = try quiet.browser.post(
            "/authorize",
            form: try quiet.authorize(pairs).hiddenFields() + [
                ("email", OIDCTestServer.email), ("password", OIDCTestServer.password), ("sign_in_as", "x"),
            ])
        #expect(OIDCTestServer.isSecondStep(page))
        #expect(DevServer.reservedClaims.isSuperset(of: ["acr", "amr"]))
    }

    @Test("RP test modes: a weaker acr after a step-up, a 30-day-old auth_time")
    func misbehavingModes() throws {
        let weaker = try OIDCTestServer { $0.rpTest = .stepUpWeakerACR }
        defer { weaker.stop() }
        let weak = try Self.tokens(weaker, acrValues: Self.mfa)
        #expect(try JWT.unverified(weak["id_token"].string).claims["acr"] == .string(DevServer.passwordACR))
        let old = try OIDCTestServer { $0.rpTest = .stepUpOldAuthTime }
        defer { old.stop() }
        let aged = try JWT.unverified(try Self.tokens(old)["id_token"].string).claims
        let age = old.clock.now.timeIntervalSince1970 - (aged["auth_time"]?.doubleValue ?? 0)
        #expect(age >= 30 * 86400 - 5)
    }
}
