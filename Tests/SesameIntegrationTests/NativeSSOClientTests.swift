import Foundation
import Sesame
import SesameDevServer
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import SesameTesting
import Testing

/// OpenID Connect Native SSO from the apps' side, against the dev server (catalog NSSO-01..NSSO-04): two client IDs
/// of one vendor sharing one store.
@Suite struct NativeSSOClientTests {
    static let scopes = ["openid", "email", "offline_access", "device_sso"]

    /// The first app signs in through the form, the second from its shared sign-in, with the server in `mode`.
    static func bothApps(rpTest mode: RPTestMode) async throws {
        let oidc = try Self.server { $0.rpTest = mode }
        defer { oidc.stop() }
        let shared = InMemoryTokenStore()
        try await Self.app("app-a", oidc, shared: shared).signIn(with: FormUserAgent(harness: oidc))
        try await Self.app("app-b", oidc, shared: shared).signInWithNativeSSO()
    }

    /// A dev server with the vendor's two apps in one Native SSO group, and a third app outside it.
    static func server(_ configure: (inout DevServer.Configuration) -> Void = { _ in }) throws -> OIDCTestServer {
        try OIDCTestServer { configuration in
            let outsider = RegisteredClient(id: "app-c", redirectURIs: [OIDCTestServer.redirect])
            configuration.clients = OIDCTestServer.nativeSSOClients + [outsider]
            configure(&configuration)
        }
    }

    /// An app of the vendor: its own store, the shared one.
    static func app(
        _ clientID: String, _ oidc: OIDCTestServer, shared: any TokenStore,
        store: any TokenStore = InMemoryTokenStore(),
        scopes: [String] = scopes
    ) async throws -> OIDCAuth {
        try await OIDCAuth.restore(
            metadata: try await OIDCProviderMetadata.discover(issuer: oidc.issuer), clientID: clientID,
            redirectURI: OIDCTestServer.redirect, scopes: scopes, store: store,
            nativeSSO: NativeSSOStore(store: shared), timeSource: oidc.clock)
    }

