import Foundation
import Sesame
import SesameDevServer
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

/// A dev server plus a REST provider and a session against it, all over real loopback HTTP.
struct Harness {
    let server: DevServer
    let provider: RESTAuthProvider
    let store: InMemoryTokenStore
    let session: AuthSession
    let client: AuthorizedClient
    let admin: HTTPTestClient
    /// The clock of both the provider (expiry at receipt) and the session (expiry decisions), so that
    /// "the access token has expired" is one `advance` instead of a sleep.
    let clock = ManualTimeSource(Date())

    init(
        store: InMemoryTokenStore = InMemoryTokenStore(),
        budget: AuthSession.RefreshBudget = .init(maxRefreshes: 50),
        _ configure: (inout DevServer.Configuration) -> Void = { _ in }
    ) throws {
        var configuration = DevServer.Configuration()
        configuration.passwordIterations = 1000
        configure(&configuration)
        server = try DevServer(configuration: configuration)
        try server.start()
        let base = try #require(server.localURL)
        provider = RESTAuthProvider(baseURL: base, timeSource: clock)
        self.store = store
        session = AuthSession(
            provider: provider, store: store, timeSource: clock, refreshLeeway: 0, refreshBudget: budget)
        client = AuthorizedClient(session: session, baseURL: base)
        admin = HTTPTestClient(base: base)
    }

    func counter(_ name: String) async throws -> Int64? {
        let json = try #require(try await admin.send("GET", "/_dev/counters").json)
        if case .integer(let value)? = json[name] { return value }
        return nil
    }

    func setFaults(_ spec: String) async throws {
        _ = try await admin.send("POST", "/_dev/faults", json: ["spec": .string(spec)])
    }
}

struct Me: Decodable, Equatable {
    let id: String
    let email: String?
}

@Suite struct SessionIntegrationTests {
    @Test(
        "Register, call /me through AuthorizedClient, sign out: local credentials are gone and the server revoked them")
    func fullFlow() async throws {
        let harness = try Harness()
        defer { harness.server.stop() }
        let tokens = try await harness.provider.register(email: "amy@example.com", password: "correct-horse")
        #expect(tokens.user?.email == "amy@example.com" && tokens.expiresAt != nil)
        try await harness.session.signIn(with: tokens)
        let me: Me = try await harness.client.get("/me")
        #expect(me.email == "amy@example.com")
        let logout = try await harness.client.send(AuthorizedClient.Endpoint("POST", "/logout", body: Data("{}".utf8)))
        #expect(logout.status == 204 && logout.body.isEmpty)  // 204: nothing to decode
        await harness.session.signOut()
        #expect(try await harness.store.load(profile: "default") == nil)
        #expect(try await harness.session.isSignedIn == false)
        let refreshToken = try #require(tokens.refreshToken)
        let refused = try await harness.admin.send(
            "POST", "/refresh-token", json: ["refreshToken": .string(refreshToken)])
        #expect(refused.error == "invalid_grant")
    }

    @Test(
        "HTTP-03: 1,000 concurrent requests with an expired access token: exactly one refresh reaches the server, all succeed"
    )
    func thousandConcurrentRequests() async throws {
        let harness = try Harness()
        defer { harness.server.stop() }
        try await harness.session.signIn(
            with: try await harness.provider.register(email: "ben@example.com", password: "correct-horse"))
        harness.clock.advance(by: 901)  // the access token is now expired, as far as the session knows
        let client = harness.client
        let results = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<1000 {
                group.addTask { ((try? await client.get("/me", as: Me.self))?.email) == "ben@example.com" }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results.count == 1000 && results.allSatisfy { $0 })
        #expect(try await harness.counter("refreshes") == 1)
    }

