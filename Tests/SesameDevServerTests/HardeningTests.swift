import Foundation
import SesameDevServer
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import Testing

/// The dev server as tried from outside: hostile numbers, NUL bytes and look-alike emails (issue 9's hardening,
/// first part).
@Suite struct HardeningTests {
    @Test(
        "Absurd numbers from a request are a 400, and the server keeps serving",
        arguments: ["1e300", "-1e300", "1e19", "315360001"])
    func absurdExpiresIn(value: String) async throws {
        let running = try RunningServer()
        defer { running.server.stop() }
        let body = try JOSEValue.parse(Data(#"{"sub":"x","nonce":"n","expiresIn":\#(value)}"#.utf8))
        let minted = try await running.client.send("POST", "/_dev/apple/identity-token", json: body)
        #expect(minted.status == 400 && minted.error == "invalid_request")
        #expect(try await running.register("still@example.com").status == 201)
        let negative = try await running.client.send(
            "POST", "/_dev/apple/identity-token", json: ["sub": "x", "nonce": "n", "expiresIn": -60])
        #expect(negative.status == 200, "a negative lifetime within bounds stays possible for negative tests")
    }

    @Test("A latency fault is finite and bounded: inf, NaN and hours are refused")
    func boundedLatency() {
        for spec in ["*:latency=infs", "*:latency=nans", "*:latency=1e300ms", "*:latency=3601s", "*:latency=-1s"] {
            #expect(throws: (any Error).self, "\(spec)") { try FaultPlan(spec: spec) }
        }
        #expect(throws: Never.self) { try FaultPlan(spec: "*:latency=60s") }
    }

    @Test("A NUL inside an email never signs in as the account before it")
    func nulInEmail() async throws {
        let running = try RunningServer()
        defer { running.server.stop() }
        #expect(try await running.register("alice@example.com").status == 201)
        let smuggled = try await running.login("alice@example.com\u{0}evil")
        #expect(smuggled.status == 400 && smuggled.json?["accessToken"] == nil)
        let registered = try await running.register("alice@example.com\u{0}evil")
        #expect(registered.status == 400)
        #expect(try await running.login("alice@example.com").status == 200)
    }

    @Test("Look-alike emails are one account (NFC, case, full width) or refused (zero-width, bidi)")
    func lookAlikes() async throws {
        let running = try RunningServer()
        defer { running.server.stop() }
        #expect(try await running.register("jos\u{E9}@example.com").status == 201)
        for same in ["jose\u{301}@example.com", "JOS\u{C9}@EXAMPLE.COM", "\u{FF4A}os\u{E9}@example.com"] {
            #expect(try await running.register(same).status == 409, "\(same.unicodeScalars.map { $0.value })")
            #expect(try await running.login(same).status == 200)
        }
        for invisible in ["jo\u{200B}se@example.com", "jose@exa\u{202E}mple.com", "jose\u{7}@example.com"] {
            #expect(try await running.register(invisible).status == 400)
        }
    }
}

@Suite struct RebindingTests {
    func raw(_ port: Int, _ request: String) throws -> String {
        let client = try RawClient(port: port)
        client.send(request)
        return client.readToEnd()
    }

    @Test("DNS rebinding reaches nothing: a foreign Host is a 421 on every route; loopback names and the issuer pass")
    func hostValidation() throws {
        let running = try RunningServer { $0.issuer = URL(string: "https://id.dev.example") }
        defer { running.server.stop() }
        let port = running.server.port
        for host in ["evil.example", "evil.example:\(port)", "127.0.0.1.evil.example", "localhost.evil.example"] {
            for path in ["/jwks", "/_dev/counters", "/me"] {
                let answer = try raw(port, "GET \(path) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n")
                #expect(answer.hasPrefix("HTTP/1.1 421 "), "\(host) \(path): \(answer.prefix(40))")
            }
        }
        #expect(try raw(port, "GET /jwks HTTP/1.1\r\nConnection: close\r\n\r\n").hasPrefix("HTTP/1.1 400 "))
        // Names that merely look like loopback addresses are names an attacker can point anywhere.
        for host in ["127.a.evil.com", "127.0.0.evil", "127.1.1.1.evil.example"] {
            let answer = try raw(port, "GET /jwks HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n")
            #expect(answer.hasPrefix("HTTP/1.1 421 Misdirected Request"), "\(host)")
        }
        let twice = try raw(
            port, "GET /jwks HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
        #expect(!twice.hasPrefix("HTTP/1.1 200 "), "two Host headers are refused")
        for host in [
            "127.0.0.1:\(port)", "localhost", "LOCALHOST:\(port)", "[::1]:\(port)", "id.dev.example", "127.0.0.2",
        ] {
            let answer = try raw(port, "GET /jwks HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n")
            #expect(answer.hasPrefix("HTTP/1.1 200 "), "\(host)")
        }
    }

    @Test("Development endpoints take JSON only: text/plain and forms are a 415 (no CORS-free cross-site writes)")
    func jsonOnly() async throws {
        let running = try RunningServer()
        defer { running.server.stop() }
        for type in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"] {
            let faults = try await running.client.send(
                "POST", "/_dev/faults", body: Data("*:status=503".utf8), contentType: type)
            #expect(faults.status == 415, "\(type)")
            let minted = try await running.client.send(
                "POST", "/_dev/apple/identity-token", body: Data(#"{"sub":"x","nonce":"n"}"#.utf8), contentType: type)
            #expect(minted.status == 415, "\(type)")
        }
        #expect(try await running.register("served@example.com").status == 201, "no fault was installed")
        #expect(try await running.client.send("POST", "/_dev/faults", json: ["spec": "*:status=503"]).status == 204)
        #expect(try await running.register("refused@example.com").status == 503)
    }
}

@Suite struct AppleLinkingTests {
    func mint(_ running: RunningServer, _ claims: JOSEObject) async throws -> String {
        var body: JOSEObject = ["nonce": "raw-nonce"]
        for member in claims { body[member.name] = member.value }
        let response = try await running.client.send("POST", "/_dev/apple/identity-token", json: .object(body))
        return try #require(response.json?["identityToken"]?.stringValue)
    }

    func exchange(_ running: RunningServer, _ token: String) async throws -> HTTPTestClient.Response {
        try await running.client.send(
            "POST", "/auth/apple", json: ["identityToken": .string(token), "nonce": "raw-nonce", "deviceId": "d"])
    }

    @Test("An unverified Apple email never links to (or claims) a password account")
    func unverifiedEmail() async throws {
        let running = try RunningServer()
        defer { running.server.stop() }
        let owner = try #require(try await running.register("victim@example.com").json?["user"]?["id"]?.stringValue)
        let token = try await mint(
            running, ["sub": "000001.attacker", "email": "victim@example.com", "email_verified": false])
        let answer = try await exchange(running, token)
        #expect(answer.status == 200)
        #expect(answer.json?["user"]?["id"]?.stringValue != owner && answer.json?["user"]?["email"] == .null)
        #expect(try await running.login("victim@example.com").status == 200, "the password account is untouched")
    }

    /// An identity token of a configured Apple issuer (the test's own key), as Apple would sign it.
    func appleToken(_ key: JWK, _ claims: JOSEObject) throws -> String {
        let now = Int64(Date().timeIntervalSince1970)
        var all: JOSEObject = [
            "iss": "https://appleid.apple.com", "aud": "dev.sesame.demo", "iat": .integer(now),
            "exp": .integer(now + 600), "nonce": .string(DevServer.appleNonceHash("raw-nonce")),
            "jti": .string(UUID().uuidString),
        ]
        for member in claims { all[member.name] = member.value }
        return try JWT.sign(JWTClaims(all), key: key, algorithm: .rs256, type: nil)
    }

    @Test("A verified email from a configured Apple issuer links to the account and removes the unverified password")
    func verifiedEmailTakesOver() async throws {
        let apple = try JWK.generate(for: .rs256)
        let running = try RunningServer { $0.appleKeys = try JWKSet(keys: [try apple.publicKey()]) }
        defer { running.server.stop() }
        // Someone registered the owner's address first, with a password of their choosing.
        let registration = try await running.register("owner@example.com").json
        let squatted = try #require(registration?["user"]?["id"]?.stringValue)
        let squatterRefresh = registration?["refreshToken"]?.stringValue
        let token = try appleToken(
            apple, ["sub": "000002.owner", "email": "owner@example.com", "email_verified": "true"])
        let answer = try await exchange(running, token)
        #expect(answer.status == 200 && answer.json?["user"]?["id"]?.stringValue == squatted)
        #expect(try await running.login("owner@example.com").status == 401, "the squatter's password no longer works")
        #expect(squatterRefresh != nil)
        #expect(try await running.refresh(squatterRefresh ?? "").status == 401, "nor the sessions it opened")
        let again = try await exchange(running, try appleToken(apple, ["sub": "000002.owner"]))
        #expect(again.json?["user"]?["id"]?.stringValue == squatted, "linked by sub from now on")
    }

    @Test("A stand-in Apple token (anyone here can mint one) never takes a password account over")
    func standInNeverTakesOver() async throws {
        let running = try RunningServer()
        defer { running.server.stop() }
        let owner = try #require(try await running.register("victim@example.com").json?["user"]?["id"]?.stringValue)
        let token = try await mint(
            running, ["sub": "000004.attacker", "email": "victim@example.com", "email_verified": "true"])
        let answer = try await exchange(running, token)
        #expect(answer.status == 200 && answer.json?["user"]?["id"]?.stringValue != owner)
        #expect(answer.json?["user"]?["email"] == .null, "the address is taken: not claimed a second time")
        #expect(try await running.login("victim@example.com").status == 200, "the password account is untouched")
        let fresh = try await exchange(
            running, try await mint(running, ["sub": "000005.new", "email": "new@example.com", "email_verified": true]))
        #expect(fresh.json?["user"]?["email"] == "new@example.com", "an unused address is still claimed")
    }

    @Test("An identity token is exchanged once: a replay within its lifetime is refused")
    func replay() async throws {
        let running = try RunningServer()
        defer { running.server.stop() }
        let token = try await mint(running, ["sub": "000003.user", "email": "r@example.com"])
        #expect(try await exchange(running, token).status == 200)
        let replayed = try await exchange(running, token)
        #expect(replayed.status == 401 && replayed.error == "invalid_grant")
    }
}

@Suite struct SeededFaultTests {
    @Test("A fault seed makes probabilistic faults reproducible: the same seed, the same sequence of answers")
    func reproducible() async throws {
        let plan = try FaultPlan(spec: "GET /jwks:status=503@0.5")
        func run(seed: UInt64) async throws -> [Int] {
            let running = try RunningServer {
                $0.faults = plan
                $0.faultSeed = seed
            }
            defer { running.server.stop() }
            var statuses: [Int] = []
            for _ in 0..<24 { statuses.append(try await running.client.send("GET", "/jwks").status) }
            return statuses
        }
        let first = try await run(seed: 42)
        #expect(try await run(seed: 42) == first)
        #expect(Set(first) == [200, 503], "both outcomes occur")
        #expect(try await run(seed: 7) != first)
    }
}
