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

    @Test("OIDC-09 OIDC-06 OIDC-01 OIDC-07: each required claim and each check, broken alone, is refused")
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

    @Test("OIDC-02 OIDC-03: an audience the client does not trust is refused, even with azp; a trusted one passes")
    func audiences() async throws {
        let fixture = try Fixture()
        defer { fixture.jwks.stop() }
        let two = try fixture.token(["aud": ["my-app", "other-api"], "azp": "my-app"])
        #expect(await fixture.validate(two) == "untrusted_audience")
        #expect(await fixture.validate(two) { $0.trustedAudiences = ["other-api"] } == nil)
        #expect(await fixture.validate(try fixture.token(["aud": ["my-app"]])) == nil, "an array with the client alone")
        #expect(await fixture.validate(try fixture.token(["azp": "someone-else"])) == "authorized_party_mismatch")
    }

    @Test("OIDC-05 RP-66: only algorithms the provider lists; never none or HMAC even if listed")
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

    @Test("BCP-08 NAT-13: a request made to provider A and answered elsewhere is refused before any token request")
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
        ] {
            #expect(throws: Never.self) { try OIDCAuthProvider.checkRedirectURI(good) }
        }
        for bad in [
            "http://localhost:8765/cb", "http://app.example.com/cb", "myapp://cb", "javascript:alert(1)",
            "https://x/#f",
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

    @Test("RFC 6749 §7.1: a token type other than Bearer is refused (until DPoP); any case of Bearer is fine")
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

@Suite struct OIDCHostileProviderTests {
    /// A provider whose discovery document says whatever the test wants.
    static func discovery(_ document: @escaping @Sendable (String) -> String) throws -> RecordingServer {
        try RecordingServer { request in
            let base = "http://127.0.0.1:\(request.headers["Host"]?.split(separator: ":").last ?? "0")"
            return request.path.hasSuffix("openid-configuration")
                ? .json(200, Data(document(base).utf8)) : .text(404, "")
        }
    }

    @Test("BCP-22: a loopback issuer cannot send the code over plain http to another host")
    func loopbackIssuerForeignHTTP() async throws {
        let server = try Self.discovery { base in
            #"{"issuer":"\#(base)","authorization_endpoint":"\#(base)/authorize","token_endpoint":"http://203.0.113.7/token","jwks_uri":"\#(base)/jwks"}"#
        }
        defer { server.stop() }
        do {
            _ = try await OIDCProviderMetadata.discover(issuer: server.base)
            Issue.record("an http token endpoint on another host was accepted")
        } catch let error as AuthError {
            #expect(error.code == .insecureEndpoint)
        }
    }

    @Test("an OpenID configuration without jwks_uri is refused (ID tokens could not be verified)")
    func noJWKS() async throws {
        let server = try Self.discovery { base in
            #"{"issuer":"\#(base)","authorization_endpoint":"\#(base)/authorize","token_endpoint":"\#(base)/token"}"#
        }
        defer { server.stop() }
        await #expect(throws: AuthError.self) { _ = try await OIDCProviderMetadata.discover(issuer: server.base) }
    }

    @Test("an issuer with a query or fragment is refused before any request")
    func issuerShape() async throws {
        for text in ["http://127.0.0.1:9/?q=1", "http://127.0.0.1:9/#x", "http://user@127.0.0.1:9"] {
            await #expect(throws: AuthError.self, "\(text)") {
                _ = try await OIDCProviderMetadata.discover(issuer: try #require(URL(string: text)))
            }
        }
    }

    @Test("DEV-03: a device response with a javascript: or file: URI, or a non-ASCII user code, is refused")
    func deviceURIs() async throws {
        let metadata = try OIDCProviderMetadata.scripted(device: true)
        for body in [
            #"{"device_code":"d","user_code":"ABCD","verification_uri":"javascript:alert(1)","expires_in":600}"#,
            #"{"device_code":"d","user_code":"ABCD","verification_uri":"file:///etc/passwd","expires_in":600}"#,
            #"{"device_code":"d","user_code":"AB\u200bCD","verification_uri":"https://as.example/d","expires_in":600}"#,
        ] {
            let transport = ScriptedTransport()
            transport.enqueue(.json(200, body))
            let provider = OIDCAuthProvider(
                metadata: metadata, configuration: .init(clientID: "c", redirectURI: "https://app.example/cb"),
                transport: transport)
            await #expect(throws: AuthError.self, "\(body)") { _ = try await provider.deviceAuthorization() }
        }
    }
}

extension IDTokenRuleTests {
    @Test("OIDC Core §2 and ATK-20: an empty or overlong sub, and an iat older than a day, are refused")
    func subjectAndAge() async throws {
        let fixture = try Fixture()
        defer { fixture.jwks.stop() }
        #expect(await fixture.validate(try fixture.token(["sub": ""])) == "invalid_subject")
        #expect(
            await fixture.validate(try fixture.token(["sub": .string(String(repeating: "s", count: 256))]))
                == "invalid_subject")
        let old = Int64(fixture.now.timeIntervalSince1970) - 2 * 86400
        #expect(
            await fixture.validate(try fixture.token(["iat": .integer(old), "auth_time": .integer(old)]))
                == "issued_too_long_ago")
    }
}

