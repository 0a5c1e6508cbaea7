import Foundation
import SesameJOSE
import Testing

@Suite struct DPoPProofTests {
    // swift-format-ignore: NeverForceUnwrap
    static let url = URL(string: "https://Server.Example.com/token?x=1#frag")!
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test(
        "DPOP-01 DPOP-02: typ dpop+jwt, an asymmetric alg, the public jwk only; jti, htm, htu without query, iat",
        arguments: [JWSAlgorithm.es256, .eddsa] + (TestKeys.rsaAvailable ? [.rs256] : []))
    func structure(_ algorithm: JWSAlgorithm) throws {
        let key = try JWK.generate(for: algorithm)
        let proof = try DPoPProof.make(key: key, method: "POST", url: Self.url, issuedAt: Self.now)
        let jws = try JWS.unverified(proof)
        #expect(jws.header.type == "dpop+jwt" && jws.header.algorithmName == algorithm.name && jws.header.keyID == nil)
        let jwk = try #require(jws.header.parameters["jwk"]?.objectValue)
        #expect(jwk["d"] == nil && jwk["p"] == nil && jwk["kty"] != nil)
        let claims = try #require(try JOSEValue.parse(jws.payload).objectValue)
        #expect(claims["htm"] == "POST" && claims["htu"] == "https://server.example.com/token")
        #expect(claims["iat"] == .integer(1_800_000_000) && claims["ath"] == nil && claims["nonce"] == nil)
        let jti = try #require(claims["jti"]?.stringValue)
        #expect(try Base64URL.decode(jti).count >= 12, "at least 96 random bits")
        let other = try JWS.unverified(try DPoPProof.make(key: key, method: "POST", url: Self.url, issuedAt: Self.now))
        #expect(try JOSEValue.parse(other.payload)["jti"] != claims["jti"], "a fresh jti per proof")
        let verified = try DPoPProofVerifier().verify(proof, method: "POST", url: Self.url, now: Self.now)
        #expect(verified.thumbprint == key.thumbprint && verified.jti == jti)
    }

    @Test("DPOP-03: ath is base64url(SHA-256(token)) — RFC 9449 §7.1's example — and is checked")
    func accessTokenHash() throws {
        #expect(
            DPoPProof.accessTokenHash("Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU")
                == "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo")
        let key = try JWK.generate(for: .es256)
        let proof = try DPoPProof.make(
            key: key, method: "GET", url: Self.url, accessToken: "token-1", nonce: "n-1", issuedAt: Self.now)
        let verifier = DPoPProofVerifier()
        _ = try verifier.verify(
            proof, method: "GET", url: Self.url, accessToken: "token-1", nonce: "n-1", now: Self.now)
        #expect(throws: JOSEError.self) {
            try verifier.verify(proof, method: "GET", url: Self.url, accessToken: "token-2", now: Self.now)
        }
        #expect(throws: JOSEError.self) {
            try verifier.verify(
                proof, method: "GET", url: Self.url, accessToken: "token-1", nonce: "n-2", now: Self.now)
        }
    }

    @Test(
        "the verifier refuses another method, URI, an old or future iat, a private or symmetric jwk, alg none, a wrong typ"
    )
    func refusals() throws {
        let key = try JWK.generate(for: .es256)
        let verifier = DPoPProofVerifier()
        let proof = try DPoPProof.make(key: key, method: "POST", url: Self.url, issuedAt: Self.now)
        for (method, url, now) in [
            ("GET", Self.url, Self.now), ("POST", URL(string: "https://server.example.com/other")!, Self.now),
            ("POST", Self.url, Self.now.addingTimeInterval(61)), ("POST", Self.url, Self.now.addingTimeInterval(-6)),
        ] {
            #expect(throws: JOSEError.self, "\(method) \(url) \(now)") {
                try verifier.verify(proof, method: method, url: url, now: now)
            }
        }
        func forged(header: JOSEObject, claims: JOSEObject, signer: JWK = key) throws -> String {
            try JWS.sign(payload: JOSEValue.object(claims).jsonBytes, key: signer, algorithm: .es256, header: header)
        }
        let claims: JOSEObject = [
            "jti": "j", "htm": "POST", "htu": "https://server.example.com/token", "iat": .integer(1_800_000_000),
        ]
        let publicJWK = try key.publicKey().with(keyID: nil, algorithm: nil).jsonValue()
        for bad in [
            try forged(header: ["typ": "JWT", "jwk": publicJWK], claims: claims),
            try forged(header: ["typ": "dpop+jwt", "jwk": key.jsonValue(includingPrivate: true)], claims: claims),
            try forged(header: ["typ": "dpop+jwt"], claims: claims),
            try forged(
                header: ["typ": "dpop+jwt", "jwk": try JWK.generate(for: .es256).publicKey().jsonValue()],
                claims: claims),
            "eyJhbGciOiJub25lIiwidHlwIjoiZHBvcCtqd3QifQ." + Base64URL.encode(JOSEValue.object(claims).jsonBytes) + ".",
        ] {
            #expect(throws: JOSEError.self) { try verifier.verify(bad, method: "POST", url: Self.url, now: Self.now) }
        }
        #expect(throws: JOSEError.self) {
            try DPoPProof.make(
                key: try JWK(symmetricKey: Array(repeating: 1, count: 32), algorithm: .hs256), method: "POST",
                url: Self.url,
                issuedAt: Self.now)
        }
    }
}

