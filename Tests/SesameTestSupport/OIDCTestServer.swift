package import Foundation
package import SesameDevServer
package import SesameJOSE
package import SesameTesting

/// A test step that did not go as the protocol says, with what happened.
package struct HarnessError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

/// The one OpenID Connect test bed.
///
/// The dev server on an ephemeral loopback port with alice and bob, a clock the test moves (the server's and the
/// client's), a browser, and the steps of the code flow as a user agent and a strict client would take them. The
/// provider's tests use the steps; the client's tests add an `OIDCAuthProvider`.
package struct OIDCTestServer: Sendable {
    package let server: DevServer
    package let browser: TestBrowser
    package let clock: ManualTimeSource
    /// The issuer, as a URL and as the string tokens carry.
    package let issuer: URL
    package let issuerText: String
    /// The one-time codes of the second step (RFC 9470 step-up) the server wrote to its log, oldest first.
    package let oneTimeCodes = LockedBox<[String]>([])

    package static let email = "alice@example.com"
    package static let password = "correct-horse"
    package static let redirect = "http://127.0.0.1:5555/callback"

    /// Starts the server; `configure` may change anything (the clock is the test's, password hashing is fast).
    package init(_ configure: (inout DevServer.Configuration) throws -> Void = { _ in }) throws {
        let clock = ManualTimeSource(Date())
        var configuration = DevServer.Configuration()
        configuration.passwordIterations = 1000  // fast tests; the default is 600,000
        configuration.users = [(Self.email, Self.password), ("bob@example.com", "battery-staple")]
        configuration.clock = { clock.now }
        let codes = oneTimeCodes
        configuration.log = { line in
            // "second step for alice@example.com: one-time code 123456 (…)"
            guard let range = line.range(of: "one-time code ") else { return }
            codes.mutate { $0.append(String(line[range.upperBound...].prefix(6))) }
        }
        try configure(&configuration)
        server = try DevServer(configuration: configuration)
        issuer = try server.start()
        issuerText = issuer.absoluteString
        self.clock = clock
        browser = TestBrowser(port: server.port)
    }

    package func stop() { server.stop() }

    /// A PKCE verifier and its S256 challenge.
    package struct PKCE: Sendable {
        package let verifier: String
        package let challenge: String
        package init() {
            verifier = Base64URL.encode(JOSECrypto.randomBytes(32))
            challenge = Base64URL.encode(JOSECrypto.sha256(Array(verifier.utf8)))
        }
    }

    /// Authorization parameters with fresh PKCE, state and nonce; `overrides` replace or (value nil) remove.
    package func parameters(
        _ pkce: PKCE, scope: String = "openid email offline_access", _ overrides: [String: String?] = [:]
    ) -> [(String, String)] {
        var values: [String: String] = [
            "client_id": "sesame-cli", "redirect_uri": Self.redirect, "response_type": "code", "scope": scope,
            "state": "state-" + Base64URL.encode(JOSECrypto.randomBytes(8)),
            "nonce": "nonce-" + Base64URL.encode(JOSECrypto.randomBytes(8)), "code_challenge": pkce.challenge,
            "code_challenge_method": "S256",
        ]
        for (name, value) in overrides { values[name] = value }
        return values.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    package static func query(_ pairs: [(String, String)]) -> String {
        pairs.map { "\(TestBrowser.formEscape($0.0))=\(TestBrowser.formEscape($0.1))" }.joined(separator: "&")
    }

    package func authorize(_ pairs: [(String, String)], browser: TestBrowser? = nil) throws -> TestBrowser.Page {
        try (browser ?? self.browser).get("/authorize?" + Self.query(pairs))
    }

    /// Opens the sign-in page and submits the password form; the page after the POST.
    package func signIn(_ pairs: [(String, String)], email: String = Self.email, password: String = Self.password)
        throws -> TestBrowser.Page
    {
        let page = try authorize(pairs)
        guard page.status == 200 else {
            throw HarnessError("the sign-in page: \(page.status) \(page.body.prefix(300))")
        }
        return try browser.post(
            "/authorize", form: page.hiddenFields() + [("email", email), ("password", password)])
    }

    /// Signs in and returns the code; `state` and `iss` in the redirect must be the request's and the issuer's.
    package func code(
        _ pkce: PKCE, scope: String = "openid email offline_access", _ overrides: [String: String?] = [:]
    ) throws -> (code: String, parameters: [(String, String)]) {
        let pairs = parameters(pkce, scope: scope, overrides)
        let page = try complete(try authorize(pairs))
        guard [302, 303].contains(page.status) else {
            throw HarnessError("after sign-in: \(page.status) \(page.body.prefix(300))")
        }
        let response = page.redirectParameters
        guard response["iss"] == issuerText, response["state"] == pairs.first(where: { $0.0 == "state" })?.1,
            let code = response["code"]
        else { throw HarnessError("the redirect's code, iss or state is wrong: \(response)") }
        return (code, pairs)
    }

    package func token(_ form: [(String, String)]) throws -> TestBrowser.Page { try browser.post("/token", form: form) }

    package func exchange(_ code: String, _ pkce: PKCE, client: String = "sesame-cli", redirect: String = Self.redirect)
        throws -> TestBrowser.Page
    {
        try token([
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirect),
            ("client_id", client), ("code_verifier", pkce.verifier),
        ])
    }

    /// Code flow to tokens: the token response's JSON and the nonce sent.
    package func signedInTokens(scope: String = "openid email offline_access") throws
        -> (tokens: JOSEValue, nonce: String)
    {
        let pkce = PKCE()
        let (code, pairs) = try self.code(pkce, scope: scope)
        let response = try exchange(code, pkce)
        guard response.status == 200, let json = response.json else { throw HarnessError("token: \(response.body)") }
        return (json, pairs.first { $0.0 == "nonce" }?.1 ?? "")
    }

    package func refresh(_ token: String, client: String = "sesame-cli", scope: String? = nil) throws
        -> TestBrowser.Page
    {
        var form = [("grant_type", "refresh_token"), ("refresh_token", token), ("client_id", client)]
        if let scope { form.append(("scope", scope)) }
        return try self.token(form)
    }

    package func jwks() throws -> JWKSet {
        let page = try browser.get("/jwks")
        return try JWKSet(json: Array(page.body.utf8))
    }

    /// Verifies an ID token as a strict client would, with the provider's current keys.
    package func verifyIDToken(_ token: String, nonce: String?, client: String = "sesame-cli") throws -> JWTClaims {
        var policy = ClaimValidationPolicy(
            issuer: issuerText, audience: client, nonce: nonce, requiredClaims: ["exp", "iat", "sub", "auth_time"])
        policy.authorizedParty = client
        return try JWTVerifier(keys: try jwks(), policy: policy).verifiedClaims(of: token, now: clock.now)
    }

    package func userInfo(_ accessToken: String) throws -> TestBrowser.Page {
        try browser.get("/userinfo", headers: [("Authorization", "Bearer \(accessToken)")])
    }

    package func dev(_ path: String, _ json: JOSEValue) throws -> TestBrowser.Page {
        try browser.request("POST", path, headers: [("Content-Type", "application/json")], body: json.jsonBytes)
    }

    /// What the user does on an authorization page: nothing when it is a redirect already (a remembered browser
    /// and a redirect that is not loopback), Continue on the consent page (a remembered browser and a loopback
    /// redirect), or alice's password on the sign-in form; the page after that.
    package func complete(_ page: TestBrowser.Page) throws -> TestBrowser.Page {
        guard page.status == 200 else { return page }
        if Self.isConsentPage(page) {
            return try browser.post("/authorize", form: page.hiddenFields() + [("action", "continue")])
        }
        let next = try browser.post(
            "/authorize", form: page.hiddenFields() + [("email", Self.email), ("password", Self.password)])
        return Self.isSecondStep(next) ? try secondStep(next) : next
    }

    /// Whether `page` asks for the second step's one-time code.
    package static func isSecondStep(_ page: TestBrowser.Page) -> Bool {
        page.status == 200 && page.body.contains("id=\"otp\"")
    }

    /// Types the newest one-time code from the server's log into the second-step page (or `code`).
    package func secondStep(_ page: TestBrowser.Page, code: String? = nil) throws -> TestBrowser.Page {
        guard let otp = code ?? oneTimeCodes.value.last else { throw HarnessError("no one-time code in the log") }
        return try browser.post("/authorize", form: page.hiddenFields() + [("otp", otp), ("action", "verify")])
    }

    /// Whether `page` is the "Continue as …?" page of a remembered browser.
    package static func isConsentPage(_ page: TestBrowser.Page) -> Bool {
        page.body.contains("id=\"continue\"") && !page.body.contains("id=\"password\"")
    }

    /// Opens `url` as a browser would, posts the sign-in form (or is sent straight back), and returns the redirect.
    package func userAgent(_ url: URL) throws -> URL {
        let target = (url.path.isEmpty ? "/" : url.path) + (url.query.map { "?" + $0 } ?? "")
        let page = try complete(try browser.get(target))
        guard let location = page.location, let redirect = URL(string: location) else {
            throw HarnessError("no redirect: \(page.status)")
        }
        return redirect
    }
}

