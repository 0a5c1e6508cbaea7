public import Foundation

/// A JWS in compact serialization (RFC 7515 §7.1): parsing, verification and signing.
///
/// Verification follows the order RFC 8725 §3.1 asks for: a size cap before any decoding, exactly three
/// dot-separated parts, strict base64url, a header that is a JSON object without duplicate members, the
/// `crit`/`b64` policy, the algorithm checked against the caller's allowlist, the key chosen among keys the
/// caller trusts, and the signature checked over the received ASCII octets.
public struct JWS: Sendable {
    /// The default cap on the size of a compact token, checked before decoding: 64 KiB.
    public static let defaultMaxSize = 64 * 1024

    /// The protected header.
    public let header: JWSHeader
    /// The decoded payload.
    public let payload: Data

    /// Parses a compact JWS **without verifying it**.
    ///
    /// For display and diagnostics only.
    ///
    /// - Throws: ``JOSEError`` for any structural problem.
    public static func unverified(_ compact: String, maxSize: Int = defaultMaxSize) throws -> JWS {
        try withParts(compact, maxSize: maxSize) { parts throws(JOSEError) in
            JWS(header: try parts.header(), payload: Data(try parts.payload()))
        }
    }

    /// Verifies a compact JWS against a key set and returns its header and payload.
    ///
    /// The payload may be anything; use ``JWTVerifier`` for JWTs, which also checks the claims.
    ///
    /// - Parameters:
    ///   - compact: the token.
    ///   - keys: the trusted keys. The key decides: the header's `alg` must fit the key's type and, when the key
    ///     declares one, its `alg`.
    ///   - allowedAlgorithms: the algorithms acceptable here. By default every asymmetric algorithm; HMAC only
    ///     when listed explicitly.
    ///   - maxSize: the size cap, checked first.
    /// - Returns: the verified header and payload.
    /// - Throws: ``JOSEError``; a bad signature is always ``JOSEError/Code/signatureInvalid``.
    public static func verify(
        _ compact: String,
        keys: JWKSet,
        allowedAlgorithms: Set<JWSAlgorithm> = JWSAlgorithm.asymmetric,
        maxSize: Int = defaultMaxSize
    ) throws -> JWS {
        try withParts(compact, maxSize: maxSize) { parts throws(JOSEError) in
            let header = try parts.header()
            try parts.verifySignature(header: header, keys: keys, allowedAlgorithms: allowedAlgorithms)
            return JWS(header: header, payload: Data(try parts.payload()))
        }
    }

    /// Signs `payload` and returns the compact serialization.
    ///
    /// - Parameters:
    ///   - payload: the bytes to sign.
    ///   - key: a private key (or a symmetric key for HS*). Its `kid`, if any, goes into the header.
    ///   - algorithm: the algorithm; it must fit the key.
    ///   - header: further header parameters (`typ`, `jwk`, …). `alg` and `kid` are set from the arguments.
    /// - Returns: the compact serialization `header.payload.signature`.
    /// - Throws: ``JOSEError`` with ``JOSEError/Code/algorithmNotAllowed`` when the algorithm does not fit the key,
    ///   ``JOSEError/Code/invalidKey`` for a public key.
    public static func sign(
        payload: some Collection<UInt8>,
        key: JWK,
        algorithm: JWSAlgorithm,
        header: JOSEObject = [:]
    ) throws -> String {
        guard key.fits(algorithm), key.declaredAlgorithm.map({ $0 == algorithm.name }) ?? true else {
            throw JOSEError(.algorithmNotAllowed, "\(algorithm) does not fit \(key)")
        }
        guard key.isPrivate else { throw JOSEError(.invalidKey, "signing needs a private key") }
        var parameters = header
        parameters["alg"] = .string(algorithm.name)
        if let keyID = key.keyID, parameters["kid"] == nil { parameters["kid"] = .string(keyID) }
        var signingInput: [UInt8] = []
        signingInput.reserveCapacity(payload.count * 4 / 3 + 128)
        Base64URL.encode(JOSEValue.object(parameters).jsonBytes, into: &signingInput)
        signingInput.append(UInt8(ascii: "."))
        Base64URL.encode(payload, into: &signingInput)
        let signature: [UInt8] = try signingInput.withUnsafeBytes { input throws(JOSEError) in
            switch key.components {
            case .octet(let k): return JOSECrypto.hmac(input, key: k, hash: algorithm.hash)
            default:
                guard let backing = key.backing else { throw JOSEError(.invalidKey, "the key has no backend") }
                return try backing.sign(input, algorithm: algorithm)
            }
        }
        signingInput.append(UInt8(ascii: "."))
        Base64URL.encode(signature, into: &signingInput)
        return String(decoding: signingInput, as: UTF8.self)
    }