@Suite struct DPoPKeyHygieneTests {
    @Test("a proof carrying an RSA key over 4096 bits is refused before the key is imported (a CPU-cost attack)")
    func hugeRSAKey() throws {
        let modulus = Base64URL.encode([0xC1] + JOSECrypto.randomBytes(2047) + [0x01])  // 16384 bits, odd
        let header = #"{"alg":"RS256","typ":"dpop+jwt","jwk":{"kty":"RSA","e":"AQAB","n":"\#(modulus)"}}"#
        let claims = #"{"htm":"POST","htu":"https://server.example.com/token","iat":1800000000,"jti":"j"}"#
        let proof =
            Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8)) + "."
            + Base64URL.encode(JOSECrypto.randomBytes(64))
        var verifier = DPoPProofVerifier()
        verifier.maxProofSize = 16 * 1024
        do {
            _ = try verifier.verify(
                proof, method: "POST", url: try #require(URL(string: "https://server.example.com/token")),
                now: Date(timeIntervalSince1970: 1_800_000_000))
            Issue.record("a 16384-bit proof key was accepted")
        } catch let error as JOSEError {
            #expect(error.code == .weakKey)
        }
    }

    @Test(
        "a proof whose jwk carries any private member (p, q without d) is refused; dump() of a key shows no material",
        .needsRSA)
    func privateMembers() throws {
        let key = try JWK.generate(for: .rs256)
        var jwk = try #require(try key.publicKey().with(keyID: nil, algorithm: nil).jsonValue().objectValue)
        jwk["p"] = "AQAB"
        let claims: JOSEObject = [
            "jti": "j", "htm": "POST", "htu": "https://server.example.com/token", "iat": .integer(1_800_000_000),
        ]
        let proof = try JWS.sign(
            payload: JOSEValue.object(claims).jsonBytes, key: key.with(keyID: nil, algorithm: .rs256),
            algorithm: .rs256,
            header: ["typ": "dpop+jwt", "jwk": .object(jwk)])
        #expect(throws: JOSEError.self) {
            try DPoPProofVerifier().verify(
                proof, method: "POST", url: try #require(URL(string: "https://server.example.com/token")),
                now: Date(timeIntervalSince1970: 1_800_000_000))
        }
        var dumped = ""
        dump(try JWK.generate(for: .es256), to: &dumped)
        #expect(!dumped.contains("components") && !dumped.contains("backing") && dumped.contains("isPrivate"))
    }
}
