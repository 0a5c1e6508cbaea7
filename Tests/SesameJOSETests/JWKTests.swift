import Foundation
import Testing

@testable import SesameJOSE

@Suite struct JWKTests {
    static let signingAlgorithms: [JWSAlgorithm] = [
        .rs256, .rs384, .rs512, .ps256, .ps384, .ps512, .es256, .es384, .es512, .eddsa, .ed25519, .hs256, .hs384,
        .hs512,
    ].filter { TestKeys.rsaAvailable || !($0.family == .rsaPKCS1 || $0.family == .rsaPSS) }

    @Test(
        "Every algorithm signs and verifies its own tokens; another key of the same kind does not verify them",
        arguments: signingAlgorithms)
    func signAndVerify(algorithm: JWSAlgorithm) throws {
        let key =
            algorithm.family == .rsaPKCS1 || algorithm.family == .rsaPSS
            ? TestKeys.rsa.with(keyID: "k", algorithm: algorithm) : try JWK.generate(for: algorithm, keyID: "k")
        let other =
            algorithm.isSymmetric
            ? try JWK.generate(for: algorithm, keyID: "k") : try JWK.generate(for: algorithm, keyID: "k")
        let token = try JWT.sign(TestKeys.claims, key: key, algorithm: algorithm)
        let verifyKey = algorithm.isSymmetric ? key : try key.publicKey()
        let verifier = JWTVerifier(keys: try JWKSet(keys: [verifyKey]), allowedAlgorithms: [algorithm])
        #expect(try verifier.verify(token, now: referenceNow).claims == TestKeys.claims)
        if !(algorithm.family == .rsaPKCS1 || algorithm.family == .rsaPSS) {
            let otherKey = algorithm.isSymmetric ? other : try other.publicKey()
            let wrong = JWTVerifier(keys: try JWKSet(keys: [otherKey]), allowedAlgorithms: [algorithm])
            expectJOSEError(.signatureInvalid) { _ = try wrong.verify(token, now: referenceNow) }
        }
    }

    @Test("Without kid, every key that fits is tried")
    func noKidTriesAll() throws {
        let a = try JWK.generate(for: .es256)
        let b = try JWK.generate(for: .es256)
        let token = try JWT.sign(TestKeys.claims, key: b.with(keyID: nil, algorithm: .es256), algorithm: .es256)
        let set = try JWKSet(keys: [
            try a.publicKey().with(keyID: nil, algorithm: nil), try b.publicKey().with(keyID: nil, algorithm: nil),
        ])
        #expect(try JWTVerifier(keys: set).verify(token, now: referenceNow).claims.subject == "alice")
    }

