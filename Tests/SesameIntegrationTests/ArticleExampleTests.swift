import Foundation
import Sesame
import SesameDevServer
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import SesameTesting
import Testing

@testable import Sesame

/// The DocC articles' examples, as written but for literals (URLs, client IDs, paths), run against the dev server.
///
/// `DocCSnippetTests` checks, line for line, that each article example is here (or in another compiled file).
@Suite struct ArticleExampleTests {
    struct User: Decodable {
        let id: String
        let email: String?
    }

    /// A REST dev server with one user, its URL, and a scratch folder removed afterwards.
    final class RESTBackend {
        let server: DevServer
        let api: URL
        let folder = ScratchFolder()
        /// The server's clock (the client keeps the system's).
        let clock = ManualTimeSource(Date())
        static let email = "article@example.com"
        static let password = "correct-horse"

        init(_ configure: (inout DevServer.Configuration) -> Void = { _ in }) throws {
            var configuration = DevServer.Configuration()
            configuration.passwordIterations = 1000
            configuration.users = [(email: Self.email, password: Self.password)]
            let clock = clock
            configuration.clock = { clock.now }
            configure(&configuration)
            server = try DevServer(configuration: configuration)
            try server.start()
            api = try #require(server.localURL)
        }

        deinit { server.stop() }
    }

    @Test("Sesame and Getting Started: sign in against a REST backend, call its API, sign out (a 204, not decoded)")
    func gettingStarted() async throws {
        let backend = try RESTBackend()
        let api = backend.api
        let email = RESTBackend.email
        let password = RESTBackend.password
        let credentialsDirectory = backend.folder.url

        // Sesame.md, the landing page:
        do {
            let provider = RESTAuthProvider(baseURL: api)
            let session = AuthSession(provider: provider, store: try FileTokenStore(directory: credentialsDirectory))
            try await session.signIn(with: try await provider.login(email: email, password: password))
            let client = AuthorizedClient(session: session, baseURL: api)
            let me: User = try await client.get("/me")
            #expect(me.email == email)
        }
        // Getting Started: the same with a store chosen first, then signing out.
        let store = try FileTokenStore(directory: credentialsDirectory.appendingPathComponent("getting-started"))
        let provider = RESTAuthProvider(baseURL: api)
        let session = AuthSession(provider: provider, store: store)
        try await session.signIn(with: try await provider.login(email: email, password: password))

        let client = AuthorizedClient(session: session, baseURL: api)
        let me: User = try await client.get("/me")
        let result = await session.signOut()  // POST /logout with the refresh token (a 204, never decoded)
        #expect(me.email == email && result.credentialsRemoved)
        if case .confirmed = result.revocation {} else { Issue.record("not confirmed: \(result.revocation)") }
    }

