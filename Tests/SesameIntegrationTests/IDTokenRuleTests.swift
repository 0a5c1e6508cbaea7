import Foundation
import Sesame
import SesameDevServer
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import SesameTesting
import Testing

/// The client's ID-token rules one by one (OIDC Core §3.1.3.7, §12.2), with tokens signed here and the keys
/// served over loopback, so each rule is broken alone.
@Suite struct IDTokenRuleTests {
    static let issuer = "https://id.example.com"
    static let client = "my-app"

    struct Fixture {
        let key: JWK
        let jwks: RecordingServer
        let cache: JWKSCache
        let now = Date(timeIntervalSince1970: 1_800_000_000)

        init() throws {
            let key = try JWK.generate(for: .es256)
            let published = JOSEValue.object(["keys": [try key.publicKey().jsonValue()]]).jsonData
            jwks = try RecordingServer { _ in .json(200, published) }
            self.key = key
            cache = JWKSCache(url: jwks.base.appendingPathComponent("jwks"))
        }

        func claims(_ changes: [String: JOSEValue?] = [:]) -> JWTClaims {
            var claims: JOSEObject = [
                "iss": .string(IDTokenRuleTests.issuer), "aud": .string(IDTokenRuleTests.client), "sub": "user-1",
                "iat": .integer(Int64(now.timeIntervalSince1970)),
                "exp": .integer(Int64(now.timeIntervalSince1970) + 300),
                "auth_time": .integer(Int64(now.timeIntervalSince1970) - 10), "nonce": "n-1",
            ]
            for (name, value) in changes { claims[name] = value }
            return JWTClaims(claims)
        }

        func token(_ changes: [String: JOSEValue?] = [:]) throws -> String {
            try JWT.sign(claims(changes), key: key, algorithm: .es256)
        }

        func validate(
            _ token: String, _ expectations: IDTokenValidator.Expectations = .init(nonce: "n-1"),
            algorithms: [String] = ["ES256"], configure: (inout IDTokenValidator) -> Void = { _ in }
        ) async -> String? {
            var validator = IDTokenValidator(
                issuer: IDTokenRuleTests.issuer, clientID: IDTokenRuleTests.client, algorithms: algorithms)
            configure(&validator)
            do {
                _ = try await validator.validate(token, expecting: expectations, keys: cache, now: now)
                return nil
            } catch let error as AuthError {
                return error.reason ?? error.code.rawValue
            } catch {
                return "\(error)"
            }
        }
    }

    @Test(
        "OIDC-09 OIDC-06 OIDC-01 OIDC-07 RP-13 RP-59 RP-60 RP-63 RP-64: each required claim and each check, broken alone, is refused"
    )
    func requiredClaims() async throws {
        let fixture = try Fixture()
        defer { fixture.jwks.stop() }
        #expect(await fixture.validate(try fixture.token()) == nil, "the unbroken token passes")
        for (change, reason) in [
            (["exp": nil], "missing_claim"), (["aud": nil], "missing_claim"), (["iss": nil], "missing_claim"),
            (["sub": nil], "missing_claim"), (["iat": nil], "missing_claim"),
            (["exp": .integer(1_800_000_000 - 120)], "expired"),
            (["iss": "https://id.example.com/"], "issuer_mismatch"),
            (["aud": "another-app"], "audience_mismatch"), (["nonce": nil], "missing_claim|nonce_mismatch"),
            (["nonce": "n-2"], "nonce_mismatch"),
        ] as [([String: JOSEValue?], String)] {
            let got = await fixture.validate(try fixture.token(change))
            #expect(reason.split(separator: "|").contains { $0 == got ?? "" }, "\(change): \(got ?? "accepted")")
        }
    }

    @Test(
        "OIDC-02 OIDC-03 RP-61 RP-62: an audience the client does not trust is refused, even with azp; [client_id] alone or a trusted one passes"
    )
    func audiences() async throws {
        let fixture = try Fixture()
        defer { fixture.jwks.stop() }
        let two = try fixture.token(["aud": ["my-app", "other-api"], "azp": "my-app"])
        #expect(await fixture.validate(two) == "untrusted_audience")
        #expect(await fixture.validate(two) { $0.trustedAudiences = ["other-api"] } == nil)
        // Byte for byte: "\u{212A}" (KELVIN SIGN) is canonically equivalent to "K", so a Set<String> matched it.
        let kelvin = try fixture.token(["aud": ["my-app", "\u{212A}api"], "azp": "my-app"])
        #expect(await fixture.validate(kelvin) { $0.trustedAudiences = ["Kapi"] } == "untrusted_audience")
        #expect(await fixture.validate(try fixture.token(["aud": ["my-app"]])) == nil, "an array with the client alone")
        #expect(await fixture.validate(try fixture.token(["azp": "someone-else"])) == "authorized_party_mismatch")
    }

