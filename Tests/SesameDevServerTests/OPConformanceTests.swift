import Foundation
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

@testable import SesameDevServer

/// Our own run of the OpenID OP certification's modules that a provider of public clients with PKCE can run.
///
/// Basic and Config OP, the RP-initiated logout plan and registration, each test named after its module. A
/// module passes only with no warning either: where the tool would warn (a scope's claims missing, no `acr` for
/// `acr_values`, tokens of a reused code still working), the test fails. The tool's plain-HTTP-on-loopback
/// conditions are the one thing left out. DESIGN §4; SECURITY-CATALOG OIDC items.
@Suite struct OPConformanceTests {
    // MARK: Discovery and keys (oidcc-discovery-endpoint-verification, oidcc-config-*)

    @Test("oidcc-discovery-endpoint-verification: the document's required members and what they promise")
    func discovery() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let document = try #require(try bed.browser.get("/.well-known/openid-configuration").json)
        let issuer = bed.oidc.issuerText
        #expect(document["issuer"] == .string(issuer))
        for member in ["authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri"] {
            #expect(document[member]?.stringValue?.hasPrefix(issuer + "/") == true, "\(member)")
        }
        #expect(document["response_types_supported"]?.arrayValue?.contains("code") == true)
        #expect(document["subject_types_supported"]?.arrayValue?.isEmpty == false)
        let algorithms = document["id_token_signing_alg_values_supported"]?.arrayValue ?? []
        #expect(algorithms.contains("RS256"), "RS256 is mandatory (OIDC Core §15.1)")
        #expect(!algorithms.contains("none"))
        let scopes = document["scopes_supported"]?.arrayValue ?? []
        for scope in ["openid", "profile", "email", "address", "phone", "offline_access"] {
            #expect(scopes.contains(.string(scope)), "\(scope)")
        }
        #expect(document["claims_parameter_supported"] == true)
        #expect(document["response_modes_supported"]?.arrayValue?.contains("form_post") == true)
        #expect(document["grant_types_supported"]?.arrayValue?.contains("refresh_token") == true)
        let claims = document["claims_supported"]?.arrayValue ?? []
        for claim in ["sub", "iss", "auth_time", "acr", "name", "given_name", "address", "phone_number", "email"] {
            #expect(claims.contains(.string(claim)), "\(claim)")
        }
        #expect(document["acr_values_supported"]?.arrayValue?.isEmpty == false)
        #expect(document["request_parameter_supported"] == false)
        #expect(document["registration_endpoint"] == nil, "registration is off unless asked for")
    }

    @Test("oidcc-config: the JWKS publishes a unique kid, alg and use for each algorithm's key, no private part")
    func jwks() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let page = try bed.browser.get("/jwks")
        let keys = try #require(page.json?["keys"]?.arrayValue)
        let kids = keys.compactMap { $0["kid"]?.stringValue }
        #expect(kids.count == keys.count && Set(kids).count == kids.count)
        let published = Set(keys.compactMap { $0["alg"]?.stringValue })
        #expect(published.isSuperset(of: ["RS256", "ES256", "EdDSA"]))
        for key in keys {
            #expect(key["use"] == "sig" || key["use"] == nil)
            for secret in ["d", "p", "q", "dp", "dq", "qi", "k"] { #expect(key[secret] == nil) }
        }
    }

    // MARK: The code flow (oidcc-server, oidcc-idtoken-*)

    @Test(
        "oidcc-server and oidcc-idtoken-rs256 / -es256 / -eddsa: the code flow, each client's ID token signed with its registered algorithm",
        arguments: ["op-rs256", "op-es256", "op-eddsa"])
    func codeFlow(client: String) throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let (tokens, claims, _, signedIn) = try bed.codeFlow(client: client)
        #expect(signedIn)
        #expect(claims.subject == ConformanceBed.subject)
        let info = try bed.userInfo(tokens)
        #expect(info.status == 200)
        #expect(info.json?["sub"] == .string(ConformanceBed.subject))
        #expect(info.header("Content-Type")?.hasPrefix("application/json") == true)
    }

    @Test("oidcc-response-type-missing: an error redirect with state and iss, no code")
    func responseTypeMissing() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let pairs = bed.request(OIDCTestServer.PKCE(), ["response_type": nil])
        let page = try bed.oidc.authorize(pairs)
        let response = page.redirectParameters
        #expect(response["error"] == "invalid_request" && response["code"] == nil)
        try bed.check(response, sent: Dictionary(pairs, uniquingKeysWith: { $1 }))
    }

    @Test(
        "oidcc-ensure-redirect-uri-in-authorization-request and -registered-redirect-uri: no redirect to an unknown URI"
    )
    func registeredRedirectURI() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        for uri: String? in [nil, "https://rp.example/other", "https://attacker.example/cb"] {
            let page = try bed.oidc.authorize(bed.request(OIDCTestServer.PKCE(), ["redirect_uri": uri]))
            #expect(page.status == 400 && page.location == nil, "\(uri ?? "none")")
        }
    }

    @Test("oidcc-redirect-uri-query-OK / -mismatch / -added: a registered query is kept; any other query is refused")
    func redirectURIQuery() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let (_, _, sent, _) = try bed.codeFlow(["redirect_uri": ConformanceBed.redirectWithQuery])
        #expect(sent["redirect_uri"] == ConformanceBed.redirectWithQuery)
        let pkce = OIDCTestServer.PKCE()
        let kept = try bed.authorize(bed.request(pkce, ["redirect_uri": ConformanceBed.redirectWithQuery]))
        #expect(kept.response["tenant"] == "one" && kept.response["code"] != nil)
        for uri in ["https://rp.example/cb?tenant=two", "https://rp.example/cb?extra=1"] {
            let page = try bed.oidc.authorize(bed.request(OIDCTestServer.PKCE(), ["redirect_uri": uri]))
            #expect(page.status == 400 && page.location == nil, "\(uri)")
        }
    }

    @Test(
        "oidcc-ensure-request-without-nonce-succeeds-for-code-flow; -other-scope-order; -unknown-parameter; display, locales, login_hint"
    )
    func tolerantRequests() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let (_, claims, _, _) = try bed.codeFlow(["nonce": nil])
        #expect(claims.nonce == nil)
        _ = try bed.codeFlow(scope: "email openid")
        for overrides: [String: String?] in [
            ["extra_parameter": "ignored"], ["display": "page"], ["display": "popup"], ["ui_locales": "fr-FR en"],
            ["claims_locales": "fr-FR"], ["login_hint": ConformanceBed.email],
        ] {
            let (_, claims, _, _) = try bed.codeFlow(overrides)
            #expect(claims.subject == ConformanceBed.subject, "\(overrides)")
        }
    }

    @Test("oidcc-ensure-post-request-succeeds: the authorization request as a form POST")
    func postRequest() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let pkce = OIDCTestServer.PKCE()
        let pairs = bed.request(pkce)
        let form = try bed.browser.post("/authorize", form: pairs)
        #expect(form.status == 200 && form.body.contains("id=\"password\""))
        let page = try bed.browser.post(
            "/authorize",
            form: form.hiddenFields() + [("email", ConformanceBed.email), ("password", ConformanceBed.password)])
        #expect(page.redirectParameters["code"] != nil)
    }

    @Test("oidcc-unsigned-request-object-supported-correctly-or-rejected-as-unsupported: request_not_supported")
    func requestObject() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let object = Base64URL.encode(Array(#"{"alg":"none"}"#.utf8)) + "." + Base64URL.encode(Array("{}".utf8)) + "."
        let page = try bed.oidc.authorize(bed.request(OIDCTestServer.PKCE(), ["request": object]))
        #expect(page.redirectParameters["error"] == "request_not_supported")
    }

    @Test("PKCE for public clients: no challenge, plain, or a wrong verifier gets no tokens")
    func pkce() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        for overrides: [String: String?] in [["code_challenge": nil], ["code_challenge_method": "plain"]] {
            let page = try bed.oidc.authorize(bed.request(OIDCTestServer.PKCE(), overrides))
            #expect(page.redirectParameters["error"] == "invalid_request", "\(overrides)")
        }
        let pkce = OIDCTestServer.PKCE()
        let (response, _) = try bed.authorize(bed.request(pkce))
        let answer = try bed.oidc.token([
            ("grant_type", "authorization_code"), ("code", response["code"] ?? ""),
            ("redirect_uri", ConformanceBed.redirect), ("client_id", "op-rs256"),
            ("code_verifier", OIDCTestServer.PKCE().verifier),
        ])
        #expect(answer.status == 400 && answer.error == "invalid_grant")
    }

    @Test("oidcc-codereuse and -codereuse-30seconds: a second use fails and what the first issued stops working")
    func codeReuse() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let pkce = OIDCTestServer.PKCE()
        let (response, _) = try bed.authorize(bed.request(pkce, scope: "openid offline_access"))
        let form: [(String, String)] = [
            ("grant_type", "authorization_code"), ("code", response["code"] ?? ""),
            ("redirect_uri", ConformanceBed.redirect), ("client_id", "op-rs256"), ("code_verifier", pkce.verifier),
        ]
        let first = try #require(try bed.oidc.token(form).json)
        bed.oidc.clock.advance(by: 30)
        let second = try bed.oidc.token(form)
        #expect(second.status == 400 && second.error == "invalid_grant")
        #expect(try bed.userInfo(first).status == 401, "the tool warns when the first tokens survive")
        #expect(try bed.oidc.refresh(first["refresh_token"].string, client: "op-rs256").error == "invalid_grant")
    }

    // MARK: UserInfo (oidcc-userinfo-get, -post-header, -post-body)

    @Test("oidcc-userinfo-get, -post-header and -post-body: the token in the header (GET, POST) or the form body")
    func userInfoMethods() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let (tokens, claims, _, _) = try bed.codeFlow(scope: "openid email")
        for page in [
            try bed.userInfo(tokens), try bed.userInfo(tokens, method: "POST"), try bed.userInfo(tokens, inBody: true),
        ] {
            #expect(page.status == 200, "\(page.body)")
            #expect(page.json?["sub"] == claims["sub"])
            #expect(page.json?["email"] == .string(ConformanceBed.email))
        }
        // Both ways at once is invalid_request (RFC 6750 §2); a wrong token in the body is invalid_token.
        let token = tokens["access_token"].string
        let both = try bed.browser.post(
            "/userinfo", form: [("access_token", token)], headers: [("Authorization", "Bearer \(token)")])
        #expect(both.status == 400 && both.error == "invalid_request")
        let wrong = try bed.browser.post("/userinfo", form: [("access_token", token + "x")])
        #expect(wrong.status == 401 && wrong.header("WWW-Authenticate")?.contains("invalid_token") == true)
    }

    // MARK: Scopes and claims (oidcc-scope-*, oidcc-claims-essential, acr)

    @Test(
        "oidcc-scope-profile / -email / -address / -phone / -all: UserInfo answers every claim of the scope",
        arguments: ["profile", "email", "address", "phone", "profile email address phone"])
    func scopes(scope: String) throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let (tokens, _, _, _) = try bed.codeFlow(scope: "openid " + scope)
        let info = try #require(try bed.userInfo(tokens).json)
        let wanted = StandardClaims.requested(by: scope.split(separator: " ").map(String.init))
        for claim in wanted { #expect(info[claim] != nil, "\(claim) for scope \(scope)") }
        #expect(info["email_verified"] == (scope.contains("email") ? true : nil))
        if scope.contains("address") { #expect(info["address"]?["locality"] == "Paris") }
        // Nothing of a scope not asked for.
        if !scope.contains("phone") { #expect(info["phone_number"] == nil) }
        if !scope.contains("profile") { #expect(info["given_name"] == nil) }
    }

    @Test("oidcc-claims-essential and voluntary claims: asked for by name in UserInfo and in the ID token")
    func claimsParameter() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let request =
            #"{"userinfo":{"name":{"essential":true},"phone_number":null},"id_token":{"given_name":{"essential":true},"address":null,"nickname":{"value":"caz"}}}"#
        let (tokens, claims, _, _) = try bed.codeFlow(["claims": request])
        #expect(claims["given_name"] == "Carol" && claims["nickname"] == "caz")
        #expect(claims["address"]?["country"] == "FR")
        #expect(claims["name"] == nil, "asked for in UserInfo only")
        let info = try #require(try bed.userInfo(tokens).json)
        #expect(info["name"] == "Carol Example" && info["phone_number"] == "+33 1 23 45 67 89")
        #expect(info["given_name"] == nil, "asked for in the ID token only")
        // The grant remembers the request: a refreshed ID token answers it too.
        let (offline, _, _, _) = try bed.codeFlow(scope: "openid offline_access", ["claims": request])
        let refreshed = try #require(try bed.oidc.refresh(offline["refresh_token"].string, client: "op-rs256").json)
        let again = try bed.verify(refreshed, client: "op-rs256", nonce: nil, fromRefresh: true)
        #expect(again["given_name"] == "Carol")
        // Malformed requests are refused, redirected with state.
        for bad in ["[1]", #"{"id_token":[]}"#, #"{"userinfo":{"name":{"essential":"yes"}}}"#, "{"] {
            let page = try bed.oidc.authorize(bed.request(OIDCTestServer.PKCE(), ["claims": bad]))
            #expect(page.redirectParameters["error"] == "invalid_request", "\(bad)")
        }
    }

    @Test("claims sub with a value: another user signing in gets no code (OIDC Core §5.5.1)")
    func claimsSubValue() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let (response, _) = try bed.authorize(
            bed.request(OIDCTestServer.PKCE(), ["claims": #"{"id_token":{"sub":{"value":"someone-else"}}}"#]))
        #expect(response["error"] == "access_denied" && response["code"] == nil)
        let (_, claims, _, _) = try bed.codeFlow(["claims": #"{"id_token":{"sub":{"value":"alice-0001"}}}"#])
        #expect(claims.subject == ConformanceBed.subject)
    }

    @Test("oidcc-ensure-request-with-acr-values-succeeds: the ID token says which acr the sign-in met")
    func acrValues() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let (_, claims, _, _) = try bed.codeFlow(["acr_values": "1 2"])
        #expect(claims["acr"] == .string(DevServer.passwordACR))
        let (_, plain, _, _) = try bed.codeFlow()
        #expect(plain["acr"] == nil, "acr only when asked for")
        let essential = #"{"id_token":{"acr":{"essential":true,"values":["urn:example:mfa"]}}}"#
        let (response, _) = try bed.authorize(bed.request(OIDCTestServer.PKCE(), ["claims": essential]))
        #expect(response["error"] == "access_denied", "an essential acr that cannot be met fails the sign-in")
    }

    @Test("custom claims: the user's own, the issuer's and the client's templates, filled from the sign-in")
    func customClaims() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let (tokens, claims, _, _) = try bed.codeFlow(client: "op-eddsa")
        #expect(claims["groups"] == ["testers"])
        #expect(claims["greeting"] == "hello carol" && claims["tenant"] == "op-eddsa")
        let info = try #require(try bed.userInfo(tokens).json)
        #expect(info["tenant"] == "op-eddsa" && info["groups"] == ["testers"])
        let (_, other, _, _) = try bed.codeFlow(client: "op-rs256")
        #expect(other["tenant"] == nil && other["greeting"] == "hello carol")
        // Templates and users never set the protocol's claims or how the user authenticated.
        let hostile = try ConformanceBed {
            $0.claims = ["iss": "https://evil.example", "sub": "root", "aud": "other", "acr": "mfa", "nonce": "n"]
            $0.seededUsers[0].claims["exp"] = 4_000_000_000
            $0.seededUsers[0].claims["cnf"] = ["jkt": "x"]
        }
        defer { hostile.stop() }
        let (hostileTokens, kept, _, _) = try hostile.codeFlow()
        #expect(kept.issuer == hostile.oidc.issuerText && kept.subject == ConformanceBed.subject)
        #expect(kept["acr"] == nil && kept["cnf"] == nil && kept.audience == ["op-rs256"])
        let hostileInfo = try #require(try hostile.userInfo(hostileTokens).json)
        #expect(hostileInfo["sub"] == .string(ConformanceBed.subject) && hostileInfo["iss"] == nil)
    }

    // MARK: prompt and max_age

    @Test("oidcc-prompt-none-not-logged-in: login_required, redirected with state")
    func promptNoneNotLoggedIn() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let pairs = bed.request(OIDCTestServer.PKCE(), ["prompt": "none"])
        let page = try bed.oidc.authorize(pairs)
        #expect(page.redirectParameters["error"] == "login_required")
        try bed.check(page.redirectParameters, sent: Dictionary(pairs, uniquingKeysWith: { $1 }))
    }

    @Test("oidcc-prompt-none-logged-in and oidcc-id-token-hint: silent, same sub and auth_time")
    func promptNoneLoggedIn() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let (first, claims, _, _) = try bed.codeFlow()
        bed.oidc.clock.advance(by: 5)
        let (_, silent, _, signedIn) = try bed.codeFlow(["prompt": "none"])
        #expect(!signedIn && silent.subject == claims.subject && silent["auth_time"] == claims["auth_time"])
        let (_, hinted, _, hintedSignIn) = try bed.codeFlow([
            "prompt": "none", "id_token_hint": first["id_token"].string,
        ])
        #expect(!hintedSignIn && hinted.subject == claims.subject)
        // A hint for another user is no silent sign-in for this browser's user; a forged hint is refused.
        let minted = try #require(try bed.oidc.dev("/_dev/token", ["sub": "someone-else", "aud": "op-rs256"]).json)
        let other = try bed.oidc.authorize(
            bed.request(OIDCTestServer.PKCE(), ["prompt": "none", "id_token_hint": minted["id_token"].string]))
        #expect(other.redirectParameters["error"] == "login_required")
        let forged = try bed.oidc.authorize(
            bed.request(
                OIDCTestServer.PKCE(),
                ["prompt": "none", "id_token_hint": DevServer.corruptingSignature(of: first["id_token"].string)]))
        #expect(forged.redirectParameters["error"] == "invalid_request" && forged.redirectParameters["code"] == nil)
    }

    @Test("oidcc-prompt-login: the user signs in again and auth_time moves on")
    func promptLogin() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let (_, first, _, _) = try bed.codeFlow()
        bed.oidc.clock.advance(by: 2)
        let (_, second, _, signedIn) = try bed.codeFlow(["prompt": "login"])
        #expect(signedIn)
        #expect((second["auth_time"]?.doubleValue ?? 0) > (first["auth_time"]?.doubleValue ?? 0))
    }

    @Test("oidcc-max-age-1 and -10000: an old sign-in is redone, a recent one is not; auth_time says which")
    func maxAge() throws {
        let bed = try ConformanceBed()
        defer { bed.stop() }
        let (_, first, _, _) = try bed.codeFlow()
        bed.oidc.clock.advance(by: 2)
        let (_, recent, _, recentSignIn) = try bed.codeFlow(["max_age": "10000"])
        #expect(!recentSignIn && recent["auth_time"] == first["auth_time"])
        let (_, renewed, _, signedIn) = try bed.codeFlow(["max_age": "1"])
        #expect(signedIn)
        #expect((renewed["auth_time"]?.doubleValue ?? 0) > (first["auth_time"]?.doubleValue ?? 0))
        // The tool waits a little over a second: one whole second on the clock is already too old for max_age=1.
        bed.oidc.clock.advance(by: 1)
        let (_, boundary, _, boundarySignIn) = try bed.codeFlow(["max_age": "1"])
        #expect(boundarySignIn && boundary["auth_time"] != renewed["auth_time"])
    }
}
