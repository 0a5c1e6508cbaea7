import Foundation
import Sesame
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A folder removed when the test ends.
final class ScratchFolder {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-scratch-\(UUID().uuidString)")
    deinit { try? FileManager.default.removeItem(at: url) }
}

/// `FileDPoPKeyStore`: DPoP keys that outlive the process on Linux, and refuse every file they did not write.
@Suite struct FileDPoPKeyStoreTests {
    func mode(_ path: String) -> Int {
        (try? FileManager.default.attributesOfItem(atPath: path))?[.posixPermissions] as? Int ?? -1
    }

    func expectCorrupt(_ keys: FileDPoPKeyStore, _ what: String) async {
        do {
            _ = try await keys.key(profile: "work")
            Issue.record("\(what) was used as a key")
        } catch let error as AuthError {
            #expect(error.code == .storeCorrupt && !error.requiresReauthentication, "\(what): \(error)")
        } catch {
            Issue.record("\(what): \(error)")
        }
    }

    @Test("made 0600 in a 0700 folder, found again by a new store (a relaunch), deleted; no temporary file left")
    func roundTrip() async throws {
        let folder = ScratchFolder()
        let keys = try FileDPoPKeyStore(directory: folder.url)
        #expect(try await keys.key(profile: "work") == nil)
        let made = try await keys.createKey(profile: "work", algorithm: .eddsa)
        let file = try keys.keyFile(profile: "work").path
        #expect(mode(file) == 0o600 && mode(folder.url.path) == 0o700)
        let relaunched = try FileDPoPKeyStore(directory: folder.url)
        let found = try #require(try await relaunched.key(profile: "work"))
        #expect(found.thumbprint == made.thumbprint && found.algorithm == .eddsa)
        let replaced = try await keys.createKey(profile: "work", algorithm: .es256)
        #expect(try await keys.key(profile: "work")?.thumbprint == replaced.thumbprint)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.url.path) == ["work.dpop.jwk"])
        try await keys.deleteKey(profile: "work")
        try await keys.deleteKey(profile: "work")
        #expect(try await keys.key(profile: "work") == nil)
        await #expect(throws: AuthError.self) { _ = try await keys.createKey(profile: "work", algorithm: .hs256) }
        for name in ["../escape", ".hidden", "", "a/b"] {
            await #expect(throws: AuthError.self) { _ = try await keys.key(profile: name) }
        }
    }

