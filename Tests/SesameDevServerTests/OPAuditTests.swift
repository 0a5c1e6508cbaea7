import Foundation
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

@testable import SesameDevServer

/// What an attacker pass over the conformant-OP features found, each as the test that refuses the old behaviour.
@Suite struct OPAuditTests {
    @Test("/jwks never makes or rotates a key, and publishes at most 20 keys per algorithm however often keys rotate")
    func jwksIsCheap() throws {
        let bed = try ConformanceBed { $0.keyRotationInterval = 1 }
        defer { bed.stop() }
        let before = Set(try bed.oidc.jwks().keys.compactMap(\.keyID))
        for _ in 0..<5 {
            bed.oidc.clock.advance(by: 2)
            #expect(Set(try bed.oidc.jwks().keys.compactMap(\.keyID)) == before, "a GET rotated a key")
        }
        // Signing rotates what is due; the retired keys stay published, up to the limit.
        _ = try bed.codeFlow()
        #expect(Set(try bed.oidc.jwks().keys.compactMap(\.keyID)) != before)
        for _ in 0..<25 { #expect(try bed.oidc.dev("/_dev/rotate-keys", [:]).status == 200) }
        let keys = try bed.oidc.jwks().keys
        for algorithm in ["ES256", "RS256", "EdDSA"] {
            let count = keys.filter { $0.algorithm?.name == algorithm }.count
            #expect(count >= 1 && count <= Int(DevStore.publishedKeyLimit) * 2, "\(algorithm): \(count)")
        }
        #expect(keys.filter { $0.algorithm == .rs256 }.count <= Int(DevStore.publishedKeyLimit))
    }

    @Test("a sub asked for by value is matched byte for byte: jos\\u{E9} is not jose\\u{301}")
    func subjectValueIsByteExact() throws {
        let bed = try ConformanceBed {
            $0.seededUsers.append(
                DevServer.SeededUser(email: "nfd@example.com", password: "long-enough", subject: "jose\u{301}"))
        }
        defer { bed.stop() }
        let request = #"{"id_token":{"sub":{"value":"jos\u00e9","essential":true}}}"#
        let pkce = OIDCTestServer.PKCE()
        let form = try bed.oidc.authorize(bed.request(pkce, ["claims": request]))
        let page = try bed.browser.post(
            "/authorize", form: form.hiddenFields() + [("email", "nfd@example.com"), ("password", "long-enough")])
        #expect(page.redirectParameters["error"] == "access_denied" && page.redirectParameters["code"] == nil)
        #expect(ClaimsRequest.exactlyEqual(["a": "jos\u{E9}", "b": [1]], ["b": [1], "a": "jos\u{E9}"]))
        #expect(!ClaimsRequest.exactlyEqual(["jos\u{E9}"], ["jose\u{301}"]))
    }

    @Test("a client ID is found only by its exact bytes: a Kelvin sign is not a K")
    func clientIDIsByteExact() throws {
        let bed = try ConformanceBed {
            $0.clients.append(RegisteredClient(id: "Kapp", redirectURIs: ["https://app.example/cb"]))
        }
        defer { bed.stop() }
        let lookalike = try bed.oidc.authorize(
            bed.request(OIDCTestServer.PKCE(), ["client_id": "\u{212A}app", "redirect_uri": "https://app.example/cb"]))
        #expect(lookalike.status == 400 && lookalike.location == nil)
        let token = try bed.oidc.token([
            ("grant_type", "refresh_token"), ("refresh_token", "x"), ("client_id", "\u{212A}app"),
        ])
        #expect(token.error == "invalid_client")
        let real = try bed.oidc.authorize(
            bed.request(OIDCTestServer.PKCE(), ["client_id": "Kapp", "redirect_uri": "https://app.example/cb"]))
        #expect(real.status == 200)
    }

    @Test("errors of a form_post request to a private-use scheme go in the query, never as a self-submitting form")
    func formPostErrorsStayInTheQuery() throws {
        let bed = try ConformanceBed {
            $0.clients.append(RegisteredClient(id: "native", redirectURIs: ["myapp:/cb"]))
        }
        defer { bed.stop() }
        for extra: [String: String?] in [["request": "x"], ["response_type": "token"], ["claims": "["]] {
            var overrides: [String: String?] = [
                "client_id": "native", "redirect_uri": "myapp:/cb", "response_mode": "form_post",
            ]
            overrides.merge(extra) { $1 }
            let page = try bed.oidc.authorize(bed.request(OIDCTestServer.PKCE(), overrides))
            #expect(page.status == 302 && page.location?.hasPrefix("myapp:/cb?") == true, "\(extra)")
            #expect(!page.body.contains("<form"), "\(extra)")
        }
    }

    @Test("claims and acr_values that would not fit once stored are refused up front, not a dead form or code")
    func oversizedClaims() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let values = Array(repeating: "a", count: 4000).joined(separator: " ")
        let page = try bed.oidc.authorize(bed.request(OIDCTestServer.PKCE(), ["acr_values": values]))
        #expect(page.redirectParameters["error"] == "invalid_request")
        let pushed = try bed.browser.post("/par", form: bed.request(OIDCTestServer.PKCE(), ["acr_values": values]))
        #expect(pushed.status == 400 && pushed.error == "invalid_request")
    }

    @Test("the sign-in and consent pages name the claims a claims request asks for")
    func pagesNameRequestedClaims() throws {
        let bed = try ConformanceBed { $0.dynamicRegistration = true }
        defer { bed.stop() }
        let request = #"{"userinfo":{"phone_number":null},"id_token":{"address":null}}"#
        let form = try bed.oidc.authorize(bed.request(OIDCTestServer.PKCE(), ["claims": request]))
        #expect(form.body.contains("<code>address</code>, <code>phone_number</code>"))
        _ = try bed.codeFlow()
        let client = try #require(
            try bed.oidc.dev("/connect/register", ["redirect_uris": ["https://x.example/cb"]]).json)["client_id"].string
        let consent = try bed.oidc.authorize(
            bed.request(
                OIDCTestServer.PKCE(), ["client_id": client, "redirect_uri": "https://x.example/cb", "claims": request])
        )
        #expect(OIDCTestServer.isConsentPage(consent) && consent.body.contains("<code>phone_number</code>"))
    }

    @Test("templates fill each placeholder once: a sub that contains ${email} is not expanded again")
    func templatesExpandOnce() {
        let filled = ClaimTemplate.fill(
            "${sub}|${email}|${unknown}|${", subject: "x${email}", email: "a@b.c", clientID: "c")
        #expect(filled == "x${email}|a@b.c|${unknown}|${")
    }

    @Test("a file's faults, RP test mode and DPoP nonces reach every issuer")
    func issuersInheritFaults() throws {
        var configuration = DevServer.Configuration()
        configuration.faults = try FaultPlan(spec: "/jwks:status=503")
        configuration.rpTest = .invalidIssuer
        try configuration.load(json: Data(#"{"issuers": {"p": {}}}"#.utf8))
        #expect(configuration.issuers["p"]?.rpTest == .invalidIssuer)
        let oidc = try OIDCTestServer {
            $0 = configuration
            $0.passwordIterations = 1000
        }
        defer { oidc.stop() }
        #expect(try oidc.browser.get("/jwks").status == 503)
        #expect(try oidc.browser.get("/p/jwks").status == 503)
    }
}