    @Test(
        "NSSO-01 NSSO-02 NSSO-04: the first app shares its sign-in, the second signs in from it with no browser, as the same user and its own client"
    )
    func secondAppSignsInSilently() async throws {
        let oidc = try Self.server()
        defer { oidc.stop() }
        let shared = InMemoryTokenStore()
        let ownA = InMemoryTokenStore()
        let appA = try await Self.app("app-a", oidc, shared: shared, store: ownA)
        let tokensA = try await appA.signIn(with: FormUserAgent(harness: oidc))
        // NSSO-01: the secret went to the shared store only, with an ID token naming sid and ds_hash.
        let entry = try #require(try await NativeSSOStore(store: shared).sharedSignIn())
        let idClaims = try JWT.unverifiedClaims(of: entry.idToken)
        #expect(idClaims["sid"]?.stringValue != nil && idClaims["ds_hash"]?.stringValue != nil)
        let storedA = try await ownA.load(profile: "default")
        #expect(tokensA.deviceSecret == nil && storedA != nil && storedA?.deviceSecret == nil)
        #expect(!String(describing: entry).contains(entry.deviceSecret) && !"\(tokensA)".contains(entry.deviceSecret))
        var dumped = ""
        dump(entry, to: &dumped)
        #expect(!dumped.contains(entry.deviceSecret) && !dumped.contains(entry.idToken))
        // NSSO-02: the second app, with no agent at all.
        let appB = try await Self.app("app-b", oidc, shared: shared)
        let tokensB = try await appB.signInWithNativeSSO()
        let claimsB = try JWT.unverifiedClaims(of: try #require(tokensB.idToken))
        #expect(claimsB.audience == ["app-b"] && claimsB.subject == idClaims.subject)
        #expect(claimsB["sid"] == idClaims["sid"] && tokensB.refreshToken != nil)
        #expect(try await appB.userInfo()["email"] == "alice@example.com")
        let counters = try oidc.browser.get("/_dev/counters").json
        #expect(counters?["codeExchanges"] == 1 && counters?["nativeSSOExchanges"] == 1)
        // The second app refreshes on its own grant.
        oidc.clock.advance(by: 3600)
        _ = try await appB.accessToken()
        // NSSO-04: the first app signs out; the device session ends for both apps, and the entry is gone.
        _ = await appA.signOut()
        #expect(try await NativeSSOStore(store: shared).sharedSignIn() == nil)
        do {
            _ = try await appB.accessToken(forceRefresh: true)
            Issue.record("the second app's session outlived the shared sign-in's end")
        } catch let error as AuthError {
            #expect(error.code == .sessionExpired)
        }
        do {
            try await appB.signInWithNativeSSO()
            Issue.record("a Native SSO sign-in succeeded with nothing shared")
        } catch let error as AuthError {
            #expect(error.code == .notSignedIn)
        }
    }

    @Test("NSSO-03: a device secret from another device, an ended session, or an app outside the group is refused")
    func refusals() async throws {
        let oidc = try Self.server()
        defer { oidc.stop() }
        // Two devices, each with its own sign-in.
        let deviceOne = InMemoryTokenStore()
        let deviceTwo = InMemoryTokenStore()
        try await Self.app("app-a", oidc, shared: deviceOne).signIn(with: FormUserAgent(harness: oidc))
        oidc.browser.clearCookies()
        try await Self.app("app-a", oidc, shared: deviceTwo).signIn(with: FormUserAgent(harness: oidc))
        let one = try #require(try await NativeSSOStore(store: deviceOne).sharedSignIn())
        let two = try #require(try await NativeSSOStore(store: deviceTwo).sharedSignIn())
        let provider = try await Self.app("app-b", oidc, shared: InMemoryTokenStore()).provider
        // Device one's ID token with device two's secret.
        let mixed = try SharedSignIn(idToken: one.idToken, deviceSecret: two.deviceSecret)
        await #expect(throws: AuthError.self) { try await provider.nativeSSOTokens(from: mixed) }
        do {
            _ = try await provider.nativeSSOTokens(from: mixed)
        } catch let error as AuthError {
            #expect(error.code == .nativeSSORejected && error.serverResponse?.error == "invalid_grant")
        }
        // An app outside the vendor's group.
        let outsider = try await Self.app("app-c", oidc, shared: deviceOne, scopes: ["openid"])
        do {
            try await outsider.signInWithNativeSSO()
            Issue.record("an app outside the group signed in from the shared sign-in")
        } catch let error as AuthError {
            #expect(error.code == .nativeSSORejected && error.serverResponse?.error == "unauthorized_client")
        }
        // The entry survives a refusal that says nothing about it, and the group's app still signs in.
        #expect(try await NativeSSOStore(store: deviceOne).sharedSignIn() == one)
        try await Self.app("app-b", oidc, shared: deviceOne).signInWithNativeSSO()
        // Device two's session ends (its secret revoked): its entry is refused and forgotten.
        try await provider.revokeDeviceSecret(two.deviceSecret)
        let appOnTwo = try await Self.app("app-b", oidc, shared: deviceTwo)
        do {
            try await appOnTwo.signInWithNativeSSO()
            Issue.record("an ended device session signed an app in")
        } catch let error as AuthError {
            #expect(error.code == .nativeSSORejected && error.serverResponse?.error == "invalid_grant")
        }
        #expect(try await NativeSSOStore(store: deviceTwo).sharedSignIn() == nil)
        // Another issuer's shared sign-in never leaves the device.
        let other = try OIDCTestServer()
        defer { other.stop() }
        let foreign = try await Self.app("sesame-cli", other, shared: InMemoryTokenStore(), scopes: ["openid"])
        do {
            _ = try await foreign.provider.nativeSSOTokens(from: one)
            Issue.record("a shared sign-in went to another provider")
        } catch let error as AuthError {
            #expect(error.code == .issuerMismatch)
        }
        #expect(try other.browser.get("/_dev/counters").json?["tokenExchanges"] == 0)
    }

    @Test("the provider misbehaves: a device secret without ds_hash, an SSO answer for another user; nothing is kept")
    func misbehavingProvider() async throws {
        let oidc = try Self.server()
        defer { oidc.stop() }
        let shared = InMemoryTokenStore()
        let ownA = InMemoryTokenStore()
        _ = try oidc.dev("/_dev/rp-test", ["test": "sesame-client-test-native-sso-missing-ds-hash"])
        let appA = try await Self.app("app-a", oidc, shared: shared, store: ownA)
        do {
            try await appA.signIn(with: FormUserAgent(harness: oidc))
            Issue.record("a device secret without ds_hash was taken")
        } catch let error as AuthError {
            #expect(error.code == .invalidResponse)
        }
        let sharedEntry = try await shared.load(profile: "native-sso")
        let ownEntry = try await ownA.load(profile: "default")
        #expect(sharedEntry == nil && ownEntry == nil)
        _ = try oidc.dev("/_dev/rp-test", ["test": .null])
        try await appA.signIn(with: FormUserAgent(harness: oidc))
        _ = try oidc.dev("/_dev/rp-test", ["test": "sesame-client-test-native-sso-other-sub"])
        let ownB = InMemoryTokenStore()
        let appB = try await Self.app("app-b", oidc, shared: shared, store: ownB)
        do {
            try await appB.signInWithNativeSSO()
            Issue.record("an SSO answer for another user was taken")
        } catch let error as AuthError {
            #expect(error.code == .idTokenRejected && error.reason == "subject_mismatch")
        }
        #expect(try await ownB.load(profile: "default") == nil)
        #expect(try await NativeSSOStore(store: shared).sharedSignIn() != nil)
    }

    @Test("the article's snippet (Sesame.docc/NativeSSO.md): the browser the first time, the shared sign-in after")
    func articleSnippet() async throws {
        let oidc = try OIDCTestServer { configuration in
            for id in ["mail", "calendar"] {
                var client = RegisteredClient(id: id, redirectURIs: ["com.example.\(id):/oauth"])
                client.nativeSSOGroup = "vendor"
                configuration.clients.append(client)
            }
        }
        defer { oidc.stop() }
        let issuer = oidc.issuer
        let agent = FormUserAgent(harness: oidc)
        let sharedTokenStore = InMemoryTokenStore()
        var browserSignIns = 0
        for app in ["mail", "calendar"] {
            let ownTokenStore = InMemoryTokenStore()
            // From the article, with the app's client ID:
            let shared = NativeSSOStore(store: sharedTokenStore)
            let auth = try await OIDCAuth.configure(
                issuer: issuer, clientID: "\(app)", redirectURI: "com.example.\(app):/oauth",
                scopes: ["openid", "email", "offline_access"], store: ownTokenStore, nativeSSO: shared)
            if try await auth.session.currentTokens == nil {
                do {
                    try await auth.signInWithNativeSSO()
                } catch let error as AuthError
                    where [.notSignedIn, .nativeSSORejected, .issuerMismatch].contains(error.code)
                {
                    try await auth.signIn(with: agent)
                    browserSignIns += 1
                }
            }
            #expect(try await auth.userInfo()["email"] == "alice@example.com")
        }
        #expect(browserSignIns == 1)
    }

    @Test("NSSO-04: RP-initiated logout with an ID token of the device session ends it for every app")
    func logoutEndsEveryApp() async throws {
        let oidc = try Self.server()
        defer { oidc.stop() }
        let shared = InMemoryTokenStore()
        let appA = try await Self.app("app-a", oidc, shared: shared)
        try await appA.signIn(with: FormUserAgent(harness: oidc))
        let appB = try await Self.app("app-b", oidc, shared: shared)
        let tokensB = try await appB.signInWithNativeSSO()
        // The second app's own ID token names the device session: logging out with it ends the first app's too.
        let page = try oidc.browser.get(
            "/end-session?" + OIDCTestServer.query([("id_token_hint", try #require(tokensB.idToken))]))
        #expect(page.status == 200)
        for app in [appA, appB] {
            do {
                _ = try await app.accessToken(forceRefresh: true)
                Issue.record("an app's session outlived the device session's logout")
            } catch let error as AuthError {
                #expect(error.code == .sessionExpired)
            }
        }
        #expect(try oidc.browser.get("/_dev/counters").json?["deviceSessionsEnded"] == 1)
    }

    @Test("M3: the first app signs in again: the shared device session is kept, so one sign-out still ends both")
    func signInAgainKeepsTheSharedSession() async throws {
        let oidc = try Self.server()
        defer { oidc.stop() }
        let shared = InMemoryTokenStore()
        let appA = try await Self.app("app-a", oidc, shared: shared)
        try await appA.signIn(with: FormUserAgent(harness: oidc))
        let before = try #require(try await NativeSSOStore(store: shared).sharedSignIn())
        let appB = try await Self.app("app-b", oidc, shared: shared)
        try await appB.signInWithNativeSSO()
        // A new browser sign-in of the first app (a re-login, a step-up).
        try await appA.signIn(with: FormUserAgent(harness: oidc))
        let after = try #require(try await NativeSSOStore(store: shared).sharedSignIn())
        #expect(after.deviceSecret == before.deviceSecret)
        _ = await appA.signOut()
        do {
            _ = try await appB.accessToken(forceRefresh: true)
            Issue.record("the second app outlived the shared sign-in's end")
        } catch let error as AuthError {
            #expect(error.code == .sessionExpired)
        }
    }

    @Test("L8: a session never stores a device secret, whoever hands it one")
    func sessionDropsTheDeviceSecret() async throws {
        let store = InMemoryTokenStore()
        let session = AuthSession(
            provider: RESTAuthProvider(baseURL: try #require(URL(string: "https://x.example"))), store: store)
        try await session.signIn(with: TokenSet(accessToken: "a", deviceSecret: "secret"))
        #expect(try await store.load(profile: "default")?.deviceSecret == nil)
        #expect(try await session.currentTokens?.deviceSecret == nil)
    }

    @Test("L5: another vendor's app is refused as unauthorized_client and the shared entry is kept")
    func anotherGroupKeepsTheEntry() async throws {
        let oidc = try Self.server { configuration in
            var rival = RegisteredClient(id: "rival", redirectURIs: [OIDCTestServer.redirect])
            rival.nativeSSOGroup = "other"
            configuration.clients.append(rival)
        }
        defer { oidc.stop() }
        let shared = InMemoryTokenStore()
        try await Self.app("app-a", oidc, shared: shared).signIn(with: FormUserAgent(harness: oidc))
        let rival = try await Self.app("rival", oidc, shared: shared)
        do {
            try await rival.signInWithNativeSSO()
            Issue.record("another vendor's app signed in from the shared sign-in")
        } catch let error as AuthError {
            #expect(error.code == .nativeSSORejected && error.serverResponse?.error == "unauthorized_client")
        }
        #expect(try await NativeSSOStore(store: shared).sharedSignIn() != nil)
    }
}
