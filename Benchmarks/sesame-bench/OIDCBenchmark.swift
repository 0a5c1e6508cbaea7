import Foundation
import Sesame
import SesameDevServer
import SesameJOSE

/// `sesame-bench oidc`: ID-token validation (signature and every claim rule, JWKS cached) beside the raw
/// signature verification of the same token with the same key, measured in alternating rounds of the same run;
/// and full code flows per second against the in-process dev server, for orientation.
enum OIDCBenchmark {
    static func run(seconds: Double) async throws {
        var configuration = DevServer.Configuration()
        configuration.passwordIterations = 1000
        configuration.users = [(email: "bench@example.com", password: "bench-password")]
        try OIDCServerBenchmark.prepare(&configuration)
        let server = try DevServer(configuration: configuration)
        let issuer = try server.start()
        defer { server.stop() }
        print("# sesame-bench oidc: dev server at \(issuer.absoluteString), \(seconds) s per measurement")
        let provider = try await OIDCAuthProvider.discover(
            issuer: issuer,
            configuration: .init(
                clientID: OIDCServerBenchmark.clientID, redirectURI: OIDCServerBenchmark.redirect,
                scopes: ["openid", "email", "offline_access"]))
        let agent = try BenchAgent(port: server.port)
        let pending = try await provider.authorizationRequest()
        let tokens = try await provider.completeAuthorization(
            redirect: try agent.signIn(pending.url, email: "bench@example.com", password: "bench-password"),
            pending: pending)
        guard let idToken = tokens.idToken, let keys = provider.keys else { throw BenchmarkError("no ID token") }

        let validator = IDTokenValidator(
            issuer: issuer.absoluteString, clientID: OIDCServerBenchmark.clientID,
            algorithms: provider.metadata.idTokenSigningAlgorithms)
        let expectations = IDTokenValidator.Expectations(nonce: pending.nonce, accessToken: tokens.accessToken)
        let jwks = try await keys.keys()
        let now = Date()
        var validations = 0.0
        var raw = 0.0
        for _ in 0..<6 {
            validations = max(
                validations,
                try await asyncRound(seconds: seconds / 6) {
                    blackHole(try await validator.validate(idToken, expecting: expectations, keys: keys, now: now))
                })
            raw = max(
                raw, try await asyncRound(seconds: seconds / 6) { blackHole(try JWS.verify(idToken, keys: jwks)) })
        }

        // Full flows: request, the browser session's redirect (no form), exchange, ID-token validation.
        let clock = ContinuousClock()
        let start = clock.now
        var flows = 0
        while clock.now - start < .milliseconds(Int(seconds * 1000)) {
            let request = try await provider.authorizationRequest()
            _ = try await provider.completeAuthorization(redirect: try agent.redirect(request.url), pending: request)
            flows += 1
        }
        let elapsed = clock.now - start
        let flowRate =
            Double(flows) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)

        report("jws_es256_verify_same_token", raw)
        report("oidc_id_token_validation", validations)
        report("ratio_validation_over_verify", validations / raw)
        report("oidc_code_flows_per_second", flowRate)
    }

    /// One timed round of an async body: operations per second over about `seconds`.
    static func asyncRound(seconds: Double, _ body: () async throws -> Void) async throws -> Double {
        let clock = ContinuousClock()
        var operations = 0
        let start = clock.now
        let deadline = start.advanced(by: .milliseconds(Int(seconds * 1000)))
        while clock.now < deadline {
            for _ in 0..<64 { try await body() }
            operations += 64
        }
        let elapsed = clock.now - start
        return Double(operations) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }
}

/// Signs in on the dev server's form once, then follows the browser session's redirects.
final class BenchAgent {
    let client: BenchClient
    var session = ""

    init(port: Int) throws { client = try BenchClient(port: port) }

    static func pathAndQuery(_ url: URL) -> String {
        let parts = URLComponents(url: url, resolvingAgainstBaseURL: false)
        return (parts?.percentEncodedPath ?? "/") + (parts?.percentEncodedQuery.map { "?" + $0 } ?? "")
    }

    func signIn(_ url: URL, email: String, password: String) throws -> URL {
        try signIn(path: Self.pathAndQuery(url), email: email, password: password)
    }

    /// Opens the sign-in form at `path`, posts the credentials, keeps the session cookie; the redirect.
    func signIn(path: String, email: String, password: String) throws -> URL {
        let page = try client.form("GET", path)
        let html = String(decoding: page.body, as: UTF8.self)
        guard let csrf = OIDCServerBenchmark.cookie("sesame_csrf", in: page.head) else {
            throw BenchmarkError("no sign-in form")
        }
        var fields: [String] = []
        for piece in html.components(separatedBy: "<form")[1].components(separatedBy: "<input type=\"hidden\" name=\"")
            .dropFirst()
        {
            let parts = piece.components(separatedBy: "\" value=\"")
            let value = parts[1].prefix { $0 != "\"" }.replacingOccurrences(of: "&amp;", with: "&")
            fields.append(OIDCServerBenchmark.escape(parts[0]) + "=" + OIDCServerBenchmark.escape(value))
        }
        fields += ["email=" + OIDCServerBenchmark.escape(email), "password=" + OIDCServerBenchmark.escape(password)]
        let posted = try client.form(
            "POST", "/authorize", headers: ["Cookie: sesame_csrf=\(csrf)"], form: fields.joined(separator: "&"))
        guard let cookie = OIDCServerBenchmark.cookie("sesame_session", in: posted.head),
            let location = OIDCServerBenchmark.header("Location", in: posted.head), let redirect = URL(string: location)
        else { throw BenchmarkError("sign-in failed: \(posted.status)") }
        session = "Cookie: sesame_session=\(cookie)"
        return redirect
    }

    func redirect(_ url: URL) throws -> URL { try redirect(path: Self.pathAndQuery(url)) }

    /// The browser session's redirect for the authorization request at `path`.
    func redirect(path: String) throws -> URL {
        let response = try client.form("GET", path, headers: [session])
        guard let location = OIDCServerBenchmark.header("Location", in: response.head),
            let redirect = URL(string: location)
        else { throw BenchmarkError("no redirect: \(response.status)") }
        return redirect
    }
}
