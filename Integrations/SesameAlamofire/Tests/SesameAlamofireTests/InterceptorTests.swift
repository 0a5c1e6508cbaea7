import Alamofire
import Foundation
import Sesame
import SesameAlamofire
import SesameDevServer
import SesameJOSE
import SesameLoopback
import SesameTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The dev server, a Sesame session over it with a manual clock, and an Alamofire session with the interceptor.
struct Backend {
    let server: DevServer
    let base: URL
    let clock = ManualTimeSource(Date())
    let store = InMemoryTokenStore()
    let provider: RESTAuthProvider
    let session: AuthSession
    let interceptor: SesameInterceptor

    init(contract: RESTAuthProvider.Contract = .init(), base override: URL? = nil, faults: String = "") throws {
        var configuration = DevServer.Configuration()
        configuration.passwordIterations = 1000
        configuration.faults = try FaultPlan(spec: faults)
        configuration.http.maxConnections = 512
        server = try DevServer(configuration: configuration)
        try server.start()
        guard let local = server.localURL else { throw AuthError(.configuration, "no address") }
        base = override ?? local
        provider = RESTAuthProvider(baseURL: base, contract: contract, timeSource: clock)
        session = AuthSession(
            provider: provider, store: store, timeSource: clock, refreshLeeway: 0,
            refreshBudget: .init(maxRefreshes: 100))
        interceptor = SesameInterceptor(session: session, origins: [base])
    }

    func alamofire(_ interceptor: (any RequestInterceptor)? = nil) -> Alamofire.Session {
        let configuration = URLSessionConfiguration.af.default
        configuration.httpMaximumConnectionsPerHost = 32
        return Alamofire.Session(
            configuration: configuration, interceptor: interceptor ?? self.interceptor,
            redirectHandler: self.interceptor.redirectHandler)
    }

    func counter(_ name: String) async throws -> Int {
        let local = try #require(server.localURL)
        let response = try await CurlOrURLSession.get(local.appendingPathComponent("_dev/counters"))
        return Int((try JOSEValue.parse(response))[name]?.doubleValue ?? -1)
    }

    func setFaults(_ spec: String) async throws {
        let local = try #require(server.localURL)
        _ = try await CurlOrURLSession.post(
            local.appendingPathComponent("_dev/faults"), JOSEValue.object(["spec": .string(spec)]).jsonData)
    }
}

enum CurlOrURLSession {
    static func get(_ url: URL) async throws -> Data {
        try await SesameHTTP.platformTransport.send(SesameHTTP.Request(method: "GET", url: url)).body
    }

    static func post(_ url: URL, _ body: Data) async throws -> Data {
        try await SesameHTTP.platformTransport.send(
            SesameHTTP.Request(method: "POST", url: url, headers: ["Content-Type": "application/json"], body: body)
        ).body
    }
}

struct Me: Decodable, Sendable {
    let id: String
    let email: String?
}

