import Foundation
import Sesame
import SesameDevServer
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

/// Several accounts — of one client, of two clients, at two issuers — in one store (issue 23): each its own profile, session and refresh; sign-out of
/// one never touches another.
@Suite struct AccountsTests {
    /// Signs in as `email` in a fresh browser (no remembered session of another user).
    struct PasswordAgent: AuthorizationUserAgent {
        let harness: OIDCTestServer
        let email: String
        let password: String

        func authorize(url: URL, redirectURI: String, state: String) async throws -> URL {
            harness.browser.clearCookies()
            let page = try harness.browser.get(url.path + "?" + (url.query ?? ""))
            let next = try harness.browser.post(
                "/authorize", form: page.hiddenFields() + [("email", email), ("password", password)])
            guard let location = next.location, let redirect = URL(string: location) else {
                throw AuthError(.invalidResponse, "no redirect: \(next.status)")
            }
            return redirect
        }
    }

    @Test("two accounts: added, listed, switched; each refreshes on its own; removing one leaves the other")
    func twoAccounts() async throws {
        let oidc = try OIDCTestServer { $0.accessTokenTTL = 120 }
        defer { oidc.stop() }
        let tokens = InMemoryTokenStore()
        let accounts = OIDCAccounts(
            provider: try await oidc.provider(), tokens: tokens, index: InMemoryAccountIndexStore())
        let alice = try await accounts.add(
            signingInWith: PasswordAgent(harness: oidc, email: "alice@example.com", password: "correct-horse"))
        let bob = try await accounts.add(
            signingInWith: PasswordAgent(harness: oidc, email: "bob@example.com", password: "battery-staple"))
        #expect(try await accounts.list().map(\.label) == ["alice@example.com", "bob@example.com"])
        #expect(try await accounts.current()?.isSame(as: bob) == true && alice.profile != bob.profile)
        #expect(!"\(alice)".contains("eyJ"))
        try await accounts.switchTo(alice)
        #expect(try await accounts.current()?.isSame(as: alice) == true)
        // Signing alice in again updates her account, never a second one.
        _ = try await accounts.add(
            signingInWith: PasswordAgent(harness: oidc, email: "alice@example.com", password: "correct-horse"))
        #expect(try await accounts.list().count == 2)
        // Both expire; both refresh at once, each once.
        oidc.clock.advance(by: 119)
        let aliceSession = try await accounts.session(for: alice)
        let bobSession = try await accounts.session(for: bob)
        async let a = aliceSession.validTokens()
        async let b = bobSession.validTokens()
        let (aliceTokens, bobTokens) = try await (a, b)
        #expect(aliceTokens.user?.email == "alice@example.com" && bobTokens.user?.email == "bob@example.com")
        #expect(try oidc.browser.get("/_dev/counters").json?["refreshes"] == 2)
        // Removing bob revokes his grant only: alice's session refreshes on.
        try await accounts.switchTo(bob)
        _ = try await accounts.remove(bob)
        #expect(try await accounts.list().map(\.subject) == [alice.subject])
        #expect(try await accounts.current()?.isSame(as: alice) == true)
        #expect(try await tokens.load(profile: bob.profile) == nil)
        _ = try await aliceSession.forceRefresh()
        do {
            try await accounts.switchTo(bob)
            Issue.record("switched to a removed account")
        } catch let error as AuthError {
            #expect(error.code == .notSignedIn)
        }
    }

    /// A provider for `client` at `oidc`.
    static func provider(_ oidc: OIDCTestServer, client: String) async throws -> OIDCAuthProvider {
        var configuration = OIDCAuthProvider.Configuration(
            clientID: client, redirectURI: OIDCTestServer.redirect, scopes: ["openid", "email", "offline_access"])
        configuration.pushedRequests = .whenRequired
        return OIDCAuthProvider(
            metadata: try await OIDCProviderMetadata.discover(issuer: oidc.issuer), configuration: configuration,
            timeSource: oidc.clock)
    }