/// Device polling rules against a scripted token endpoint (fault injection at the transport seam).
@Suite struct DevicePollingTests {
    /// A provider over a scripted transport whose first answer is the device authorization `response`, and the
    /// waits it asks for (recorded, never slept).
    static func fixture(device response: String) throws -> (
        ScriptedTransport, LockedBox<[TimeInterval]>, OIDCAuthProvider
    ) {
        let transport = ScriptedTransport()
        let sleeps = LockedBox<[TimeInterval]>([])
        let metadata = try OIDCProviderMetadata.scripted(device: true)
        let provider = OIDCAuthProvider(
            metadata: metadata,
            configuration: .init(clientID: "c", redirectURI: "https://app.example/cb", scopes: ["offline_access"]),
            transport: transport, sleep: { seconds in sleeps.mutate { $0.append(seconds) } })
        transport.enqueue(.json(200, response))
        return (transport, sleeps, provider)
    }

    static let tokens = #"{"access_token":"a","token_type":"Bearer","refresh_token":"r","expires_in":60}"#

    @Test("DEV-02 DEV-04 DEV-05: no interval means 5 s; slow_down adds 5 s for good; pending keeps the interval")
    func intervals() async throws {
        let (transport, sleeps, provider) = try Self.fixture(
            device:
                #"{"device_code":"d","user_code":"ABCD-EFGH","verification_uri":"https://as.example/d","expires_in":600}"#
        )
        transport.enqueue(
            .json(400, #"{"error":"authorization_pending"}"#), .json(400, #"{"error":"slow_down"}"#),
            .json(400, #"{"error":"authorization_pending"}"#), .json(200, Self.tokens))
        let authorization = try await provider.deviceAuthorization()
        #expect(authorization.interval == 5)
        var signedIn = false
        for try await progress in provider.deviceTokens(for: authorization) {
            if case .signedIn = progress { signedIn = true }
        }
        #expect(signedIn)
        #expect(sleeps.value == [5, 5, 10, 10])
        let polls = transport.requests.dropFirst()
        #expect(polls.allSatisfy { String(decoding: $0.body ?? Data(), as: UTF8.self).contains("device_code=d") })
    }

    @Test("DEV-07 DEV-06: a timeout doubles the interval; expired_token ends the flow with a typed error")
    func backoffAndExpiry() async throws {
        let (transport, sleeps, provider) = try Self.fixture(
            device:
                #"{"device_code":"d","user_code":"ABCD","verification_uri":"https://as.example/d","expires_in":600,"interval":2}"#
        )
        transport.enqueue(
            .failure(AuthError(.transport, "timed out")), .json(400, #"{"error":"expired_token"}"#))
        let authorization = try await provider.deviceAuthorization()
        do {
            for try await _ in provider.deviceTokens(for: authorization) {}
            Issue.record("expired_token did not end the flow")
        } catch let error as AuthError {
            #expect(error.code == .deviceCodeExpired)
        }
        #expect(sleeps.value == [2, 4])
    }
}

@Suite struct LogoutRuleTests {
    @Test(
        "LOGOUT-01 LOGOUT-02 REV-02: the logout URL carries the hint, a registered URI and the state, which come back; revoking twice succeeds"
    )
    func endSessionRoundTrip() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let provider = try await oidc.provider()
        let tokens = try await oidc.signIn(provider)
        let url = try #require(
            provider.endSessionURL(for: tokens, postLogoutRedirectURI: "http://127.0.0.1:5555/bye", state: "st-1"))
        let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
        #expect(items.contains { $0.name == "id_token_hint" && $0.value == tokens.idToken })
        let target =
            url.path + "?" + (URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedQuery ?? "")
        let page = try oidc.browser.get(target)
        #expect(page.status == 302 && page.location == "http://127.0.0.1:5555/bye?state=st-1")
        try await provider.signOut(tokens)
        try await provider.signOut(tokens)  // RFC 7009 §2.2: an invalid token is a 200 too
    }
}
