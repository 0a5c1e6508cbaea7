import Foundation
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

@testable import SesameDevServer

/// The provider's side of OpenID Connect Native SSO (catalog NSSO-01..NSSO-04), request by request.
@Suite struct NativeSSOProviderTests {
    static let deviceSecretType = "urn:openid:params:token-type:device-secret"

    static func server() throws -> OIDCTestServer {
        try OIDCTestServer { configuration in
            var other = RegisteredClient(id: "other-vendor", redirectURIs: [OIDCTestServer.redirect])
            other.nativeSSOGroup = "other"
            configuration.clients = OIDCTestServer.nativeSSOClients + [other]
        }
    }

    /// The first app's sign-in with `device_sso`: the token response.
    static func firstSignIn(_ oidc: OIDCTestServer) throws -> JOSEValue {
        let pkce = OIDCTestServer.PKCE()
        let (code, _) = try oidc.code(
            pkce, scope: "openid email offline_access device_sso", ["client_id": "app-a"])
        let answer = try oidc.exchange(code, pkce, client: "app-a")
        return try #require(answer.status == 200 ? answer.json : nil, "\(answer.body)")
    }

    static func exchange(_ oidc: OIDCTestServer, client: String = "app-b", _ values: [String: String?])
        throws -> TestBrowser.Page
    {
        var form: [String: String] = [
            "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange", "client_id": client,
            "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
            "actor_token_type": deviceSecretType, "audience": oidc.issuerText, "scope": "openid offline_access",
        ]
        for (name, value) in values { form[name] = value }
        return try oidc.token(form.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
    }

    @Test(
        "NSSO-01: device_sso gets a device secret, and an ID token with sid and the secret's ds_hash; discovery says so"
    )
    func deviceSecretIssued() throws {
        let oidc = try Self.server()
        defer { oidc.stop() }
        let tokens = try Self.firstSignIn(oidc)
        let secret = tokens["device_secret"].string
        let claims = try oidc.verifyIDToken(tokens["id_token"].string, nonce: nil, client: "app-a")
        #expect(claims["ds_hash"]?.stringValue == DevStore.deviceSecretHash(secret))
        #expect(claims["sid"]?.stringValue?.isEmpty == false && secret.utf8.count >= 43)
        #expect(tokens["scope"] == "openid email offline_access device_sso")
        // A refresh keeps naming the session, and gives no new secret.
        let refreshed = try #require(
            try oidc.refresh(tokens["refresh_token"].string, client: "app-a").json)
        let again = try oidc.verifyIDToken(refreshed["id_token"].string, nonce: nil, client: "app-a")
        #expect(
            again["sid"] == claims["sid"] && again["ds_hash"] == claims["ds_hash"] && refreshed["device_secret"] == nil)
        let discovery = try #require(try oidc.browser.get("/.well-known/openid-configuration").json)
        #expect(discovery["native_sso_supported"] == true)
        #expect(discovery["scopes_supported"]?.arrayValue?.contains("device_sso") == true)
        // Without it, nothing: no secret, no sid.
        let plain = try oidc.signedInTokens().tokens
        #expect(plain["device_secret"] == nil)
        #expect(try JWT.unverified(plain["id_token"].string).claims["sid"] == nil)
    }

    @Test("device_sso is refused for a client in no group, without openid, and in the device flow")
    func deviceSSOScopeRules() throws {
        let oidc = try Self.server()
        defer { oidc.stop() }
        let pkce = OIDCTestServer.PKCE()
        let outsider = try oidc.authorize(oidc.parameters(pkce, scope: "openid device_sso"))
        #expect(outsider.status == 302 && outsider.redirectParameters["error"] == "invalid_scope")
        let noOpenID = try oidc.authorize(
            oidc.parameters(pkce, scope: "email device_sso", ["client_id": "app-a"]))
        #expect(noOpenID.redirectParameters["error"] == "invalid_scope")
        let device = try oidc.browser.post(
            "/device_authorization", form: [("client_id", "app-a"), ("scope", "openid device_sso")])
        #expect(device.status == 400 && device.json?["error"] == "invalid_scope")
    }

    @Test("NSSO-02: the sibling app's exchange: its own tokens for the same user and session, no new secret")
    func siblingExchange() throws {
        let oidc = try Self.server()
        defer { oidc.stop() }
        let first = try Self.firstSignIn(oidc)
        let idToken = first["id_token"].string
        let original = try JWT.unverified(idToken).claims
        // The ID token may have expired: the device session is what must be live.
        oidc.clock.advance(by: 7200)
        let answer = try Self.exchange(
            oidc, ["subject_token": idToken, "actor_token": first["device_secret"].string])
        let body = try #require(answer.status == 200 ? answer.json : nil, "\(answer.body)")
        #expect(body["issued_token_type"] == "urn:ietf:params:oauth:token-type:access_token")
        #expect(body["refresh_token"] != nil && body["device_secret"] == nil)
        let claims = try oidc.verifyIDToken(body["id_token"].string, nonce: nil, client: "app-b")
        #expect(claims.subject == original.subject && claims["sid"] == original["sid"])
        #expect(claims["auth_time"] == original["auth_time"])
        let access = try JWT.unverified(body["access_token"].string).claims
        #expect(access["client_id"] == "app-b")
        #expect(try oidc.userInfo(body["access_token"].string).status == 200)
        // Native SSO 1.0 ID1's token type is still understood.
        let legacy = try Self.exchange(
            oidc,
            [
                "subject_token": idToken, "actor_token": first["device_secret"].string,
                "actor_token_type": "urn:x-oath:params:oauth:token-type:device-secret",
            ])
        #expect(legacy.status == 200)
    }

    @Test("NSSO-03: another device's secret, a forged or foreign ID token, another group, a wrong audience: refused")
    func refusals() throws {
        let oidc = try Self.server()
        defer { oidc.stop() }
        let one = try Self.firstSignIn(oidc)
        oidc.browser.clearCookies()
        let two = try Self.firstSignIn(oidc)
        let idToken = one["id_token"].string
        let secret = one["device_secret"].string
        func refused(_ values: [String: String?], client: String = "app-b") throws -> String? {
            let answer = try Self.exchange(oidc, client: client, values)
            #expect(answer.status == 400 || answer.status == 401, "\(answer.body)")
            return answer.json?["error"]?.stringValue
        }
        // A device secret from another device (another device session) with this ID token.
        #expect(try refused(["subject_token": idToken, "actor_token": two["device_secret"].string]) == "invalid_grant")
        // An unknown secret, a missing one, a wrong type.
        #expect(try refused(["subject_token": idToken, "actor_token": "guess"]) == "invalid_grant")
        #expect(try refused(["subject_token": idToken, "actor_token": nil]) == "invalid_request")
        #expect(
            try refused([
                "subject_token": idToken, "actor_token": secret,
                "actor_token_type": "urn:ietf:params:oauth:token-type:access_token",
            ]) == "invalid_request")
        // A forged ID token: the claims edited (another user's sub), the signature kept.
        let parts = idToken.split(separator: ".").map(String.init)
        var edited = try JOSEValue.parse(try Base64URL.decode(parts[1])).objectValue ?? [:]
        edited["sub"] = "someone-else"
        let forged = [parts[0], Base64URL.encode(JOSEValue.object(edited).jsonBytes), parts[2]].joined(separator: ".")
        #expect(try refused(["subject_token": forged, "actor_token": secret]) == "invalid_grant")
        // An access token where the ID token goes.
        #expect(try refused(["subject_token": one["access_token"].string, "actor_token": secret]) == "invalid_grant")
        // A client of another vendor's group, a client in no group.
        #expect(
            try refused(["subject_token": idToken, "actor_token": secret], client: "other-vendor")
                == "unauthorized_client")
        #expect(
            try refused(["subject_token": idToken, "actor_token": secret], client: "sesame-cli")
                == "unauthorized_client")
        // Another audience, or a resource.
        #expect(
            try refused(["subject_token": idToken, "actor_token": secret, "audience": "https://api.example"])
                == "invalid_target")
        #expect(
            try refused(["subject_token": idToken, "actor_token": secret, "resource": "https://api.example"])
                == "invalid_target")
        // A scope this server does not know.
        #expect(
            try refused(["subject_token": idToken, "actor_token": secret, "scope": "openid admin"]) == "invalid_scope")
        // No widening: the first sign-in did not grant profile.
        #expect(
            try refused(["subject_token": idToken, "actor_token": secret, "scope": "openid profile"]) == "invalid_scope"
        )
        // After all that, the right pair still works: refusals spend nothing.
        #expect(try Self.exchange(oidc, ["subject_token": idToken, "actor_token": secret]).status == 200)
    }

    @Test("NSSO-04: revoking the device secret, or logging out with an ID token of the session, ends every app's grant")
    func endingTheSession() throws {
        for byLogout in [false, true] {
            let oidc = try Self.server()
            defer { oidc.stop() }
            let first = try Self.firstSignIn(oidc)
            let second = try #require(
                try Self.exchange(
                    oidc, ["subject_token": first["id_token"].string, "actor_token": first["device_secret"].string]
                ).json)
            // A client outside the group cannot end it.
            _ = try oidc.browser.post(
                "/revoke", form: [("client_id", "sesame-cli"), ("token", first["device_secret"].string)])
            #expect(try oidc.refresh(first["refresh_token"].string, client: "app-a").status == 200)
            // A rotated first-app token is needed from now on; the second app's is unused.
            if byLogout {
                let page = try oidc.browser.get(
                    "/end-session?" + OIDCTestServer.query([("id_token_hint", second["id_token"].string)]))
                #expect(page.status == 200)
            } else {
                let revoked = try oidc.browser.post(
                    "/revoke",
                    form: [
                        ("client_id", "app-b"), ("token", first["device_secret"].string),
                        ("token_type_hint", "device_secret"),
                    ])
                #expect(revoked.status == 200)
            }
            #expect(try oidc.refresh(second["refresh_token"].string, client: "app-b").json?["error"] == "invalid_grant")
            #expect(try oidc.userInfo(second["access_token"].string).status == 401)
            let again = try Self.exchange(
                oidc, ["subject_token": first["id_token"].string, "actor_token": first["device_secret"].string])
            #expect(again.json?["error"] == "invalid_grant")
            #expect(try oidc.browser.get("/_dev/counters").json?["deviceSessionsEnded"] == 1)
        }
    }

    @Test("M2: a grant is made from a device session only while it lives (one transaction with the check)")
    func noGrantAfterTheEnd() throws {
        let oidc = try Self.server()
        defer { oidc.stop() }
        let first = try Self.firstSignIn(oidc)
        let sid = try #require(try JWT.unverified(first["id_token"].string).claims["sid"]?.stringValue)
        let store = oidc.server.store
        let user = try #require(try store.deviceSession(id: sid)).user.id
        let now = Int64(oidc.clock.now.timeIntervalSince1970)
        #expect(
            try store.createGrant(
                inDeviceSession: sid, userID: user, clientID: "app-b", scope: ["openid"], authTime: now, acr: nil,
                now: now) != nil)
        try store.endDeviceSession(id: sid)
        #expect(
            try store.createGrant(
                inDeviceSession: sid, userID: user, clientID: "app-b", scope: ["openid"], authTime: now, acr: nil,
                now: now) == nil)
    }

    @Test("M3: a new sign-in that sends the device secret with its code keeps that device session")
    func newSignInKeepsTheSession() throws {
        let oidc = try Self.server()
        defer { oidc.stop() }
        let first = try Self.firstSignIn(oidc)
        let secret = first["device_secret"].string
        let pkce = OIDCTestServer.PKCE()
        let (code, _) = try oidc.code(pkce, scope: "openid email offline_access device_sso", ["client_id": "app-a"])
        let again = try #require(
            try oidc.token([
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", OIDCTestServer.redirect),
                ("client_id", "app-a"), ("code_verifier", pkce.verifier), ("device_secret", secret),
            ]).json)
        #expect(again["device_secret"]?.stringValue == secret)
        let sid = { (token: JOSEValue?) in try JWT.unverified(token.string).claims["sid"] }
        #expect(try sid(again["id_token"]) == sid(first["id_token"]))
        // Without it, or from another browser, a new session.
        oidc.browser.clearCookies()
        let other = try Self.firstSignIn(oidc)
        #expect(other["device_secret"]?.stringValue != secret)
    }

    @Test("the configuration file's native_sso_group: read, and a bad one named")
    func configurationFile() throws {
        func load(_ group: String) throws -> DevServer.Configuration {
            var configuration = DevServer.Configuration()
            try configuration.load(
                json: Data(
                    #"{"clients": [{"client_id": "a", "redirect_uris": ["https://a.example/cb"], "native_sso_group": \#(group)}]}"#
                        .utf8))
            return configuration
        }
        #expect(try load(#""vendor""#).clients.first?.nativeSSOGroup == "vendor")
        for bad in [#""""#, "7", #""has space""#] {
            #expect(throws: DevServerError.self) { _ = try load(bad) }
        }
    }
}
