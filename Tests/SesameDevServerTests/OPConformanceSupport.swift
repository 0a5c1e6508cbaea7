import Foundation
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

@testable import SesameDevServer

/// The test bed of our own OpenID Provider conformance run: the dev server as the OP certification's test tool
/// finds it — configured from a file (a user with every standard claim, one client per ID-token algorithm), a
/// remembered browser (the `prompt=none` and `max_age` modules need a session), redirect URIs on a public HTTPS
/// name — and a relying party that checks what the tool's conditions check, warnings included.
struct ConformanceBed {
    let oidc: OIDCTestServer
    var browser: TestBrowser { oidc.browser }

    static let redirect = "https://rp.example/cb"
    static let redirectWithQuery = "https://rp.example/cb?tenant=one"
    static let logoutRedirect = "https://rp.example/logged-out"
    static let subject = "alice-0001"

    /// The configuration file the run starts from (also an example of the format).
    static let configuration = #"""
        {
          "users": [{
            "email": "carol@example.com", "password": "correct-horse-battery", "sub": "alice-0001",
            "claims": {
              "name": "Carol Example", "given_name": "Carol", "family_name": "Example", "middle_name": "Q",
              "nickname": "caz", "preferred_username": "carol", "profile": "https://carol.example/",
              "picture": "https://carol.example/me.png", "website": "https://carol.example/blog", "gender": "female",
              "birthdate": "1990-04-01", "zoneinfo": "Europe/Paris", "locale": "fr-FR", "updated_at": 1700000000,
              "email_verified": true,
              "address": {"formatted": "1 Rue Example\n75001 Paris\nFrance", "street_address": "1 Rue Example",
                          "locality": "Paris", "postal_code": "75001", "country": "FR"},
              "phone_number": "+33 1 23 45 67 89", "phone_number_verified": false,
              "groups": ["testers"]
            }
          }],
          "clients": [
            {"client_id": "op-rs256", "redirect_uris": ["https://rp.example/cb", "https://rp.example/cb?tenant=one"],
             "post_logout_redirect_uris": ["https://rp.example/logged-out"]},
            {"client_id": "op-es256", "redirect_uris": ["https://rp.example/cb"], "id_token_signed_response_alg": "ES256",
             "post_logout_redirect_uris": ["https://rp.example/logged-out"]},
            {"client_id": "op-eddsa", "redirect_uris": ["https://rp.example/cb"], "id_token_signed_response_alg": "EdDSA",
             "post_logout_redirect_uris": ["https://rp.example/logged-out"], "claims": {"tenant": "${client_id}"}}
          ],
          "claims": {"greeting": "hello ${email_local}"}
        }
        """#
    static let email = "carol@example.com"
    static let password = "correct-horse-battery"

    init(_ configure: (inout DevServer.Configuration) throws -> Void = { _ in }) throws {
        oidc = try OIDCTestServer { configuration in
            try configuration.load(json: Data(Self.configuration.utf8))
            configuration.rememberBrowser = true
            try configure(&configuration)
        }
    }

    func stop() { oidc.stop() }

    /// A code-flow request for `client` with fresh PKCE, state and nonce; `overrides` replace or (nil) remove.
    func request(
        _ pkce: OIDCTestServer.PKCE, client: String = "op-rs256", scope: String = "openid",
        _ overrides: [String: String?] = [:]
    ) -> [(String, String)] {
        var all: [String: String?] = ["client_id": client, "redirect_uri": Self.redirect]
        for (name, value) in overrides { all[name] = value }
        return oidc.parameters(pkce, scope: scope, all)
    }

    /// `/authorize` as the browser: the sign-in form filled in when it is shown (`signedIn` reports whether it
    /// was), and the authorization response's parameters.
    func authorize(_ pairs: [(String, String)], consent: Bool = false) throws
        -> (response: [String: String], signedIn: Bool)
    {
        var page = try oidc.authorize(pairs)
        var signedIn = false
        if consent, OIDCTestServer.isConsentPage(page) {
            page = try browser.post("/authorize", form: page.hiddenFields() + [("action", "continue")])
        }
        if page.status == 200, page.body.contains("id=\"password\"") {
            signedIn = true
            page = try browser.post(
                "/authorize", form: page.hiddenFields() + [("email", Self.email), ("password", Self.password)])
        }
        guard [302, 303].contains(page.status), page.location != nil else {
            throw HarnessError("no authorization response: \(page.status) \(page.body.prefix(300))")
        }
        return (page.redirectParameters, signedIn)
    }

    /// The whole code flow; the token response, the ID token's verified claims and what was sent.
    func codeFlow(
        client: String = "op-rs256", scope: String = "openid", _ overrides: [String: String?] = [:]
    ) throws -> (tokens: JOSEValue, idToken: JWTClaims, request: [String: String], signedIn: Bool) {
        let pkce = OIDCTestServer.PKCE()
        let pairs = request(pkce, client: client, scope: scope, overrides)
        let sent = Dictionary(pairs, uniquingKeysWith: { $1 })
        let (response, signedIn) = try authorize(pairs)
        guard let code = response["code"] else { throw HarnessError("no code: \(response)") }
        try check(response, sent: sent)
        let answer = try oidc.token([
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", sent["redirect_uri"] ?? ""),
            ("client_id", client), ("code_verifier", pkce.verifier),
        ])
        guard answer.status == 200, let tokens = answer.json else {
            throw HarnessError("token: \(answer.status) \(answer.body)")
        }
        let claims = try verify(tokens, client: client, nonce: sent["nonce"])
        return (tokens, claims, sent, signedIn)
    }

    /// The authorization response's `state` and `iss` (RFC 9207), as the tool checks them.
    func check(_ response: [String: String], sent: [String: String]) throws {
        guard response["state"] == sent["state"] else { throw HarnessError("state: \(response)") }
        guard response["iss"] == oidc.issuerText else { throw HarnessError("iss: \(response)") }
    }

    /// The token response and its ID token as the tool's conditions check them (OIDC Core §3.1.3.3, §3.1.3.7):
    /// `token_type`, `expires_in`, the signature by a key of the JWKS named by `kid` with the client's registered
    /// algorithm, `iss`, `aud`, `azp`, `sub`, `exp`, `iat`, `auth_time`, `nonce` and `at_hash`.
    func verify(_ tokens: JOSEValue, client: String, nonce: String?, fromRefresh: Bool = false) throws -> JWTClaims {
        guard tokens["token_type"]?.stringValue?.lowercased() == "bearer" else {
            throw HarnessError("token_type: \(tokens)")
        }
        guard let lifetime = tokens["expires_in"]?.doubleValue, lifetime > 0 else {
            throw HarnessError("expires_in missing (a warning for the tool)")
        }
        guard let idToken = tokens["id_token"]?.stringValue, let access = tokens["access_token"]?.stringValue else {
            throw HarnessError("no id_token or access_token: \(tokens)")
        }
        let jwt = try JWT.unverified(idToken)
        let expected = oidc.server.idTokenAlgorithm(for: client).name
        guard jwt.header.algorithmName == expected else {
            throw HarnessError("the ID token is \(jwt.header.algorithmName), registered \(expected)")
        }
        guard let kid = jwt.header.keyID, let key = try oidc.jwks().keys.first(where: { $0.keyID == kid }) else {
            throw HarnessError("the ID token's kid is not in the JWKS")
        }
        var policy = ClaimValidationPolicy(
            issuer: oidc.issuerText, audience: client, nonce: fromRefresh ? nil : nonce,
            requiredClaims: ["exp", "iat", "sub", "auth_time"])
        policy.authorizedParty = client
        let claims = try JWTVerifier(keys: JWKSet(keys: [key]), policy: policy).verifiedClaims(
            of: idToken, now: oidc.clock.now)
        if !fromRefresh, nonce == nil, claims.nonce != nil { throw HarnessError("a nonce nobody sent") }
        guard let hash = claims["at_hash"]?.stringValue,
            hash == DevServer.atHash(access, algorithm: jwt.header.algorithm ?? .rs256)
        else { throw HarnessError("at_hash missing or wrong") }
        return claims
    }

    func userInfo(_ tokens: JOSEValue, method: String = "GET", inBody: Bool = false) throws -> TestBrowser.Page {
        let token = tokens["access_token"]?.stringValue ?? ""
        if inBody {
            return try browser.post("/userinfo", form: [("access_token", token)])
        }
        return try browser.request(method, "/userinfo", headers: [("Authorization", "Bearer \(token)")])
    }

    /// Signs the browser out of the server (a new browser: no session cookie).
    func forgetBrowser() { browser.clearCookies() }
}
