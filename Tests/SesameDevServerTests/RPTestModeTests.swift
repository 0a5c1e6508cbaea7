import Foundation
import SesameDevServer
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

/// Each RP test mode must produce exactly its defect and nothing else: a strict client's checks, run over a whole
/// flow (discovery, authorization response, code exchange, refresh, UserInfo), name what they observe.
@Suite struct RPTestModeTests {
    static let expected: [RPTestMode?: Set<String>] = [
        nil: [],
        .invalidIssuer: ["iss"], .invalidAudience: ["aud"], .missingSubject: ["sub-missing"],
        .missingIssuedAt: ["iat-missing"], .invalidNonce: ["nonce"],
        .invalidSignatureRS256: ["signature", "alg-RS256"],
        .invalidSignatureES256: ["signature"], .signatureNone: ["alg-none"], .kidAbsentSingleJWKS: ["kid-missing"],
        .kidAbsentMultipleJWKS: ["kid-missing", "jwks-ambiguous"], .userInfoInvalidSubject: ["userinfo-sub"],
        .discoveryIssuerMismatch: ["discovery-issuer"], .signingKeyRotation: ["kid-rotated-later"],
        .signingKeyRotationJustBeforeSigning: ["kid-rotated-first"],
        .refreshTokenInvalidSubject: ["refresh-sub-changed"], .refreshTokenInvalidIssuer: ["refresh-iss-changed"],
        .invalidAtHash: ["at-hash-wrong"], .missingAtHash: ["at-hash-missing"],
        .invalidAuthorizationResponseIssuer: ["response-iss-wrong"],
        .removedAuthorizationResponseIssuer: ["response-iss-missing"], .invalidState: ["state-wrong"],
        .happyPathNoDPoPNonce: [],
        // Sesame's step-up modes: a weaker acr shows only after a step-up (StepUpProviderTests), an old auth_time
        // in every ID token.
        .stepUpWeakerACR: [], .stepUpOldAuthTime: ["auth-time-old"],
        // Sesame's Native SSO modes show only with device_sso and in the exchange (NativeSSOClientTests).
        .nativeSSOMissingDeviceSecretHash: [], .nativeSSOOtherSubject: [],
        // Sesame's token exchange and client credentials modes show only in those grants (OIDCClientTests).
        .tokenExchangeWrongIssuedType: [], .clientCredentialsRefreshToken: [],
    ]

    @Test("every mode produces exactly its defect", arguments: [nil] + RPTestMode.allCases)
    func exactlyItsDefect(_ mode: RPTestMode?) throws {
        let oidc = try OIDCTestServer { $0.rpTest = mode }
        defer { oidc.stop() }
        #expect(try observedDefects(oidc) == Self.expected[mode], "\(mode?.rawValue ?? "no mode")")
    }

