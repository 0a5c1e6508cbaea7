import Foundation
import SesameDevServer
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite struct AppleExchangeTests {
    func mint(_ running: RunningServer, _ extra: JOSEObject = [:], nonce: String = "raw-nonce-1") async throws -> String
    {
        var body: JOSEObject = [
            "sub": "001234.apple-subject", "email": "jo@privaterelay.appleid.com", "nonce": .string(nonce),
        ]
        for member in extra { body[member.name] = member.value }
        let response = try await running.client.send("POST", "/_dev/apple/identity-token", json: .object(body))
        return try #require(response.json?["identityToken"]?.stringValue)
    }

    func exchange(_ running: RunningServer, _ token: String, nonce: String = "raw-nonce-1") async throws
        -> HTTPTestClient.Response
    {
        try await running.client.send(
            "POST", "/auth/apple",
            json: ["identityToken": .string(token), "nonce": .string(nonce), "deviceId": "device-1"])
    }

    @Test("A stand-in Apple identity token is exchanged for a session; the same subject keeps its account")
    func exchangeWorks() async throws {
        let running = try RunningServer()
        defer { running.server.stop() }
        let token = try await mint(running)
        let claims = try JWT.unverifiedClaims(of: token)
        #expect(claims.issuer == "https://appleid.apple.com" && claims.audience == ["dev.sesame.demo"])
        #expect(claims.nonce == DevServer.appleNonceHash("raw-nonce-1"))
        let first = try await exchange(running, token)
        #expect(first.status == 200 && first.json?["user"]?["email"] == "jo@privaterelay.appleid.com")
        let second = try await exchange(running, try await mint(running, nonce: "raw-nonce-2"), nonce: "raw-nonce-2")
        #expect(second.json?["user"]?["id"] == first.json?["user"]?["id"])
        let jwks = try await running.client.send("GET", "/_dev/apple/jwks")
        #expect(try JWKSet(json: jwks.body).keys.first?.keyType == .rsa)
        #expect(try await running.counters()["appleExchanges"] == 2)
    }

    @Test("Rejected: wrong audience, wrong nonce, expired, wrong issuer, bad signature")
    func rejections() async throws {
        let running = try RunningServer()
        defer { running.server.stop() }
        let wrongAudience = try await mint(running, ["aud": "com.other.app"])
        let expired = try await mint(running, ["expiresIn": -3600])
        let wrongIssuer = try await mint(running, ["iss": "https://evil.example"])
        let good = try await mint(running)
        let parts = good.split(separator: ".")
        var signature = Array(try Base64URL.decode(String(parts[2])))
        signature[10] ^= 1
        let badSignature = "\(parts[0]).\(parts[1]).\(Base64URL.encode(signature))"
        let attempts: [(String, String)] = [
            (wrongAudience, "raw-nonce-1"), (good, "another-nonce"), (expired, "raw-nonce-1"),
            (wrongIssuer, "raw-nonce-1"), (badSignature, "raw-nonce-1"), ("not.a.token", "raw-nonce-1"),
        ]
        for (token, nonce) in attempts {
            let response = try await exchange(running, token, nonce: nonce)
            #expect(response.status == 401 && response.error == "invalid_grant")
        }
        #expect(try await running.counters()["appleExchanges"] == 0)
    }

    @Test("--no-dev-endpoints: /_dev/ answers 404")
    func devEndpointsOff() async throws {
        let running = try RunningServer { $0.devEndpoints = false }
        defer { running.server.stop() }
        #expect(try await running.client.send("GET", "/_dev/counters").status == 404)
        #expect(
            try await running.client.send("POST", "/_dev/apple/identity-token", json: ["sub": "x", "nonce": "n"]).status
                == 404)
    }
}

