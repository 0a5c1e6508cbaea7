import Foundation
import Testing

@testable import SesameJOSE

/// SECURITY-CATALOG.md items that need a vector set of their own (VEC-08, VEC-11, VEC-12) or a named slice of
/// the Wycheproof files (ATK-12, ATK-13).
@Suite struct CatalogVectorTests {
    @Test("VEC-08: RFC 7636 App. B — BASE64URL(SHA256(ASCII(code_verifier))), the primitive PKCE S256 uses")
    func pkceS256Primitive() {
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
        #expect(
            Base64URL.encode(JOSECrypto.sha256(Array(verifier.utf8))) == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
    }

    /// RFC 9449 §4.1 Figure 3 (the proof key) and §5 Figure 4 (the token-request proof), §6.1 (its thumbprint).
    static let dpopProof =
        "eyJ0eXAiOiJkcG9wK2p3dCIsImFsZyI6IkVTMjU2IiwiandrIjp7Imt0eSI6IkVDIiwieCI6Imw4dEZyaHgtMzR0VjNoUklDUkRZOXpDa0RscEJoRjQyVVFVZldWQVdCRnMiLCJ5IjoiOVZFNGpmX09rX282NHpiVFRsY3VOSmFqSG10NnY5VERWclUwQ2R2R1JEQSIsImNydiI6IlAtMjU2In19"
        + ".eyJqdGkiOiItQndDM0VTYzZhY2MybFRjIiwiaHRtIjoiUE9TVCIsImh0dSI6Imh0dHBzOi8vc2VydmVyLmV4YW1wbGUuY29tL3Rva2VuIiwiaWF0IjoxNTYyMjYyNjE2fQ"
        + ".2-GxA6T8lP4vfrg8v-FdWP0A0zdrj8igiMLvqRMUvwnQg4PtFLbdLXiOSsX0x7NVY-FNyJK70nfbV37xRZT3Lg"

    @Test("VEC-11: the RFC 9449 token-request proof verifies with its embedded key, whose thumbprint is the jkt")
    func rfc9449Proof() throws {
        // Only a DPoP proof is verified with the key it carries (ATK-04 forbids this for every other token).
        let unverified = try JWS.unverified(Self.dpopProof)
        #expect(unverified.header.type == "dpop+jwt" && unverified.header.algorithm == .es256)
        let embedded = try #require(unverified.header.parameters["jwk"])
        let key = try JWK(value: embedded)
        #expect(!key.isPrivate)
        #expect(key.thumbprint == "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I")
        let verified = try JWS.verify(Self.dpopProof, keys: try JWKSet(keys: [key]), allowedAlgorithms: [.es256])
        let claims = try JOSEValue.parse(verified.payload)
        #expect(claims["htm"] == "POST" && claims["htu"] == "https://server.example.com/token")
        #expect(claims["iat"] == .integer(1_562_262_616) && claims["jti"] == "-BwC3ESc6acc2lTc")
        // RFC 9449 §7.1: ath of the Figure 6 access token.
        let accessToken = "Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU"
        #expect(
            Base64URL.encode(JOSECrypto.sha256(Array(accessToken.utf8)))
                == "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo")
    }

    @Test("VEC-12 / ATK-07: RFC 7797 §4.1 verifies; §4.2 (b64:false, attached and detached) is rejected")
    func rfc7797() throws {
        let k = "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow"
        let key = try JWK(json: #"{"kty":"oct","k":"\#(k)"}"#, allowSymmetric: true)
        let keys = try JWKSet(keys: [key])
        let normal = "eyJhbGciOiJIUzI1NiJ9.JC4wMg.5mvfOroL-g7HyqJoozehmsaqmvTYGEq5jTI1gVvoEoQ"
        #expect(try JWS.verify(normal, keys: keys, allowedAlgorithms: [.hs256]).payload == Data("$.02".utf8))
        let header = "eyJhbGciOiJIUzI1NiIsImI2NCI6ZmFsc2UsImNyaXQiOlsiYjY0Il19"
        let signature = "A5dxf2s96_n5FLueVuW1Z_vh161FwXZC4YLPff6dmDY"
        for token in ["\(header).$.02.\(signature)", "\(header)..\(signature)"] {
            #expect(throws: JOSEError.self) { try JWS.verify(token, keys: keys, allowedAlgorithms: [.hs256]) }
        }
    }

    @Test(
        "ATK-12: PSS signatures with a changed salt length or other mutations are rejected (Wycheproof JWS#272-319)",
        .enabled(if: TestVectors.wycheproofAvailable, "Wycheproof vectors are not available")
    )
    func pssParameterDrift() throws {
        let document = try TestVectors.wycheproof("json_web_signature_test.json")
        var saltChanged = 0
        for group in try #require(document["testGroups"] as? [[String: Any]]) {
            for test in try #require(group["tests"] as? [[String: Any]]) {
                guard let id = test["tcId"] as? Int, (272...319).contains(id), test["result"] as? String == "invalid"
                else { continue }
                if test["comment"] as? String == "SaltLenChanged" { saltChanged += 1 }
                let token = try #require(test["jws"] as? String)
                #expect(
                    !WycheproofTests.verifies(token, keyObject: group["public"] ?? group["private"] as Any),
                    "tcId \(id)")
            }
        }
        #expect(saltChanged == 6)
    }

    @Test(
        "ATK-13: Ed25519 malleable (S ≥ L), non-canonical, truncated and padded signatures are rejected",
        .enabled(if: TestVectors.wycheproofAvailable, "Wycheproof vectors are not available")
    )
    func ed25519EdgeCases() throws {
        let document = try TestVectors.wycheproof("ed25519_test.json")
        let flags: Set<String> = [
            "SignatureMalleability", "InvalidEncoding", "TruncatedSignature", "SignatureWithGarbage",
            "CompressedSignature",
        ]
        var checked = 0
        for group in try #require(document["testGroups"] as? [[String: Any]]) {
            let key = try WycheproofTests.groupKey(group)
            for test in try #require(group["tests"] as? [[String: Any]]) {
                guard let testFlags = test["flags"] as? [String], !flags.isDisjoint(with: testFlags) else { continue }
                checked += 1
                let accepted = key.isValidSignature(
                    [UInt8](hex: test["sig"] as? String ?? ""), over: [UInt8](hex: test["msg"] as? String ?? ""),
                    algorithm: .eddsa)
                #expect(!accepted, "tcId \(test["tcId"] ?? "?")")
            }
        }
        #expect(checked >= 40)
    }
}

@Suite struct PBKDF2Tests {
    @Test("RFC 7914 §11: PBKDF2-HMAC-SHA256 (P=passwd, S=salt, c=1, dkLen=64)")
    func rfc7914Vector() {
        let derived = JOSECrypto.pbkdf2SHA256(
            password: Array("passwd".utf8), salt: Array("salt".utf8), iterations: 1, length: 64)
        #expect(
            derived
                == [UInt8](
                    hex:
                        "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc49ca9cccf179b645991664b39d77ef317c71b845b1e30bd509112041d3a19783"
                ))
    }
}
