import Foundation
import Testing

@testable import SesameJOSE

/// RFC 7519 §4.1 and OIDC Core §3.1.3.7: one test per rule, each failure a distinct code.
@Suite struct ClaimValidationTests {
    let now = Int64(referenceNow.timeIntervalSince1970)

    private func check(_ changes: [String: JOSEValue?], policy: ClaimValidationPolicy = ClaimValidationPolicy())
        -> JOSEError.Code?
    {
        var values = TestKeys.claims.values
        for (name, value) in changes { values[name] = value }
        do {
            try policy.validate(JWTClaims(values), now: referenceNow)
            return nil
        } catch {
            return (error as? JOSEError)?.code
        }
    }

    @Test("exp: accepted before expiry and within the leeway, refused after (OIDC Core §3.1.3.7 #9)")
    func expiry() {
        #expect(check([:]) == nil)
        #expect(check(["exp": .integer(now - 59)]) == nil)
        #expect(check(["exp": .integer(now - 60)]) == .expired)
        #expect(check(["exp": .integer(now - 360)]) == .expired)
        var noLeeway = ClaimValidationPolicy()
        noLeeway.leeway = 0
        #expect(check(["exp": .integer(now)], policy: noLeeway) == .expired)
        #expect(check(["exp": .number(Double(now) + 0.5)], policy: noLeeway) == nil)
    }

    @Test("exp is required by default; requiredClaims is configurable")
    func requiredClaims() {
        #expect(check(["exp": nil]) == .missingClaim)
        #expect(check(["exp": nil], policy: ClaimValidationPolicy(requiredClaims: [])) == nil)
        #expect(check(["sub": nil], policy: ClaimValidationPolicy(requiredClaims: ["exp", "sub"])) == .missingClaim)
    }

    @Test("nbf: refused while in the future beyond the leeway")
    func notBefore() {
        #expect(check(["nbf": .integer(now + 30)]) == nil)
        #expect(check(["nbf": .integer(now + 61)]) == .notYetValid)
    }

    @Test("iat: refused in the future beyond the leeway, and older than maxAge (OIDC Core §3.1.3.7 #10)")
    func issuedAt() {
        #expect(check(["iat": .integer(now + 61)]) == .issuedInFuture)
        var policy = ClaimValidationPolicy()
        policy.maxAge = 3600
        #expect(check(["iat": .integer(now - 3000)], policy: policy) == nil)
        #expect(check(["iat": .integer(now - 7 * 86400)], policy: policy) == .issuedTooLongAgo)
    }

    @Test("iss: exact string comparison (OIDC Core §3.1.3.7 #2)")
    func issuer() {
        let policy = ClaimValidationPolicy(issuer: "https://issuer.example")
        #expect(check([:], policy: policy) == nil)
        #expect(check(["iss": "https://issuer.example/"], policy: policy) == .issuerMismatch)
        #expect(check(["iss": "https://other.example"], policy: policy) == .issuerMismatch)
        #expect(check(["iss": nil], policy: policy) == .missingClaim)
    }

    @Test("aud: a string or an array containing the audience (OIDC Core §3.1.3.7 #3)")
    func audience() {
        let policy = ClaimValidationPolicy(audience: "my-app")
        #expect(check([:], policy: policy) == nil)
        #expect(check(["aud": ["my-app"]], policy: policy) == nil)
        #expect(check(["aud": "other"], policy: policy) == .audienceMismatch)
        #expect(check(["aud": nil], policy: policy) == .missingClaim)
        #expect(check(["aud": []], policy: policy) == .invalidClaimType)
        #expect(check(["aud": [1]], policy: policy) == .invalidClaimType)
    }

    @Test("azp: untrusted extra audiences need azp = the client; a wrong azp is refused (OIDC Core §3.1.3.7 #4-5)")
    func authorizedParty() {
        var policy = ClaimValidationPolicy(audience: "my-app")
        #expect(check(["aud": ["my-app", "intruder"]], policy: policy) == .authorizedPartyMismatch)
        #expect(check(["aud": ["my-app", "intruder"], "azp": "my-app"], policy: policy) == nil)
        #expect(check(["azp": "someone-else"], policy: policy) == .authorizedPartyMismatch)
        policy.additionalTrustedAudiences = ["api"]
        #expect(check(["aud": ["my-app", "api"]], policy: policy) == nil)
    }

    @Test("nonce: required and equal when expected (OIDC Core §3.1.3.7 #11)")
    func nonce() {
        let policy = ClaimValidationPolicy(nonce: "n-0S6_WzA2Mj")
        #expect(check(["nonce": "n-0S6_WzA2Mj"], policy: policy) == nil)
        #expect(check(["nonce": "n-0S6_WzA2Mk"], policy: policy) == .nonceMismatch)
        #expect(check([:], policy: policy) == .nonceMismatch)
    }

    @Test("Registered string claims must be strings")
    func stringClaimTypes() {
        for name in ["iss", "sub", "jti", "azp", "nonce"] {
            #expect(check([name: .integer(1)]) == .invalidClaimType, "\(name)")
        }
    }

    @Test("Typed accessors read the registered claims")
    func accessors() {
        let claims = JWTClaims([
            "iss": "i", "sub": "s", "aud": ["a", "b"], "exp": 10, "nbf": 5, "iat": 4.5, "jti": "j", "azp": "a",
            "nonce": "n",
        ])
        #expect(claims.issuer == "i" && claims.subject == "s" && claims.audience == ["a", "b"])
        #expect(
            claims.expiresAt == Date(timeIntervalSince1970: 10) && claims.issuedAt == Date(timeIntervalSince1970: 4.5))
        #expect(claims.notBefore == Date(timeIntervalSince1970: 5))
        #expect(claims.jwtID == "j" && claims.authorizedParty == "a" && claims.nonce == "n")
        #expect(JWTClaims(["aud": "x"]).audience == ["x"])
    }

    @Test("unverifiedClaims decodes without a key, and still rejects malformed input")
    func unverified() throws {
        let token = try JWT.sign(TestKeys.claims, key: TestKeys.ec, algorithm: .es256)
        #expect(try JWT.unverifiedClaims(of: token) == TestKeys.claims)
        #expect(try JWT.unverified(token).header.keyID == "ec-1")
        #expect(throws: JOSEError.self) { try JWT.unverifiedClaims(of: "a.b") }
        #expect(throws: JOSEError.self) { try JWT.unverifiedClaims(of: "eyJhbGciOiJub25lIn0.bm90IGpzb24.") }
    }
}
