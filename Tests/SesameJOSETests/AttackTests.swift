import Foundation
import Testing

@testable import SesameJOSE

/// SECURITY-CATALOG.md §2: the JOSE attacks a verifier must resist, one test (or more) per ID.
@Suite struct AttackTests {
    let keys: JWKSet
    let verifier: JWTVerifier
    let claimsJSON = TestKeys.claims.jsonValue.jsonString

    init() throws {
        keys = try JWKSet(keys: TestKeys.signers.map { try $0.key.publicKey() })
        verifier = JWTVerifier(keys: keys)
    }

    @Test("Control: a well-formed token from each key verifies")
    func control() throws {
        for (key, alg) in TestKeys.signers {
            let token = try JWT.sign(TestKeys.claims, key: key, algorithm: alg)
            #expect(try verifier.verify(token, now: referenceNow).claims.subject == "alice")
        }
    }

    @Test(
        "ATK-01: alg none in every spelling, with or without a signature, is rejected",
        arguments: ["none", "None", "NONE", "nOnE", "noNE"])
    func algNone(spelling: String) {
        for signature in [[], [UInt8](repeating: 7, count: 32)] {
            let token = TokenForge.unsigned(
                header: #"{"alg":"\#(spelling)"}"#, payload: claimsJSON, signature: signature)
            expectJOSEError(.unsupportedAlgorithm) { _ = try verifier.verify(token, now: referenceNow) }
        }
    }

    @Test("ATK-02: HS256 keyed with the RSA public key's DER, PEM, JWK or modulus is rejected", .needsRSA)
    func hmacWithPublicKeyBytes() throws {
        let publicKey = try TestKeys.rsa.publicKey()
        let pem = try publicKey.pemRepresentation
        let der = try Base64URL.decode(
            pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        )
        guard case .rsa(let n, _, _) = publicKey.components else { throw JOSEError(.invalidKey, "not RSA") }
        for secret in [Array(der), Array(pem.utf8), Array(publicKey.jwkRepresentation.utf8), n] {
            let hmacKey = try JWK(symmetricKey: secret, algorithm: .hs256)
            let token = try TokenForge.signed(
                header: #"{"alg":"HS256","kid":"rsa-1"}"#, payload: claimsJSON, key: hmacKey, algorithm: .hs256)
            expectJOSEError(.algorithmNotAllowed) { _ = try verifier.verify(token, now: referenceNow) }
            // Even a caller who allows HS256 gets no key: an RSA key never becomes an HMAC secret.
            var permissive = verifier
            permissive.allowedAlgorithms = Set(JWSAlgorithm.all)
            expectJOSEError(.keyNotFound) { _ = try permissive.verify(token, now: referenceNow) }
        }
    }

    @Test(
        "ATK-03: the key decides — a header alg that does not fit the key's type, curve, alg, use or key_ops is refused"
    )
    func keyAlgorithmMismatch() throws {
        let ecToken = try JWT.sign(TestKeys.claims, key: TestKeys.ec, algorithm: .es256)
        // RS256 header on an EC-signed token: no RSA key has kid ec-1.
        let relabelled = ecToken.replacingOccurrences(
            of: ecToken.split(separator: ".")[0], with: TokenForge.part(#"{"alg":"RS256","kid":"ec-1"}"#))
        expectJOSEError(.keyNotFound) { _ = try verifier.verify(relabelled, now: referenceNow) }

        // A key pinned to RS256 refuses PS256.
        if TestKeys.rsaAvailable {
            let pinned = try JWKSet(keys: [try TestKeys.rsa.publicKey().with(keyID: "rsa-1", algorithm: .rs256)])
            let psToken = try JWT.sign(
                TestKeys.claims, key: TestKeys.rsa.with(keyID: "rsa-1", algorithm: nil), algorithm: .ps256)
            expectJOSEError(.keyNotFound) { _ = try JWTVerifier(keys: pinned).verify(psToken, now: referenceNow) }
        }

        // ES512 header against a P-256 key; ES256 against a P-384 key.
        let p384 = try JWK.generate(for: .es384, keyID: "p384")
        let es384Token = try JWT.sign(TestKeys.claims, key: p384, algorithm: .es384)
        let forgedES256 = es384Token.replacingOccurrences(
            of: es384Token.split(separator: ".")[0], with: TokenForge.part(#"{"alg":"ES256","kid":"p384"}"#))
        let p384Set = try JWKSet(keys: [try p384.publicKey().with(keyID: "p384", algorithm: nil)])
        expectJOSEError(.keyNotFound) { _ = try JWTVerifier(keys: p384Set).verify(forgedES256, now: referenceNow) }

        // use: enc and key_ops: [encrypt] keys never verify.
        for extra in [#""use":"enc""#, #""key_ops":["encrypt"]"#] {
            var members = try #require(try TestKeys.ec.publicKey().jsonValue().objectValue)
            members["alg"] = nil
            let json = JOSEValue.object(members).jsonString.dropLast() + "," + extra + "}"
            let restricted = try JWKSet(keys: [try JWK(json: String(json))])
            let token = try JWT.sign(TestKeys.claims, key: TestKeys.ec, algorithm: .es256)
            expectJOSEError(.keyNotFound) { _ = try JWTVerifier(keys: restricted).verify(token, now: referenceNow) }
        }
    }

    @Test("ATK-04: jwk, jku, x5u and x5c headers never supply the key")
    func attackerSuppliedKey() throws {
        let attacker = try JWK.generate(for: .es256)
        let attackerJWK = try attacker.publicKey().jwkRepresentation
        for extra in [
            #""jwk":\#(attackerJWK)"#, #""jku":"https://attacker.example/jwks""#,
            #""x5u":"https://attacker.example/cert""#, #""x5c":["MIIB"]"#,
        ] {
            let header = #"{"alg":"ES256","kid":"ec-1",\#(extra)}"#
            let forged = try TokenForge.signed(header: header, payload: claimsJSON, key: attacker, algorithm: .es256)
            expectJOSEError(.signatureInvalid) { _ = try verifier.verify(forged, now: referenceNow) }
            // The same header on a token the real key signed still verifies: the extras are simply ignored.
            let genuine = try TokenForge.signed(
                header: header, payload: claimsJSON, key: TestKeys.ec, algorithm: .es256)
            #expect(try verifier.verify(genuine, now: referenceNow).claims.subject == "alice")
        }
    }

    @Test("ATK-05: kid is an opaque string; duplicates are ambiguous; decoys of another type are skipped")
    func kidAbuse() throws {
        for kid in ["../../dev/null", "' OR '1'='1", #"ec-1\u0000"#, "EC-1", ""] {
            let token = try TokenForge.signed(
                header: #"{"alg":"ES256","kid":"\#(kid)"}"#, payload: claimsJSON, key: TestKeys.ec, algorithm: .es256)
            expectJOSEError(.keyNotFound) { _ = try verifier.verify(token, now: referenceNow) }
        }
        let twin = try JWK.generate(for: .es256, keyID: "ec-1")
        let duplicated = try TestKeys.publicSet(TestKeys.ec, twin)
        let token = try JWT.sign(TestKeys.claims, key: TestKeys.ec, algorithm: .es256)
        expectJOSEError(.ambiguousKey) { _ = try JWTVerifier(keys: duplicated).verify(token, now: referenceNow) }

        let decoy = try JWK.generate(for: TestKeys.rsaAvailable ? .rs256 : .eddsa, keyID: "ec-1")
        let withDecoy = try TestKeys.publicSet(decoy, TestKeys.ec)
        #expect(try JWTVerifier(keys: withDecoy).verify(token, now: referenceNow).claims.subject == "alice")
    }

    @Test(
        "ATK-06: crit is refused in every form",
        arguments: [#""crit":["exp"],"exp":1"#, #""crit":[]"#, #""crit":["alg"]"#, #""crit":"b64""#])
    func criticalHeaders(extra: String) throws {
        let token = try TokenForge.signed(
            header: #"{"alg":"ES256","kid":"ec-1",\#(extra)}"#, payload: claimsJSON, key: TestKeys.ec, algorithm: .es256
        )
        expectJOSEError(.unsupportedCriticalHeader) { _ = try verifier.verify(token, now: referenceNow) }
    }

    @Test("ATK-07 / VEC-12: b64:false is refused, with or without crit")
    func unencodedPayload() throws {
        for header in [#"{"alg":"ES256","kid":"ec-1","b64":false}"#] {
            let token = try TokenForge.signed(header: header, payload: claimsJSON, key: TestKeys.ec, algorithm: .es256)
            expectJOSEError(.unencodedPayload) { _ = try verifier.verify(token, now: referenceNow) }
        }
        let withCrit = try TokenForge.signed(
            header: #"{"alg":"ES256","kid":"ec-1","b64":false,"crit":["b64"]}"#, payload: claimsJSON, key: TestKeys.ec,
            algorithm: .es256)
        #expect(throws: JOSEError.self) { try verifier.verify(withCrit, now: referenceNow) }
    }

    @Test("ATK-08: ECDSA r or s of 0 or ≥ n (CVE-2022-21449), and every wrong length, are rejected")
    func psychicSignatures() throws {
        let n = [UInt8](hex: "ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551")
        var nPlusOne = n
        nPlusOne[31] += 1
        let zero = [UInt8](repeating: 0, count: 32)
        let one = [UInt8](repeating: 0, count: 31) + [1]
        let token = try JWT.sign(TestKeys.claims, key: TestKeys.ec, algorithm: .es256)
        let parts = token.split(separator: ".").map(String.init)
        let real = Array(try Base64URL.decode(parts[2]))
        let bad: [[UInt8]] = [
            zero + zero, zero + one, one + zero, n + one, one + n, nPlusOne + one, n + n,
            Array(real.dropLast()), real + [0], [0] + real, Array(real.prefix(32)), [], real + real,
        ]
        for signature in bad {
            let forged = "\(parts[0]).\(parts[1]).\(Base64URL.encode(signature))"
            expectJOSEError(.signatureInvalid) { _ = try verifier.verify(forged, now: referenceNow) }
        }
    }

    @Test("ATK-10: invalid EC public keys are refused at import")
    func invalidECKeys() throws {
        guard case .ec(_, let x, let y, _) = try TestKeys.ec.publicKey().components else { return }
        var offCurve = y
        offCurve[31] ^= 1
        let cases: [JWK.Components] = [
            .ec(curve: .p256, x: x, y: offCurve, d: nil),
            .ec(curve: .p256, x: Array(x.dropFirst()), y: y, d: nil),
            .ec(curve: .p256, x: [0] + x, y: [0] + y, d: nil),
            .ec(curve: .p256, x: [UInt8](repeating: 0, count: 32), y: [UInt8](repeating: 0, count: 32), d: nil),
            .ec(curve: .p384, x: x, y: y, d: nil),
        ]
        for components in cases {
            expectJOSEError(.invalidKey) { _ = try JWK(components: components) }
        }
    }

    @Test("ATK-11: RSA keys under 2048 bits, with e = 1, an even e, or the ROCA fingerprint are refused", .needsRSA)
    func weakRSAKeys() throws {
        guard case .rsa(let n, _, _) = TestKeys.rsa.components else { return }
        expectJOSEError(.weakKey) {
            _ = try JWK(components: .rsa(n: Array(n.prefix(128)), e: [1, 0, 1], private: nil))
        }
        expectJOSEError(.weakKey) { _ = try JWK(components: .rsa(n: n, e: [1], private: nil)) }
        expectJOSEError(.weakKey) { _ = try JWK(components: .rsa(n: n, e: [1, 0, 0], private: nil)) }
        #expect(ROCA.isVulnerable(modulus: n) == false)
    }

    @Test("ATK-14: oversize tokens, deep headers and huge key sets give typed errors in bounded time")
    func resourceLimits() throws {
        let big = String(repeating: "a", count: 64 * 1024 + 1)
        expectJOSEError(.tooLarge) { _ = try verifier.verify(big, now: referenceNow) }
        expectJOSEError(.tooLarge) {
            _ = try verifier.verify(String(repeating: "a", count: 1 << 20), now: referenceNow)
        }
        let deepHeader = String(repeating: "[", count: 1000) + String(repeating: "]", count: 1000)
        let deep = TokenForge.unsigned(header: deepHeader, payload: claimsJSON)
        expectJOSEError(.malformedJSON) { _ = try verifier.verify(deep, now: referenceNow) }
        let oneKey = try TestKeys.ec.publicKey().jwkRepresentation
        let hugeSet = #"{"keys":["# + Array(repeating: oneKey, count: 10_000).joined(separator: ",") + "]}"
        expectJOSEError(.tooLarge) { _ = try JWKSet(json: hugeSet) }
        let manyKeys = #"{"keys":["# + Array(repeating: oneKey, count: 101).joined(separator: ",") + "]}"
        expectJOSEError(.tooLarge) { _ = try JWKSet(json: manyKeys) }
    }

    @Test("ATK-15: duplicate members in the header or the claims are refused")
    func duplicateMembers() throws {
        let dupHeader = try TokenForge.signed(
            header: #"{"alg":"ES256","kid":"ec-1","alg":"ES256"}"#, payload: claimsJSON, key: TestKeys.ec,
            algorithm: .es256)
        expectJOSEError(.duplicateMember) { _ = try verifier.verify(dupHeader, now: referenceNow) }
        for payload in [
            String(claimsJSON.dropLast()) + #","sub":"admin"}"#,
            String(claimsJSON.dropLast()) + #","cnf":{"jkt":"a","jkt":"b"}}"#,
        ] {
            let token = try TokenForge.signed(
                header: #"{"alg":"ES256","kid":"ec-1"}"#, payload: payload, key: TestKeys.ec, algorithm: .es256)
            expectJOSEError(.duplicateMember) { _ = try verifier.verify(token, now: referenceNow) }
        }
    }

    @Test("ATK-16: a JWE (five parts or an enc header) and nested cty JWT tokens are refused")
    func nestedAndEncrypted() throws {
        expectJOSEError(.malformedToken) { _ = try verifier.verify("a.b.c.d.e", now: referenceNow) }
        let withEnc = try TokenForge.signed(
            header: #"{"alg":"ES256","kid":"ec-1","enc":"A256GCM"}"#, payload: claimsJSON, key: TestKeys.ec,
            algorithm: .es256)
        expectJOSEError(.malformedToken) { _ = try verifier.verify(withEnc, now: referenceNow) }
        let nested = try TokenForge.signed(
            header: #"{"alg":"ES256","kid":"ec-1","cty":"JWT"}"#, payload: claimsJSON, key: TestKeys.ec,
            algorithm: .es256)
        expectJOSEError(.invalidHeader) { _ = try verifier.verify(nested, now: referenceNow) }
    }

    @Test(
        "ATK-17: anything but three base64url parts is refused",
        arguments: ["", "abc", "a.b", ".b.c", "a.b.c.d", #"{"payload":"x","signatures":[]}"#, "a b.c.d"])
    func compactShape(token: String) {
        #expect(throws: JOSEError.self) { try verifier.verify(token, now: referenceNow) }
    }

    @Test("ATK-18: a padded or re-encoded signature is refused")
    func laxBase64InToken() throws {
        let token = try JWT.sign(TestKeys.claims, key: TestKeys.ec, algorithm: .es256)
        expectJOSEError(.signatureInvalid) { _ = try verifier.verify(token + "==", now: referenceNow) }
        let header = token.split(separator: ".")[0]
        expectJOSEError(.malformedBase64URL) {
            _ = try verifier.verify(token.replacingOccurrences(of: header, with: header + "="), now: referenceNow)
        }
    }

    @Test(
        "ATK-19: a token typed as another kind (at+jwt, dpop+jwt, logout+jwt) is refused by default",
        arguments: ["at+jwt", "dpop+jwt", "logout+jwt", "secevent+jwt", "application/at+jwt"])
    func tokenTypeConfusion(type: String) throws {
        let token = try JWT.sign(TestKeys.claims, key: TestKeys.ec, algorithm: .es256, type: type)
        expectJOSEError(.invalidHeader) { _ = try verifier.verify(token, now: referenceNow) }
        var accessTokenVerifier = verifier
        accessTokenVerifier.policy.acceptedTypes = ["at+jwt"]
        if type.hasSuffix("at+jwt") {
            #expect(throws: Never.self) { try accessTokenVerifier.verify(token, now: referenceNow) }
        }
        for accepted in ["JWT", "jwt", "application/jwt"] {
            let plain = try JWT.sign(TestKeys.claims, key: TestKeys.ec, algorithm: .es256, type: accepted)
            #expect(throws: Never.self) { try verifier.verify(plain, now: referenceNow) }
        }
    }

    @Test("ATK-20: exp in milliseconds, as a string or as an object, and an iss with a trailing slash are refused")
    func claimTricks() throws {
        let now = Int64(referenceNow.timeIntervalSince1970)
        var policyVerifier = verifier
        policyVerifier.policy.issuer = "https://issuer.example"
        let cases: [(JOSEValue, JOSEValue, JOSEError.Code)] = [
            ("exp", .integer(now * 1000), .invalidClaimType), ("exp", .string(String(now + 600)), .invalidClaimType),
            ("exp", .number(1e300), .invalidClaimType), ("exp", .integer(-5), .invalidClaimType),
            ("exp", .integer(now - 360), .expired), ("aud", ["x": 1], .invalidClaimType),
            ("iss", "https://issuer.example/", .issuerMismatch), ("iss", "HTTPS://ISSUER.EXAMPLE", .issuerMismatch),
            ("sub", 42, .invalidClaimType),
        ]
        for (name, value, code) in cases {
            var values = TestKeys.claims.values
            values[name.stringValue ?? ""] = value
            let token = try JWT.sign(JWTClaims(values), key: TestKeys.ec, algorithm: .es256)
            expectJOSEError(code) { _ = try policyVerifier.verify(token, now: referenceNow) }
        }
    }

    @Test("ATK-21: a valid RS256 token is refused where only ES256 is allowed", .needsRSA)
    func algorithmDowngrade() throws {
        var strict = verifier
        strict.allowedAlgorithms = [.es256]
        let token = try JWT.sign(TestKeys.claims, key: TestKeys.rsa, algorithm: .rs256)
        expectJOSEError(.algorithmNotAllowed) { _ = try strict.verify(token, now: referenceNow) }
    }

    @Test("ATK-22: empty and short HMAC keys are refused")
    func weakHMACKeys() {
        expectJOSEError(.weakKey) { _ = try JWK(symmetricKey: [], algorithm: .hs256) }
        expectJOSEError(.weakKey) { _ = try JWK(symmetricKey: [UInt8](repeating: 1, count: 31), algorithm: .hs256) }
        expectJOSEError(.weakKey) { _ = try JWK(symmetricKey: [UInt8](repeating: 1, count: 63), algorithm: .hs512) }
        expectJOSEError(.weakKey) { _ = try JWK(json: #"{"kty":"oct","k":""}"#, allowSymmetric: true) }
    }

    @Test("Truncated, overlong and bit-flipped signatures and non-JSON payloads are refused")
    func signatureAndPayloadDamage() throws {
        for (key, alg) in TestKeys.signers {
            let token = try JWT.sign(TestKeys.claims, key: key, algorithm: alg)
            let parts = token.split(separator: ".").map(String.init)
            let signature = Array(try Base64URL.decode(parts[2]))
            var flipped = signature
            flipped[flipped.count / 2] ^= 0x01
            for damaged in [Array(signature.dropLast()), signature + [0], flipped] {
                let forged = "\(parts[0]).\(parts[1]).\(Base64URL.encode(damaged))"
                expectJOSEError(.signatureInvalid) { _ = try verifier.verify(forged, now: referenceNow) }
            }
        }
        for payload in ["not json", "[1,2]", "\"string\"", ""] {
            let token = try TokenForge.signed(
                header: #"{"alg":"ES256","kid":"ec-1"}"#, payload: payload, key: TestKeys.ec, algorithm: .es256)
            expectJOSEError(.malformedClaims) { _ = try verifier.verify(token, now: referenceNow) }
        }
    }
}

@Suite struct CurveRangeTests {
    @Test(
        "ATK-10: r or s of 0, n or n + 1 is refused on every curve (CVE-2022-21449), before the platform sees it",
        arguments: [JWK.Curve.p256, .p384, .p521])
    func outOfRange(curve: JWK.Curve) throws {
        let n = ECDSASignature.order(of: curve)
        #expect(n.count == curve.coordinateLength, "the order constant has the curve's length")
        var nPlusOne = n
        for index in nPlusOne.indices.reversed() {
            nPlusOne[index] &+= 1
            if nPlusOne[index] != 0 { break }
        }
        let zero = [UInt8](repeating: 0, count: curve.coordinateLength)
        let one = [UInt8](repeating: 0, count: curve.coordinateLength - 1) + [1]
        for (r, s) in [(zero, one), (one, zero), (one, n), (n, one), (one, nPlusOne), (nPlusOne, one)] {
            let raw = r + s
            #expect(raw.withUnsafeBytes { !ECDSASignature.isWellFormed(raw: $0, curve: curve) })
        }
        var below = n
        below[below.count - 1] -= 1
        #expect((one + below).withUnsafeBytes { ECDSASignature.isWellFormed(raw: $0, curve: curve) }, "n − 1 is fine")
    }

    @Test("Ed25519 public keys of small order (identity, order 2, 4, 8, non-canonical) are refused")
    func smallOrderEd25519() {
        for encoding in JWK.Components.smallOrderEd25519 {
            for sign: UInt8 in [0, 0x80] {
                var x = encoding
                x[31] |= sign
                expectJOSEError(.weakKey) { _ = try JWK(components: .okp(curve: .ed25519, x: x, d: nil)) }
            }
        }
        #expect(throws: Never.self) { _ = try TestKeys.ed.publicKey() }
    }
}

@Suite struct RSAConsistencyTests {
    @Test("an RSA private key whose p·q is not its modulus is refused before any backend sees it (RFC 7515 A.2 key)")
    func inconsistentFactors() throws {
        let entry = try #require(TestVectors.rfc("rfc7515", "A.2") as? [String: Any])
        var key = try #require(entry["key"] as? [String: Any])
        #expect(throws: Never.self) { _ = try JWK(json: TestVectors.json(key)) }
        var q = Array(try Base64URL.decode(try #require(key["q"] as? String)))
        q[q.count - 1] ^= 0x02  // still odd, no longer a factor
        key["q"] = Base64URL.encode(q)
        expectJOSEError(.invalidKey) { _ = try JWK(json: TestVectors.json(key)) }
        #expect(JWK.Components.product([0x01, 0x00], [0xFF]) == [0xFF, 0x00])
        #expect(
            JWK.Components.product([0xFF, 0xFF, 0xFF, 0xFF, 0xFF], [0xFF, 0xFF]) == [
                0xFF, 0xFE, 0xFF, 0xFF, 0xFF, 0x00, 0x01,
            ])
    }
}