    @Test("HTTP-03: a 401 storm on a valid-looking token: one refresh, every request retried once and served")
    func unauthorizedStorm() async throws {
        let harness = try Harness()
        defer { harness.server.stop() }
        var tokens = try await harness.provider.register(email: "cat@example.com", password: "correct-horse")
        // Looks fine and expires far away, but the server refuses it.
        tokens.accessToken = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.AAAA"
        tokens.expiresAt = Date().addingTimeInterval(3600)
        try await harness.session.signIn(with: tokens)
        let client = harness.client
        let results = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<100 { group.addTask { (try? await client.get("/me", as: Me.self)) != nil } }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results.allSatisfy { $0 })
        #expect(try await harness.counter("refreshes") == 1)
    }

    @Test("HTTP-01: a 401 that persists after one refresh is an error, not a loop; insufficient_scope never refreshes")
    func noRefreshLoop() async throws {
        let harness = try Harness()
        defer { harness.server.stop() }
        try await harness.session.signIn(
            with: try await harness.provider.register(email: "dee@example.com", password: "correct-horse"))
        try await harness.setFaults("/me:unauthorized")
        await #expect(throws: AuthError.self) { try await harness.client.get("/me", as: Me.self) }
        #expect(try await harness.counter("refreshes") == 1)
        let scoped = SesameHTTP.Response(
            status: 401, headers: ["WWW-Authenticate": "Bearer error=\"insufficient_scope\""])
        #expect(BearerAuthenticator.bearerVerdict(scoped) == .done)
        #expect(BearerAuthenticator.bearerVerdict(SesameHTTP.Response(status: 401)) == .refreshAndRetry)
    }

    @Test("HTTP-04: 30 % injected 5xx on refresh: no sign-out, the credentials stay, and a retry eventually succeeds")
    func transientFaults() async throws {
        let harness = try Harness()
        defer { harness.server.stop() }
        try await harness.session.signIn(
            with: try await harness.provider.register(email: "eve@example.com", password: "correct-horse"))
        try await harness.setFaults("POST /refresh-token:status=503@0.3")
        var successes = 0
        var transient = 0
        for _ in 0..<60 {
            harness.clock.advance(by: 901)  // the access token expires again
            do {
                _ = try await harness.session.validTokens()
                successes += 1
            } catch let error as AuthError {
                #expect(error.isTransient, "\(error)")
                transient += 1
            }
            #expect(try await harness.store.load(profile: "default") != nil)
            if successes >= 5 && transient >= 1 { break }
        }
        #expect(successes >= 5 && transient >= 1)
        #expect(try await harness.session.isSignedIn)
    }

    @Test("HTTP-04: invalid_grant ends the session: signed out (sessionExpired), store empty")
    func definitiveRejection() async throws {
        let harness = try Harness()
        defer { harness.server.stop() }
        let tokens = try await harness.provider.register(email: "fox@example.com", password: "correct-horse")
        var events = harness.session.events().makeAsyncIterator()
        try await harness.session.signIn(with: tokens)
        // Another device rotates the same refresh token behind this session's back; this session's refresh is
        // then a reuse, and the server revokes the family.
        _ = try await harness.provider.refresh(tokens)
        harness.clock.advance(by: 901)
        #expect(await events.next() == .signedIn)
        do {
            _ = try await harness.session.validTokens()
            Issue.record("expected the session to end")
        } catch let error as AuthError {
            #expect(error.code == .sessionExpired && error.requiresReauthentication, "\(error)")
        }
        #expect(await events.next() == .signedOut(.sessionExpired))
        #expect(try await harness.store.load(profile: "default") == nil)
        #expect(try await harness.counter("reuseDetections") == 1)
    }

    @Test("A refresh that finishes after sign-out is discarded: nothing is stored")
    func refreshAfterSignOut() async throws {
        let harness = try Harness()
        defer { harness.server.stop() }
        try await harness.session.signIn(
            with: try await harness.provider.register(email: "gil@example.com", password: "correct-horse"))
        try await harness.setFaults("POST /refresh-token:latency=1s")
        harness.clock.advance(by: 901)
        let session = harness.session
        let refreshing = Task { try await session.validTokens() }
        try await Task.sleep(for: .milliseconds(150))
        await session.signOut()
        await #expect(throws: AuthError.self) { try await refreshing.value }
        try await Task.sleep(for: .milliseconds(1000))
        #expect(try await harness.store.load(profile: "default") == nil)
        #expect(try await session.isSignedIn == false)
    }

    @Test("The refresh budget turns a refresh loop into a named error")
    func refreshBudget() async throws {
        // An hour's window: the budget counts real time, and under a sanitizer on a loaded machine two refreshes
        // once took longer than 30 s, letting the third through (the window's sliding: SessionMachineTests).
        let harness = try Harness(budget: .init(maxRefreshes: 2, window: .seconds(3600)))
        defer { harness.server.stop() }
        try await harness.session.signIn(
            with: try await harness.provider.register(email: "hal@example.com", password: "correct-horse"))
        for _ in 0..<2 { _ = try await harness.session.forceRefresh() }
        do {
            _ = try await harness.session.forceRefresh()
            Issue.record("expected the budget to stop the third refresh")
        } catch let error as AuthError {
            #expect(error.code == .refreshBudgetExceeded)
        }
    }

    @Test("Login errors are typed: invalid_credentials, email_taken; descriptions hold no secrets")
    func typedErrors() async throws {
        let harness = try Harness()
        defer { harness.server.stop() }
        let tokens = try await harness.provider.register(email: "ida@example.com", password: "Sup3r-Secret!")
        do {
            _ = try await harness.provider.login(email: "ida@example.com", password: "wrong-password")
            Issue.record("expected a rejection")
        } catch let error as AuthError {
            #expect(error.serverResponse?.restError == .invalidCredentials && error.statusCode == 401)
            #expect(!error.description.contains("wrong-password"))
        }
        await #expect(throws: AuthError.self) {
            try await harness.provider.register(email: "ida@example.com", password: "x-password")
        }
        let described = "\(tokens) \(String(reflecting: tokens))"
        for secret in [tokens.accessToken, tokens.refreshToken ?? "-"] { #expect(!described.contains(secret)) }
    }
}
