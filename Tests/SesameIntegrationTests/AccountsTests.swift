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

    @Test("one user at two issuers and two clients: three accounts, each refreshing at its own issuer; removing one")
    func severalIssuersAndClients() async throws {
        let first = try OIDCTestServer { configuration in
            configuration.accessTokenTTL = 120
            configuration.clients = [RegisteredClient(id: "app-a", redirectURIs: [OIDCTestServer.redirect])]
        }
        defer { first.stop() }
        let second = try OIDCTestServer { $0.accessTokenTTL = 120 }
        defer { second.stop() }
        let cli = try await first.provider()
        let app = try await first.provider(client: "app-a")
        let other = try await second.provider()
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
        struct NobodyAsked: AuthorizationUserAgent {
            func authorize(url: URL, redirectURI: String, state: String) async throws -> URL {
                Issue.record("the user was asked to sign in at a provider OIDCAccounts does not have")
                throw AuthError(.cancelled, "no")
            }
        }
        await #expect(throws: AuthError.self) { try await stranger.add(signingInWith: NobodyAsked(), at: other) }
        do {
            _ = try await stranger.session(for: atApp)
            Issue.record("a session without its provider")
        } catch let error as AuthError {
            #expect(error.code == .configuration)
        }
    }

    @Test(
        "hostile stores and upgrades: a failed save lists nothing, a failed delete keeps the account listed, a dropped provider can still be removed"
    )
    func failuresKeepTheListTrue() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let provider = try await oidc.provider()
        let store = FailingTokenStore()
        let index = InMemoryAccountIndexStore()
        let accounts = OIDCAccounts(provider: provider, tokens: store, index: index)
        let alice = PasswordAgent(harness: oidc, email: "alice@example.com", password: "correct-horse")
        // The credentials cannot be saved: the sign-in fails and no account is listed without credentials.
        await store.fail([.save])
        await #expect(throws: AuthError.self) { try await accounts.add(signingInWith: alice) }
        #expect(try await accounts.list().isEmpty)
        #expect(try await accounts.current() == nil)
        await store.heal()
        let account = try await accounts.add(signingInWith: alice)
        // The credentials cannot be deleted: still listed, so removing it again finishes the job.
        await store.fail([.delete])
        let failed = try await accounts.remove(account)
        #expect(!failed.credentialsRemoved)
        #expect(try await accounts.list() == [account])
        await store.heal()
        #expect(try await accounts.remove(account).credentialsRemoved)
        #expect(try await accounts.list().isEmpty)
        await #expect(throws: AuthError.self) { try await accounts.remove(account) }  // not listed: notSignedIn
        // An app update dropped the account's provider: removing it deletes its credentials without revocation.
        let again = try await accounts.add(signingInWith: alice)
        var otherConfiguration = provider.configuration
        otherConfiguration = OIDCAuthProvider.Configuration(
            clientID: "another-client", redirectURI: otherConfiguration.redirectURI, scopes: otherConfiguration.scopes)
        let updated = OIDCAccounts(
            provider: OIDCAuthProvider(metadata: provider.metadata, configuration: otherConfiguration),
            tokens: store, index: index)
        let removed = try await updated.remove(again)
        let left = await store.peek(profile: again.profile)
        #expect(removed.credentialsRemoved && left == nil)
        if case .notAttempted = removed.revocation {} else { Issue.record("revoked with the wrong client") }
        // Equality is the identity's: a changed label is the same account.
        var relabelled = again
        relabelled.label = "Alice (work)"
        #expect(relabelled == again && Set([relabelled, again]).count == 1)
    }

    @Test("adopt: a single-account sign-in (profile default) becomes an account without signing anyone out")
    func adoptSingleAccount() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let provider = try await oidc.provider()
        let store = InMemoryTokenStore()
        let single = OIDCAuth(provider: provider, store: store)
        try await single.signIn(
            with: PasswordAgent(harness: oidc, email: "bob@example.com", password: "battery-staple"))
        let before = try #require(try await store.load(profile: "default"))
        let accounts = OIDCAccounts(provider: provider, tokens: store, index: InMemoryAccountIndexStore())
        let bob = try #require(try await accounts.adopt(profile: "default", at: provider))
        #expect(bob.label == "bob@example.com")
        #expect(try await accounts.current() == bob)
        #expect(try await store.load(profile: "default") == nil)
        #expect(try await store.load(profile: bob.profile) == before)
        _ = try await accounts.session(for: bob).forceRefresh()
        #expect(try await accounts.adopt(profile: "default", at: provider) == nil)
    }

    @Test("a corrupt index is moved aside (the app starts over), a newer one of another shape is left as it is")
    func indexFiles() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-index-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        // The folder is created on first save (Application Support does not exist on a fresh iOS install).
        let url = folder.appendingPathComponent("nested/accounts.json")
        let store = FileAccountIndexStore(url: url)
        try await store.save(AccountIndex())
        #expect(try await store.load() == AccountIndex())
        try Data("{not json".utf8).write(to: url)
        await #expect(throws: AuthError.self) { try await store.load() }
        #expect(try await store.load() == nil)
        let aside = try FileManager.default.contentsOfDirectory(atPath: url.deletingLastPathComponent().path)
        #expect(aside.count == 1 && aside[0].hasPrefix("accounts.json.corrupt-"))
        let newer = Data(#"{"version":2,"accounts":{"by-issuer":{}}}"#.utf8)
        try newer.write(to: url)
        do {
            _ = try await store.load()
            Issue.record("a newer index was read")
        } catch let error as AuthError {
            #expect(error.code == .storeUnavailable)
        }
        #expect(try Data(contentsOf: url) == newer)
    }

    @Test("AccountsState follows the new session of an account removed and added again")
    @MainActor
    func stateFollowsReaddedAccount() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let accounts = OIDCAccounts(
            provider: try await oidc.provider(), tokens: InMemoryTokenStore(), index: InMemoryAccountIndexStore())
        let state = AccountsState(accounts: accounts)
        let agent = PasswordAgent(harness: oidc, email: "alice@example.com", password: "correct-horse")
        let alice = try await state.add(signingInWith: agent)
        #expect(state.current == alice)
        try await state.remove(alice)
        #expect(state.current == nil && state.currentState == nil)
        _ = try await state.add(signingInWith: agent)
        await state.currentState?.reload()
        guard case .signedIn? = state.currentState?.status else {
            Issue.record("follows the removed session: \(String(describing: state.currentState?.status))")
            return
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

    @Test("the file index: 0600, round trip, a corrupt file is storeCorrupt and kept aside")
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
        let kept = try FileManager.default.contentsOfDirectory(atPath: folder.path)
        #expect(kept.count == 1 && kept[0].hasPrefix("accounts.json.corrupt-"))
        // Profiles are stable and distinct, and valid profile names.
        let one = Account(issuer: "https://id.example", clientID: "app", subject: "s1")
        #expect(
            one.profile == Account(issuer: "https://id.example", clientID: "app", subject: "s1", label: "x").profile)
        #expect(one.profile != Account(issuer: "https://id.example", clientID: "app", subject: "s2").profile)
        #expect(
            one.profile.utf8.count == 27 && one.profile.allSatisfy { $0.isLetter || $0.isNumber || "-_".contains($0) })
    }
}