    @Test(
        "Getting Started: a subscriber to the session's events sees .signedOut(.sessionExpired) when the server ends it"
    )
    func listenToTheSession() async throws {
        let backend = try RESTBackend()
        let provider = RESTAuthProvider(baseURL: backend.api)
        let session = AuthSession(provider: provider, store: InMemoryTokenStore())
        try await session.signIn(
            with: try await provider.login(email: RESTBackend.email, password: RESTBackend.password))
        let (shown, shownContinuation) = AsyncStream<Void>.makeStream()
        @Sendable func showSignIn() { shownContinuation.yield() }

        let watcher = Task {
            for await event in session.events() {
                if case .signedOut(.sessionExpired) = event { showSignIn() }
            }
        }
        defer { watcher.cancel() }
        // The subscription is made when the task starts; the refresh below must come after it.
        while session.broadcaster.subscriberCount == 0 { await Task.yield() }
        try await provider.signOut(try #require(try await session.currentTokens))  // the server ends the session
        await #expect(throws: AuthError.self) { try await session.forceRefresh() }
        var iterator = shown.makeAsyncIterator()
        #expect(await iterator.next() != nil)
    }

    @Test("Getting Started: another backend's refresh contract (path and body fields)")
    func anotherContract() async throws {
        let backend = try RESTBackend()
        let api = backend.api
        let deviceID = "device-7"
        var contract = RESTAuthProvider.Contract()
        contract.refreshPath = "refresh-token"  // the dev server's path stands in for auth/refresh
        contract.refreshBody = { token in ["refreshToken": .string(token), "deviceId": .string(deviceID)] }
        let provider = RESTAuthProvider(baseURL: api, contract: contract)
        let session = AuthSession(provider: provider, store: InMemoryTokenStore())
        try await session.signIn(
            with: try await provider.login(email: RESTBackend.email, password: RESTBackend.password))
        let before = try #require(try await session.currentTokens)
        let after = try await session.forceRefresh()
        #expect(after.refreshToken != nil && after.refreshToken != before.refreshToken)
    }

    @Test("Calling APIs: origins, a custom signer, retries; Handling errors: definitive, transient and other errors")
    func callingAPIs() async throws {
        let backend = try RESTBackend()
        let session = AuthSession(provider: RESTAuthProvider(baseURL: backend.api), store: InMemoryTokenStore())
        try await session.signIn(
            with: try await RESTAuthProvider(baseURL: backend.api).login(
                email: RESTBackend.email, password: RESTBackend.password))
        let cdn = try RecordingServer { _ in HTTPServerResponse(status: 200) }
        defer { cdn.stop() }
        let local = backend.api.absoluteString

        // swift-format-ignore: NeverForceUnwrap
        let api = AuthorizedClient(
            session: session, baseURL: URL(string: "\(local)/")!,
            additionalOrigins: [URL(string: "https://files.example.com")!])
        let me: User = try await api.get("/me")  // Bearer attached
        let avatar = try await api.send(.get("\(cdn.base.absoluteString)/a.png"))  // another origin: no credentials
        #expect(me.email == RESTBackend.email && avatar.status == 200)
        #expect(cdn.requests.count == 1 && cdn.requests.allSatisfy { $0.headers["Authorization"] == nil })

        // A custom async signer, on an endpoint of the API's own origin.
        struct Signer: Sendable {
            func signature(for body: Data) async throws -> String {
                Base64URL.encode(JOSECrypto.sha256(Array(body)))
            }
        }
        let signer = Signer()
        let body = Data(#"{"item":1}"#.utf8)
        let shop = try RecordingServer { _ in HTTPServerResponse(status: 201) }
        defer { shop.stop() }
        do {
            let api = AuthorizedClient(session: session, baseURL: shop.base)
            let signed = AuthorizedClient.Endpoint(
                "POST", "/orders", body: body,
                authorization: .custom { request, tokens in
                    var request = request
                    request.headers["Authorization"] = "Bearer \(tokens?.accessToken ?? "")"
                    request.headers["X-Signature"] = try await signer.signature(for: request.body ?? Data())
                    return request
                })
            #expect(try await api.send(signed).status == 201)
        }
        let order = try #require(shop.requests.first)
        let tokens = try #require(try await session.currentTokens)
        #expect(order.headers["Authorization"] == "Bearer \(tokens.accessToken)")
        #expect(order.headers["X-Signature"] == Base64URL.encode(JOSECrypto.sha256(Array(body))))

        // Retries: 3 attempts of an idempotent request (Retry-After: 0, so the test waits for nothing).
        let busy = LockedBox(2)
        let flaky = try RecordingServer { _ in
            guard busy.value > 0 else { return HTTPServerResponse(status: 200) }
            busy.value -= 1
            var response = HTTPServerResponse(status: 503)
            response.headers.set("Retry-After", "0")
            return response
        }
        defer { flaky.stop() }
        do {
            let apiBase = flaky.base
            let api = AuthorizedClient(session: session, baseURL: apiBase, retry: .standard)
            #expect(try await api.send(.get("/items")).status == 200 && flaky.requests.count == 3)
        }

        // Handling errors: the server ends the session and the access token expires there; the refresh the 401
        // causes is refused: definitive.
        var shown: [String] = []
        func show(_ user: User) { shown.append("me") }
        func showSignIn() { shown.append("sign-in") }
        func showOffline(retryAfter: TimeInterval?) { shown.append("offline") }
        func report(_ error: AuthError) { shown.append("report") }
        try await RESTAuthProvider(baseURL: backend.api).signOut(try #require(try await session.currentTokens))
        backend.clock.advance(by: 1000)
        do {
            let me: User = try await api.get("/me")
            show(me)
        } catch let error as AuthError where error.requiresReauthentication {
            showSignIn()  // the session is over; credentials were deleted
        } catch let error as AuthError where error.isTransient {
            showOffline(retryAfter: error.retryAfter)  // credentials kept; Retry-After when the server sent one
        } catch let error as AuthError {
            report(error)  // description: code, message, the server's words — no secret
        }
        #expect(shown == ["sign-in"])
    }

    /// A dev server on the real clock: the articles' code leaves the SDK's clock the system's, so the server's must
    /// be too (DPoP proofs and client assertions carry `iat`; the harness's manual clock would fall behind).
    static let commandLineArticle = ReadmeOIDCExampleTests.readme.deletingLastPathComponent()
        .appendingPathComponent("Sources/Sesame/Sesame.docc/CommandLineAndLinux.md")

    static func realTimeServer(_ configure: (inout DevServer.Configuration) throws -> Void = { _ in }) throws
        -> OIDCTestServer
    {
        try OIDCTestServer { configuration in
            configuration.clock = { Date() }
            try configure(&configuration)
        }
    }

    @Test("Signing in with OpenID Connect: configure, sign in, a token; keep the metadata and restore offline")
    func signingIn() async throws {
        let oidc = try Self.realTimeServer()
        defer { oidc.stop() }
        let store = InMemoryTokenStore()
        let agent = FormUserAgent(harness: oidc)
        let issuer = oidc.issuerText

        // swift-format-ignore: NeverForceUnwrap
        let auth = try await OIDCAuth.configure(
            issuer: URL(string: "\(issuer)")!, clientID: "sesame-cli",
            redirectURI: "http://127.0.0.1:5555/callback", store: store)
        try await auth.signIn(with: agent)
        let token = try await auth.accessToken()

        let kept = try JSONEncoder().encode(auth.provider.metadata)  // keep it beside your settings
        oidc.stop()  // next launch, offline:
        let restored = try await OIDCAuth.restore(
            metadata: try JSONDecoder().decode(OIDCProviderMetadata.self, from: kept), clientID: "sesame-cli",
            redirectURI: "http://127.0.0.1:5555/callback", store: store)
        #expect(try await restored.accessToken() == token)
    }

    @Test("Signing in with OpenID Connect and Command line and Linux: the loopback agent, file stores, DPoP, restore")
    func commandLine() async throws {
        // The clients the article's own `sesame serve` line registers: its example's client must be one of them.
        let served = try ReadmeOIDCExampleTests.clientsServed(in: Self.commandLineArticle)
        #expect(served.map(\.id) == ["my-cli"])
        let oidc = try Self.realTimeServer { $0.clients = served }
        defer { oidc.stop() }
        let scratch = ScratchFolder()
        struct Profile: Decodable { let sub: String }

        // Signing in with OpenID Connect (the browser is a stand-in that posts the form; the folder a scratch one):
        do {
            let issuer = oidc.issuer
            let folder = scratch.url.appendingPathComponent("signing-in")
            let agent = try LoopbackUserAgent(open: DesktopSignInTests.user(oidc))
            let auth = try await OIDCAuth.configure(
                issuer: issuer, clientID: "sesame-cli", redirectURI: agent.redirectURI,
                store: try FileTokenStore(directory: folder),
                dpopKeys: try FileDPoPKeyStore(directory: folder))  // DPoP keys that survive a relaunch, 0600
            try await auth.signIn(with: agent)
            #expect(try await auth.session.currentTokens?.tokenType == "DPoP")
        }

        // Command line and Linux, against the dev server its `sesame serve` line starts:
        // swift-format-ignore: NeverForceUnwrap
        let issuer = URL(string: "\(oidc.issuerText)")!
        let environment = ProcessInfo.processInfo.environment
        let config = environment["XDG_CONFIG_HOME"] ?? ((environment["HOME"] ?? NSHomeDirectory()) + "/.config")
        #expect(!config.isEmpty)
        let folder = scratch.url.appendingPathComponent("my-cli")
        let agent = try LoopbackUserAgent(open: DesktopSignInTests.user(oidc))  // http://127.0.0.1:PORT/callback
        let auth = try await OIDCAuth.configure(
            issuer: issuer, clientID: "my-cli", redirectURI: agent.redirectURI,
            store: try FileTokenStore(directory: folder), dpopKeys: try FileDPoPKeyStore(directory: folder))
        try await auth.signIn(with: agent)
        let kept = try JSONEncoder().encode(auth.provider.metadata)  // keep it with your settings
        // A later launch, offline or not:
        let again = try await OIDCAuth.restore(
            metadata: try JSONDecoder().decode(OIDCProviderMetadata.self, from: kept), clientID: "my-cli",
            redirectURI: agent.redirectURI, store: try FileTokenStore(directory: folder),
            dpopKeys: try FileDPoPKeyStore(directory: folder))
        let profile = try await again.userInfo(as: Profile.self)  // your Decodable; sub checked, refreshed if rejected
        #expect(!profile.sub.isEmpty && again.provider.dpopSigner != nil)
        let result = await again.signOut(
            endSession: try LoopbackUserAgent(timeout: 30, open: DesktopSignInTests.browser(oidc)))
        if case .confirmed = result.revocation {} else { Issue.record("the revocation was not confirmed") }

        // The keyring when a desktop session runs one, else files.
        let store: any TokenStore =
            SecretServiceTokenStore.isAvailable
            ? SecretServiceTokenStore(service: "my-cli")
            : try FileTokenStore(directory: folder)
        #expect(try await store.load(profile: "default") == nil)
    }

    @Test("Service accounts: a private JWK read from a file, the client credentials grant, an API call")
    func serviceAccount() async throws {
        let key = try JWK.generate(for: .es256)
        let oidc = try Self.realTimeServer { $0.clients = try OIDCTestServer.serviceClients(key: key) }
        defer { oidc.stop() }
        let scratch = ScratchFolder()
        try FileManager.default.createDirectory(at: scratch.url, withIntermediateDirectories: true)
        let path = scratch.url.appendingPathComponent("nightly-report.jwk").path
        try Data(key.jsonValue(includingPrivate: true).jsonBytes).write(to: URL(fileURLWithPath: path))
        let api = try RecordingServer { _ in HTTPServerResponse(status: 200) }
        defer { api.stop() }
        let reportsAPI = api.base
        let issuer = oidc.issuerText

        let keyFile = try Data(contentsOf: URL(fileURLWithPath: "\(path)"))  // a private JWK
        // swift-format-ignore: NeverForceUnwrap
        let service = try await ServiceAccount.configure(
            issuer: URL(string: "\(issuer)")!, clientID: "nightly",
            authentication: try .privateKeyJWT(key: try JWK(json: keyFile)), scopes: ["reports.read"])
        let reports = try await service.client(for: reportsAPI)
        let response = try await reports.send(.get("/v1/reports"))
        #expect(response.status == 200 && api.requests.first?.headers["Authorization"]?.hasPrefix("Bearer ") == true)
    }

    @Test("SesameJOSE's Getting Started: sign, publish the key set, verify with a policy (and an expired token)")
    func jose() throws {
        let key = try JWK.generate(for: .es256)  // kid = RFC 7638 thumbprint
        let token = try JWT.sign(JWTClaims(["sub": "alice", "exp": 1_900_000_000]), key: key, algorithm: .es256)
        let published = try JWKSet(keys: [key.publicKey()]).jsonValue.jsonString
        #expect(try JWT.unverifiedClaims(of: token).subject == "alice")
        let jwksData = Data(published.utf8)
        let nonceSentWithTheAuthorizationRequest = "n-0S6_WzA2Mj"
        func claims(expiring exp: Int64) -> JWTClaims {
            JWTClaims([
                "iss": "https://id.example", "aud": "my-app", "sub": "alice", "exp": .integer(exp),
                "nonce": .string(nonceSentWithTheAuthorizationRequest),
            ])
        }
        let fresh = try JWT.sign(claims(expiring: 1_900_000_000), key: key, algorithm: .es256)
        let stale = try JWT.sign(claims(expiring: 1_000_000_000), key: key, algorithm: .es256)
        var outcomes: [String] = []

        let keys = try JWKSet(json: jwksData)
        var policy = ClaimValidationPolicy(issuer: "https://id.example", audience: "my-app")
        policy.nonce = nonceSentWithTheAuthorizationRequest
        let verifier = JWTVerifier(keys: keys, policy: policy)
        for token in [fresh, stale] {
            do {
                let jwt = try verifier.verify(token, now: Date())
                print(jwt.claims.subject ?? "")
                outcomes.append(jwt.claims.subject ?? "")
            } catch let error as JOSEError where error.code == .expired {
                // Ask for a fresh token.
                outcomes.append("expired")
            }
        }
        #expect(outcomes == ["alice", "expired"])
    }
}
