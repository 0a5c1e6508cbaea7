import Foundation
import Sesame
import SesameDevServer
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import SesameTesting
import Testing

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
        "LOGOUT-01 LOGOUT-02 REV-02 RP-38: the logout URL carries the hint, a registered URI and the state, which come back; revoking twice succeeds"
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
