import Foundation
import Testing

@testable import SesameJOSE

/// The RFC examples (VEC-* in SECURITY-CATALOG.md), from `Vectors/rfc-vectors.json`.
@Suite struct RFCVectorTests {
    struct Example: CustomTestStringConvertible, Sendable {
        let name: String
        let algorithm: JWSAlgorithm
        let keyJSON: String
        let token: String
        let deterministic: Bool
        var testDescription: String { "\(name) \(algorithm)" }
        /// RSA examples need a backend with RSA (not the CryptoKit-on-Linux check).
        var runsHere: Bool { TestKeys.rsaAvailable || !(algorithm.family == .rsaPKCS1 || algorithm.family == .rsaPSS) }
    }

    /// Whether Ed25519 signatures are randomized: CryptoKit's are (Apple's documentation says so).
    ///
    /// RFC 8037's signature then cannot be reproduced byte for byte; it is verified instead. swift-crypto on Linux
    /// (BoringSSL) and libcrypto are deterministic.
    static let randomizedEdDSA: Bool = {
        #if canImport(CryptoKit) && !canImport(CSesameOpenSSL)
            true
        #else
            false
        #endif
    }()

    static func key(_ document: String, _ reference: Any?) -> String {
        if let section = reference as? String { return TestVectors.json(TestVectors.rfc(document, section) as Any) }
        return TestVectors.json(reference as Any)
    }

    static let signatureExamples: [Example] = {
        var examples: [Example] = []
        let sets: [(String, [String])] = [
            ("rfc7515", ["A.1", "A.2", "A.3", "A.4"]), ("rfc7520", ["4.1", "4.2", "4.3", "4.4"]), ("rfc8037", ["A.4"]),
        ]
        for (document, sections) in sets {
            for section in sections {
                guard let entry = TestVectors.rfc(document, section) as? [String: Any],
                    let alg = (entry["alg"] as? String).flatMap(JWSAlgorithm.init(name:)),
                    let token = entry["token"] as? String
                else { fatalError("bad vector \(document) \(section)") }
                examples.append(
                    Example(
                        name: "\(document.uppercased()) \(section)",
                        algorithm: alg,
                        keyJSON: key(document, entry["key"]),
                        token: token,
                        deterministic: (entry["deterministic"] as? Bool ?? false)
                            && !(alg.family == .eddsa && Self.randomizedEdDSA)
                    )
                )
            }
        }
        return examples
    }()

    @Test(
        "VEC-01, VEC-02, VEC-03, VEC-04, VEC-06, VEC-10: RFC examples verify as received",
        arguments: signatureExamples.filter(\.runsHere))
    func examplesVerify(example: Example) throws {
        let key = try JWK(json: example.keyJSON, allowSymmetric: example.algorithm.isSymmetric)
        let verifyKey = example.algorithm.isSymmetric ? key : try key.publicKey()
        let jws = try JWS.verify(
            example.token, keys: try JWKSet(keys: [verifyKey]), allowedAlgorithms: [example.algorithm])
        #expect(!jws.payload.isEmpty)
    }

    @Test(
        "VEC-01, VEC-02, VEC-06, VEC-10: deterministic algorithms reproduce the RFC signature byte for byte",
        arguments: signatureExamples.filter { $0.deterministic && $0.runsHere })
    func deterministicSignaturesMatch(example: Example) throws {
        let key = try JWK(json: example.keyJSON, allowSymmetric: example.algorithm.isSymmetric)
        let parts = example.token.split(separator: ".", omittingEmptySubsequences: false)
        let input = Array("\(parts[0]).\(parts[1])".utf8)
        let signature: [UInt8] = try input.withUnsafeBytes { bytes in
            if case .octet(let k) = key.components {
                return JOSECrypto.hmac(bytes, key: k, hash: example.algorithm.hash)
            }
            return try #require(key.backing).sign(bytes, algorithm: example.algorithm)
        }
        #expect(Base64URL.encode(signature) == String(parts[2]))
    }

