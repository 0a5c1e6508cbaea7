import Foundation
import Sesame
import SesameDevServer
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

/// Keeps the README's and the articles' OpenID Connect examples compiling and true, against the dev server (a form-posting agent
/// stands in for the browser sheet).
@Suite struct ReadmeOIDCExampleTests {
    @Test("README: signing in with OpenID Connect")
    func readmeExample() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let store = InMemoryTokenStore()
        let agent = FormUserAgent(harness: oidc)
        let issuer = oidc.issuer.absoluteString

        // README, verbatim but for the literals (issuer, client, redirect URI, API URL); ReadmeSnippetTests checks:
        // swift-format-ignore: NeverForceUnwrap
        let auth = try await OIDCAuth.configure(
            issuer: URL(string: "\(issuer)")!, clientID: "sesame-cli",
            redirectURI: "http://127.0.0.1:5555/callback", store: store)
        try await auth.signIn(with: agent)
        let token = try await auth.accessToken()
        let claims = try await auth.userInfo()
        // swift-format-ignore: NeverForceUnwrap
        let api = auth.client(for: URL(string: "\(issuer)")!)
        #expect(token.split(separator: ".").count == 3 && claims["email"] == "alice@example.com")
        #expect(api.credentialOrigins.count == 1)
        _ = await auth.signOut(endSession: agent)

        await #expect(throws: AuthError.self) { try await auth.accessToken() }
    }

    @Test("The DPoP article: DPoP with a key store")
    func readmeDPoPExample() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let keychain = InMemoryKeychain()
        let issuer = oidc.issuer.absoluteString
        let apiURL = oidc.issuer

        // The DPoP article's flow with the portable KeychainTokenStore / KeychainDPoPKeyStore over an in-memory
        // Keychain and an emulated enclave (the article's Apple-only lines are type-checked in ArticleSnippets):
        // swift-format-ignore: NeverForceUnwrap
        let signIn = try await OIDCAuth.configure(
            issuer: URL(string: issuer)!, clientID: "sesame-cli",
            redirectURI: "http://127.0.0.1:5555/callback",
            store: KeychainTokenStore(service: "com.example.app", backend: keychain),
            dpopKeys: KeychainDPoPKeyStore(
                service: "com.example.app", backend: keychain, hardware: EmulatedSecureEnclave()),
            timeSource: oidc.clock)
        // swift-format-ignore: NeverForceUnwrap
        let api = signIn.client(for: URL(string: issuer)!)
        let mine = AuthorizedClient(session: signIn.session, baseURL: apiURL)  // the session's scheme: DPoP here too

        let tokens = try await signIn.signIn(with: FormUserAgent(harness: oidc))
        #expect(tokens.tokenType == "DPoP")
        #expect(try await api.send(.get("/userinfo")).status == 200)
        #expect(try await mine.send(.get("/userinfo")).status == 200)
    }

    @Test(
        "README and Command line and Linux: a desktop or CLI app against the dev server its `sesame serve` line starts (LoopbackUserAgent, file stores, restore)"
    )
    func readmeDesktopExample() async throws {
        // The clients the README's own `sesame serve` line registers: the example's client must be one of them.
        let served = try Self.clientsServed(in: Self.readme)
        #expect(served.map(\.id) == ["my-cli"])
        let oidc = try OIDCTestServer { $0.clients = served }
        defer { oidc.stop() }
        let scratch = ScratchFolder()
        // The README's lines (ReadmeSnippetTests checks) and then the article's, but the folder is a scratch one, the
        // browser a form-posting stand-in, and the clock the test's.
        struct Profile: Decodable {
            let sub: String
            let email: String?
        }

        // swift-format-ignore: NeverForceUnwrap
        let issuer = URL(string: "\(oidc.issuerText)")!
        let environment = ProcessInfo.processInfo.environment
        let config = environment["XDG_CONFIG_HOME"] ?? ((environment["HOME"] ?? NSHomeDirectory()) + "/.config")
        #expect(config.hasSuffix("/.config") || environment["XDG_CONFIG_HOME"] != nil)  // where a real tool keeps it
        let folder = scratch.url
        var signedIn: Profile?
        do {
            let agent = try LoopbackUserAgent(open: DesktopSignInTests.user(oidc))  // http://127.0.0.1:PORT/callback
            let auth = try await OIDCAuth.configure(
                issuer: issuer, clientID: "my-cli", redirectURI: agent.redirectURI,
                store: try FileTokenStore(directory: folder), dpopKeys: try FileDPoPKeyStore(directory: folder),
                timeSource: oidc.clock)  // the server's clock is the test's: the proofs' iat must agree with it
            try await auth.signIn(with: agent)
            let profile = try await auth.userInfo(as: Profile.self)  // your Decodable; sub checked
            print("signed in as \(profile.email ?? profile.sub)")
            signedIn = profile
        } catch let error as AuthError {
            FileHandle.standardError.write(Data("my-cli: \(error)\n".utf8))
            Issue.record("the README's tool would exit \(error.requiresReauthentication ? 2 : 1): \(error)")
        }
        let profile = try #require(signedIn)
        #expect(profile.email == "alice@example.com")
        // The article goes on: keep the metadata, restore without the network, sign out.
        let agent = try LoopbackUserAgent(open: DesktopSignInTests.user(oidc))
        let auth = try await OIDCAuth.configure(
            issuer: issuer, clientID: "my-cli", redirectURI: agent.redirectURI,
            store: try FileTokenStore(directory: folder), dpopKeys: try FileDPoPKeyStore(directory: folder),
            timeSource: oidc.clock)
        let kept = try JSONEncoder().encode(auth.provider.metadata)  // keep it with your settings
        // A later launch, offline or not:
        let again = try await OIDCAuth.restore(
            metadata: try JSONDecoder().decode(OIDCProviderMetadata.self, from: kept), clientID: "my-cli",
            redirectURI: agent.redirectURI, store: try FileTokenStore(directory: folder),
            dpopKeys: try FileDPoPKeyStore(directory: folder), timeSource: oidc.clock)
        let restored = try await again.userInfo(as: Profile.self)  // your Decodable; sub checked, refreshed if rejected
        #expect(!profile.sub.isEmpty && restored.sub == profile.sub && again.provider.dpopSigner != nil)
        let logout = try LoopbackUserAgent(timeout: 30, open: DesktopSignInTests.browser(oidc))
        let started = ContinuousClock.now
        let result = await again.signOut(endSession: logout)  // one agent per sign-in or sign-out
        if case .confirmed = result.revocation {} else { Issue.record("the revocation was not confirmed") }
        #expect(ContinuousClock.now - started < .seconds(20), "the provider sent the browser back: no timeout")
        #expect(try await oidc.counters()["requests"]?["GET /end-session"] == 1)
    }

    static let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("README.md")

    /// The clients a document's `sesame serve` lines register, read as `sesame serve --client` reads them.
    static func clientsServed(in document: URL) throws -> [RegisteredClient] {
        let text = try String(contentsOf: document, encoding: .utf8)
        let serveLines = text.split(separator: "\n").filter { $0.contains("sesame serve") && $0.contains("--client") }
        return try serveLines.flatMap { line in
            line.matches(of: /--client (\S+)/).map { String($0.output.1) }
        }.map { try RegisteredClient(specification: $0) }
    }
}