    @Test(
        "an exposed file, a link, a FIFO, a public key or garbage: store_corrupt, kept in place, never 'no key'",
        .timeLimit(.minutes(1)))
    func hostileFiles() async throws {
        let folder = ScratchFolder()
        let keys = try FileDPoPKeyStore(directory: folder.url)
        _ = try await keys.createKey(profile: "work", algorithm: .es256)
        let file = try keys.keyFile(profile: "work").path
        chmod(file, 0o644)
        await expectCorrupt(keys, "a key others can read")
        #expect(FileManager.default.fileExists(atPath: file), "kept")
        chmod(file, 0o600)
        let elsewhere = folder.url.appendingPathComponent("elsewhere.jwk").path
        #expect(rename(file, elsewhere) == 0 && symlink(elsewhere, file) == 0)
        await expectCorrupt(keys, "a symbolic link")
        unlink(file)
        #expect(mkfifo(file, 0o600) == 0)
        await expectCorrupt(keys, "a FIFO (it must not hang)")
        unlink(file)
        let key = try JWK.generate(for: .es256)
        for (what, content) in [
            ("a public key", key.jsonValue(includingPrivate: false).jsonString), ("garbage", "not json"),
            ("a symmetric key", #"{"kty":"oct","k":"AAAA"}"#),
        ] {
            let written = FileManager.default.createFile(
                atPath: file, contents: Data(content.utf8), attributes: [.posixPermissions: 0o600])
            #expect(written)
            await expectCorrupt(keys, what)
            #expect(FileManager.default.fileExists(atPath: file), "\(what) kept")
            unlink(file)
        }
    }

    @Test("a folder others can write to is refused")
    func exposedFolder() throws {
        let folder = ScratchFolder()
        try FileManager.default.createDirectory(at: folder.url, withIntermediateDirectories: true)
        chmod(folder.url.path, 0o777)
        #expect(throws: AuthError.self) { _ = try FileDPoPKeyStore(directory: folder.url) }
    }
}

/// `LoopbackUserAgent` and `OIDCAuth` as a desktop or command-line app uses them, against the dev server.
@Suite struct DesktopSignInTests {
    @Test(
        "on a machine with no desktop the system browser fails, and the agent says so (the URL goes to stderr)",
        .enabled(
            if: ProcessInfo.processInfo.environment["DISPLAY"] == nil
                && ProcessInfo.processInfo.environment["WAYLAND_DISPLAY"] == nil))
    func noBrowser() async throws {
        let told = AsyncStream.makeStream(of: Void.self)
        // swift-format-ignore: NeverForceUnwrap
        LoopbackUserAgent.openInSystemBrowser(URL(string: "http://127.0.0.1:9/authorize")!) {
            told.continuation.yield()
        }
        let deadline = Task {
            try await Task.sleep(for: .seconds(20))
            told.continuation.finish()
        }
        var failed = false
        for await _ in told.stream {
            failed = true
            break
        }
        deadline.cancel()
        #expect(failed, "xdg-open or open failed unseen: the user would wait with no URL")
    }

    @Test("only an http or https URL reaches the system browser; file:, custom schemes and -options fail at once")
    func onlyWebURLsOpened() throws {
        for text in ["file:///etc/passwd", "javascript:alert(1)", "sesame-app://callback", "-x", "https:relative"] {
            let url = try #require(URL(string: text))
            let failed = Mutex(false)
            LoopbackUserAgent.openInSystemBrowser(url) { failed.withLock { $0 = true } }
            #expect(failed.withLock { $0 }, "\(text) was handed to the opener")
        }
    }

    /// An opener that plays the user: the provider's form, then the browser following the redirect to the agent.
    static func user(_ oidc: OIDCTestServer, state override: String? = nil) -> LoopbackUserAgent.Opener {
        .custom { url in
            let redirect = try oidc.userAgent(url)
            var components = try #require(URLComponents(url: redirect, resolvingAgainstBaseURL: false))
            if let override {
                components.queryItems = components.queryItems?.map {
                    $0.name == "state" ? URLQueryItem(name: "state", value: override) : $0
                }
            }
            let target = components.path + "?" + (components.percentEncodedQuery ?? "")
            _ = try TestBrowser(port: redirect.port ?? 0).get(target)
        }
    }

    /// An opener that follows `url` as a browser would, up to the redirect to the agent, and delivers it there.
    static func browser(_ oidc: OIDCTestServer) -> LoopbackUserAgent.Opener {
        .custom { url in
            let target = (url.path.isEmpty ? "/" : url.path) + (url.query.map { "?" + $0 } ?? "")
            let page = try oidc.browser.get(target)
            guard let location = page.location, let redirect = URL(string: location) else { return }
            let back = (redirect.path.isEmpty ? "/" : redirect.path) + (redirect.query.map { "?" + $0 } ?? "")
            _ = try TestBrowser(port: redirect.port ?? 0).get(back)
        }
    }

