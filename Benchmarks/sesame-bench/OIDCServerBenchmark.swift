import Foundation
import SesameDevServer
import SesameJOSE

/// The OIDC routes of `sesame-bench server`: `/token` code exchange, `/token` refresh (rotation persisted in a
/// file-backed SQLite database) and `/userinfo`, each beside the ES256 sign and verify rates of the same run.
enum OIDCServerBenchmark {
    static let verifier = "sesame-bench-verifier-0123456789-abcdefghijklmnopqrstuvwxyz"
    /// Not a loopback redirect, so that the remembered browser is sent back without a consent page.
    static let redirect = "https://bench.example/callback"
    /// The benchmark's client: public, `redirect` registered.
    static let clientID = "bench"

    /// Configures `configuration` for the benchmark's code flows: its client, and a remembered browser.
    static func prepare(_ configuration: inout DevServer.Configuration) throws {
        configuration.rememberBrowser = true
        configuration.clients = [try RegisteredClient(specification: "\(clientID):\(redirect)")]
    }

    static var authorizePath: String {
        let challenge = Base64URL.encode(JOSECrypto.sha256(Array(verifier.utf8)))
        return "/authorize?client_id=\(clientID)&response_type=code&code_challenge_method=S256&code_challenge="
            + challenge + "&redirect_uri=" + escape(redirect) + "&scope=openid+email+offline_access&state=s&nonce=n"
    }

    static func escape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text
    }

    static func header(_ name: String, in head: String) -> String? {
        head.components(separatedBy: "\r\n").first { $0.lowercased().hasPrefix(name.lowercased() + ":") }
            .map { String($0.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces) }
    }

    static func cookie(_ name: String, in head: String) -> String? {
        head.components(separatedBy: "\r\n").compactMap { line -> String? in
            guard line.lowercased().hasPrefix("set-cookie: \(name)=") else { return nil }
            return String(line.dropFirst("set-cookie: \(name)=".count).prefix { $0 != ";" })
        }.first
    }

    /// A code from the browser session (no form: the session skips it).
    static func code(_ agent: BenchAgent) throws -> String {
        let location = try agent.redirect(path: authorizePath)
        guard
            let code = URLComponents(url: location, resolvingAgainstBaseURL: false)?.queryItems?
                .first(where: { $0.name == "code" })?.value
        else { throw BenchmarkError("no code in the redirect") }
        return code
    }

    static func exchange(_ client: BenchClient, code: String) throws -> JOSEValue {
        let response = try client.form(
            "POST", "/token",
            form: "grant_type=authorization_code&client_id=\(clientID)&code_verifier=\(verifier)&redirect_uri="
                + escape(redirect) + "&code=" + escape(code))
        guard response.status == 200 else {
            throw BenchmarkError(
                "code exchange answered \(response.status): \(String(decoding: response.body, as: UTF8.self))")
        }
        return try JOSEValue.parse(response.body)
    }

    struct Rates {
        let codeExchange: Double
        let refresh: Double
        let userInfo: Double
        /// An access token for `/userinfo` (for wrk).
        let accessToken: String
    }

    static func run(port: Int, email: String, password: String, seconds: Double) throws -> Rates {
        let agent = try BenchAgent(port: port)
        _ = try agent.signIn(path: authorizePath, email: email, password: password)
        let client = agent.client

        // Code exchange: codes are made in batches outside the clock, exchanged on it.
        var exchanged = 0
        var spent: TimeInterval = 0
        var lastTokens: JOSEValue = .null
        while spent < seconds {
            let codes = try (0..<200).map { _ in try code(agent) }
            let start = Date()
            for code in codes { lastTokens = try exchange(client, code: code) }
            spent += Date().timeIntervalSince(start)
            exchanged += codes.count
        }
        guard let access = lastTokens["access_token"]?.stringValue else { throw BenchmarkError("no access token") }

        // Two pipelined connections, one per core (a server thread serves each).
        let userInfoCounts = LockedCounts()
        let userInfoGroup = DispatchGroup()
        for _ in 0..<2 {
            userInfoGroup.enter()
            Thread {
                defer { userInfoGroup.leave() }
                let rate =
                    (try? BenchClient(port: port).pipelinedGets(
                        "/userinfo", bearer: access, depth: 16, seconds: seconds)) ?? 0
                userInfoCounts.add(Int(rate))
            }.start()
        }
        userInfoGroup.wait()
        let userInfo = Double(userInfoCounts.total)

        // Refresh chains: each connection rotates its own grant, request after response.
        let chains = 4
        let tokens = try (0..<chains).map { _ -> String in
            guard
                let token = try exchange(client, code: try code(agent))["refresh_token"]?
                    .stringValue
            else { throw BenchmarkError("no refresh token") }
            return token
        }
        let refresh = ServerBenchmark.chainLoad(port: port, tokens: tokens, seconds: seconds) { client, current in
            guard
                let response = try? client.form(
                    "POST", "/token", form: "grant_type=refresh_token&client_id=\(clientID)&refresh_token=" + current),
                response.status == 200
            else { return nil }
            return (try? JOSEValue.parse(response.body))?["refresh_token"]?.stringValue
        }
        return Rates(
            codeExchange: Double(exchanged) / spent, refresh: refresh, userInfo: userInfo, accessToken: access)
    }
}