@Suite struct FaultInjectionTests {
    @Test("Fault SPEC grammar: routes, methods, actions and probabilities; bad specs are refused")
    func grammar() throws {
        let plan = try FaultPlan(
            spec: "/refresh-token:status=503@0.3; POST /login:drop ;*:latency=50ms@0.1;/me:unauthorized")
        #expect(plan.rules.count == 4)
        #expect(
            plan.rules[0].path == "/refresh-token" && plan.rules[0].action == .status(503)
                && plan.rules[0].probability == 0.3)
        #expect(plan.rules[1].method == "POST" && plan.rules[1].action == .drop)
        #expect(plan.rules[2].path == nil && plan.rules[2].action == .latency(0.05))
        for bad in ["/me", "/me:explode", "/me:status=200", "/me:drop@2", "me:drop", "/me:latency=fast"] {
            #expect(throws: DevServerError.self) { try FaultPlan(spec: bad) }
        }
    }

    @Test("Injected 5xx, dropped connections, forced 401s and latency reach the client; clearing restores service")
    func faultsReachTheClient() async throws {
        let running = try RunningServer { $0.users = [(email: "kim@example.com", password: "correct-horse")] }
        defer { running.server.stop() }
        let access = try #require(try await running.login("kim@example.com").json?["accessToken"]?.stringValue)
        _ = try await running.client.send(
            "POST", "/_dev/faults", json: ["spec": "/login:status=503;/me:unauthorized;POST /refresh-token:drop"])
        let login = try await running.login("kim@example.com")
        #expect(login.status == 503 && login.error == "server_error")
        #expect(try await running.client.send("GET", "/me", bearer: access).status == 401)
        // A fresh client, so that no reused keep-alive connection invites a transparent retry.
        let fresh = HTTPTestClient(base: running.client.base)
        await #expect(throws: (any Error).self) {
            try await fresh.send("POST", "/refresh-token", json: ["refreshToken": "whatever"])
        }

        _ = try await running.client.send("POST", "/_dev/faults", json: ["spec": "/me:latency=150ms"])
        let start = ContinuousClock.now
        #expect(try await running.client.send("GET", "/me", bearer: access).status == 200)
        #expect(ContinuousClock.now - start >= .milliseconds(150))  // a lower bound the server guarantees

        _ = try await running.client.send("POST", "/_dev/faults", json: ["spec": ""])
        #expect(try await running.login("kim@example.com").status == 200)
    }
}

@Suite struct DevServerRobustnessTests {
    @Test("Huge bodies, header floods, garbage and stalled clients are answered, and the next client is served")
    func badClients() async throws {
        let running = try RunningServer {
            $0.http.readTimeout = 0.5
            $0.http.maxBodyBytes = 64 * 1024
        }
        defer { running.server.stop() }
        let port = running.server.port
        let cases: [(String, String)] = [
            ("POST /login HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n", "413"),
            ("GET /me HTTP/1.1\r\n" + String(repeating: "X-Flood: aaaaaaaaaaaaaaaa\r\n", count: 1000) + "\r\n", "431"),
            ("\u{16}\u{03}\u{01}\u{02}\u{00}\u{01}\u{00}\u{01}\u{fc}\r\n\r\n", "400"),
            ("POST /login HTTP/1.1\r\nContent-Length: 50\r\n\r\n{\"email\":", "408"),
        ]
        for (request, status) in cases {
            let client = try RawClient(port: port)
            client.send(request)
            #expect(client.readToEnd().hasPrefix("HTTP/1.1 \(status) "), "\(status)")
        }
        #expect(try await running.register("lee@example.com").status == 201)
    }

    @Test("200 concurrent clients register, log in and refresh: none fails, every refresh is counted")
    func concurrentClients() async throws {
        let running = try RunningServer()
        defer { running.server.stop() }
        // Each client says where it failed (nil: it did not), so that a failure in CI says why.
        let failures = await withTaskGroup(of: String?.self) { group in
            for index in 0..<200 {
                group.addTask {
                    var step = "register"
                    do {
                        let email = "user\(index)@example.com"
                        let registered = try await running.register(email)
                        guard registered.status == 201 else { return "register: \(registered.status)" }
                        step = "login"
                        let login = try await running.login(email)
                        guard let token = login.json?["refreshToken"]?.stringValue else {
                            return "login: \(login.status)"
                        }
                        step = "refresh"
                        let refreshed = try await running.refresh(token)
                        guard let access = refreshed.json?["accessToken"]?.stringValue else {
                            return "refresh: \(refreshed.status)"
                        }
                        step = "me"
                        let me = try await running.client.send("GET", "/me", bearer: access)
                        return me.json?["email"] == .string(email) ? nil : "me: \(me.status)"
                    } catch {
                        return "\(step): \(error)"
                    }
                }
            }
            return await group.reduce(into: [String]()) { if let failure = $1 { $0.append(failure) } }
        }
        #expect(failures.isEmpty, "\(failures.count) of 200 failed: \(Set(failures).sorted().prefix(5))")
        let counters = try await running.counters()
        #expect(counters["registrations"] == 200 && counters["logins"] == 200 && counters["refreshes"] == 200)
        #expect(counters["reuseDetections"] == 0)
    }
}