    @Test(
        "PEM: public SPKI and PKCS#8 private keys round-trip, and keep the same thumbprint",
        arguments: [JWSAlgorithm.es256, .es384, .es512, .eddsa])
    func pemRoundTrip(algorithm: JWSAlgorithm) throws {
        let key = try JWK.generate(for: algorithm)
        let publicPEM = try key.pemRepresentation
        #expect(publicPEM.hasPrefix("-----BEGIN PUBLIC KEY-----"))
        let privatePEM = try key.unsafePrivatePEMRepresentation
        #expect(privatePEM.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let importedPublic = try JWK(pemRepresentation: publicPEM)
        let importedPrivate = try JWK(pemRepresentation: privatePEM, algorithm: algorithm)
        #expect(importedPublic.thumbprint == key.thumbprint)
        #expect(importedPrivate.isPrivate && !importedPublic.isPrivate)
        let token = try JWT.sign(TestKeys.claims, key: importedPrivate, algorithm: algorithm)
        #expect(throws: Never.self) {
            try JWTVerifier(keys: JWKSet(keys: [importedPublic])).verify(token, now: referenceNow)
        }
    }

    @Test("PEM: an RSA key round-trips with all CRT parameters", .needsRSA)
    func rsaPEM() throws {
        let imported = try JWK(pemRepresentation: try TestKeys.rsa.unsafePrivatePEMRepresentation)
        #expect(
            imported.jsonValue(includingPrivate: true)
                == TestKeys.rsa.with(keyID: nil, algorithm: nil).jsonValue(includingPrivate: true))
        expectJOSEError(.invalidKey) {
            _ = try JWK(pemRepresentation: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
        }
    }

    @Test("JWK JSON export: public members only by default; private import re-exports exactly")
    func jsonExport() throws {
        let key = try JWK.generate(for: .es256, keyID: "k1")
        let exported = key.jsonValue()
        #expect(exported["d"] == nil && exported["kid"] == "k1" && exported["alg"] == "ES256")
        let roundTripped = try JWK(json: key.jsonValue(includingPrivate: true).jsonString)
        #expect(roundTripped.isPrivate && roundTripped.thumbprint == key.thumbprint)
        #expect(!key.jwkRepresentation.contains("\"d\""))
    }

    @Test("A private key whose public half does not match is refused")
    func mismatchedPrivateKey() throws {
        guard case .ec(_, _, _, let d?) = try JWK.generate(for: .es256).components,
            case .ec(_, let x, let y, _) = try JWK.generate(for: .es256).components
        else { return }
        expectJOSEError(.invalidKey) { _ = try JWK(components: .ec(curve: .p256, x: x, y: y, d: d)) }
        guard case .okp(_, _, let edD?) = try JWK.generate(for: .eddsa).components,
            case .okp(_, let edX, _) = TestKeys.ed.components
        else { return }
        expectJOSEError(.invalidKey) { _ = try JWK(components: .okp(curve: .ed25519, x: edX, d: edD)) }
    }

    @Test("Symmetric keys only when asked for; a JWKS skips broken keys and keeps the rest")
    func keySetParsing() throws {
        expectJOSEError(.invalidKey) { _ = try JWK(json: #"{"kty":"oct","k":"AAAA"}"#) }
        let good = try TestKeys.ec.publicKey().jwkRepresentation
        let set = try JWKSet(
            json: #"{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"},{"kty":"XYZ"},"#
                + #"{"kty":"EC","crv":"P-256","x":"!!","y":"AA"},"# + good + #",{"kty":"oct","k":"AAAA"}]}"#)
        #expect(set.keys.count == 1 && set.skippedKeyCount == 4)
        expectJOSEError(.malformedJSON) { _ = try JWKSet(json: #"{"keys":{}}"#) }
        expectJOSEError(.malformedJSON) { _ = try JWKSet(json: "[]") }
        expectJOSEError(.mixedKeySet) {
            _ = try JWKSet(
                json: #"{"keys":[{"kty":"oct","k":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},"# + good + "]}",
                allowSymmetric: true)
        }
    }

    @Test("description never shows key material")
    func descriptionIsSafe() throws {
        let key = try JWK.generate(for: .es256, keyID: "k1")
        guard case .ec(_, let x, _, let d?) = key.components else { return }
        let text = "\(key) \(String(reflecting: key.description))"
        #expect(!text.contains(Base64URL.encode(d)) && !text.contains(Base64URL.encode(x)))
        #expect(text.contains("kid=k1") && text.contains("private"))
        let hmac = try JWK.generate(for: .hs256)
        guard case .octet(let k) = hmac.components else { return }
        #expect(!hmac.description.contains(Base64URL.encode(k)))
    }

    @Test("Verification is thread-safe: concurrent verifies on one key all succeed")
    func concurrentVerify() async throws {
        let signers = TestKeys.signers
        let verifier = JWTVerifier(keys: try JWKSet(keys: signers.map { try $0.key.publicKey() }))
        let tokens = try signers.map { try JWT.sign(TestKeys.claims, key: $0.key, algorithm: $0.algorithm) }
        let results = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<200 {
                group.addTask { (try? verifier.verify(tokens[index % tokens.count], now: referenceNow)) != nil }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results.count == 200 && results.allSatisfy { $0 })
    }
}

@Suite struct PEMImportTests {
    static let ecOID = DER.ecPublicKeyOID
    static let p256OID: [UInt8] = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]

    /// PKCS#8 for a P-256 key with `embedded` as its [1] public key (RFC 5915 inside RFC 5208).
    static func pkcs8(d: [UInt8], embedded: [UInt8]?) -> [UInt8] {
        var inner = [DER.tlv(0x02, [1]), DER.tlv(0x04, d)]
        if let embedded { inner.append(DER.tlv(0xA1, DER.tlv(0x03, [0] + embedded))) }
        return DER.sequence([
            DER.tlv(0x02, [0]), DER.sequence([ecOID, p256OID]), DER.tlv(0x04, DER.sequence(inner)),
        ])
    }

    @Test(
        "PEM: only SubjectPublicKeyInfo and unencrypted PKCS#8, one block, uncompressed points, a matching public key")
    func acceptsExactlyTheDocumentedForms() throws {
        let key = try JWK.generate(for: .es256)
        let other = try JWK.generate(for: .es256)
        guard case .ec(_, let x, let y, let d?) = key.components, case .ec(_, let ox, let oy, _) = other.components
        else { throw JOSEError(.invalidKey, "not EC") }
        // Accepted: PKCS#8 with and without the embedded public key, and SPKI.
        for der in [Self.pkcs8(d: d, embedded: [4] + x + y), Self.pkcs8(d: d, embedded: nil)] {
            let imported = try JWK(pemRepresentation: DER.pem(der, label: "PRIVATE KEY"))
            #expect(imported.thumbprint == key.thumbprint)
        }
        #expect(try JWK(pemRepresentation: try key.pemRepresentation).thumbprint == key.thumbprint)
        // Refused everywhere.
        let sec1 = DER.sequence([DER.tlv(0x02, [1]), DER.tlv(0x04, d), DER.tlv(0xA1, DER.tlv(0x03, [0, 4] + x + y))])
        let compressed = DER.sequence([
            DER.sequence([Self.ecOID, Self.p256OID]), DER.tlv(0x03, [0, 2 + (y.last ?? 0) & 1] + x),
        ])
        let refused: [(String, String)] = [
            ("SEC1", DER.pem(sec1, label: "EC PRIVATE KEY")),
            (
                "a mismatched embedded public key",
                DER.pem(Self.pkcs8(d: d, embedded: [4] + ox + oy), label: "PRIVATE KEY")
            ),
            ("a compressed point", DER.pem(compressed, label: "PUBLIC KEY")),
            ("encrypted PKCS#8", DER.pem([0x30, 0x03, 0x02, 0x01, 0x00], label: "ENCRYPTED PRIVATE KEY")),
            ("PKCS#1", DER.pem([0x30, 0x03, 0x02, 0x01, 0x00], label: "RSA PRIVATE KEY")),
            ("two blocks", try key.pemRepresentation + (try other.pemRepresentation)),
        ]
        for (what, pem) in refused {
            #expect(throws: JOSEError.self, "\(what)") { _ = try JWK(pemRepresentation: pem) }
        }
    }

    @Test("PEM: an Ed25519 PKCS#8 v2 key whose public key is not its own is refused")
    func ed25519WithWrongPublicKey() throws {
        guard case .okp(_, let x, let d?) = TestKeys.ed.components,
            case .okp(_, let wrong, _) = try JWK.generate(for: .eddsa).components
        else { throw JOSEError(.invalidKey, "not OKP") }
        func v2(_ publicKey: [UInt8]) -> String {
            DER.pem(
                DER.sequence([
                    DER.tlv(0x02, [1]), DER.sequence([DER.ed25519OID]), DER.tlv(0x04, DER.tlv(0x04, d)),
                    DER.tlv(0x81, [0] + publicKey),
                ]), label: "PRIVATE KEY")
        }
        #expect(try JWK(pemRepresentation: v2(x)).thumbprint == TestKeys.ed.thumbprint)
        #expect(throws: JOSEError.self) { _ = try JWK(pemRepresentation: v2(wrong)) }
    }
}