@Suite struct InterceptorTests {
    @Test("1,000 concurrent Alamofire requests across an access-token expiry: exactly one refresh, all succeed")
    func thousandAcrossExpiry() async throws {
        let backend = try Backend()
        defer { backend.server.stop() }
        try await backend.session.signIn(
            with: try await backend.provider.register(email: "af@example.com", password: "correct-horse"))
        backend.clock.advance(by: 901)
        let alamofire = backend.alamofire()
        let url = backend.base.appendingPathComponent("me")
        let statuses = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<1000 {
                group.addTask {
                    await alamofire.request(url).validate().serializingData().response.response?.statusCode ?? -1
                }
            }
            return await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.count == 1000 && statuses.allSatisfy { $0 == 200 }, "\(Set(statuses))")
        #expect(try await backend.counter("refreshes") == 1)
    }

    @Test("A 401 storm on a valid-looking token: one refresh, every request retried once and served")
    func unauthorizedStorm() async throws {
        let backend = try Backend()
        defer { backend.server.stop() }
        var tokens = try await backend.provider.register(email: "storm@example.com", password: "correct-horse")
        tokens.accessToken = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.AAAA"
        try await backend.session.signIn(with: tokens)
        let alamofire = backend.alamofire()
        let url = backend.base.appendingPathComponent("me")
        let statuses = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<100 {
                group.addTask {
                    await alamofire.request(url).validate().serializingData().response.response?.statusCode ?? -1
                }
            }
            return await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.allSatisfy { $0 == 200 }, "\(Set(statuses))")
        let refreshes = try await backend.counter("refreshes")
        #expect(refreshes == 1)
    }

    @Test("A 401 that persists is returned after one refresh and one retry, never a loop")
    func noLoop() async throws {
        let backend = try Backend()
        defer { backend.server.stop() }
        try await backend.session.signIn(
            with: try await backend.provider.register(email: "loop@example.com", password: "correct-horse"))
        // An API that refuses every token. Its 401 carries no challenge: FoundationNetworking on Linux hangs on a
        // retried request whose 401 carries one (swift-corelibs-foundation #5456); Apple platforms do not.
        let hits = Recorded()
        let api = HTTPServer { request in
            hits.append(request.headers["Authorization"] ?? "none")
            return HTTPServerResponse(status: 401)
        }
        let port = try api.start()
        defer { api.stop() }
        let base = URL(string: "http://127.0.0.1:\(port)")!
        let interceptor = SesameInterceptor(session: backend.session, origins: [base])
        let alamofire = Alamofire.Session(interceptor: interceptor, redirectHandler: interceptor.redirectHandler)
        let response = await alamofire.request(base.appendingPathComponent("me")).validate().serializingData().response
        #expect(response.response?.statusCode == 401)
        #expect(hits.values.count == 2 && Set(hits.values).count == 2, "one retry, with a refreshed token")
        let refreshes = try await backend.counter("refreshes")
        #expect(refreshes == 1)
    }

    @Test("Alamofire's RetryPolicy composed with the interceptor: 5xx retried by the policy, still one refresh")
    func composedRetryPolicy() async throws {
        let backend = try Backend()
        defer { backend.server.stop() }
        try await backend.session.signIn(
            with: try await backend.provider.register(email: "policy@example.com", password: "correct-horse"))
        backend.clock.advance(by: 901)
        try await backend.setFaults("GET /me:status=503@0.3")
        let composed = Interceptor(
            adapters: [backend.interceptor], retriers: [backend.interceptor, RetryPolicy(retryLimit: 6)])
        let alamofire = backend.alamofire(composed)
        let url = backend.base.appendingPathComponent("me")
        let statuses = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    await alamofire.request(url).validate().serializingData().response.response?.statusCode ?? -1
                }
            }
            return await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.filter { $0 == 200 }.count >= 45, "\(statuses)")
        #expect(try await backend.counter("refreshes") == 1)
    }

    @Test(
        "Credentials never reach another origin: not a foreign request, not a redirect; a foreign 401 never refreshes")
    func origins() async throws {
        let backend = try Backend()
        defer { backend.server.stop() }
        try await backend.session.signIn(
            with: try await backend.provider.register(email: "origin@example.com", password: "correct-horse"))
        let seen = Recorded()
        let foreign = HTTPServer { request in
            seen.append(request.path + ":" + (request.headers["Authorization"] ?? "none"))
            return HTTPServerResponse(status: 401, headers: ["WWW-Authenticate": #"Bearer error="invalid_token""#])
        }
        let foreignPort = try foreign.start()
        defer { foreign.stop() }
        let redirecting = HTTPServer { _ in
            HTTPServerResponse(status: 302, headers: ["Location": "http://127.0.0.1:\(foreignPort)/stolen"])
        }
        let redirectPort = try redirecting.start()
        defer { redirecting.stop() }
        // The redirecting server is a credential origin too: its redirect must still not carry them away.
        let interceptor = SesameInterceptor(
            session: backend.session,
            origins: [backend.base, URL(string: "http://127.0.0.1:\(redirectPort)")!])
        let alamofire = Alamofire.Session(interceptor: interceptor, redirectHandler: interceptor.redirectHandler)
        _ = await alamofire.request("http://127.0.0.1:\(foreignPort)/direct").validate().serializingData().response
        _ = await alamofire.request("http://127.0.0.1:\(redirectPort)/away").validate().serializingData().response
        #expect(seen.values.sorted() == ["/direct:none", "/stolen:none"])
        let refreshes = try await backend.counter("refreshes")
        #expect(refreshes == 0)
    }
}

/// Values appended from server threads.
final class Recorded: @unchecked Sendable {
    // `stored` is only touched under `lock`.
    private let lock = NSLock()
    private var stored: [String] = []

    func append(_ value: String) {
        lock.lock()
        stored.append(value)
        lock.unlock()
    }

    var values: [String] {
        lock.lock()
        defer { lock.unlock() }
        return stored
    }
}

@Suite struct PerTargetAuthorizationTests {
    @Test("Moya-style per-target authorization through the marker header: bearer, basic, none; the marker never leaves")
    func markedKinds() async throws {
        let backend = try Backend()
        defer { backend.server.stop() }
        try await backend.session.signIn(
            with: try await backend.provider.register(email: "marked@example.com", password: "correct-horse"))
        let seen = Recorded()
        let api = HTTPServer { request in
            seen.append(
                "\(request.path) \(request.headers["Authorization"]?.split(separator: " ").first ?? "none") "
                    + (request.headers[SesameInterceptor.authorizationKindHeader] ?? "-"))
            return HTTPServerResponse(status: request.path == "/public" ? 401 : 200)
        }
        let port = try api.start()
        defer { api.stop() }
        let base = URL(string: "http://127.0.0.1:\(port)")!
        let interceptor = SesameInterceptor(
            session: backend.session, origins: [base],
            authorization: SesameInterceptor.markedAuthorization(basic: (user: "svc", password: "pw")))
        let alamofire = Alamofire.Session(interceptor: interceptor, redirectHandler: interceptor.redirectHandler)
        func call(_ path: String, _ kind: String?) async -> Int? {
            var headers: HTTPHeaders = [:]
            if let kind { headers.add(name: SesameInterceptor.authorizationKindHeader, value: kind) }
            return await alamofire.request(base.appendingPathComponent(path), headers: headers).validate()
                .serializingData().response.response?.statusCode
        }
        #expect(await call("bearer", nil) == 200)
        #expect(await call("basic", "basic") == 200)
        #expect(await call("public", "none") == 401)
        #expect(seen.values == ["/bearer Bearer -", "/basic Basic -", "/public none -"])
        let refreshes = try await backend.counter("refreshes")
        #expect(refreshes == 0, "a 401 on an uncredentialed target never refreshes")
    }
}

@Suite struct MigrationSnippetTests {
    @Test("Migration guide: the Alamofire snippet, as written")
    func guideSnippet() async throws {
        let backend = try Backend()
        defer { backend.server.stop() }
        let api = backend.base
        let session = backend.session
        try await session.signIn(
            with: try await backend.provider.register(email: "snippet@example.com", password: "correct-horse"))

        let interceptor = SesameInterceptor(session: session, origins: [api])
        let alamofire = Session(interceptor: interceptor, redirectHandler: interceptor.redirectHandler)
        let me = try await alamofire.request(api.appendingPathComponent("me")).validate().serializingData().value

        #expect(String(decoding: me, as: UTF8.self).contains("snippet@example.com"))
    }
}

/// Regressions from the security review of the integration.
@Suite struct InterceptorReviewTests {
    @Test(
        "A 503 retried by RetryPolicy does not use up the credential retry: the later 401 still refreshes",
        arguments: [true, false])
    func fiveHundredThenUnauthorized(sesameFirst: Bool) async throws {
        let backend = try Backend()
        defer { backend.server.stop() }
        let first = try await backend.provider.register(email: "p\(sesameFirst)@example.com", password: "correct-horse")
        try await backend.session.signIn(with: first)
        let hits = Recorded()
        let api = HTTPServer { request in
            hits.append(request.headers["Authorization"] ?? "none")
            if hits.values.count == 1 { return HTTPServerResponse(status: 503) }
            if request.headers["Authorization"] == "Bearer \(first.accessToken)" {
                return HTTPServerResponse(status: 401)
            }
            return .text(200, "ok")
        }
        let port = try api.start()
        defer { api.stop() }
        let base = try #require(URL(string: "http://127.0.0.1:\(port)"))
        let interceptor = SesameInterceptor(session: backend.session, origins: [base])
        let policy = RetryPolicy(retryLimit: 3, exponentialBackoffBase: 2, exponentialBackoffScale: 0.01)
        let composed = Interceptor(
            adapters: [interceptor], retriers: sesameFirst ? [interceptor, policy] : [policy, interceptor])
        let alamofire = Alamofire.Session(interceptor: composed, redirectHandler: interceptor.redirectHandler)
        let response = await alamofire.request(base.appendingPathComponent("me")).validate().serializingData().response
        #expect(response.response?.statusCode == 200, "\(hits.values.count) hits")
        let refreshes = try await backend.counter("refreshes")
        #expect(refreshes == 1)
    }

    @Test("A custom signer's headers never follow a redirect to another origin")
    func customHeaderOnRedirect() async throws {
        let backend = try Backend()
        defer { backend.server.stop() }
        try await backend.session.signIn(
            with: try await backend.provider.register(email: "custom@example.com", password: "correct-horse"))
        let seen = Recorded()
        let foreign = HTTPServer { request in
            seen.append(
                "sig=\(request.headers["X-Api-Signature"] ?? "none") auth=\(request.headers["Authorization"] ?? "none")"
            )
            return .text(200, "ok")
        }
        let foreignPort = try foreign.start()
        defer { foreign.stop() }
        let api = HTTPServer { _ in
            HTTPServerResponse(status: 302, headers: ["Location": "http://127.0.0.1:\(foreignPort)/stolen"])
        }
        let apiPort = try api.start()
        defer { api.stop() }
        let base = try #require(URL(string: "http://127.0.0.1:\(apiPort)"))
        let interceptor = SesameInterceptor(session: backend.session, origins: [base]) { _ in
            .custom { request, tokens in
                var signed = request
                signed.headers["X-Api-Signature"] = "hmac-of-" + String(tokens?.accessToken.prefix(8) ?? "")
                return signed
            }
        }
        let alamofire = Alamofire.Session(interceptor: interceptor, redirectHandler: interceptor.redirectHandler)
        _ = await alamofire.request(base.appendingPathComponent("away")).serializingData().response
        #expect(seen.values == ["sig=none auth=none"])
    }
}
