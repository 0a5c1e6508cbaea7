import Foundation
import SesameJOSE
import Testing

/// Keeps the README's Swift example compiling and true.
@Suite struct ReadmeExampleTests {
    @Test("README: verifying a token in Swift")
    func readmeExample() throws {
        let signingKey = try JWK.generate(for: .es256)
        let jwksDocument = try JWKSet(keys: [try signingKey.publicKey()]).jsonValue.jsonString
        let expectedNonce = "n-123"
        let idToken = try JWT.sign(
            JWTClaims([
                "iss": "https://id.example", "aud": "my-app", "sub": "alice", "nonce": "n-123",
                "exp": .integer(Int64(Date().timeIntervalSince1970) + 300),
            ]),
            key: signingKey,
            algorithm: .es256
        )

        // README, verbatim:
        let keys = try JWKSet(json: jwksDocument)  // the issuer's jwks_uri, fetched by you
        let verifier = JWTVerifier(
            keys: keys,
            policy: ClaimValidationPolicy(issuer: "https://id.example", audience: "my-app", nonce: expectedNonce))
        let jwt = try verifier.verify(idToken, now: Date())  // throws JOSEError with a stable code
        print(jwt.claims.subject ?? "?", jwt.claims.expiresAt ?? "no exp")

        // For display only, never for a decision:
        let claims = try JWT.unverifiedClaims(of: idToken)

        #expect(jwt.claims.subject == "alice")
        #expect(claims == jwt.claims)
    }
}
