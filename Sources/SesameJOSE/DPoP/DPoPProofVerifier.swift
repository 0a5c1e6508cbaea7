public import Foundation

/// Checks DPoP proofs as a server does (RFC 9449 §4.3).
public struct DPoPProofVerifier: Sendable {
    /// Acceptable algorithms.
    ///
    /// Default: every asymmetric one.
    public var allowedAlgorithms: Set<JWSAlgorithm> = JWSAlgorithm.asymmetric
    /// How old a proof's `iat` may be.
    ///
    /// Default 60 s.
    public var maximumAge: TimeInterval = 60
    /// How far in the future `iat` may be (clock skew).
    ///
    /// Default 5 s.
    public var leeway: TimeInterval = 5
    /// The size cap on a proof.
    ///
    /// Default 8 KiB.
    public var maxProofSize = 8 * 1024
    /// The largest RSA modulus an embedded `jwk` may have, checked before the key is imported: anyone can send a
    /// proof, and importing (and checking) a 16384-bit key costs the server most of a second.
    ///
    /// Default 4096 bits.
    public var maxRSAModulusBits = 4096

    /// A verifier with the defaults.
    public init() {}

    /// What a valid proof says.
    public struct Verified: Sendable {
        /// The RFC 7638 thumbprint of the proof's key (`cnf.jkt`).
        public let thumbprint: String
        /// The proof's `jti`, for replay detection within ``DPoPProofVerifier/maximumAge``.
        public let jti: String
        /// `iat`.
        public let issuedAt: Date
        /// The `nonce` it carries, if any.
        public let nonce: String?
    }

    /// Verifies `proof` for `method` `url`.
    ///
    /// - Parameters:
    ///   - proof: the `DPoP` header's value.
    ///   - method: the request's method.
    ///   - url: the request's URL (compared without query and fragment).
    ///   - accessToken: for resource requests: the token whose `ath` the proof must carry.
    ///   - nonce: the nonce the server demands, or nil.
    ///   - now: the server's time.
    /// - Returns: the key's thumbprint and what the proof says.
    /// - Throws: ``JOSEError``: ``JOSEError/Code/invalidHeader`` (`typ`, `jwk`), ``JOSEError/Code/algorithmNotAllowed``,
    ///   ``JOSEError/Code/signatureInvalid``, ``JOSEError/Code/missingClaim``, ``JOSEError/Code/invalidClaimType``,
    ///   ``JOSEError/Code/expired`` / ``JOSEError/Code/issuedInFuture`` (`iat`), ``JOSEError/Code/nonceMismatch``, or
    ///   ``JOSEError/Code/malformedClaims`` for `htm`, `htu` or `ath` that do not match.
    public func verify(
        _ proof: String, method: String, url: URL, accessToken: String? = nil, nonce: String? = nil,
        now: Date
    ) throws -> Verified {
        let jws = try JWS.unverified(proof, maxSize: maxProofSize)
        let header = jws.header
        guard header.type?.lowercased() == DPoPProof.type else {
            throw JOSEError(.invalidHeader, "the DPoP proof's typ is not dpop+jwt", parameter: "typ")
        }
        guard let algorithm = header.algorithm, allowedAlgorithms.contains(algorithm), !algorithm.isSymmetric else {
            throw JOSEError(.algorithmNotAllowed, "the DPoP proof's alg is not allowed")
        }
        guard let embedded = header.parameters["jwk"], let members = embedded.objectValue else {
            throw JOSEError(.invalidHeader, "the DPoP proof has no jwk", parameter: "jwk")
        }
        // Any private member at all (RFC 9449 §4.3: the key must not be a private key), not only `d`.
        if members.names.contains(where: { ["d", "p", "q", "dp", "dq", "qi", "oth", "k"].contains($0) }) {
            throw JOSEError(.invalidHeader, "the DPoP proof's jwk contains private key members", parameter: "jwk")
        }
        if let modulus = members["n"]?.stringValue, modulus.utf8.count > (maxRSAModulusBits + 5) / 6 + 1 {
            throw JOSEError(
                .weakKey, "the DPoP proof's RSA key is larger than \(maxRSAModulusBits) bits", parameter: "jwk")
        }
        let key = try JWK(json: embedded.jsonString, allowSymmetric: false)
        guard !key.isPrivate else {
            throw JOSEError(.invalidHeader, "the DPoP proof's jwk contains a private key", parameter: "jwk")
        }
        let verified = try JWS.verify(
            proof, keys: try JWKSet(keys: [key]), allowedAlgorithms: [algorithm], maxSize: maxProofSize)
        guard let claims = try JOSEValue.parse(verified.payload).objectValue else {
            throw JOSEError(.malformedClaims, "the DPoP proof's payload is not an object")
        }
        guard let jti = claims["jti"]?.stringValue, !jti.isEmpty, jti.utf8.count <= 256 else {
            throw JOSEError(.missingClaim, "the DPoP proof has no usable jti", parameter: "jti")
        }
        guard let htm = claims["htm"]?.stringValue, htm == method else {
            throw JOSEError(.malformedClaims, "the DPoP proof is for another method", parameter: "htm")
        }
        guard let htu = claims["htu"]?.stringValue, let htuURL = URL(string: htu),
            ByteExact.equals(DPoPProof.targetURI(htuURL), DPoPProof.targetURI(url))
        else { throw JOSEError(.malformedClaims, "the DPoP proof is for another URI", parameter: "htu") }
        guard let iat = claims["iat"]?.doubleValue, iat.isFinite else {
            throw JOSEError(.missingClaim, "the DPoP proof has no iat", parameter: "iat")
        }
        let issued = Date(timeIntervalSince1970: iat)
        if issued.timeIntervalSince(now) > leeway {
            throw JOSEError(.issuedInFuture, "the DPoP proof is issued in the future", parameter: "iat")
        }
        if now.timeIntervalSince(issued) > maximumAge {
            throw JOSEError(.expired, "the DPoP proof is too old", parameter: "iat")
        }
        if let accessToken {
            guard let ath = claims["ath"]?.stringValue,
                ConstantTime.equals(Array(ath.utf8), Array(DPoPProof.accessTokenHash(accessToken).utf8))
            else { throw JOSEError(.malformedClaims, "the DPoP proof is not for this access token", parameter: "ath") }
        }
        let stated = claims["nonce"]?.stringValue
        if let nonce {
            guard let stated, ConstantTime.equals(Array(stated.utf8), Array(nonce.utf8)) else {
                throw JOSEError(.nonceMismatch, "the DPoP proof lacks the server's current nonce", parameter: "nonce")
            }
        }
        return Verified(thumbprint: key.thumbprint, jti: jti, issuedAt: issued, nonce: stated)
    }
}
