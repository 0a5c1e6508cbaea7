import Foundation
import Sesame
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import SesameTesting
import Testing

/// A provider that rotates deterministically, for races between sessions over one real file store.
actor CountingProvider: AuthProvider {
    private(set) var refreshes = 0
    let user: String

    init(user: String) { self.user = user }

    func refresh(_ tokens: TokenSet) async throws -> TokenSet {
        refreshes += 1
        return TokenSet(
            accessToken: "\(user)-a\(refreshes)", refreshToken: "\(user)-r\(refreshes)", expiresAt: .distantFuture,
            user: .init(id: user))
    }

    func signOut(_ tokens: TokenSet) async throws {}
}

/// A real file store whose saves or deletes fail on demand (the lock is the real one).
actor SwitchableFileStore: TokenStore {
    let inner: FileTokenStore
    private var failing: Set<String> = []

    init(_ inner: FileTokenStore) { self.inner = inner }

    func fail(_ operations: Set<String>) { failing = operations }

    func load(profile: String) async throws -> TokenSet? { try await inner.load(profile: profile) }

    func save(_ tokens: TokenSet, profile: String) async throws {
        if failing.contains("save") { throw AuthError(.storeUnavailable, "injected save failure") }
        try await inner.save(tokens, profile: profile)
    }

    func delete(profile: String) async throws {
        if failing.contains("delete") { throw AuthError(.storeUnavailable, "injected delete failure") }
        try await inner.delete(profile: profile)
    }

    nonisolated func withExclusiveAccess<Result: Sendable>(
        profile: String, _ body: @Sendable () async throws -> Result
    ) async throws -> Result {
        try await inner.withExclusiveAccess(profile: profile, body)
    }
}

