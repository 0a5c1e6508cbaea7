import Foundation
import SesameDevServer
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

/// A dev server on an ephemeral loopback port for one test.
struct RunningServer {
    let server: DevServer
    let client: HTTPTestClient
    let logLines: LineCollector

    init(_ configure: (inout DevServer.Configuration) throws -> Void = { _ in }) throws {
        var configuration = DevServer.Configuration()
        configuration.passwordIterations = 1000  // fast tests; the default is 600,000
        let lines = LineCollector()
        configuration.log = { lines.append($0) }
        try configure(&configuration)
        server = try DevServer(configuration: configuration)
        try server.start()
        client = HTTPTestClient(base: try #require(server.localURL))
        logLines = lines
    }

    /// The REST side of a server started elsewhere.
    init(wrapping server: DevServer) {
        self.server = server
        // swift-format-ignore: NeverForceUnwrap
        // (a started server has a local URL)
        client = HTTPTestClient(base: server.localURL!)
        logLines = LineCollector()
    }

    func register(_ email: String, _ password: String = "correct-horse") async throws -> HTTPTestClient.Response {
        try await client.send("POST", "/register", json: ["email": .string(email), "password": .string(password)])
    }

    func login(_ email: String, _ password: String = "correct-horse") async throws -> HTTPTestClient.Response {
        try await client.send("POST", "/login", json: ["email": .string(email), "password": .string(password)])
    }

    func refresh(_ token: String) async throws -> HTTPTestClient.Response {
        try await client.send("POST", "/refresh-token", json: ["refreshToken": .string(token)])
    }

    func counters() async throws -> JOSEValue {
        try #require(try await client.send("GET", "/_dev/counters").json)
    }
}

@Suite struct RESTContractTests {
    @Test("POST /register: 201 AuthResponse; 409 email_taken; 400 invalid_request for bad input")
    func register() async throws {
        let running = try RunningServer()
        defer { running.server.stop() }
        let created = try await running.register("  Alice@Example.COM ")
        #expect(created.status == 201)
        let body = try #require(created.json)
        #expect(body["tokenType"] == "Bearer" && body["expiresIn"] == 900)
        #expect(body["accessToken"]?.stringValue?.split(separator: ".").count == 3)
        #expect((body["refreshToken"]?.stringValue?.count ?? 0) >= 43)
        #expect(body["user"]?["email"] == "alice@example.com" && body["user"]?["id"]?.stringValue != nil)

        #expect(try await running.register("alice@example.com").error == "email_taken")
        #expect(try await running.register("alice@example.com").status == 409)
        for (email, password) in [
            ("not-an-email", "correct-horse"), ("bob@example.com", "short"), ("", "correct-horse"),
            // Two @ bytes, the second hidden from a Character split behind a combining mark.
            ("a@\u{301}x@victim.example", "correct-horse"), ("a@\u{FE0F}x@victim.example", "correct-horse"),
        ] {
            let response = try await running.register(email, password)
            #expect(response.status == 400 && response.error == "invalid_request", "\(email)")
            #expect(response.json?["error_description"]?.stringValue?.isEmpty == false)
        }
    }