    @Test("OIDC-08: an auth_time past the token's check (beyond the 60 s leeway) is refused, with max_age or without")
    func authTimeInFuture() async throws {
        let fixture = try Fixture()
        defer { fixture.jwks.stop() }
        let later = Int64(fixture.now.timeIntervalSince1970) + 61
        for maxAge in [nil, 600] as [TimeInterval?] {
            let expectations = IDTokenValidator.Expectations(nonce: "n-1", maxAge: maxAge)
            #expect(
                await fixture.validate(try fixture.token(["auth_time": .integer(later)]), expectations)
                    == "auth_time_in_future")
            #expect(await fixture.validate(try fixture.token(["auth_time": .integer(later - 1)]), expectations) == nil)
            #expect(
                await fixture.validate(try fixture.token(["auth_time": 99_999_999_999]), expectations)
                    == "auth_time_in_future")
        }
    }

    @Test("OIDC-05 RP-06 RP-66: only algorithms the provider lists; never none or HMAC even if listed")
    func algorithms() async throws {
        let fixture = try Fixture()
        defer { fixture.jwks.stop() }
        let token = try fixture.token()
        #expect(await fixture.validate(token, algorithms: ["RS256"]) == "algorithm_not_allowed")
        #expect(await fixture.validate(token, algorithms: ["none", "HS256"]) == "algorithm_not_allowed")
        let hmac = try JWT.sign(
            fixture.claims(), key: try JWK(symmetricKey: Array(repeating: 7, count: 32), algorithm: .hs256),
            algorithm: .hs256)
        #expect(await fixture.validate(hmac, algorithms: ["HS256", "ES256"]) == "algorithm_not_allowed")
    }

    @Test("OIDC-11: a refreshed ID token keeps iss, sub, aud, azp and auth_time")
    func refreshRules() async throws {
        let fixture = try Fixture()
        defer { fixture.jwks.stop() }
        let original = fixture.claims(["azp": "my-app"])
        let expect = IDTokenValidator.Expectations(original: original)
        #expect(await fixture.validate(try fixture.token(["nonce": nil, "azp": "my-app"]), expect) == nil)
        for (change, reason) in [
            (["sub": "user-2"], "subject_changed"),
            (["auth_time": .integer(1_800_000_000)], "auth_time_changed"),
            (["aud": ["my-app", "x"], "azp": "my-app"], "untrusted_audience"),
        ] as [([String: JOSEValue?], String)] {
            var all = change
            all["nonce"] = .some(nil)
            if all["azp"] == nil { all["azp"] = "my-app" }
            #expect(await fixture.validate(try fixture.token(all), expect) == reason, "\(change)")
        }
    }

    @Test("OIDC-12: an unknown kid refetches the keys at most once a minute (forged kids do not hammer the provider)")
    func refetchRateLimit() async throws {
        let fixture = try Fixture()
        defer { fixture.jwks.stop() }
        #expect(await fixture.validate(try fixture.token()) == nil)
        let stranger = try JWK.generate(for: .es256, keyID: "forged")
        for _ in 0..<5 {
            let forged = try JWT.sign(fixture.claims(), key: stranger, algorithm: .es256)
            #expect(await fixture.validate(forged) == "key_not_found")
        }
        #expect(fixture.jwks.requests.count == 2, "one fetch, one refetch")
    }
}

