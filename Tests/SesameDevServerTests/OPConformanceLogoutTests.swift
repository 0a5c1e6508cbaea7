import Foundation
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

@testable import SesameDevServer

/// The OP certification's RP-initiated logout modules, and dynamic registration (RFC 7591), run as the tool would.
@Suite struct OPConformanceLogoutTests {
    /// Signs in with a remembered browser; the ID token to hint with.
    static func signedIn(_ bed: ConformanceBed) throws -> String {
        try bed.codeFlow().tokens["id_token"].string
    }

    /// Whether the browser still has a session: `prompt=none` answers with a code.
    static func hasSession(_ bed: ConformanceBed) throws -> Bool {
        let page = try bed.oidc.authorize(bed.request(OIDCTestServer.PKCE(), ["prompt": "none"]))
        return page.redirectParameters["code"] != nil
    }

    func endSession(_ bed: ConformanceBed, _ pairs: [(String, String)]) throws -> TestBrowser.Page {
        try bed.browser.get("/end-session?" + OIDCTestServer.query(pairs))
    }

    @Test(
        "oidcc-rp-initiated-logout: with id_token_hint, the registered URI and state: signed out, sent back with state")
    func logout() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let hint = try Self.signedIn(bed)
        #expect(try Self.hasSession(bed))
        let page = try endSession(
            bed,
            [("id_token_hint", hint), ("post_logout_redirect_uri", ConformanceBed.logoutRedirect), ("state", "s-1")])
        #expect(page.status == 302 && page.location == ConformanceBed.logoutRedirect + "?state=s-1")
        #expect(try !Self.hasSession(bed), "the session ends")
    }

    @Test("oidcc-rp-initiated-logout-no-state / -no-post-logout-redirect-uri: back without state, or a signed-out page")
    func logoutVariants() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let hint = try Self.signedIn(bed)
        let noState = try endSession(
            bed, [("id_token_hint", hint), ("post_logout_redirect_uri", ConformanceBed.logoutRedirect)])
        #expect(noState.location == ConformanceBed.logoutRedirect)
        let again = try Self.signedIn(bed)
        let noURI = try endSession(bed, [("id_token_hint", again)])
        #expect(noURI.status == 200 && noURI.location == nil && noURI.body.contains("Signed out"))
        #expect(try !Self.hasSession(bed))
    }

    @Test("oidcc-rp-initiated-logout-bad-post-logout-redirect-uri / -query-added: an error page, never a redirect")
    func badLogoutURIs() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let hint = try Self.signedIn(bed)
        for uri in [
            "https://attacker.example/logged-out", ConformanceBed.logoutRedirect + "?extra=1",
            ConformanceBed.redirect,  // a redirect URI, not a registered post-logout URI
        ] {
            let page = try endSession(bed, [("id_token_hint", hint), ("post_logout_redirect_uri", uri)])
            #expect(page.status == 400 && page.location == nil, "\(uri)")
        }
        #expect(try Self.hasSession(bed), "a refused request signs nobody out")
    }

    @Test("oidcc-rp-initiated-logout-modified-id-token-hint: a hint whose signature was changed is refused")
    func modifiedHint() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let hint = DevServer.corruptingSignature(of: try Self.signedIn(bed))
        let page = try endSession(
            bed, [("id_token_hint", hint), ("post_logout_redirect_uri", ConformanceBed.logoutRedirect)])
        #expect(page.status == 400 && page.location == nil)
        #expect(try Self.hasSession(bed))
    }

    @Test("oidcc-rp-initiated-logout-no-id-token-hint / -no-params / -only-state: the user confirms first")
    func confirmation() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        _ = try Self.signedIn(bed)
        for pairs: [(String, String)] in [[], [("state", "only")]] {
            let page = try endSession(bed, pairs)
            #expect(page.status == 200 && page.location == nil && page.body.contains("id=\"sign-out\""))
        }
        #expect(try Self.hasSession(bed), "nothing ends before the user confirms")
        let ask = try endSession(
            bed,
            [("client_id", "op-rs256"), ("post_logout_redirect_uri", ConformanceBed.logoutRedirect), ("state", "s-2")])
        #expect(ask.status == 200 && ask.body.contains("id=\"sign-out\""))
        let done = try bed.browser.post("/end-session", form: ask.hiddenFields())
        #expect(done.status == 303 && done.location == ConformanceBed.logoutRedirect + "?state=s-2")
        #expect(try !Self.hasSession(bed))
    }

    // MARK: Dynamic registration (RFC 7591)

    @Test("registration: off by default; on, a public client registers, signs in with consent, gets its algorithm")
    func registration() throws {
        let off = try ConformanceBed()
        defer { off.stop() }
        let refused = try off.oidc.dev("/connect/register", ["redirect_uris": ["https://app.example/cb"]])
        #expect(refused.status == 404)

        let bed = try ConformanceBed { $0.dynamicRegistration = true }
        defer { bed.stop() }
        let document = try #require(try bed.browser.get("/.well-known/openid-configuration").json)
        #expect(document["registration_endpoint"] == .string(bed.oidc.issuerText + "/connect/register"))
        let answer = try bed.oidc.dev(
            "/connect/register",
            [
                "redirect_uris": ["https://app.example/cb"], "id_token_signed_response_alg": "EdDSA",
                "client_name": "Example", "grant_types": ["authorization_code", "refresh_token"],
            ])
        #expect(answer.status == 201)
        let registered = try #require(answer.json)
        let client = registered["client_id"].string
        #expect(registered["token_endpoint_auth_method"] == "none")
        #expect(registered["id_token_signed_response_alg"] == "EdDSA" && registered["client_secret"] == nil)
        #expect(try bed.oidc.jwks().keys.contains { $0.algorithm == .eddsa })

        // A remembered browser still confirms a client anyone could have registered.
        _ = try bed.codeFlow()
        let pkce = OIDCTestServer.PKCE()
        let pairs = bed.oidc.parameters(
            pkce, scope: "openid", ["client_id": client, "redirect_uri": "https://app.example/cb"])
        let consent = try bed.oidc.authorize(pairs)
        #expect(OIDCTestServer.isConsentPage(consent))
        let page = try bed.browser.post("/authorize", form: consent.hiddenFields() + [("action", "continue")])
        let code = try #require(page.redirectParameters["code"])
        let tokens = try #require(
            try bed.oidc.token([
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", "https://app.example/cb"),
                ("client_id", client), ("code_verifier", pkce.verifier),
            ]).json)
        let nonce = Dictionary(pairs, uniquingKeysWith: { $1 })["nonce"]
        _ = try bed.verify(tokens, client: client, nonce: nonce)
        #expect(try JWT.unverified(tokens["id_token"].string).header.algorithmName == "EdDSA")

        // Registered without refresh_token or the device grant: neither is given.
        let narrow = try #require(
            try bed.oidc.dev("/connect/register", ["redirect_uris": ["https://app.example/cb"]]).json)
        let narrowID = narrow["client_id"].string
        #expect(narrow["grant_types"] == ["authorization_code"])
        let (offline, _) = try bed.authorize(
            bed.oidc.parameters(
                pkce, scope: "openid offline_access", ["client_id": narrowID, "redirect_uri": "https://app.example/cb"]
            ).map { $0 }, consent: true)
        let narrowTokens = try #require(
            try bed.oidc.token([
                ("grant_type", "authorization_code"), ("code", offline["code"] ?? ""),
                ("redirect_uri", "https://app.example/cb"), ("client_id", narrowID), ("code_verifier", pkce.verifier),
            ]).json)
        #expect(narrowTokens["refresh_token"] == nil && narrowTokens["access_token"] != nil)
        let device = try bed.browser.post("/device_authorization", form: [("client_id", narrowID)])
        #expect(device.error == "unauthorized_client")
    }

    @Test(
        "registration refuses what it cannot honour, with RFC 7591's error codes",
        arguments: [
            (#"{}"#, "invalid_redirect_uri"), (#"{"redirect_uris":["/relative"]}"#, "invalid_redirect_uri"),
            (#"{"redirect_uris":["https://a.example/cb#frag"]}"#, "invalid_redirect_uri"),
            (#"{"redirect_uris":["javascript:alert(document.cookie)//"]}"#, "invalid_redirect_uri"),
            (#"{"redirect_uris":["data:text/html,x"]}"#, "invalid_redirect_uri"),
            (
                #"{"redirect_uris":["https://a.example/cb"],"post_logout_redirect_uris":["JavaScript:alert(1)"]}"#,
                "invalid_client_metadata"
            ),
            (
                #"{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"client_secret_basic"}"#,
                "invalid_client_metadata"
            ),
            (
                #"{"redirect_uris":["https://a.example/cb"],"id_token_signed_response_alg":"HS256"}"#,
                "invalid_client_metadata"
            ),
            (
                #"{"redirect_uris":["https://a.example/cb"],"id_token_signed_response_alg":"none"}"#,
                "invalid_client_metadata"
            ),
            (#"{"redirect_uris":["https://a.example/cb"],"response_types":["token"]}"#, "invalid_client_metadata"),
            (#"{"redirect_uris":["https://a.example/cb"],"grant_types":["implicit"]}"#, "invalid_client_metadata"),
            (#"{"redirect_uris":["https://a.example/cb"],"post_logout_redirect_uris":"x"}"#, "invalid_client_metadata"),
        ])
    func registrationErrors(body: String, error: String) throws {
        let bed = try ConformanceBed { $0.dynamicRegistration = true }
        defer { bed.stop() }
        let page = try bed.browser.request(
            "POST", "/connect/register", headers: [("Content-Type", "application/json")], body: Array(body.utf8))
        #expect(page.status == 400 && page.error == error, "\(page.body)")
        let form = try bed.browser.post("/connect/register", form: [("redirect_uris", "https://a.example/cb")])
        #expect(form.status == 415, "JSON only: no web page can register a client cross-site")
    }
}
