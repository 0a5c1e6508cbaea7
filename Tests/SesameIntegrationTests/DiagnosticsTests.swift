import Foundation
import SesameDevServer
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import SesameTesting
import Testing

@testable import Sesame

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
        "No secret anywhere: a debug handler through sign-in with DPoP nonces, refresh, 401, redirect, exchange, Native SSO, a service account, the code and device flows by hand, revocation, end session, Sign in with Apple and the REST contract — every step said; no token, code, verifier, device code, password, client secret or private key in the entries, the dev servers' logs, errors, description or dump()"
    )
    func everyFlow() async throws {
        let serverLog = LineCollector()
        let described = LockedBox<[String]>([])
        func describe(_ value: Any) {
            var dumped = ""
            dump(value, to: &dumped)
            described.mutate { $0 += ["\(value)", String(reflecting: value), dumped] }
        }
        let (entries, secrets) = try await Self.capture {
            var secrets: [String] = [OIDCTestServer.password]
            func keep(_ tokens: TokenSet?) {
                guard let tokens else { return }
                secrets += [tokens.accessToken] + [tokens.refreshToken, tokens.idToken].compactMap { $0 }
            }
            // OpenID Connect with DPoP and server nonces; a refresh; UserInfo.
            let oidc = try OIDCTestServer {
                $0.dpopNonce = true
                $0.accessTokenTTL = 120
                $0.exchangeAudiences = ["https://api.example"]
                $0.log = { serverLog.append($0) }
            }
            defer { oidc.stop() }
            let key = try JWK.generate(for: .es256)
            if let d = key.jsonValue(includingPrivate: true)["d"]?.stringValue { secrets.append(d) }
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
            if let d = serviceKey.jsonValue(includingPrivate: true)["d"]?.stringValue { secrets.append(d) }
            describe(account)
            describe(legacy)
            describe(IDTokenValidator.Expectations(nonce: "a-nonce-of-the-flow", accessToken: secrets[1]))
            secrets.append("a-nonce-of-the-flow")
            // The code flow by hand: the code and the verifier are secrets too.
            let plain = try await oidc.provider()
            let pending = try await plain.authorizationRequest()
            let redirect = try oidc.userAgent(pending.url)
            secrets.append(pending.codeVerifier)
            let code = URLComponents(url: redirect, resolvingAgainstBaseURL: false)?.queryItems?.first {
                $0.name == "code"
            }?.value
            secrets += [code].compactMap { $0 }
            let byHand = try await plain.completeAuthorization(redirect: redirect, pending: pending)
            keep(byHand)
            [pending, byHand, plain, auth, auth.session].forEach(describe)
            describe(try AuthorizationResponse(url: redirect))
            let loopback = try LoopbackUserAgent(open: .custom { _ in })
            describe(loopback)
            // A replayed code: its error is described and dumped too.
            do { _ = try await plain.completeAuthorization(redirect: redirect, pending: pending) } catch {
                describe(error)
            }
            let rotated = try await plain.refresh(byHand)
            keep(rotated)
            // The device flow: its device code is a secret; approved on the device page.
            let user = DevServerUser(email: OIDCTestServer.email, password: OIDCTestServer.password)
            describe(user)
            let device = try await oidc.provider(sleep: { _ in })
            let authorization = try await device.deviceAuthorization()
            secrets.append(authorization.deviceCode)
            describe(authorization)
            try await user.confirmDevice(userCode: authorization.userCode, at: authorization.verificationURI)
            for try await progress in device.deviceTokens(for: authorization) {
                if case .signedIn(let tokens) = progress { keep(tokens) }
            }
            // Revocation and end session, through the provider's page.
            let ending = OIDCAuth(provider: plain, store: InMemoryTokenStore())
            try await ending.session.signIn(with: try await plain.refresh(rotated))
            keep(try await ending.session.currentTokens)
            describe(await ending.signOut(endSession: user, postLogoutRedirectURI: "http://127.0.0.1:5555/callback"))
            // A replayed (rotated, then revoked) refresh token: its error too.
            do { _ = try await plain.refresh(byHand) } catch { describe(error) }
            // Sign in with Apple and the REST contract, on the REST dev server.
            let rest = try Harness { $0.log = { serverLog.append($0) } }
            defer { rest.server.stop() }
            let nonce = SignInWithAppleNonce()
            secrets.append(nonce.raw)
            describe(nonce)
            let minted = try await rest.admin.send(
                "POST", "/_dev/apple/identity-token",
                json: ["sub": "000777.apple", "email": "ana@example.com", "nonce": .string(nonce.raw)])
            let identityToken = try #require(minted.json?["identityToken"]?.stringValue)
            secrets.append(identityToken)
            let apple = try await rest.provider.signInWithApple(
                identityToken: identityToken, rawNonce: nonce.raw, deviceID: "device-1")
            keep(apple)
            describe(apple)
            let password = "Pa55-\(UUID().uuidString)"
            secrets.append(password)
            keep(try await rest.provider.register(email: "leak@example.com", password: password))
            do { _ = try await rest.provider.login(email: "leak@example.com", password: password + "x") } catch {
                describe(error)
            }
            secrets.append(password + "x")
            try await rest.session.signIn(
                with: try await rest.provider.login(email: "leak@example.com", password: password))
            keep(try await rest.session.currentTokens)
            describe(rest.session)
            _ = await rest.session.signOut()
            return secrets
        }
        let text = entries.joined(separator: "\n")
        let everywhere: [String] = [text] + serverLog.lines.map { String($0) } + described.value
        #expect(serverLog.lines.count >= 20, "the dev servers logged their requests")
        for expected in [
            "authorization request", "code <redacted", "ID token <redacted", "refresh started", "refreshed",
            "asked for a DPoP nonce", "credentials rejected, refreshing once", "followed without credentials",
            "token exchanged for", "sign-in shared", "signed in from the shared sign-in", "client credentials granted",
            "signed out",
        ] {
            #expect(text.contains(expected), "no entry says '\(expected)'")
        }
        // No token, code or secret: not whole, not its first 12 characters; and no JWT at all.
        for output in everywhere {
            #expect(!output.contains("eyJ"), "a JWT in: \(output.prefix(160))")
            for secret in secrets where secret.count >= 12 {
                #expect(
                    !output.contains(secret) && !output.contains(String(secret.prefix(12))),
                    "a secret of \(secret.count) characters in: \(output.prefix(160))")
            }
            for secret in secrets where secret.count < 12 { #expect(!output.contains(secret)) }
        }
        #expect(secrets.count >= 25)
    }

    @Test("Calling APIs article: a debug handler that prints each entry sees a sign-in and a refresh")
    func printingHandler() async throws {
        let session = AuthSession(provider: ScriptedProvider(), store: InMemoryTokenStore())
        // Prints lines such as "info [session] profile default: refreshed (generation 2)".
        SesameLog.setHandler(level: .debug) { entry in print(entry) }
        defer { SesameLog.setHandler(nil) }
        try await session.signIn(with: TokenSet(accessToken: "a", refreshToken: "r"))
        _ = try await session.forceRefresh()
        // What it printed went to the test's output; the same entries, captured, are everyFlow()'s subject.
        #expect(await session.status == .signedIn)
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
