import Foundation
import SesameDevServer
import SesameJOSE
import SesameTestSupport
import Testing

/// A dev server with the OIDC provider, a browser, and the steps of the code flow, for the provider's tests.
struct OIDCHarness {
    let running: RunningServer
    let browser: TestBrowser
    let clock: TestClock
    let issuer: String

    static let email = "alice@example.com"
    static let password = "correct-horse"
    static let redirect = "http://127.0.0.1:5555/callback"

    init(_ configure: (inout DevServer.Configuration) throws -> Void = { _ in }) throws {
        let clock = TestClock()
        running = try RunningServer { configuration in
            configuration.users = [(Self.email, Self.password), ("bob@example.com", "battery-staple")]
            configuration.clock = { clock.now }
            try configure(&configuration)
        }
        self.clock = clock
        browser = TestBrowser(port: running.server.port)
        issuer = try #require(running.server.issuer?.absoluteString)
    }

    func stop() { running.server.stop() }

    struct PKCE {
        let verifier: String
        let challenge: String
        init() {
            verifier = Base64URL.encode(JOSECrypto.randomBytes(32))
            challenge = Base64URL.encode(JOSECrypto.sha256(Array(verifier.utf8)))
        }
    }

    /// Authorization parameters with fresh PKCE, state and nonce; `overrides` replace or (value nil) remove.
    func parameters(_ pkce: PKCE, scope: String = "openid email offline_access", _ overrides: [String: String?] = [:])
        -> [(String, String)]
    {
        var values: [String: String] = [
            "client_id": "sesame-cli", "redirect_uri": Self.redirect, "response_type": "code", "scope": scope,
            "state": "state-" + Base64URL.encode(JOSECrypto.randomBytes(8)),
            "nonce": "nonce-" + Base64URL.encode(JOSECrypto.randomBytes(8)), "code_challenge": pkce.challenge,
            "code_challenge_method": "S256",
        ]
        for (name, value) in overrides { values[name] = value }
        return values.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    static func query(_ pairs: [(String, String)]) -> String {
        pairs.map { "\(TestBrowser.formEscape($0.0))=\(TestBrowser.formEscape($0.1))" }.joined(separator: "&")
    }

    func authorize(_ pairs: [(String, String)], browser: TestBrowser? = nil) throws -> TestBrowser.Page {
        try (browser ?? self.browser).get("/authorize?" + Self.query(pairs))
    }

    /// Opens the sign-in page and submits the password form; the page after the POST.
    func signIn(_ pairs: [(String, String)], email: String = Self.email, password: String = Self.password)
        throws -> TestBrowser.Page
    {
        let page = try authorize(pairs)
        try #require(page.status == 200, "the sign-in page: \(page.status) \(page.body.prefix(300))")
        return try browser.post(
            "/authorize", form: page.hiddenFields() + [("email", email), ("password", password)])
    }

    /// Signs in and returns the code, checking `state` and `iss` in the redirect.
    func code(_ pkce: PKCE, scope: String = "openid email offline_access", _ overrides: [String: String?] = [:])
        throws -> (code: String, parameters: [(String, String)])
    {
        let pairs = parameters(pkce, scope: scope, overrides)
        // A browser that is signed in already is sent straight back with a code.
        let first = try authorize(pairs)
        let page =
            first.status == 302
            ? first
            : try browser.post(
                "/authorize",
                form: first.hiddenFields() + [("email", Self.email), ("password", Self.password)])
        try #require([302, 303].contains(page.status), "after sign-in: \(page.status) \(page.body.prefix(300))")
        let response = page.redirectParameters
        #expect(response["iss"] == issuer)
        #expect(response["state"] == pairs.first { $0.0 == "state" }?.1)
        return (try #require(response["code"]), pairs)
    }

    func token(_ form: [(String, String)]) throws -> TestBrowser.Page { try browser.post("/token", form: form) }

    func exchange(_ code: String, _ pkce: PKCE, client: String = "sesame-cli", redirect: String = Self.redirect)
        throws -> TestBrowser.Page
    {
        try token([
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirect),
            ("client_id", client), ("code_verifier", pkce.verifier),
        ])
    }

    /// Code flow to tokens: the token response's JSON.
    func signedInTokens(scope: String = "openid email offline_access") throws -> (tokens: JOSEValue, nonce: String) {
        let pkce = PKCE()
        let (code, pairs) = try self.code(pkce, scope: scope)
        let response = try exchange(code, pkce)
        try #require(response.status == 200, "token: \(response.body)")
        return (try #require(response.json), pairs.first { $0.0 == "nonce" }?.1 ?? "")
    }

    func refresh(_ token: String, client: String = "sesame-cli", scope: String? = nil) throws -> TestBrowser.Page {
        var form = [("grant_type", "refresh_token"), ("refresh_token", token), ("client_id", client)]
        if let scope { form.append(("scope", scope)) }
        return try self.token(form)
    }

    func jwks() throws -> JWKSet {
        let page = try browser.get("/jwks")
        return try JWKSet(json: Array(page.body.utf8))
    }

    /// Verifies an ID token as a strict client would, with the provider's current keys.
    func verifyIDToken(_ token: String, nonce: String?, client: String = "sesame-cli") throws -> JWTClaims {
        var policy = ClaimValidationPolicy(
            issuer: issuer, audience: client, nonce: nonce, requiredClaims: ["exp", "iat", "sub", "auth_time"])
        policy.authorizedParty = client
        return try JWTVerifier(keys: try jwks(), policy: policy).verifiedClaims(of: token, now: clock.now)
    }

    func userInfo(_ accessToken: String) throws -> TestBrowser.Page {
        try browser.get("/userinfo", headers: [("Authorization", "Bearer \(accessToken)")])
    }

    func dev(_ path: String, _ json: JOSEValue) throws -> TestBrowser.Page {
        try browser.request(
            "POST", path, headers: [("Content-Type", "application/json")], body: json.jsonBytes)
    }
}

extension JOSEValue {
    var string: String { stringValue ?? "" }
}

extension Optional where Wrapped == JOSEValue {
    /// The string, or "" (a test's `#expect` then fails on what uses it).
    var string: String { self?.stringValue ?? "" }
}

/// `at_hash` for an ES256/RS256 ID token, computed here rather than by the server (OIDC Core §3.1.3.6).
func expectedAtHash(_ accessToken: String) -> String {
    Base64URL.encode(JOSECrypto.sha256(Array(accessToken.utf8)).prefix(16))
}