/// Regression tests for what the security review of the second pass found.
@Suite struct AuditRegressionTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-audit-\(UUID().uuidString)")

    func user(_ id: String, _ suffix: String) -> TokenSet {
        TokenSet(
            accessToken: "\(id)-a\(suffix)", refreshToken: "\(id)-r\(suffix)", expiresAt: .distantFuture,
            user: .init(id: id))
    }

    @Test("A pending save never overwrites another process's sign-out and sign-in (another user's session)")
    func pendingSaveRespectsNewerSession() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try FileTokenStore(directory: directory)
        let flaky = SwitchableFileStore(file)
        let old = AuthSession(provider: CountingProvider(user: "Y"), store: flaky, profile: "p")
        try await old.signIn(with: user("Y", "0"))
        await flaky.fail(["save"])
        _ = try await old.forceRefresh()  // rotated; the save fails: pending
        await flaky.fail([])
        let other = AuthSession(provider: CountingProvider(user: "X"), store: file, profile: "p")
        await other.signOut(revoke: false)
        try await other.signIn(with: user("X", "0"))
        await #expect(throws: AuthError.self) { try await old.validTokens() }  // ended: another user's profile now
        #expect(try await file.load(profile: "p")?.accessToken == "X-a0")
        #expect(await old.status == .signedOut(reason: .signedOutElsewhere))
        #expect(try await other.forceRefresh().accessToken == "X-a1")
    }

    @Test("A pending delete never deletes a newer session's credentials")
    func pendingDeleteRespectsNewerSession() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try FileTokenStore(directory: directory)
        let flaky = SwitchableFileStore(file)
        let old = AuthSession(provider: CountingProvider(user: "old"), store: flaky, profile: "p")
        try await old.signIn(with: user("old", "0"))
        await flaky.fail(["delete"])
        #expect(await old.signOut(revoke: false).credentialsRemoved == false)
        await flaky.fail([])
        let fresh = AuthSession(provider: CountingProvider(user: "new"), store: file, profile: "p")
        try await fresh.signIn(with: user("new", "0"))
        _ = try await old.isSignedIn  // retries its pending delete
        #expect(try await file.load(profile: "p")?.accessToken == "new-a0")
        #expect(try await fresh.forceRefresh().accessToken == "new-a1")
        // Without a newer session the pending delete does its job.
        let lone = AuthSession(provider: CountingProvider(user: "lone"), store: flaky, profile: "q")
        try await lone.signIn(with: user("lone", "0"))
        await flaky.fail(["delete"])
        await lone.signOut(revoke: false)
        await flaky.fail([])
        _ = try await lone.isSignedIn
        #expect(try await file.load(profile: "q") == nil)
    }

    @Test("A corrupt credentials file during an active session: kept aside, the session kept and re-saved")
    func corruptFileKeepsSession() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try FileTokenStore(directory: directory)
        let session = AuthSession(provider: CountingProvider(user: "u"), store: file, profile: "p")
        try await session.signIn(with: user("u", "0"))
        try Data("{not json".utf8).write(to: directory.appendingPathComponent("p.json"))
        #expect(try await session.forceRefresh().accessToken == "u-a1")
        #expect(await session.status == .signedIn)
        #expect(try await file.load(profile: "p")?.accessToken == "u-a1")
        let kept = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains("corrupt") }
        #expect(kept.count == 1)
    }

    @Test("A foreign origin cannot redirect a request into the API to have it signed (307 keeps the body)")
    func noCredentialsAfterForeignHop() async throws {
        let foreignBase = LockedBox<URL?>(nil)
        let api = try RecordingServer { request in
            request.path == "/leave"
                ? HTTPServerResponse(
                    status: 302, headers: ["Location": (foreignBase.value?.absoluteString ?? "") + "/out"])
                : .text(200, "\(request.method) \(request.path) auth=\(request.headers["Authorization"] ?? "none")")
        }
        defer { api.stop() }
        let apiBase = api.base.absoluteString
        let foreign = try RecordingServer { request in
            HTTPServerResponse(
                status: 307, headers: ["Location": apiBase + (request.path == "/out" ? "/me" : "/delete")])
        }
        defer { foreign.stop() }
        foreignBase.value = foreign.base
        let session = AuthSession(provider: CountingProvider(user: "u"), store: InMemoryTokenStore())
        try await session.signIn(with: user("u", "0"))
        let client = AuthorizedClient(session: session, baseURL: api.base)
        let started = try await client.send(.post(foreign.base.absoluteString + "/webhook", body: Data("{}".utf8)))
        #expect(String(decoding: started.body, as: UTF8.self) == "POST /delete auth=none")
        // API → foreign → API: once the request left the credential origins it stays without credentials.
        let bounced = try await client.send(.get("/leave"))
        #expect(String(decoding: bounced.body, as: UTF8.self) == "GET /me auth=none")
        #expect(String(decoding: try await client.send(.get("/me")).body, as: UTF8.self) == "GET /me auth=Bearer u-a0")
    }

    @Test("Custom headers do not cross origins on a redirect; userinfo in Location is dropped; HTTP:// is followed")
    func crossOriginHeaderAllowList() async throws {
        let elsewhere = try RecordingServer { _ in .text(200, "elsewhere") }
        defer { elsewhere.stop() }
        let port = elsewhere.port
        let api = try RecordingServer { request in
            switch request.path {
            case "/custom": return HTTPServerResponse(status: 302, headers: ["Location": "HTTP://127.0.0.1:\(port)/c"])
            case "/userinfo":
                return HTTPServerResponse(status: 302, headers: ["Location": "http://attacker:pw@127.0.0.1:\(port)/u"])
            default: return .text(404, "")
            }
        }
        defer { api.stop() }
        let session = AuthSession(provider: CountingProvider(user: "u"), store: InMemoryTokenStore())
        try await session.signIn(with: user("u", "0"))
        let client = AuthorizedClient(session: session, baseURL: api.base)
        var custom = AuthorizedClient.Endpoint.get("/custom")
        custom.headers["X-Api-Key"] = "SECRET-KEY"
        custom.headers["Accept-Language"] = "de"
        #expect(try await client.send(custom).status == 200)
        #expect(try await client.send(.get("/userinfo")).status == 200)
        let received = elsewhere.requests
        #expect(received.count == 2)
        #expect(received.allSatisfy { $0.headers["X-Api-Key"] == nil && $0.headers["Authorization"] == nil })
        #expect(received.first?.headers["Accept-Language"] == "de")
    }

    @Test("Endpoint paths stay under the base path; a ?query in the path is a query; '..' is refused")
    func endpointPaths() async throws {
        let server = try RecordingServer { request in .text(200, request.target) }
        defer { server.stop() }
        let session = AuthSession(provider: CountingProvider(user: "u"), store: InMemoryTokenStore())
        try await session.signIn(with: user("u", "0"))
        let client = AuthorizedClient(session: session, baseURL: server.base.appendingPathComponent("v1/tenant/"))
        #expect(try await client.send(.get("me?x=1&y=%20")).body == Data("/v1/tenant/me?x=1&y=%20".utf8))
        for path in ["../../admin", "a/../../admin", "%2e%2e/admin"] {
            await #expect(throws: AuthError.self, "\(path)") { try await client.send(.get(path)) }
        }
        #expect(server.requests.count == 1)
    }

    @Test(
        "Transports refuse a method that is not an HTTP token (no request-line smuggling)",
        arguments: ["curl", "urlsession"])
    func methodInjection(transport: String) async throws {
        let server = try RecordingServer { _ in .text(200, "ok") }
        defer { server.stop() }
        let sender: any HTTPTransport = transport == "curl" ? SesameHTTP.platformTransport : URLSessionTransport()
        for method in ["GET /smuggled HTTP/1.1\r\nX-Injected: yes\r\nX-Pad:", "GET X", "", "G\u{0}T"] {
            await #expect(throws: AuthError.self) {
                try await sender.send(
                    SesameHTTP.Request(method: method, url: server.base.appendingPathComponent("real")))
            }
        }
        #expect(server.requests.isEmpty)
    }

    @Test("URLSessionTransport keeps no cookies; headers print and dump without values")
    func cookiesAndHeaderRedaction() async throws {
        let server = try RecordingServer { request in
            request.path == "/set"
                ? HTTPServerResponse(status: 200, headers: ["Set-Cookie": "sid=SECRET-COOKIE; Path=/"])
                : .text(200, "cookie:" + (request.headers["Cookie"] ?? "none"))
        }
        defer { server.stop() }
        let transport = URLSessionTransport()
        _ = try await transport.send(SesameHTTP.Request(method: "GET", url: server.base.appendingPathComponent("set")))
        let echoed = try await transport.send(
            SesameHTTP.Request(method: "GET", url: server.base.appendingPathComponent("echo")))
        #expect(String(decoding: echoed.body, as: UTF8.self) == "cookie:none")
        let headers: SesameHTTP.Headers = ["Authorization": "Bearer SECRET"]
        var dumped = ""
        dump(headers, to: &dumped)
        #expect(!dumped.contains("SECRET") && !"\(headers)".contains("SECRET"))
    }

    @Test(
        "Absurd expires_in values are an unknown expiry, never a trap",
        arguments: ["1e300", "9223372036854775807", "1.7976931348623157e308", "315360001"])
    func hostileExpiry(value: String) throws {
        let json = try JOSEValue.parse(Data(#"{"accessToken":"a","refreshToken":"r","expiresIn":\#(value)}"#.utf8))
        let tokens = try #require(RESTAuthProvider.parseAuthResponse(json, receivedAt: Date()))
        #expect(tokens.expiresAt == nil)
        _ = try JSONEncoder().encode(tokens)
    }
}