    @Test("VEC-01: the A.1 header with CRLF verifies over the received text; as a JWT it is rejected (HS256, exp 2011)")
    func a1AsIDTokenIsRejected() throws {
        let example = try #require(Self.signatureExamples.first { $0.name == "RFC7515 A.1" })
        let key = try JWK(json: example.keyJSON, allowSymmetric: true)
        let hmacVerifier = JWTVerifier(keys: try JWKSet(keys: [key]), allowedAlgorithms: [.hs256])
        #expect(throws: JOSEError(.expired, "the token expired", parameter: "exp")) {
            try hmacVerifier.verify(example.token, now: referenceNow)
        }
        let defaultVerifier = JWTVerifier(keys: try JWKSet(keys: [key]))
        #expect(throws: JOSEError.self) { try defaultVerifier.verify(example.token, now: referenceNow) }
    }

    @Test("VEC-03 / ATK-09: the malleated A.3 signature (r, n − s) verifies; the DER form is rejected")
    func es256Malleability() throws {
        let example = try #require(Self.signatureExamples.first { $0.name == "RFC7515 A.3" })
        let key = try JWK(json: example.keyJSON).publicKey()
        let parts = example.token.split(separator: ".").map(String.init)
        let raw = Array(try Base64URL.decode(parts[2]))
        let n = [UInt8](hex: "ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551")
        let s = Array(raw[32...])
        var negated = [UInt8](repeating: 0, count: 32)
        var borrow = 0
        for index in stride(from: 31, through: 0, by: -1) {
            var difference = Int(n[index]) - Int(s[index]) - borrow
            borrow = difference < 0 ? 1 : 0
            if difference < 0 { difference += 256 }
            negated[index] = UInt8(difference)
        }
        let keys = try JWKSet(keys: [key])
        let malleated = "\(parts[0]).\(parts[1]).\(Base64URL.encode(Array(raw[..<32]) + negated))"
        #expect(throws: Never.self) { try JWS.verify(malleated, keys: keys) }

        let der = try #require(raw.withUnsafeBytes { ECDSASignature.der(fromRaw: $0, curve: .p256) })
        let derToken = "\(parts[0]).\(parts[1]).\(Base64URL.encode(der))"
        #expect(throws: JOSEError.self) { try JWS.verify(derToken, keys: keys) }
    }

    @Test("VEC-05 / ATK-01: the unsecured A.5 token and its case variants are rejected")
    func unsecuredIsRejected() throws {
        let entry = try #require(TestVectors.rfc("rfc7515", "A.5") as? [String: Any])
        let token = try #require(entry["token"] as? String)
        let keys = try JWKSet(keys: [try JWK.generate(for: .es256).publicKey()])
        for candidate in [token]
            + ["None", "NONE", "nOnE"].map({ TokenForge.unsigned(header: "{\"alg\":\"\($0)\"}", payload: "{}") })
        {
            #expect(throws: JOSEError.self) { try JWS.verify(candidate, keys: keys) }
            do {
                _ = try JWS.verify(candidate, keys: keys)
            } catch let error as JOSEError {
                #expect(error.code == .unsupportedAlgorithm)
            }
        }
    }

    @Test(
        "VEC-07 / ATK-17: RFC 7520 4.6–4.8 JSON serializations are rejected by the compact parser",
        arguments: ["4.6", "4.7", "4.8"])
    func jsonSerializationRejected(section: String) throws {
        let entry = try #require(TestVectors.rfc("rfc7520", section) as? [String: Any])
        let json = try #require(entry["json"] as? String)
        let keys = try JWKSet(keys: [try JWK.generate(for: .es256).publicKey()])
        #expect(throws: JOSEError.self) { try JWS.verify(json, keys: keys) }
    }

    @Test("VEC-09: RFC 7638 §3.1 thumbprint (alg and kid do not count)")
    func rfc7638Thumbprint() throws {
        let entry = try #require(TestVectors.rfc("rfc7638", "3.1") as? [String: Any])
        let key = try JWK(json: TestVectors.json(entry["key"] as Any))
        #expect(key.thumbprint == entry["thumbprint"] as? String)
        #expect(key.with(keyID: "other", algorithm: nil).thumbprint == key.thumbprint)
    }

    @Test("VEC-10: RFC 8037 A.1–A.3: x derived from d, OKP thumbprint")
    func rfc8037Keys() throws {
        let privateKey = try JWK(json: TestVectors.json(TestVectors.rfc("rfc8037", "A.1") as Any))
        let publicKey = try JWK(json: TestVectors.json(TestVectors.rfc("rfc8037", "A.2") as Any))
        #expect(try privateKey.publicKey().jwkRepresentation == publicKey.jwkRepresentation)
        let thumbprint = (TestVectors.rfc("rfc8037", "A.3") as? [String: Any])?["thumbprint"] as? String
        #expect(publicKey.thumbprint == thumbprint)
    }

    @Test("RFC 7517 App. A: the example key sets import; the enc-only key cannot verify")
    func rfc7517KeySets() throws {
        let publicSet = try JWKSet(json: TestVectors.json(TestVectors.rfc("rfc7517", "A.1") as Any))
        try #require(publicSet.keys.count == 2)
        #expect(publicSet.keys[0].canVerify(.es256) == false)  // use: enc
        #expect(publicSet.keys[1].canVerify(.rs256))
        let privateSet = try JWKSet(json: TestVectors.json(TestVectors.rfc("rfc7517", "A.2") as Any))
        #expect(privateSet.keys.allSatisfy { $0.isPrivate })
        // A.3 holds only symmetric keys: skipped unless asked for.
        let symmetric = TestVectors.json(TestVectors.rfc("rfc7517", "A.3") as Any)
        #expect(try JWKSet(json: symmetric).keys.isEmpty)
        #expect(try JWKSet(json: symmetric, allowSymmetric: true).keys.count == 2)
    }

    @Test(
        "RFC 7520 §3: the cookbook keys import and keep their public members on export",
        arguments: ["3.1", "3.2", "3.3", "3.4", "3.5"])
    func rfc7520Keys(section: String) throws {
        let json = TestVectors.json(TestVectors.rfc("rfc7520", section) as Any)
        let key = try JWK(json: json, allowSymmetric: section == "3.5")
        let original = try JOSEValue.parse(Array(json.utf8))
        let exported = key.jsonValue(includingPrivate: true)
        for name in ["kty", "n", "e", "crv", "x", "y", "d", "p", "q", "dp", "dq", "qi", "kid"]
        where original[name] != nil {
            #expect(exported[name] == original[name], "member \(name)")
        }
    }
}
