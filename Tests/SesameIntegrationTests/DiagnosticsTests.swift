import Foundation
import Sesame
import SesameDevServer
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import SesameTesting
import Testing

/// The diagnostics seam (issue 23): a handler at its most verbose through every flow says what happened, and no
/// entry holds a token, a code or a secret.
@Suite(.serialized) struct DiagnosticsTests {
    /// Every entry logged while `body` runs (other suites' entries too: the handler is global; only their
    /// absence of this test's secrets is checked).
    static func capture(_ body: () async throws -> [String]) async throws -> (entries: [String], secrets: [String]) {
        let entries = LockedBox<[String]>([])
        SesameLog.setHandler(level: .debug) { entry in entries.mutate { $0.append(entry.description) } }
        defer { SesameLog.setHandler(nil) }
        let secrets = try await body()
        return (entries.value, secrets)
    }

    @Test(
        "a debug handler through sign-in with DPoP nonces, refresh, 401, redirect, exchange, Native SSO, a service account and sign-out: every step said, no secret"
    )
    func everyFlow() async throws {
        let (entries, secrets) = try await Self.capture {
            var secrets: [String] = []
            func keep(_ tokens: TokenSet?) {
                guard let tokens else { return }
                secrets += [tokens.accessToken] + [tokens.refreshToken, tokens.idToken].compactMap { $0 }
            }
            // OpenID Connect with DPoP and server nonces; a refresh; UserInfo.
            let oidc = try OIDCTestServer {
                $0.dpopNonce = true
                $0.accessTokenTTL = 120
                $0.exchangeAudiences = ["https://api.example"]
            }
            defer { oidc.stop() }
            let key = try JWK.generate(for: .es256)
            let auth = OIDCAuth(
                provider: try await DPoPClientTests.provider(oidc, key: key), store: InMemoryTokenStore())
            keep(try await auth.signIn(with: FormUserAgent(harness: oidc)))
            oidc.clock.advance(by: 119)
            _ = try await auth.accessToken()
            keep(try await auth.session.currentTokens)
            _ = try await auth.userInfo()
            // A token exchange.
            secrets.append(try await auth.exchangedToken(for: .audience("https://api.example")).accessToken)
            // An API that rejects the token once, then redirects elsewhere.
            let elsewhere = try RecordingServer { _ in HTTPServerResponse(status: 200) }
            defer { elsewhere.stop() }
            let rejections = LockedBox(1)
            let api = try RecordingServer { request in
                if rejections.value > 0 {
                    rejections.value -= 1
                    var response = HTTPServerResponse(status: 401)
                    response.headers.set("WWW-Authenticate", "DPoP error=\"invalid_token\"")
                    return response
                }
                var response = HTTPServerResponse(status: 302)
                response.headers.set("Location", elsewhere.base.appendingPathComponent("x").absoluteString)
                return response
            }
            defer { api.stop() }
            _ = try await auth.client(for: api.base).send(.get("/v1"))
            keep(try await auth.session.currentTokens)
            _ = await auth.signOut()
            // Native SSO between two apps.
            let sso = try NativeSSOClientTests.server()
            defer { sso.stop() }
            let shared = InMemoryTokenStore()
            keep(
                try await NativeSSOClientTests.app("app-a", sso, shared: shared).signIn(
                    with: FormUserAgent(harness: sso)))
            if let entry = try await NativeSSOStore(store: shared).sharedSignIn() { secrets.append(entry.deviceSecret) }
            keep(try await NativeSSOClientTests.app("app-b", sso, shared: shared).signInWithNativeSSO())
            // A service account.
            let serviceKey = try JWK.generate(for: .es256)
            let service = try ServiceAccountClientTests.server(key: serviceKey)
            defer { service.stop() }
            let account = try await ServiceAccount.configure(
                issuer: service.issuer, clientID: "nightly", authentication: try .privateKeyJWT(key: serviceKey),
                timeSource: service.clock)
            secrets.append(try await account.accessToken())
            let legacy = try await ServiceAccount.configure(
                issuer: service.issuer, clientID: "legacy",
                authentication: .clientSecretBasic(ServiceAccountClientTests.secret), timeSource: service.clock)
            secrets.append(try await legacy.accessToken())
            secrets.append(ServiceAccountClientTests.secret)
            return secrets
        }
        let text = entries.joined(separator: "\n")
        for expected in [
            "authorization request", "code <redacted", "ID token <redacted", "refresh started", "refreshed",
            "asked for a DPoP nonce", "credentials rejected, refreshing once", "followed without credentials",
            "token exchanged for", "sign-in shared", "signed in from the shared sign-in", "client credentials granted",
            "signed out",
        ] {
            #expect(text.contains(expected), "no entry says '\(expected)'")
        }
        // No token, code or secret: not whole, not its first 12 characters; and no JWT at all.
        #expect(!text.contains("eyJ"), "a JWT in the diagnostics")
        for secret in secrets where secret.count >= 12 {
            #expect(!text.contains(secret) && !text.contains(String(secret.prefix(12))))
        }
        #expect(secrets.count >= 10)
    }

    @Test("nothing is built or sent without a handler, or below its level")
    func quiet() async throws {
        let entries = LockedBox(0)
        SesameLog.setHandler(level: .error) { _ in entries.mutate { $0 += 1 } }
        defer { SesameLog.setHandler(nil) }
        let session = AuthSession(provider: ScriptedProvider(), store: InMemoryTokenStore())
        try await session.signIn(with: TokenSet(accessToken: "a"))
        #expect(entries.value == 0)
        _ = await session.signOut(revoke: false)
        #expect(entries.value == 0)
    }
}