/// The clients the frontier features' tests register, in one place for the provider's and the client's tests.
extension OIDCTestServer {
    /// The secret of the confidential clients `legacy` and `legacy-post`.
    package static let serviceSecret = "correct-horse-battery-staple"

    /// `nightly` (`private_key_jwt` with `key`'s public half, the client credentials grant only, `reports.read`
    /// and `reports.write`), `legacy` (`client_secret_basic`, `reports.read`) and `legacy-post`
    /// (`client_secret_post`).
    package static func serviceClients(key: JWK) throws -> [RegisteredClient] {
        let jwks = String(decoding: try JWKSet(keys: [key.publicKey()]).jsonValue.jsonBytes, as: UTF8.self)
        var nightly = RegisteredClient(id: "nightly", redirectURIs: [])
        nightly.tokenEndpointAuthentication = .privateKeyJWT(jwks: jwks)
        nightly.grantTypes = ["client_credentials"]
        nightly.allowedScopes = ["reports.read", "reports.write"]
        var legacy = RegisteredClient(id: "legacy", redirectURIs: [])
        legacy.tokenEndpointAuthentication = .clientSecretBasic(secret: serviceSecret)
        legacy.allowedScopes = ["reports.read"]
        var posted = RegisteredClient(id: "legacy-post", redirectURIs: [])
        posted.tokenEndpointAuthentication = .clientSecretPost(secret: serviceSecret)
        return [nightly, legacy, posted]
    }

    /// `app-a` and `app-b`: one vendor's apps in the Native SSO group `vendor`, redirecting to ``redirect``.
    package static var nativeSSOClients: [RegisteredClient] {
        ["app-a", "app-b"].map { id in
            var client = RegisteredClient(id: id, redirectURIs: [redirect])
            client.nativeSSOGroup = "vendor"
            return client
        }
    }
}