    /// The offset of the next `.` at or after `start` (memchr: this runs on every token).
    private static func indexOfDot(in bytes: UnsafeRawBufferPointer, from start: Int) -> Int? {
        guard let base = bytes.baseAddress, start < bytes.count,
            let found = memchr(base + start, Int32(UInt8(ascii: ".")), bytes.count - start)
        else { return nil }
        return UnsafeRawPointer(found) - base
    }

    /// Splits a compact JWS after the size and shape checks and hands its parts to `body`.
    package static func withParts<R>(
        _ compact: String,
        maxSize: Int,
        _ body: (CompactParts) throws(JOSEError) -> R
    ) throws(JOSEError) -> R {
        guard compact.utf8.count <= maxSize else {
            throw JOSEError(.tooLarge, "the token is larger than \(maxSize) bytes")
        }
        var token = compact
        return try JOSEError.typed {
            try token.withUTF8 { utf8 throws(JOSEError) in
                let bytes = UnsafeRawBufferPointer(utf8)
                guard let firstDot = Self.indexOfDot(in: bytes, from: 0),
                    let secondDot = Self.indexOfDot(in: bytes, from: firstDot + 1)
                else {
                    throw JOSEError(.malformedToken, "a compact JWS has three dot-separated parts")
                }
                guard Self.indexOfDot(in: bytes, from: secondDot + 1) == nil else {
                    throw JOSEError(.malformedToken, "a compact JWS has exactly three parts (a JWE has five)")
                }
                guard firstDot > 0 else { throw JOSEError(.malformedToken, "the header part is empty") }
                return try body(CompactParts(bytes: bytes, firstDot: firstDot, secondDot: secondDot))
            }
        }
    }
}

/// The three parts of a compact JWS, still as received.
package struct CompactParts {
    let bytes: UnsafeRawBufferPointer
    let firstDot: Int
    let secondDot: Int

    var headerText: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: bytes[..<firstDot]) }
    var payloadText: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: bytes[(firstDot + 1)..<secondDot]) }
    var signatureText: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: bytes[(secondDot + 1)...]) }
    /// `header.payload` exactly as received: what the signature covers.
    var signingInput: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: bytes[..<secondDot]) }

    package func header() throws(JOSEError) -> JWSHeader {
        let value = try Base64URL.withDecoded(headerText) { json throws(JOSEError) in
            try JOSEValue.parse(buffer: json)
        }
        guard let members = value.objectValue else {
            throw JOSEError(.malformedToken, "the JWS header is not a JSON object")
        }
        return try JWSHeader(parameters: members)
    }

    package func payload() throws(JOSEError) -> [UInt8] { try Base64URL.decode(payloadText) }

    /// Chooses the key the way RFC 8725 §3.1 asks and checks the signature; throws unless it verifies.
    package func verifySignature(
        header: JWSHeader,
        keys: JWKSet,
        allowedAlgorithms: Set<JWSAlgorithm>
    ) throws(JOSEError) {
        guard let algorithm = header.algorithm else {
            throw JOSEError(
                .unsupportedAlgorithm, "the algorithm \(header.algorithmName.prefix(16)) is not supported",
                parameter: "alg")
        }
        guard allowedAlgorithms.contains(algorithm) else {
            throw JOSEError(.algorithmNotAllowed, "\(algorithm) is not an allowed algorithm here", parameter: "alg")
        }
        let candidates = try keys.candidates(for: algorithm, keyID: header.keyID)
        let verified =
            (try? Base64URL.withDecoded(signatureText) { signature in
                candidates.contains { key in
                    key.isValidSignature(signature, over: signingInput, algorithm: algorithm)
                }
            }) ?? false
        guard verified else { throw JOSEError(.signatureInvalid, "the signature does not verify") }
    }
}

extension JWK {
    /// Whether `signature` (the JWS form: `R‖S` for ECDSA) is valid over `message` under this key and
    /// `algorithm`.
    ///
    /// The key must fit the algorithm; this does not look at `alg`, `use` or `key_ops`.
    package func isValidSignature(
        _ signature: UnsafeRawBufferPointer,
        over message: UnsafeRawBufferPointer,
        algorithm: JWSAlgorithm
    ) -> Bool {
        guard fits(algorithm) else { return false }
        if case .octet(let k) = components {
            return ConstantTime.equals(JOSECrypto.hmac(message, key: k, hash: algorithm.hash), signature)
        }
        return backing?.verify(signature: signature, message: message, algorithm: algorithm) ?? false
    }

    package func isValidSignature(_ signature: [UInt8], over message: [UInt8], algorithm: JWSAlgorithm) -> Bool {
        signature.withUnsafeBytes { signature in
            message.withUnsafeBytes { isValidSignature(signature, over: $0, algorithm: algorithm) }
        }
    }
}
