import Foundation
import Testing

@testable import SesameJOSE

/// Where the test vectors live and how to read them.
enum TestVectors {
    /// `$SESAME_TESTVECTORS`, else `../shared/testvectors` beside the package root.
    static let sharedDirectory: URL = {
        if let path = ProcessInfo.processInfo.environment["SESAME_TESTVECTORS"], !path.isEmpty {
            return URL(fileURLWithPath: path)
        }
        return packageRoot.deletingLastPathComponent().appendingPathComponent("shared/testvectors")
    }()

    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static var wycheproofDirectory: URL { sharedDirectory.appendingPathComponent("wycheproof") }

    /// Whether the Wycheproof files are present (a clone outside the workplace has no `../shared`).
    static let wycheproofAvailable: Bool = {
        let available = FileManager.default.fileExists(
            atPath: wycheproofDirectory.appendingPathComponent("json_web_signature_test.json").path
        )
        if !available {
            print(
                "◇ NOTICE: Wycheproof vectors not found at \(wycheproofDirectory.path); set SESAME_TESTVECTORS. Those tests are skipped."
            )
        }
        return available
    }()

    static func wycheproof(_ name: String) throws -> [String: Any] {
        let data = try Data(contentsOf: wycheproofDirectory.appendingPathComponent(name))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// The RFC vectors checked in beside the tests.
    nonisolated(unsafe) static let rfc: [String: Any] = {  // read-only after initialisation
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Vectors/rfc-vectors.json")
        guard let data = try? Data(contentsOf: url),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { fatalError("cannot read \(url.path)") }
        return object
    }()

    static func rfc(_ document: String, _ section: String) -> Any? {
        (rfc[document] as? [String: Any])?[section]
    }

    /// Serialises a Foundation JSON object back to text (to feed our own parser).
    static func json(_ object: Any) -> String {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else {
            fatalError("not JSON: \(object)")
        }
        return String(decoding: data, as: UTF8.self)
    }
}

extension Array where Element == UInt8 {
    /// Bytes from lowercase or uppercase hex.
    init(hex: String) {
        var bytes: [UInt8] = []
        var iterator = hex.utf8.makeIterator()
        while let high = iterator.next(), let low = iterator.next() {
            bytes.append(UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16) ?? 0)
        }
        self = bytes
    }
}

/// Builds compact tokens by hand, for attack tests.
enum TokenForge {
    static func part(_ json: String) -> String { Base64URL.encode(Array(json.utf8)) }

    static func unsigned(header: String, payload: String, signature: [UInt8] = []) -> String {
        "\(part(header)).\(part(payload)).\(Base64URL.encode(signature))"
    }

    /// Signs `header.payload` (given as JSON text) with `key`, keeping the header exactly as written.
    static func signed(header: String, payload: String, key: JWK, algorithm: JWSAlgorithm) throws -> String {
        let input = "\(part(header)).\(part(payload))"
        let signature: [UInt8] = try Array(input.utf8).withUnsafeBytes { bytes in
            if case .octet(let k) = key.components { return JOSECrypto.hmac(bytes, key: k, hash: algorithm.hash) }
            return try #require(key.backing).sign(bytes, algorithm: algorithm)
        }
        return input + "." + Base64URL.encode(signature)
    }
}

/// A fixed instant for claim tests.
let referenceNow = Date(timeIntervalSince1970: 1_750_000_000)

/// Expects `body` to throw a `JOSEError` with `code`.
func expectJOSEError(
    _ code: JOSEError.Code,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> Void
) {
    do {
        try body()
        Issue.record("expected \(code), but nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as JOSEError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected JOSEError \(code), got \(error)", sourceLocation: sourceLocation)
    }
}

/// Keys generated once for the whole test run (RSA generation is slow).
enum TestKeys {
    static let rsa = make(.rs256, "rsa-1")
    static let ec = make(.es256, "ec-1")
    static let ed = make(.eddsa, "ed-1")

    private static func make(_ algorithm: JWSAlgorithm, _ keyID: String) -> JWK {
        guard let key = try? JWK.generate(for: algorithm, keyID: keyID) else {
            fatalError("could not generate a \(algorithm) test key")
        }
        return key
    }

    /// Whether this build has RSA (not the CryptoKit-on-Linux check of Scripts/check-apple-backend.sh).
    static let rsaAvailable: Bool = {
        if !JOSECrypto.supportsRSA {
            print("◇ NOTICE: this backend has no RSA (Apple's Security framework is absent); the RSA tests are skipped")
        }
        return JOSECrypto.supportsRSA
    }()

    /// One signing key per key type with its algorithm (RSA only where the backend has it).
    static var signers: [(key: JWK, algorithm: JWSAlgorithm)] {
        (rsaAvailable ? [(rsa, .rs256)] : []) + [(ec, .es256), (ed, .eddsa)]
    }

    static func publicSet(_ keys: JWK...) throws -> JWKSet { try JWKSet(keys: keys.map { try $0.publicKey() }) }

    /// A valid claim set around `referenceNow`.
    static let claims: JWTClaims = JWTClaims([
        "iss": "https://issuer.example", "sub": "alice", "aud": "my-app",
        "exp": .integer(Int64(referenceNow.timeIntervalSince1970) + 600),
        "iat": .integer(Int64(referenceNow.timeIntervalSince1970) - 10),
    ])
}

extension Trait where Self == ConditionTrait {
    /// Skips a test that needs RSA where the backend has none (the CryptoKit-on-Linux check).
    static var needsRSA: Self {
        .enabled(if: TestKeys.rsaAvailable, "RSA needs Apple's Security framework, absent from this build")
    }
}