    @Test("Bad bodies: invalid JSON, duplicate members, wrong content type, missing or mistyped fields")
    func badBodies() async throws {
        let running = try RunningServer()
        defer { running.server.stop() }
        let client = running.client
        let cases: [(Data, String?, Int)] = [
            (Data("{not json".utf8), "application/json", 400),
            (Data(#"{"email":"a@b","email":"c@d","password":"x"}"#.utf8), "application/json", 400),
            (Data(#"{"email":"a@b.c","password":"correct-horse"}"#.utf8), "text/plain", 415),
            (Data(#"{"email":"a@b.c","password":"correct-horse"}"#.utf8), nil, 415),
            (Data("[]".utf8), "application/json", 400),
            (Data(#"{"email":"a@b.c"}"#.utf8), "application/json", 400),
            (Data(#"{"email":1,"password":2}"#.utf8), "application/json", 400),
        ]
        for path in ["/register", "/login", "/refresh-token", "/auth/apple"] {
            for (body, type, status) in cases {
                let response = try await client.send("POST", path, body: body, contentType: type)
                #expect(response.status == status, "\(path) \(String(decoding: body, as: UTF8.self)) \(type ?? "-")")
                #expect(response.error == "invalid_request")
            }
        }
        #expect(try await client.send("GET", "/register").status == 405)
        #expect(try await client.send("GET", "/nope").status == 404)
    }

    @Test("POST /login: 200 with the right password, 401 invalid_credentials otherwise (unknown email included)")
    func login() async throws {
        let running = try RunningServer { $0.users = [(email: "bob@example.com", password: "correct-horse")] }
        defer { running.server.stop() }
        #expect(try await running.login("BOB@example.com").status == 200)
        let wrong = try await running.login("bob@example.com", "wrong-horse")
        #expect(wrong.status == 401 && wrong.error == "invalid_credentials")
        #expect(wrong.headers["www-authenticate"]?.hasPrefix("Bearer error=\"invalid_token\"") == true)
        #expect(try await running.login("nobody@example.com").error == "invalid_credentials")
    }

    @Test("GET /me: 200 {id,email} with the access token; 401 with WWW-Authenticate otherwise; tokens expire")
    func me() async throws {
        let running = try RunningServer()
        defer { running.server.stop() }
        let body = try #require(try await running.register("carol@example.com").json)
        let token = try #require(body["accessToken"]?.stringValue)
        let me = try await running.client.send("GET", "/me", bearer: token)
        #expect(me.status == 200 && me.json?["email"] == "carol@example.com" && me.json?["id"] == body["user"]?["id"])
        for bearer in [nil, "garbage", token + "x", String(token.dropLast(4))] as [String?] {
            let response = try await running.client.send("GET", "/me", bearer: bearer)
            #expect(response.status == 401)
            #expect(response.headers["www-authenticate"]?.hasPrefix("Bearer error=\"invalid_token\"") == true)
        }
    }

    @Test("Access tokens expire after --access-token-ttl")
    func accessTokenExpiry() async throws {
        let clock = ManualTimeSource(Date())
        let running = try RunningServer {
            $0.accessTokenTTL = 1
            $0.clock = { clock.now }
        }
        defer { running.server.stop() }
        let token = try #require(try await running.register("cleo@example.com").json?["accessToken"]?.stringValue)
        #expect(try await running.client.send("GET", "/me", bearer: token).status == 200)
        clock.advance(by: 62)  // past the lifetime and the verifier's 60 s leeway, without sleeping
        let expired = try await running.client.send("GET", "/me", bearer: token)
        #expect(expired.status == 401 && expired.error == "invalid_token")
    }

    @Test("POST /refresh-token rotates; reusing a rotated token returns invalid_grant and revokes the whole family")
    func rotationAndReuse() async throws {
        let running = try RunningServer()
        defer { running.server.stop() }
        let first = try #require(try await running.register("dan@example.com").json?["refreshToken"]?.stringValue)
        let rotated = try await running.refresh(first)
        #expect(rotated.status == 200)
        let second = try #require(rotated.json?["refreshToken"]?.stringValue)
        #expect(second != first)
        #expect(rotated.json?["accessToken"]?.stringValue != nil)

        let reuse = try await running.refresh(first)
        #expect(reuse.status == 401 && reuse.error == "invalid_grant")
        // The family is revoked: the newest token is dead too.
        #expect(try await running.refresh(second).error == "invalid_grant")
        #expect(try await running.refresh("unknown-token").error == "invalid_grant")

        let counters = try await running.counters()
        #expect(counters["refreshes"] == 1 && counters["reuseDetections"] == 1)
        #expect(counters["requests"]?["POST /refresh-token"] == 4)
    }

    @Test("request counters are kept per route: a method the path has no route for counts as other, never a new key")
    func countersPerRoute() async throws {
        let running = try RunningServer()
        defer { running.server.stop() }
        for index in 0..<20 { #expect(try await running.client.send("XYZZY\(index)", "/token").status == 405) }
        let requests = try #require(try await running.counters()["requests"]?.objectValue)
        #expect(!requests.names.contains { $0.hasPrefix("XYZZY") }, "\(requests.names)")
        #expect(requests["other"] == 20)
    }

    @Test("--refresh-reuse-grace on /refresh-token: a lost answer's token comes back for a replacement; one chain")
    func reuseGrace() async throws {
        let clock = ManualTimeSource(Date())
        let running = try RunningServer {
            $0.refreshReuseGrace = 5
            $0.clock = { clock.now }
        }
        defer { running.server.stop() }
        let first = try #require(try await running.register("gil@example.com").json?["refreshToken"]?.stringValue)
        let lost = try #require(try await running.refresh(first).json?["refreshToken"]?.stringValue)  // never arrived
        clock.advance(by: 2)
        let again = try await running.refresh(first)
        let replacement = try #require(again.json?["refreshToken"]?.stringValue)
        #expect(again.status == 200 && replacement != lost)
        // Lost twice running: still within the grace and nothing later presented, so a replacement again.
        let lostAgain = try #require(try await running.refresh(first).json?["refreshToken"]?.stringValue)
        #expect(lostAgain != replacement)
        var counters = try await running.counters()
        #expect(counters["reuseGraceRefreshes"] == 2 && counters["reuseDetections"] == 0)
        // One chain: the newest works; once it was presented, the original may not come back.
        #expect(try await running.refresh(lostAgain).status == 200)
        #expect(try await running.refresh(first).error == "invalid_grant")
        counters = try await running.counters()
        #expect(counters["reuseDetections"] == 1)
        // The family is revoked: the replaced ones are dead too.
        #expect(try await running.refresh(replacement).error == "invalid_grant")

        // Past the grace, a spent token revokes its family as before.
        let other = try #require(try await running.login("gil@example.com").json?["refreshToken"]?.stringValue)
        let next = try #require(try await running.refresh(other).json?["refreshToken"]?.stringValue)
        clock.advance(by: 6)
        #expect(try await running.refresh(other).error == "invalid_grant")
        #expect(try await running.refresh(next).error == "invalid_grant")
    }

    @Test("Refresh tokens expire")
    func refreshExpiry() async throws {
        let clock = ManualTimeSource(Date())
        let running = try RunningServer {
            $0.refreshTokenTTL = 1
            $0.clock = { clock.now }
        }
        defer { running.server.stop() }
        let token = try #require(try await running.register("erin@example.com").json?["refreshToken"]?.stringValue)
        clock.advance(by: 2)
        #expect(try await running.refresh(token).error == "invalid_grant")
    }

    @Test("POST /logout: the refresh token alone ends its session (Bearer optional); 204, empty; idempotent")
    func logout() async throws {
        let running = try RunningServer()
        defer { running.server.stop() }
        let body = try #require(try await running.register("fay@example.com").json)
        let access = try #require(body["accessToken"]?.stringValue)
        let refresh = try #require(body["refreshToken"]?.stringValue)
        let nothing = try await running.client.send("POST", "/logout", json: [:])
        #expect(nothing.status == 401, "neither a refresh token nor a valid access token")
        #expect(try await running.client.send("POST", "/logout", json: [:], bearer: access).status == 204)
        let out = try await running.client.send("POST", "/logout", json: ["refreshToken": .string(refresh)])
        #expect(out.status == 204 && out.body.isEmpty)
        #expect(try await running.refresh(refresh).error == "invalid_grant")
        let again = try await running.client.send("POST", "/logout", json: ["refreshToken": .string(refresh)])
        #expect(again.status == 204, "RFC 7009 §2.2: an ended or unknown token is not an error")
        let unknown = try await running.client.send("POST", "/logout", json: ["refreshToken": "no-such-token"])
        #expect(unknown.status == 204)
    }

    @Test("GET /jwks publishes the access-token key, and the access token verifies against it as at+jwt")
    func jwksVerifiesAccessTokens() async throws {
        let running = try RunningServer { $0.signingAlgorithm = .eddsa }
        defer { running.server.stop() }
        let token = try #require(try await running.register("gus@example.com").json?["accessToken"]?.stringValue)
        let jwks = try await running.client.send("GET", "/jwks")
        let issuer = try #require(running.server.issuer?.absoluteString)
        var policy = ClaimValidationPolicy(
            issuer: issuer, audience: issuer, requiredClaims: ["exp", "iat", "sub", "jti"])
        policy.acceptedTypes = ["at+jwt"]
        let jwt = try JWTVerifier(keys: try JWKSet(json: jwks.body), policy: policy).verify(token, now: Date())
        #expect(jwt.header.algorithm == .eddsa)
    }

    @Test("Restarting on the same database keeps users, sessions and the signing key")
    func restartPersistence() async throws {
        // A folder of our own: the server refuses a database in a folder others can write (such as /tmp itself).
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: folder, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("dev.sqlite").path
        let first = try RunningServer {
            $0.databasePath = path
            $0.issuer = URL(string: "http://127.0.0.1:1/")
        }
        let body = try #require(try await first.register("hal@example.com").json)
        first.server.stop()
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)

        let second = try RunningServer {
            $0.databasePath = path
            $0.issuer = URL(string: "http://127.0.0.1:1/")
        }
        defer { second.server.stop() }
        #expect(try await second.login("hal@example.com").status == 200)
        let access = try #require(body["accessToken"]?.stringValue)
        #expect(try await second.client.send("GET", "/me", bearer: access).status == 200)
        let refresh = try #require(body["refreshToken"]?.stringValue)
        #expect(try await second.refresh(refresh).status == 200)
    }

    @Test("The log has one line per request and never a token or a password")
    func logsHoldNoSecrets() async throws {
        let running = try RunningServer()
        defer { running.server.stop() }
        let password = "Secret-Password-123"
        let body = try #require(try await running.register("ivy@example.com", password).json)
        let firstRefresh = try #require(body["refreshToken"]?.stringValue)
        let refreshed = try #require(try await running.refresh(firstRefresh).json)
        _ = try await running.login("ivy@example.com", password)
        _ = try await running.client.send("GET", "/me", bearer: refreshed["accessToken"]?.stringValue)
        let lines = running.logLines.lines
        #expect(lines.count == 4)
        #expect(lines.first?.hasPrefix("POST /register 201 ") == true)
        let secrets = [
            password, body["accessToken"]?.stringValue, body["refreshToken"]?.stringValue,
            refreshed["refreshToken"]?.stringValue,
        ].compactMap { $0 }
        for line in lines { for secret in secrets { #expect(!line.contains(secret)) } }
    }
}
