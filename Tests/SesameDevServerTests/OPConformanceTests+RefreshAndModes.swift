import Foundation
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

@testable import SesameDevServer

/// Refresh, key rotation and response modes: the rest of the conformance run.
extension OPConformanceTests {
    // MARK: Refresh and keys

    @Test("oidcc-refresh-token: new tokens, the same sub, iss, aud and auth_time; not for another client")
    func refresh() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let (tokens, claims, _, _) = try bed.codeFlow(client: "op-es256", scope: "openid offline_access")
        let other = try bed.oidc.refresh(tokens["refresh_token"].string, client: "op-rs256")
        #expect(other.status == 400 && other.error == "invalid_grant")
        let refreshed = try #require(
            try bed.oidc.refresh(tokens["refresh_token"].string, client: "op-es256").json)
        let again = try bed.verify(refreshed, client: "op-es256", nonce: nil, fromRefresh: true)
        #expect(again.subject == claims.subject && again["auth_time"] == claims["auth_time"])
        #expect(refreshed["refresh_token"] != tokens["refresh_token"])
        #expect(try bed.userInfo(refreshed).status == 200)
    }

    @Test("oidcc-server-rotate-keys: after a rotation new ID tokens carry the new kid and verify from the JWKS")
    func rotateKeys() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let kidBefore = try JWT.unverified(try bed.codeFlow().tokens["id_token"].string).header.keyID
        #expect(try bed.oidc.dev("/_dev/rotate-keys", [:]).status == 200)
        for client in ["op-rs256", "op-es256", "op-eddsa"] {
            let (tokens, _, _, _) = try bed.codeFlow(client: client)
            let kid = try JWT.unverified(tokens["id_token"].string).header.keyID
            #expect(kid != nil && (client != "op-rs256" || kid != kidBefore), "\(client)")
        }
    }

    // MARK: Response modes

    @Test("response_mode=form_post: a page that posts code, state and iss to the redirect URI, errors too")
    func formPost() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let pkce = OIDCTestServer.PKCE()
        let pairs = bed.request(pkce, ["response_mode": "form_post"])
        let form = try bed.oidc.authorize(pairs)
        let page = try bed.browser.post(
            "/authorize",
            form: form.hiddenFields() + [("email", ConformanceBed.email), ("password", ConformanceBed.password)])
        #expect(page.status == 200 && page.location == nil)
        #expect(page.body.contains("action=\"https://rp.example/cb\""))
        let fields = Dictionary(page.hiddenFields(), uniquingKeysWith: { $1 })
        try bed.check(fields, sent: Dictionary(pairs, uniquingKeysWith: { $1 }))
        let answer = try bed.oidc.token([
            ("grant_type", "authorization_code"), ("code", fields["code"] ?? ""),
            ("redirect_uri", ConformanceBed.redirect), ("client_id", "op-rs256"), ("code_verifier", pkce.verifier),
        ])
        #expect(answer.status == 200)
        // The one script allowed is the submitting line, by its hash.
        let csp = (page.header("Content-Security-Policy") ?? "").split(separator: ";").map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        let script = csp.first { $0.hasPrefix("script-src") } ?? ""
        #expect(script.hasPrefix("script-src 'sha256-") && !script.contains("unsafe"))
        bed.forgetBrowser()
        let error = try bed.oidc.authorize(
            bed.request(OIDCTestServer.PKCE(), ["response_mode": "form_post", "prompt": "none"]))
        #expect(Dictionary(error.hiddenFields(), uniquingKeysWith: { $1 })["error"] == "login_required")
        let unknown = try bed.oidc.authorize(bed.request(OIDCTestServer.PKCE(), ["response_mode": "fragment"]))
        #expect(unknown.redirectParameters["error"] == "invalid_request")
    }

    @Test("form_post never posts to a scheme a browser runs: such redirect URIs cannot be registered or used")
    func formPostSchemes() throws {
        #expect(throws: DevServerError.self) { try RegisteredClient(specification: "x:javascript:alert(1)//") }
        let bed = try ConformanceBed {
            $0.clients.append(
                RegisteredClient(id: "direct", redirectURIs: ["javascript:alert(1)//", "app.example:/cb"]))
        }
        defer { bed.stop() }
        let script = try bed.oidc.authorize(
            bed.request(
                OIDCTestServer.PKCE(),
                ["client_id": "direct", "redirect_uri": "javascript:alert(1)//", "response_mode": "form_post"]))
        #expect(script.status == 400 && script.location == nil && !script.body.contains("action=\"javascript"))
        let custom = try bed.oidc.authorize(
            bed.request(
                OIDCTestServer.PKCE(),
                ["client_id": "direct", "redirect_uri": "app.example:/cb", "response_mode": "form_post"]))
        #expect(custom.status == 302 && custom.redirectParameters["error"] == "invalid_request")
    }
}