    @Test("one user at two issuers and two clients: three accounts, each refreshing at its own issuer; removing one")
    func severalIssuersAndClients() async throws {
        let first = try OIDCTestServer { configuration in
            configuration.accessTokenTTL = 120
            configuration.clients = [RegisteredClient(id: "app-a", redirectURIs: [OIDCTestServer.redirect])]
        }
        defer { first.stop() }
        let second = try OIDCTestServer { $0.accessTokenTTL = 120 }
        defer { second.stop() }
        let cli = try await Self.provider(first, client: "sesame-cli")
        let app = try await Self.provider(first, client: "app-a")
        let other = try await Self.provider(second, client: "sesame-cli")
        let tokens = InMemoryTokenStore()
        let accounts = OIDCAccounts(providers: [cli, app, other], tokens: tokens, index: InMemoryAccountIndexStore())
        func alice(_ harness: OIDCTestServer) -> PasswordAgent {
            PasswordAgent(harness: harness, email: "alice@example.com", password: "correct-horse")
        }
        let atCLI = try await accounts.add(signingInWith: alice(first))
        let atApp = try await accounts.add(signingInWith: alice(first), at: app)
        let atSecond = try await accounts.add(signingInWith: alice(second), at: other)
        #expect(Set([atCLI.profile, atApp.profile, atSecond.profile]).count == 3)
        #expect(atCLI.issuer == atApp.issuer && atCLI.issuer != atSecond.issuer && atApp.clientID == "app-a")
        #expect(try await accounts.list().count == 3)
        #expect(try await accounts.current()?.isSame(as: atSecond) == true)
        // All expire; each refreshes once, at its own issuer with its own client.
        first.clock.advance(by: 119)
        second.clock.advance(by: 119)
        for account in [atCLI, atApp, atSecond] {
            let refreshed = try await accounts.session(for: account).validTokens()
            #expect(refreshed.user?.id == account.subject)
        }
        #expect(try first.browser.get("/_dev/counters").json?["refreshes"] == 2)
        #expect(try second.browser.get("/_dev/counters").json?["refreshes"] == 1)
        // Removing the second issuer's account revokes there only; the first issuer's two refresh on.
        _ = try await accounts.remove(atSecond)
        #expect(try await tokens.load(profile: atSecond.profile) == nil)
        #expect(try await accounts.list().map(\.profile) == [atCLI.profile, atApp.profile])
        _ = try await accounts.session(for: atApp).forceRefresh()
        _ = try await accounts.session(for: atCLI).forceRefresh()
        // A provider that is not one of the accounts' is refused before anyone is asked to sign in.
        let stranger = OIDCAccounts(provider: cli, tokens: tokens, index: InMemoryAccountIndexStore())
        await #expect(throws: AuthError.self) { try await stranger.add(signingInWith: alice(second), at: other) }
        do {
            _ = try await stranger.session(for: atApp)
            Issue.record("a session without its provider")
        } catch let error as AuthError {
            #expect(error.code == .configuration)
        }
    }

    @Test("AccountsState: the current account with its AuthState, the others, and a switch")
    @MainActor
    func observableState() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let accounts = OIDCAccounts(
            provider: try await oidc.provider(), tokens: InMemoryTokenStore(), index: InMemoryAccountIndexStore())
        let state = AccountsState(accounts: accounts)
        await state.reload()
        #expect(state.current == nil && state.others.isEmpty && state.currentState == nil)
        let alice = try await accounts.add(
            signingInWith: PasswordAgent(harness: oidc, email: "alice@example.com", password: "correct-horse"))
        let bob = try await accounts.add(
            signingInWith: PasswordAgent(harness: oidc, email: "bob@example.com", password: "battery-staple"))
        await state.reload()
        #expect(state.current?.isSame(as: bob) == true && state.others.map(\.subject) == [alice.subject])
        try await state.switchTo(alice)
        #expect(state.current?.isSame(as: alice) == true && state.others.map(\.subject) == [bob.subject])
        await state.currentState?.reload()
        if case .signedIn(let user)? = state.currentState?.status {
            #expect(user?.email == "alice@example.com")
        } else {
            Issue.record(
                "the current account's state is not signed in: \(String(describing: state.currentState?.status))")
        }
    }

    @Test("the file index: 0600, round trip, a corrupt file is storeCorrupt and kept")
    func fileIndex() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sesame-accounts-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("accounts.json")
        let store = FileAccountIndexStore(url: file)
        #expect(try await store.load() == nil)
        var index = AccountIndex()
        index.accounts = [Account(issuer: "https://id.example", clientID: "app", subject: "s1", label: "a@example.com")]
        index.current = index.accounts[0].profile
        try await store.save(index)
        #expect(try await store.load() == index)
        let mode = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        try Data("{not json".utf8).write(to: file)
        await #expect(throws: AuthError.self) { _ = try await store.load() }
        #expect(FileManager.default.fileExists(atPath: file.path))
        // Profiles are stable and distinct, and valid profile names.
        let one = Account(issuer: "https://id.example", clientID: "app", subject: "s1")
        #expect(
            one.profile == Account(issuer: "https://id.example", clientID: "app", subject: "s1", label: "x").profile)
        #expect(one.profile != Account(issuer: "https://id.example", clientID: "app", subject: "s2").profile)
        #expect(
            one.profile.utf8.count == 27 && one.profile.allSatisfy { $0.isLetter || $0.isNumber || "-_".contains($0) })
    }
}
