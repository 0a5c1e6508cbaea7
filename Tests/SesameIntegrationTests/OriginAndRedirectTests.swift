import Foundation
import Sesame
import SesameLoopback
import SesameTestSupport
import SesameTesting
import Testing

/// Credentials never leave their origins: not through an absolute URL, not through a redirect (GET 302, POST
/// 307, 303), not through the provider's own calls — over real loopback servers, with both transports.
@Suite struct OriginAndRedirectTests {
    /// An API on one origin that redirects to itself and to `elsewhere`, and answers `/me` with what it saw.
    struct Backends {
        let elsewhere: RecordingServer
        let api: RecordingServer
        let session: AuthSession

        init() async throws {
            let elsewhere = try RecordingServer { _ in .json(200, Data(#"{"elsewhere":true}"#.utf8)) }
            let away = elsewhere.base.absoluteString
            api = try RecordingServer { request in
                switch request.path {
                case "/same": return Self.redirect(302, "/me")
                case "/away": return Self.redirect(302, away + "/stolen")
                case "/post-away": return Self.redirect(307, away + "/stolen-post")
                case "/see-other": return Self.redirect(303, away + "/see-other")
                case "/loop": return Self.redirect(302, "/loop")
                case "/me":
                    let seen = request.headers["Authorization"] ?? "none"
                    return .json(200, Data(#"{"authorization":"\#(seen)"}"#.utf8))
                case "/foreign-401": return HTTPServerResponse(status: 401)
                default: return .text(404, "no")
                }
            }
            self.elsewhere = elsewhere
            session = AuthSession(provider: RESTAuthProvider(baseURL: api.base), store: InMemoryTokenStore())
            try await session.signIn(
                with: TokenSet(accessToken: "secret-access", refreshToken: "secret-refresh", expiresAt: .distantFuture))
        }

        static func redirect(_ status: Int, _ location: String) -> HTTPServerResponse {
            HTTPServerResponse(status: status, headers: ["Location": location])
        }

        func client(_ transport: any HTTPTransport, policy: AuthorizedClient.RedirectPolicy = .follow)
            -> AuthorizedClient
        {
            AuthorizedClient(session: session, baseURL: api.base, redirectPolicy: policy, transport: transport)
        }

        func stop() {
            api.stop()
            elsewhere.stop()
        }
    }

    static let transports: [String] = ["curl", "urlsession"]

    static func transport(_ name: String) -> any HTTPTransport {
        name == "curl" ? SesameHTTP.platformTransport : URLSessionTransport()
    }

    @Test("HTTP-06: a same-origin redirect keeps the credentials (applied afresh)", arguments: transports)
    func sameOrigin(transport: String) async throws {
        let backends = try await Backends()
        defer { backends.stop() }
        let response = try await backends.client(Self.transport(transport)).send(.get("/same"))
        #expect(response.status == 200)
        #expect(String(decoding: response.body, as: UTF8.self).contains("Bearer secret-access"))
    }

    @Test(
        "HTTP-06: cross-origin redirects (GET 302, POST 307, 303) are followed without Authorization, Cookie or DPoP",
        arguments: transports)
    func crossOrigin(transport: String) async throws {
        let backends = try await Backends()
        defer { backends.stop() }
        let client = backends.client(Self.transport(transport))
        var get = AuthorizedClient.Endpoint.get("/away")
        get.headers["Cookie"] = "session=secret-cookie"
        get.headers["DPoP"] = "secret-proof"
        #expect(try await client.send(get).status == 200)
        #expect(try await client.send(.post("/post-away", body: Data(#"{"a":1}"#.utf8))).status == 200)
        #expect(try await client.send(.post("/see-other", body: Data("x".utf8))).status == 200)
        let received = backends.elsewhere.requests
        #expect(received.map(\.path) == ["/stolen", "/stolen-post", "/see-other"])
        for request in received {
            for name in ["Authorization", "Cookie", "DPoP", "Proxy-Authorization"] {
                #expect(request.headers[name] == nil, "\(name) reached the other origin at \(request.path)")
            }
            #expect(!String(decoding: request.body, as: UTF8.self).contains("secret"))
        }
        // 307 keeps the method and body (RFC 9110 §15.4.8); 303 turns into a GET without a body.
        #expect(received[1].method == "POST" && received[1].body == Data(#"{"a":1}"#.utf8))
        #expect(received[2].method == "GET" && received[2].body.isEmpty)
    }

    @Test("refuseCrossOrigin throws redirect_refused and the other origin receives nothing; never returns 3xx")
    func refused() async throws {
        let backends = try await Backends()
        defer { backends.stop() }
        let refusing = backends.client(SesameHTTP.platformTransport, policy: .refuseCrossOrigin)
        for endpoint in [AuthorizedClient.Endpoint.get("/away"), .post("/post-away", body: Data("{}".utf8))] {
            do {
                _ = try await refusing.send(endpoint)
                Issue.record("expected redirect_refused for \(endpoint)")
            } catch let error as AuthError {
                #expect(error.code == .redirectRefused)
            }
        }
        #expect(try await refusing.send(.get("/same")).status == 200)  // same-origin still followed
        #expect(backends.elsewhere.requests.isEmpty)
        let never = backends.client(SesameHTTP.platformTransport, policy: .never)
        #expect(try await never.send(.get("/away")).status == 302)
        #expect(backends.elsewhere.requests.isEmpty)
    }

    @Test("A redirect loop ends with an error after 10 hops")
    func loop() async throws {
        let backends = try await Backends()
        defer { backends.stop() }
        await #expect(throws: AuthError.self) {
            try await backends.client(SesameHTTP.platformTransport).send(.get("/loop"))
        }
        #expect(backends.api.requests.count == 11)
    }

    @Test("Transports never follow redirects themselves: a 302 comes back as it is", arguments: transports)
    func transportsDoNotFollow(transport: String) async throws {
        let backends = try await Backends()
        defer { backends.stop() }
        let request = SesameHTTP.Request(
            method: "GET", url: backends.api.base.appendingPathComponent("away"),
            headers: ["Authorization": "Bearer secret-access"])
        let response = try await Self.transport(transport).send(request)
        #expect(response.status == 302 && response.header("location")?.hasSuffix("/stolen") == true)
        #expect(backends.elsewhere.requests.isEmpty)
    }

    @Test("BCP-23: a foreign origin gets no credentials, and its 401 never refreshes the session")
    func foreignOrigin() async throws {
        let backends = try await Backends()
        defer { backends.stop() }
        let foreign = try RecordingServer { _ in HTTPServerResponse(status: 401) }
        defer { foreign.stop() }
        let client = backends.client(SesameHTTP.platformTransport)
        let response = try await client.send(.get(foreign.base.absoluteString + "/data"))
        #expect(response.status == 401)
        #expect(foreign.requests.count == 1 && foreign.requests[0].headers["Authorization"] == nil)
        #expect(backends.api.requests.isEmpty)  // no /refresh-token
        #expect(try await backends.session.currentTokens?.accessToken == "secret-access")
    }

    @Test("The provider's refresh and logout never follow a redirect to another origin")
    func providerCalls() async throws {
        let elsewhere = try RecordingServer { _ in .json(200, Data("{}".utf8)) }
        defer { elsewhere.stop() }
        let away = elsewhere.base.absoluteString
        let backend = try RecordingServer { _ in
            HTTPServerResponse(status: 307, headers: ["Location": away + "/grab"])
        }
        defer { backend.stop() }
        let provider = RESTAuthProvider(baseURL: backend.base)
        let tokens = TokenSet(accessToken: "secret-access", refreshToken: "secret-refresh", expiresAt: .distantFuture)
        await #expect(throws: AuthError.self) { try await provider.refresh(tokens) }
        await #expect(throws: AuthError.self) { try await provider.signOut(tokens) }
        #expect(backend.requests.count == 2)
        #expect(elsewhere.requests.isEmpty)
    }
}

/// What an earlier security review found in AuthorizedClient's redirects and paths.
extension OriginAndRedirectTests {
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
        let session = AuthSession(provider: ScriptedProvider(user: "u"), store: InMemoryTokenStore())
        try await session.signIn(with: TokenSet.of("u", "0"))
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
        let session = AuthSession(provider: ScriptedProvider(user: "u"), store: InMemoryTokenStore())
        try await session.signIn(with: TokenSet.of("u", "0"))
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
        let session = AuthSession(provider: ScriptedProvider(user: "u"), store: InMemoryTokenStore())
        try await session.signIn(with: TokenSet.of("u", "0"))
        let client = AuthorizedClient(session: session, baseURL: server.base.appendingPathComponent("v1/tenant/"))
        #expect(try await client.send(.get("me?x=1&y=%20")).body == Data("/v1/tenant/me?x=1&y=%20".utf8))
        for path in [
            "../../admin", "a/../../admin", "%2e%2e/admin", "..;/admin", "a/..;x=1/../admin", ".%2E/admin",
            "%2e./admin",
        ] {
            await #expect(throws: AuthError.self, "\(path)") { try await client.send(.get(path)) }
        }
        #expect(server.requests.count == 1)
    }
}