    @Test("GET /_dev/rp-tests lists every mode with its expectation; POST /_dev/rp-test switches")
    func switching() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let list = try #require(try oidc.browser.get("/_dev/rp-tests").json)
        let names = list["tests"]?.arrayValue?.compactMap { $0["name"]?.stringValue } ?? []
        #expect(names == RPTestMode.allCases.map(\.rawValue) && names.count == 28)
        #expect(
            list["tests"]?.arrayValue?.allSatisfy {
                ["accept", "reject", "reject or try every key"].contains($0["expected"].string)
            } == true)
        #expect(list["current"] == .null)
        #expect(try oidc.dev("/_dev/rp-test", ["test": "oidcc-client-test-nonce-invalid"]).status == 200)
        #expect(try observedDefects(oidc) == ["nonce"])
        #expect(try oidc.dev("/_dev/rp-test", ["test": .null]).status == 200)
        #expect(try observedDefects(oidc) == [])
        #expect(try oidc.dev("/_dev/rp-test", ["test": "no-such-test"]).status == 400)
        let text = try oidc.browser.request(
            "POST", "/_dev/rp-test", headers: [("Content-Type", "text/plain")], body: Array("{}".utf8))
        #expect(text.status == 415)
    }

    /// Runs a flow as a strict client and names every deviation it sees.
    func observedDefects(_ oidc: OIDCTestServer) throws -> Set<String> {
        var defects: Set<String> = []
        let discovery = try #require(try oidc.browser.get("/.well-known/openid-configuration").json)
        if discovery["issuer"] != .string(oidc.issuerText) { defects.insert("discovery-issuer") }
        let cachedKids = Set(try oidc.jwks().keys.compactMap(\.keyID))

        let pkce = OIDCTestServer.PKCE()
        let pairs = oidc.parameters(pkce)
        let sent = Dictionary(uniqueKeysWithValues: pairs)
        let first = try oidc.authorize(pairs)
        let redirect =
            first.status == 302
            ? first
            : try oidc.browser.post(
                "/authorize",
                form: first.hiddenFields() + [("email", OIDCTestServer.email), ("password", OIDCTestServer.password)])
        let response = redirect.redirectParameters
        switch response["iss"] {
        case nil: defects.insert("response-iss-missing")
        case let iss? where iss != oidc.issuerText: defects.insert("response-iss-wrong")
        default: break
        }
        if response["state"] != sent["state"] { defects.insert("state-wrong") }
        let code = try #require(response["code"])
        let tokens = try #require(try oidc.exchange(code, pkce).json)
        let idToken = tokens["id_token"].string
        let access = tokens["access_token"].string
        let keys = try oidc.jwks()

        func check(_ token: String) throws -> (header: JWSHeader, claims: JWTClaims) {
            let jwt = try JWT.unverified(token)
            if jwt.header.algorithmName == "none" {
                defects.insert("alg-none")
            } else {
                if jwt.header.algorithmName != "ES256" { defects.insert("alg-\(jwt.header.algorithmName)") }
                let candidates = keys.keys.filter { key in
                    jwt.header.keyID.map { key.keyID == $0 } ?? (key.algorithm?.name == jwt.header.algorithmName)
                }
                if jwt.header.keyID == nil, candidates.count > 1 { defects.insert("jwks-ambiguous") }
                let verifies = candidates.contains { key in
                    (try? JWS.verify(token, keys: JWKSet(keys: [key]))) != nil
                }
                if !verifies { defects.insert("signature") }
            }
            return (jwt.header, jwt.claims)
        }
        let (header, claims) = try check(idToken)
        if header.keyID == nil, header.algorithmName != "none" { defects.insert("kid-missing") }
        if let kid = header.keyID, !cachedKids.contains(kid) { defects.insert("kid-rotated-first") }
        if claims.issuer != oidc.issuerText { defects.insert("iss") }
        if claims.audience != ["sesame-cli"] || claims.authorizedParty != "sesame-cli" { defects.insert("aud") }
        if claims.subject == nil { defects.insert("sub-missing") }
        if claims.issuedAt == nil { defects.insert("iat-missing") }
        if let authTime = claims["auth_time"]?.doubleValue, oidc.clock.now.timeIntervalSince1970 - authTime > 86400 {
            defects.insert("auth-time-old")
        }
        if claims.nonce != sent["nonce"] { defects.insert("nonce") }
        switch claims["at_hash"]?.stringValue {
        case nil: defects.insert("at-hash-missing")
        case let hash? where hash != expectedAtHash(access): defects.insert("at-hash-wrong")
        default: break
        }

        let refreshed = try #require(try oidc.refresh(tokens["refresh_token"].string).json)
        let (refreshedHeader, refreshedClaims) = try check(refreshed["id_token"].string)
        if refreshedHeader.keyID != header.keyID { defects.insert("kid-rotated-later") }
        if refreshedClaims.subject != claims.subject { defects.insert("refresh-sub-changed") }
        if refreshedClaims.issuer != claims.issuer { defects.insert("refresh-iss-changed") }

        let info = try #require(try oidc.userInfo(refreshed["access_token"].string).json)
        if let subject = claims.subject, info["sub"] != .string(subject) { defects.insert("userinfo-sub") }
        return defects
    }
}
