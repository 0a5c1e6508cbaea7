import Foundation
import Sesame
import SesameDevServer
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

@Suite struct ClientBehaviourTests {
    @Test("Sign in with Apple: a nonce, a stand-in identity token, the provider's exchange, then a session")
    func signInWithApple() async throws {
        let harness = try Harness()
        defer { harness.server.stop() }
        let nonce = SignInWithAppleNonce()
        let minted = try await harness.admin.send(
            "POST", "/_dev/apple/identity-token",
            json: ["sub": "000777.apple", "email": "ana@privaterelay.appleid.com", "nonce": .string(nonce.raw)])
        let identityToken = try #require(minted.json?["identityToken"]?.stringValue)
        #expect(try JWT.unverifiedClaims(of: identityToken).nonce == nonce.hashed)
        let tokens = try await harness.provider.signInWithApple(
            identityToken: identityToken, rawNonce: nonce.raw, deviceID: "device-1")
        try await harness.session.signIn(with: tokens)
        let me: Me = try await harness.client.get("/me")
        #expect(me.email == "ana@privaterelay.appleid.com")
        await #expect(throws: AuthError.self) {
            try await harness.provider.signInWithApple(identityToken: identityToken, rawNonce: "other", deviceID: "d")
        }
    }

    @Test("Endpoints marked .none or .basic never refresh on 401; .custom and .bearer do, once")
    func authorizationKinds() async throws {
        let transport = ScriptedTransport()
        let clock = ManualTimeSource()
        let base = try #require(URL(string: "https://api.example/"))
        let provider = RESTAuthProvider(baseURL: base, transport: transport, timeSource: clock)
        let session = AuthSession(provider: provider, store: InMemoryTokenStore(), timeSource: clock)
        try await session.signIn(
            with: TokenSet(accessToken: "a1", refreshToken: "r1", expiresAt: clock.now.addingTimeInterval(3600)))
        let client = AuthorizedClient(session: session, baseURL: base, transport: transport)

        transport.enqueue(.empty(401))
        #expect(try await client.send(AuthorizedClient.Endpoint("GET", "/public", authorization: .none)).status == 401)
        transport.enqueue(.empty(401))
        #expect(
            try await client.send(
                AuthorizedClient.Endpoint("GET", "/basic", authorization: .basic(user: "u", password: "p"))
            ).status
                == 401)
        #expect(transport.requests.count == 2)
        #expect(transport.requests[0].headers["Authorization"] == nil)
        #expect(transport.requests[1].headers["Authorization"] == "Basic dTpw")

        transport.enqueue(
            .empty(401, headers: ["WWW-Authenticate": "Bearer error=\"invalid_token\""]),
            .json(200, #"{"accessToken":"a2","refreshToken":"r2","expiresIn":3600}"#),
            .json(200, #"{"ok":true}"#))
        let custom = AuthorizedClient.Endpoint(
            "GET", "/custom",
            authorization: .custom { request, tokens in
                var request = request
                request.headers["X-Token"] = tokens?.accessToken
                return request
            })
        #expect(try await client.send(custom).status == 200)
        let requests = transport.requests
        #expect(requests[2].headers["X-Token"] == "a1" && requests[3].url.path.hasSuffix("refresh-token"))
        #expect(requests[4].headers["X-Token"] == "a2")

        transport.enqueue(.empty(403, headers: ["WWW-Authenticate": "Bearer error=\"insufficient_scope\""]))
        #expect(try await client.send(AuthorizedClient.Endpoint("GET", "/admin")).status == 403)
        #expect(transport.requests.count == 6)  // no refresh for a 403
    }

    @Test("Credentials are only ever sent to the configured origin")
    func originPinning() async throws {
        let transport = ScriptedTransport()
        let base = try #require(URL(string: "https://api.example/"))
        let session = AuthSession(
            provider: RESTAuthProvider(baseURL: base, transport: transport), store: InMemoryTokenStore())
        try await session.signIn(with: TokenSet(accessToken: "a1", expiresAt: Date().addingTimeInterval(3600)))
        let client = AuthorizedClient(session: session, baseURL: base, transport: transport)
        // Relative paths stay under the base URL; an absolute URL to another origin is sent without credentials
        // (RFC 9700 §4.9.1).
        for path in ["//evil.example/steal", "https://evil.example/steal", "/@evil.example/x", "http://api.example/x"] {
            transport.enqueue(.empty(200))
            _ = try await client.send(AuthorizedClient.Endpoint("GET", path))
        }
        await #expect(throws: AuthError.self) { try await client.send(.get("/../../@evil.example/x")) }
        let requests = transport.requests
        #expect(requests.count == 4)
        for request in requests {
            let credentialed = request.url.host == "api.example" && request.url.scheme == "https"
            #expect(
                request.headers.contains("Authorization") == credentialed, "\(request.url.absoluteString)")
        }
        #expect(requests[1].url.host == "evil.example" && requests[3].url.scheme == "http")
    }

    @Test("signOut deletes local credentials even when the server is unreachable")
    func signOutOffline() async throws {
        let harness = try Harness()
        let tokens = try await harness.provider.register(email: "off@example.com", password: "correct-horse")
        try await harness.session.signIn(with: tokens)
        harness.server.stop()
        await harness.session.signOut()
        #expect(try await harness.store.load(profile: "default") == nil)
        #expect(try await harness.session.isSignedIn == false)
    }

    @Test("The user's raw claims survive storage")
    func rawClaims() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("claims-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try FileTokenStore(directory: directory)
        let tokens = TokenSet(
            accessToken: "a",
            user: .init(
                id: "u", email: "e@example.com", claims: ["email": "e@example.com", "roles": ["admin", 1, true, nil]]))
        try await store.save(tokens, profile: "default")
        #expect(try await store.load(profile: "default")?.user?.claims?["roles"] == ["admin", 1, true, nil])
    }

    @Test("Cancellation surfaces as CancellationError and keeps the session")
    func cancellation() async throws {
        let harness = try Harness()
        defer { harness.server.stop() }
        try await harness.session.signIn(
            with: try await harness.provider.register(email: "cal@example.com", password: "correct-horse"))
        try await harness.setFaults("/me:latency=2s")
        let client = harness.client
        let task = Task { try await client.get("/me", as: Me.self) }
        try await Task.sleep(for: .milliseconds(100))
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(try await harness.session.isSignedIn)
    }

    @MainActor
    @Test("AuthState follows the session: unknown, signed in, signed out with the reason")
    func authState() async throws {
        let harness = try Harness()
        defer { harness.server.stop() }
        let state = AuthState(session: harness.session)
        #expect(state.status == .unknown || state.status == .signedOut(reason: nil))
        try await waitUntil { state.status == .signedOut(reason: nil) }
        try await harness.session.signIn(
            with: try await harness.provider.register(email: "dot@example.com", password: "correct-horse"))
        try await waitUntil {
            if case .signedIn(let user) = state.status { return user?.email == "dot@example.com" }
            return false
        }
        await harness.session.signOut()
        try await waitUntil { state.status == .signedOut(reason: .userInitiated) }
    }

    @MainActor
    @Test("A released AuthState ends only its own subscription; a locked store at launch stays unknown, not signed out")
    func authStateLifetimes() async throws {
        let harness = try Harness()
        defer { harness.server.stop() }
        let other = harness.session.events()
        var state: AuthState? = AuthState(session: harness.session)
        try await waitUntil { state?.status == .signedOut(reason: nil) }
        state = nil
        try await harness.session.signIn(
            with: try await harness.provider.register(email: "life@example.com", password: "correct-horse"))
        var iterator = other.makeAsyncIterator()
        #expect(await iterator.next() == .loaded(signedIn: false))
        #expect(await iterator.next() == .signedIn)

        let store = FailingTokenStore()
        await store.fail([.load])
        let locked = AuthSession(provider: harness.provider, store: store)
        let launched = AuthState(session: locked)
        try await waitUntil { launched.lastTransientError == .storeUnavailable }
        #expect(launched.status == .unknown)
        await store.heal()
        await launched.reload()
        #expect(launched.status == .signedOut(reason: nil) && launched.lastTransientError == nil)
    }

    @MainActor
    private func waitUntil(_ condition: @MainActor () -> Bool) async throws {
        for _ in 0..<200 {
            if condition() { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("the condition did not become true")
    }
}