    @Test(
        "NAT-07 NAT-10: the listener binds 127.0.0.1 on a free port first (RFC 8252 §7.3), its redirect URI configures the facade, the real form signs in; then the port is closed"
    )
    func signInThroughTheLoopback() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let agent = try LoopbackUserAgent(open: Self.user(oidc))
        #expect(agent.redirectURI.hasPrefix("http://127.0.0.1:") && agent.redirectURI.hasSuffix("/callback"))
        let store = InMemoryTokenStore()
        let auth = try await OIDCAuth.configure(
            issuer: oidc.issuer, clientID: "sesame-cli", redirectURI: agent.redirectURI, store: store,
            timeSource: oidc.clock)
        let tokens = try await auth.signIn(with: agent)
        #expect(tokens.user?.email == "alice@example.com")
        // The listener lived for this sign-in only: nothing answers on its port any more.
        let port = try #require(URLComponents(string: agent.redirectURI)?.port)
        #expect(throws: RawClientError.self) { _ = try RawClient(port: port) }
        #expect(try await auth.userInfo()["email"] == "alice@example.com")
        struct Profile: Decodable {
            let sub: String
            let email: String?
        }
        let profile = try await auth.userInfo(as: Profile.self)
        #expect(profile.email == "alice@example.com" && profile.sub == tokens.user?.id)
        struct Wrong: Decodable { let age: Int }
        await expectAuthError(.decoding, "claims without age") { try await auth.userInfo(as: Wrong.self) }
        await expectAuthError(.configuration, "one agent, two sign-ins") { try await auth.signIn(with: agent) }
    }

