import Foundation
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

@testable import SesameDevServer

/// The provider's side of RFC 8693 token exchange (catalog TX-01..TX-05).
@Suite struct TokenExchangeProviderTests {
    static let api = "https://api.example"

    static func exchange(_ oidc: OIDCTestServer, _ subject: String, _ extra: [(String, String)] = [])
        throws -> TestBrowser.Page
    {
        var form: [(String, String)] = [
            ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"), ("client_id", "sesame-cli"),
            ("subject_token", subject), ("subject_token_type", "urn:ietf:params:oauth:token-type:access_token"),
        ]
        let overridden = Set(extra.map(\.0))
        form = form.filter { !overridden.contains($0.0) } + extra.filter { !$0.1.isEmpty }
        return try oidc.token(form)
    }

    @Test("TX-01 TX-02 TX-05: an allowed audience gets a token for it alone, same user and grant, no refresh token")
    func exchange() throws {
        let oidc = try OIDCTestServer { $0.exchangeAudiences = [Self.api] }
        defer { oidc.stop() }
        let (tokens, _) = try oidc.signedInTokens(scope: "openid email offline_access")
        let subject = tokens["access_token"].string
        let answer = try Self.exchange(oidc, subject, [("audience", Self.api), ("scope", "openid")])
        let body = try #require(answer.json, "\(answer.body)")
        #expect(answer.status == 200)
        #expect(body["issued_token_type"] == "urn:ietf:params:oauth:token-type:access_token")
        #expect(body["token_type"] == "Bearer" && body["refresh_token"] == nil && body["expires_in"] != nil)
        let exchanged = try JWT.unverified(body["access_token"].string).claims
        let original = try JWT.unverified(subject).claims
        #expect(exchanged.audience == [Self.api] && exchanged.subject == original.subject)
        #expect(exchanged["scope"] == "openid" && exchanged["client_id"] == "sesame-cli" && exchanged["act"] == nil)
        // Not for the provider itself: UserInfo refuses it (its audience is the API).
        #expect(try oidc.userInfo(body["access_token"].string).status == 401)
        #expect(
            try oidc.browser.get("/.well-known/openid-configuration").json?["grant_types_supported"]?.arrayValue?
                .contains("urn:ietf:params:oauth:grant-type:token-exchange") == true)
    }

    @Test(
        "TX-01 TX-03: malformed requests, other targets, other clients' or dead tokens and wider scopes are refused",
        arguments: [
            ([("audience", "https://other.example")], "invalid_target"),
            ([("audience", api), ("resource", api)], "invalid_target"), ([], "invalid_target"),
            ([("audience", api), ("subject_token_type", "")], "invalid_request"),
            (
                // An ID token is Native SSO's subject, for clients of a Native SSO group only.
                [("audience", api), ("subject_token_type", "urn:ietf:params:oauth:token-type:id_token")],
                "unauthorized_client"
            ),
            (
                [("audience", api), ("requested_token_type", "urn:ietf:params:oauth:token-type:id_token")],
                "invalid_request"
            ),
            ([("audience", api), ("actor_token", "x")], "invalid_request"),
            ([("audience", api), ("scope", "openid admin")], "invalid_scope"),
            ([("audience", api), ("subject_token", "nonsense")], "invalid_grant"),
            (
                [
                    ("audience", api), ("actor_token", "x"),
                    ("actor_token_type", "urn:ietf:params:oauth:token-type:access_token"),
                ], "invalid_grant"
            ),
        ])
    func refusals(extra: [(String, String)], error: String) throws {
        let oidc = try OIDCTestServer { $0.exchangeAudiences = [Self.api] }
        defer { oidc.stop() }
        let (tokens, _) = try oidc.signedInTokens(scope: "openid email")
        let answer = try Self.exchange(oidc, tokens["access_token"].string, extra)
        #expect(answer.status == 400 && answer.error == error, "\(extra): \(answer.body)")
    }

    @Test("the subject token must be the client's own and alive; revoking the grant ends the exchanged token")
    func ownAndAlive() throws {
        let oidc = try OIDCTestServer {
            $0.exchangeAudiences = [Self.api]
            $0.clients = [RegisteredClient(id: "other", redirectURIs: ["https://other.example/cb"])]
        }
        defer { oidc.stop() }
        let (tokens, _) = try oidc.signedInTokens(scope: "openid offline_access")
        let asOther = try oidc.token([
            ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"), ("client_id", "other"),
            ("subject_token", tokens["access_token"].string),
            ("subject_token_type", "urn:ietf:params:oauth:token-type:access_token"), ("audience", Self.api),
        ])
        #expect(asOther.error == "invalid_grant")
        #expect(
            try oidc.browser.post(
                "/revoke", form: [("client_id", "sesame-cli"), ("token", tokens["refresh_token"].string)]
            ).status == 200)
        #expect(
            try Self.exchange(oidc, tokens["access_token"].string, [("audience", Self.api)]).error == "invalid_grant")
    }

    @Test("TX-04: delegation names the actor in act, and an actor's own act nested inside")
    func delegation() throws {
        let oidc = try OIDCTestServer { $0.exchangeAudiences = [Self.api] }
        defer { oidc.stop() }
        let (alice, _) = try oidc.signedInTokens(scope: "openid")
        let bobPKCE = OIDCTestServer.PKCE()
        let bobForm = try oidc.authorize(oidc.parameters(bobPKCE, scope: "openid"))
        let bobPage = try oidc.browser.post(
            "/authorize", form: bobForm.hiddenFields() + [("email", "bob@example.com"), ("password", "battery-staple")])
        let bobCode = try #require(bobPage.redirectParameters["code"])
        let bob = try #require(try oidc.exchange(bobCode, bobPKCE).json)
        let bobClaims = try JWT.unverified(bob["access_token"].string).claims
        let answer = try Self.exchange(
            oidc, alice["access_token"].string,
            [
                ("audience", Self.api), ("actor_token", bob["access_token"].string),
                ("actor_token_type", "urn:ietf:params:oauth:token-type:access_token"),
            ])
        let act = try JWT.unverified(try #require(answer.json)["access_token"].string).claims["act"]
        #expect(act?["sub"] == bobClaims["sub"] && act?["client_id"] == "sesame-cli" && act?["act"] == nil)
        // An actor that acts for someone else already: the chain is kept, the current actor outermost.
        let minted = try #require(
            try oidc.dev(
                "/_dev/token",
                [
                    "sub": bobClaims["sub"] ?? .null, "clientId": "sesame-cli",
                    "claims": ["gid": bobClaims["gid"] ?? .null, "act": ["sub": "carol"]],
                ]
            ).json)
        let chained = try Self.exchange(
            oidc, alice["access_token"].string,
            [
                ("audience", Self.api), ("actor_token", minted["access_token"].string),
                ("actor_token_type", "urn:ietf:params:oauth:token-type:access_token"),
            ])
        let outer = try JWT.unverified(try #require(chained.json)["access_token"].string).claims["act"]
        #expect(outer?["sub"] == bobClaims["sub"] && outer?["act"]?["sub"] == "carol")
    }

    @Test("DPoP: a proof binds the exchanged token; a bound subject token needs a proof by its key")
    func dpop() throws {
        let oidc = try OIDCTestServer { $0.exchangeAudiences = [Self.api] }
        defer { oidc.stop() }
        let key = try JWK.generate(for: .es256)
        func proof() throws -> String { try DPoPProviderTests.proof(oidc, key, "POST", "/token") }
        let pkce = OIDCTestServer.PKCE()
        let (code, _) = try oidc.code(pkce, scope: "openid")
        let bound = try #require(
            try oidc.browser.post(
                "/token",
                form: [
                    ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", OIDCTestServer.redirect),
                    ("client_id", "sesame-cli"), ("code_verifier", pkce.verifier),
                ], headers: [("DPoP", try proof())]
            ).json)
        #expect(bound["token_type"] == "DPoP")
        let withoutProof = try Self.exchange(oidc, bound["access_token"].string, [("audience", Self.api)])
        #expect(withoutProof.error == "invalid_grant")
        let form: [(String, String)] = [
            ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"), ("client_id", "sesame-cli"),
            ("subject_token", bound["access_token"].string),
            ("subject_token_type", "urn:ietf:params:oauth:token-type:access_token"), ("audience", Self.api),
        ]
        let answer = try #require(try oidc.browser.post("/token", form: form, headers: [("DPoP", try proof())]).json)
        #expect(answer["token_type"] == "DPoP")
        let claims = try JWT.unverified(answer["access_token"].string).claims
        #expect(claims["cnf"]?["jkt"] == .string(key.thumbprint))
        // A bound actor token without a proof by its key puts nobody into act.
        let (plain, _) = try oidc.signedInTokens(scope: "openid")
        let actor = try Self.exchange(
            oidc, plain["access_token"].string,
            [
                ("audience", Self.api), ("actor_token", bound["access_token"].string),
                ("actor_token_type", "urn:ietf:params:oauth:token-type:access_token"),
            ])
        #expect(actor.error == "invalid_grant")
    }

    @Test("an exchanged token never outlives its subject token")
    func lifetime() throws {
        let oidc = try OIDCTestServer {
            $0.exchangeAudiences = [Self.api]
            $0.accessTokenTTL = 300
        }
        defer { oidc.stop() }
        let (tokens, _) = try oidc.signedInTokens(scope: "openid")
        oidc.clock.advance(by: 200)
        let answer = try #require(try Self.exchange(oidc, tokens["access_token"].string, [("audience", Self.api)]).json)
        let subject = try JWT.unverified(tokens["access_token"].string).claims
        let exchanged = try JWT.unverified(answer["access_token"].string).claims
        #expect(exchanged.expiresAt == subject.expiresAt && answer["expires_in"] == 100)
    }
}