@Suite struct OIDCResponseRuleTests {
    @Test("BCP-06: a replayed redirect never reaches the token endpoint, and the first session stays alive")
    func replay() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let provider = try await oidc.provider()
        let pending = try await provider.authorizationRequest()
        let redirect = try oidc.userAgent(pending.url)
        let tokens = try await provider.completeAuthorization(redirect: redirect, pending: pending)
        do {
            _ = try await provider.completeAuthorization(redirect: redirect, pending: pending)
            Issue.record("a replayed response was exchanged")
        } catch let error as AuthError {
            #expect(error.code == .invalidAuthorizationResponse)
        }
        #expect(try await provider.userInfo(for: tokens)["sub"] != nil, "the provider never saw the replay")
    }

    @Test(
        "BCP-08 BCP-09 BCP-10 NAT-13: a request made to provider A and answered elsewhere is refused before any token request"
    )
    func mixUpAcrossProviders() async throws {
        let a = try OIDCTestServer()
        defer { a.stop() }
        let b = try OIDCTestServer()
        defer { b.stop() }
        let providerA = try await a.provider()
        let providerB = try await b.provider()
        let pending = try await providerA.authorizationRequest()
        let redirect = try a.userAgent(pending.url)
        await #expect(throws: AuthError.self) {
            try await providerB.completeAuthorization(redirect: redirect, pending: pending)
        }
        // And a response that arrives on another path than the request's redirect URI.
        var moved = try #require(URLComponents(url: redirect, resolvingAgainstBaseURL: false))
        moved.path = "/elsewhere"
        do {
            _ = try await providerA.completeAuthorization(redirect: try #require(moved.url), pending: pending)
            Issue.record("a response on another redirect URI was exchanged")
        } catch let error as AuthError {
            #expect(error.code == .invalidAuthorizationResponse)
        }
        let counters = try await b.counters()
        #expect(counters["codeExchanges"] == 0 && counters["codeFailures"] == 0)
    }

    @Test("BCP-21 NAT-05 NAT-09: redirect URIs a native client may use")
    func redirectURIs() throws {
        for good in [
            "http://127.0.0.1:8765/cb", "http://[::1]:1/cb", "https://app.example.com/cb", "com.example.app:/oauth",
            "http://127.1.2.3:1/cb",
        ] {
            #expect(throws: Never.self) { try OIDCAuthProvider.checkRedirectURI(good) }
        }
        for bad in [
            "http://localhost:8765/cb", "http://app.example.com/cb", "myapp://cb", "javascript:alert(1)",
            "https://x/#f", "http://127.attacker.example/cb", "http://127.0.0.1\u{301}/cb", "http://127.0.0.256/cb",
            "http://128.0.0.1/cb", "http://127.0.0/cb",
        ] {
            #expect(throws: AuthError.self, "\(bad)") { try OIDCAuthProvider.checkRedirectURI(bad) }
        }
    }

    @Test("DEV-08: no poll after the device code expired")
    func deviceExpiry() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let clock = oidc.clock
        let provider = try await oidc.provider(sleep: { clock.advance(by: $0 * 200) })
        let authorization = try await provider.deviceAuthorization()
        let before = try await oidc.counters()["requests"]?["POST /token"]?.doubleValue ?? 0
        do {
            for try await _ in provider.deviceTokens(for: authorization) {}
            Issue.record("an expired device code kept polling without an error")
        } catch let error as AuthError {
            #expect(error.code == .deviceCodeExpired)
        }
        let after = try await oidc.counters()["requests"]?["POST /token"]?.doubleValue ?? 0
        #expect(after - before <= 1, "at most one poll (before the expiry)")
    }

    @Test("REV-03: a failing revocation still tries the other token and reports a retryable error")
    func revocationFailure() async throws {
        let oidc = try OIDCTestServer { $0.faults = try FaultPlan(spec: "/revoke:status=503") }
        defer { oidc.stop() }
        let provider = try await oidc.provider()
        let tokens = try await oidc.signIn(provider)
        do {
            try await provider.signOut(tokens)
            Issue.record("an unconfirmed revocation was reported as done")
        } catch let error as AuthError {
            #expect(error.isTransient)
        }
        #expect(try await oidc.counters()["requests"]?["POST /revoke"] == 2)
    }

    @Test(
        "HTTP-02: token_type compares case-insensitively (bEARER is Bearer); another type is refused until DPoP (RFC 6749 §7.1)"
    )
    func tokenType() async throws {
        let metadata = try OIDCProviderMetadata.scripted()
        let transport = ScriptedTransport()
        let provider = OIDCAuthProvider(
            metadata: metadata,
            configuration: .init(clientID: "c", redirectURI: "https://app.example/cb", scopes: ["offline_access"]),
            transport: transport)
        let old = TokenSet(accessToken: "old", refreshToken: "r-1")
        transport.enqueue(.json(200, #"{"access_token":"a-1","token_type":"bEARER","expires_in":60}"#))
        let refreshed = try await provider.refresh(old)
        #expect(refreshed.accessToken == "a-1" && refreshed.refreshToken == "r-1", "the old refresh token is kept")
        transport.enqueue(.json(200, #"{"access_token":"a-2","token_type":"mac"}"#))
        await #expect(throws: AuthError.self) { _ = try await provider.refresh(old) }
    }
}

extension OIDCTestServer {
    func counters() async throws -> JOSEValue {
        let page = try browser.get("/_dev/counters")
        return try #require(page.json)
    }
}