    @Test(
        "RP-initiated logout goes through the agent's endSession, not its sign-in: the loopback agent's logout page returns, the tokens are revoked"
    )
    func signOutThroughEndSession() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let signIn = try LoopbackUserAgent(open: Self.user(oidc))
        let auth = try await OIDCAuth.configure(
            issuer: oidc.issuer, clientID: "sesame-cli", redirectURI: signIn.redirectURI, store: InMemoryTokenStore(),
            timeSource: oidc.clock)
        _ = try await auth.signIn(with: signIn)
        let agent = PurposeRecordingAgent(try LoopbackUserAgent(timeout: 30, open: Self.browser(oidc)))
        // A wrapper is not a LoopbackUserAgent: its post-logout redirect URI is given, as an app would.
        let result = await auth.signOut(endSession: agent, postLogoutRedirectURI: agent.inner.redirectURI)
        #expect(agent.calls == ["endSession", "endSession returned"], "the logout page did not redirect back")
        #expect(try await oidc.counters()["requests"]?["GET /end-session"] == 1)
        if case .confirmed = result.revocation {} else { Issue.record("not revoked: \(result)") }
        #expect("\(result)" == "signed out; the server confirmed the revocation")
    }

    @Test("a redirect with another state ends the sign-in at once; nothing is stored")
    func wrongState() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let agent = try LoopbackUserAgent(open: Self.user(oidc, state: "forged"))
        let store = InMemoryTokenStore()
        let auth = try await OIDCAuth.configure(
            issuer: oidc.issuer, clientID: "sesame-cli", redirectURI: agent.redirectURI, store: store,
            timeSource: oidc.clock)
        await expectAuthError(.invalidAuthorizationResponse, "a forged state") { try await auth.signIn(with: agent) }
        #expect(try await store.load(profile: "default") == nil)
    }

    @Test("misuse is a typed error: a name for a host, another redirect URI, nobody coming back in time")
    func misuse() async throws {
        #expect(throws: AuthError.self) { _ = try LoopbackUserAgent(host: "localhost") }
        #expect(throws: AuthError.self) { _ = try LoopbackUserAgent(port: 70000) }
        // A timeout that is not a number, infinite or negative is made one that cannot trap: 300 s, a day, 0.
        for (asked, kept) in [(Double.nan, 300.0), (.infinity, 86_400), (-5, 0)] {
            #expect(try LoopbackUserAgent(timeout: asked, open: .custom { _ in }).timeout == kept)
        }
        let agent = try LoopbackUserAgent(timeout: 0.2, open: .custom { _ in })
        let url = try #require(URL(string: "https://id.example/authorize"))
        await #expect(throws: AuthError.self) {
            _ = try await agent.authorize(url: url, redirectURI: "http://127.0.0.1:1/cb", state: "s")
        }
        await expectAuthError(.cancelled, "nobody came back") {
            try await agent.authorize(url: url, redirectURI: agent.redirectURI, state: "s")
        }
    }

    @Test("DPoP on Linux survives a relaunch: FileDPoPKeyStore keeps the key, restore needs no network")
    func dpopRelaunch() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let folder = ScratchFolder()
        let store = try FileTokenStore(directory: folder.url)
        let agent = try LoopbackUserAgent(open: Self.user(oidc))
        let auth = try await OIDCAuth.configure(
            issuer: oidc.issuer, clientID: "sesame-cli", redirectURI: agent.redirectURI, store: store,
            dpopKeys: try FileDPoPKeyStore(directory: folder.url), timeSource: oidc.clock)
        let tokens = try await auth.signIn(with: agent)
        #expect(tokens.tokenType == "DPoP" && tokens.dpopKeyThumbprint != nil)
        let kept = try JSONEncoder().encode(auth.provider.metadata)
        // The next launch: new stores over the same folder, the kept metadata, and a transport that fails.
        let offline = ScriptedTransport()
        let relaunched = try await OIDCAuth.restore(
            metadata: try JSONDecoder().decode(OIDCProviderMetadata.self, from: kept), clientID: "sesame-cli",
            redirectURI: agent.redirectURI, store: try FileTokenStore(directory: folder.url),
            dpopKeys: try FileDPoPKeyStore(directory: folder.url), transport: offline, timeSource: oidc.clock)
        #expect(try await relaunched.accessToken() == tokens.accessToken, "the stored session, offline")
        #expect(offline.requests.isEmpty)
        #expect(relaunched.provider.dpopSigner?.thumbprint == tokens.dpopKeyThumbprint, "the same key")
        // Online again: the bound token works at UserInfo with a proof of the kept key.
        let online = try await OIDCAuth.restore(
            metadata: auth.provider.metadata, clientID: "sesame-cli", redirectURI: agent.redirectURI,
            store: try FileTokenStore(directory: folder.url), dpopKeys: try FileDPoPKeyStore(directory: folder.url),
            timeSource: oidc.clock)
        #expect(try await online.userInfo()["email"] == "alice@example.com")
        var tampered = auth.provider.metadata
        tampered.tokenEndpoint = try #require(URL(string: "http://evil.example/token"))
        await #expect(throws: AuthError.self) {
            _ = try await OIDCAuth.restore(
                metadata: tampered, clientID: "sesame-cli", redirectURI: agent.redirectURI, store: store)
        }
    }

    @Test("another process signs in again with a new key after this one read its own: try again, nothing ended")
    func concurrentReSignIn() async throws {
        let folder = ScratchFolder()
        let store = try FileTokenStore(directory: folder.url)
        let keys = try FileDPoPKeyStore(directory: folder.url)
        var metadata = try OIDCProviderMetadata.scripted()
        metadata.revocationEndpoint = URL(string: "https://as.example/revoke")
        let transport = ScriptedTransport()
        // This process: restored with the key it read (made now).
        let mine = try await OIDCAuth.restore(
            metadata: metadata, clientID: "c", redirectURI: "https://app.example/cb", store: store, dpopKeys: keys,
            transport: transport)
        // Meanwhile another process makes a new key and stores tokens bound to it.
        let theirs = try await FileDPoPKeyStore(directory: folder.url).createKey(profile: "default", algorithm: .es256)
        let fresh = TokenSet(
            accessToken: "a-2", tokenType: "DPoP", refreshToken: "r-2", dpopKeyThumbprint: theirs.thumbprint)
        try await store.save(fresh, profile: "default")
        await expectAuthError(.storeUnavailable, "tokens bound to another key") { try await mine.accessToken() }
        #expect(transport.requests.isEmpty, "nothing revoked")
        #expect(try await store.load(profile: "default") == fresh, "nothing deleted")
        // Run again (a fresh restore reads the new key): the session is there.
        let again = try await OIDCAuth.restore(
            metadata: metadata, clientID: "c", redirectURI: "https://app.example/cb", store: store, dpopKeys: keys,
            transport: transport)
        #expect(try await again.accessToken() == "a-2")
        // A key that is truly gone still ends the session (revoked first).
        try await keys.deleteKey(profile: "default")
        transport.enqueue(.empty(200), .empty(200))
        let lost = try await OIDCAuth.restore(
            metadata: metadata, clientID: "c", redirectURI: "https://app.example/cb", store: store, dpopKeys: keys,
            transport: transport)
        await #expect(throws: AuthError.self) { _ = try await lost.accessToken() }
        #expect(try await store.load(profile: "default") == nil)
        #expect(transport.requests.count == 2, "the refresh token and the access token revoked")
    }

    @Test("a refresh that finds another process's sign-in bound to a new key adopts nothing and ends nothing")
    func refreshFindsAnotherKeysSession() async throws {
        let folder = ScratchFolder()
        let store = try FileTokenStore(directory: folder.url)
        let keys = try FileDPoPKeyStore(directory: folder.url)
        let clock = ManualTimeSource(Date())
        let transport = ScriptedTransport()
        var metadata = try OIDCProviderMetadata.scripted()
        metadata.revocationEndpoint = URL(string: "https://as.example/revoke")
        let mine = try await OIDCAuth.restore(
            metadata: metadata, clientID: "c", redirectURI: "https://app.example/cb", store: store, dpopKeys: keys,
            transport: transport, timeSource: clock)
        let myKey = try #require(mine.provider.dpopSigner?.thumbprint)
        try await mine.session.signIn(
            with: TokenSet(
                accessToken: "a-1", tokenType: "DPoP", refreshToken: "r-1", expiresAt: clock.now.addingTimeInterval(60),
                receivedAt: clock.now, user: .init(id: "alice"), dpopKeyThumbprint: myKey))
        // Another process signs alice in again with a new key (after a logout there, say) and stores the result.
        let theirs = try await FileDPoPKeyStore(directory: folder.url).createKey(profile: "default", algorithm: .eddsa)
        let fresh = TokenSet(
            accessToken: "a-2", tokenType: "DPoP", refreshToken: "r-2", expiresAt: clock.now.addingTimeInterval(600),
            receivedAt: clock.now, user: .init(id: "alice"), dpopKeyThumbprint: theirs.thumbprint)
        try await store.save(fresh, profile: "default")
        clock.advance(by: 55)  // this process's token now needs a refresh
        await expectAuthError(.storeUnavailable, "a session bound to another key") { try await mine.accessToken() }
        #expect(transport.requests.isEmpty, "nothing refreshed or revoked")
        #expect(try await store.load(profile: "default") == fresh, "their session kept")
        #expect(await mine.session.status != .signedOut(reason: .dpopKeyLost))
    }
}

/// An agent that says which of its methods ran, then lets the loopback agent do the work.
final class PurposeRecordingAgent: AuthorizationUserAgent {
    let inner: LoopbackUserAgent
    private let recorded = Mutex<[String]>([])
    var calls: [String] { recorded.withLock { $0 } }

    init(_ inner: LoopbackUserAgent) { self.inner = inner }

    func authorize(url: URL, redirectURI: String, state: String) async throws -> URL {
        recorded.withLock { $0.append("authorize") }
        return try await inner.authorize(url: url, redirectURI: redirectURI, state: state)
    }

    func endSession(url: URL, redirectURI: String, state: String) async throws -> URL {
        recorded.withLock { $0.append("endSession") }
        let back = try await inner.endSession(url: url, redirectURI: redirectURI, state: state)
        recorded.withLock { $0.append("endSession returned") }
        return back
    }
}
