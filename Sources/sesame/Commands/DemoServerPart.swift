import Foundation
import SesameDevServer
import SesameJOSE

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The second half of `sesame demo`: the REST contract against an embedded dev server on an ephemeral port.
struct DemoServerPart {
    private var failures = 0
    private let session = URLSession(configuration: .ephemeral)

    static func run() async throws -> Int {
        var part = DemoServerPart()
        try await part.narrate()
        return part.failures
    }

    private struct Reply {
        let status: Int
        let json: JOSEValue?
        var error: String? { json?["error"]?.stringValue }
    }

    private func call(_ base: URL, _ method: String, _ path: String, _ body: JOSEValue? = nil, bearer: String? = nil)
        async throws -> Reply
    {
        guard let url = URL(string: path, relativeTo: base) else { throw URLError(.badURL) }
        var request = URLRequest(url: url)
        request.httpMethod = method
        if let body {
            request.httpBody = body.jsonData
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await session.data(for: request)
        return Reply(status: (response as? HTTPURLResponse)?.statusCode ?? 0, json: try? JOSEValue.parse(data))
    }

    private mutating func check(_ label: String, _ condition: Bool, _ detail: String = "") {
        if condition {
            print("  ✓ \(label)\(detail.isEmpty ? "" : ": \(detail)")")
        } else {
            print("  ✗ \(label): unexpected — this is a bug")
            failures += 1
        }
    }

    private mutating func narrate() async throws {
        print("\n▸ Starting the development identity server (SQLite in memory, an ephemeral loopback port)")
        var configuration = DevServer.Configuration()
        configuration.passwordIterations = 10_000
        let server = try DevServer(configuration: configuration)
        try server.start()
        defer { server.stop() }
        guard let base = server.localURL else { throw DevServerError("the server did not report its address") }
        print("  issuer \(server.issuer?.absoluteString ?? "?")")

        print("\n▸ POST /register and GET /me")
        let credentials: JOSEValue = ["email": "alice@example.com", "password": "correct-horse-battery"]
        let registered = try await call(base, "POST", "/register", credentials)
        let access = registered.json?["accessToken"]?.stringValue ?? ""
        let refresh = registered.json?["refreshToken"]?.stringValue ?? ""
        check("registered", registered.status == 201, "user \(registered.json?["user"]?["id"]?.stringValue ?? "?")")
        let me = try await call(base, "GET", "/me", bearer: access)
        check("GET /me with the access token", me.json?["email"] == "alice@example.com", "alice@example.com")
        let anonymous = try await call(base, "GET", "/me")
        check("GET /me without a token is refused", anonymous.status == 401, "401 \(anonymous.error ?? "")")
        let duplicate = try await call(base, "POST", "/register", credentials)
        check("registering the same email again", duplicate.status == 409, "409 \(duplicate.error ?? "")")
        let wrong = try await call(
            base, "POST", "/login", ["email": "alice@example.com", "password": "wrong-horse-battery"])
        check("a wrong password", wrong.status == 401, "401 \(wrong.error ?? "")")

        print("\n▸ POST /refresh-token rotates the refresh token; replaying the old one revokes the session")
        let rotated = try await call(base, "POST", "/refresh-token", ["refreshToken": .string(refresh)])
        let next = rotated.json?["refreshToken"]?.stringValue ?? ""
        check("refreshed", rotated.status == 200 && !next.isEmpty && next != refresh, "a new refresh token")
        let replay = try await call(base, "POST", "/refresh-token", ["refreshToken": .string(refresh)])
        check("the spent token replayed", replay.error == "invalid_grant", "invalid_grant")
        let revoked = try await call(base, "POST", "/refresh-token", ["refreshToken": .string(next)])
        check("its family is revoked, the newest token too", revoked.error == "invalid_grant", "invalid_grant")
        let counters = try await call(base, "GET", "/_dev/counters")
        check("the server counted it", counters.json?["reuseDetections"] == 1, "reuseDetections = 1")

        print("\n▸ POST /login, then POST /logout (204, empty body)")
        let login = try await call(base, "POST", "/login", credentials)
        let loginAccess = login.json?["accessToken"]?.stringValue ?? ""
        let loginRefresh = login.json?["refreshToken"]?.stringValue ?? ""
        check("signed in again", login.status == 200)
        let logout = try await call(
            base, "POST", "/logout", ["refreshToken": .string(loginRefresh)], bearer: loginAccess)
        check("signed out", logout.status == 204, "204")
        let afterLogout = try await call(base, "POST", "/refresh-token", ["refreshToken": .string(loginRefresh)])
        check("the session's refresh token is dead", afterLogout.error == "invalid_grant", "invalid_grant")

        print("\n▸ Sign in with Apple against the stand-in Apple issuer")
        let rawNonce = Base64URL.encode(JOSECrypto.randomBytes(16))
        let minted = try await call(
            base, "POST", "/_dev/apple/identity-token",
            ["sub": "000123.demo", "email": "bea@privaterelay.appleid.com", "nonce": .string(rawNonce)])
        let identityToken = minted.json?["identityToken"]?.stringValue ?? ""
        let apple = try await call(
            base, "POST", "/auth/apple",
            ["identityToken": .string(identityToken), "nonce": .string(rawNonce), "deviceId": "demo-device"])
        check("exchanged for a session", apple.status == 200, apple.json?["user"]?["email"]?.stringValue ?? "")
        let replayedNonce = try await call(
            base, "POST", "/auth/apple",
            ["identityToken": .string(identityToken), "nonce": "another-nonce", "deviceId": "demo-device"])
        check("the same token with another nonce", replayedNonce.error == "invalid_grant", "invalid_grant")
    }
}
