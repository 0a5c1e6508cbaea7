public import Foundation

/// DPoP proofs (RFC 9449 §4): a JWT signed with the client's key, naming the request it is for.
///
/// ```swift
/// let key = try JWK.generate(for: .es256)
/// let proof = try DPoPProof.make(key: key, method: "POST", url: tokenEndpoint, issuedAt: Date())
/// ```
public enum DPoPProof {
    /// The proof's `typ`.
    public static let type = "dpop+jwt"

    /// A proof for `method` `url`, signed with `key` (its public half goes into the `jwk` header).
    ///
    /// - Parameters:
    ///   - key: a private asymmetric key (ES256 by default; any asymmetric algorithm it fits).
    ///   - algorithm: the signature algorithm; by default the key's declared `alg`, else the one its type implies.
    ///   - method: the HTTP method (`htm`).
    ///   - url: the request URL; `htu` is it without query and fragment.
    ///   - accessToken: for resource requests, the access token (`ath` = its SHA-256, base64url).
    ///   - nonce: the server's latest `DPoP-Nonce`, when it gave one.
    ///   - issuedAt: `iat`.
    ///   - jti: a unique identifier; 128 random bits by default.
    /// - Returns: the compact proof for the `DPoP` header.
    /// - Throws: ``JOSEError`` for a symmetric or public key, or an algorithm that does not fit it.
    public static func make(
        key: JWK, algorithm: JWSAlgorithm? = nil, method: String, url: URL, accessToken: String? = nil,
        nonce: String? = nil, issuedAt: Date, jti: String = Base64URL.encode(JOSECrypto.randomBytes(16))
    ) throws -> String {
        try DPoPSigner(key: key, algorithm: algorithm).proof(
            method: method, url: url, accessToken: accessToken, nonce: nonce, issuedAt: issuedAt, jti: jti)
    }

    /// `ath`: base64url(SHA-256(ASCII(access token))) (RFC 9449 §4.2).
    public static func accessTokenHash(_ accessToken: String) -> String {
        Base64URL.encode(JOSECrypto.sha256(Array(accessToken.utf8)))
    }

    /// `htu`: the URL without query and fragment, scheme and host in lower case (RFC 9449 §4.2, RFC 3986 §6.2.2).
    public static func targetURI(_ url: URL) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else { return url.absoluteString }
        components.query = nil
        components.fragment = nil
        components.scheme = components.scheme?.lowercased()
        components.host = components.host?.lowercased()
        if (components.scheme == "https" && components.port == 443)
            || (components.scheme == "http" && components.port == 80)
        {
            components.port = nil
        }
        if components.percentEncodedPath.isEmpty { components.percentEncodedPath = "/" }
        return components.string ?? url.absoluteString
    }

    static func defaultAlgorithm(for key: JWK) -> JWSAlgorithm? {
        switch key.keyType {
        case .ec:
            switch key.curve {
            case .p256?: .es256
            case .p384?: .es384
            case .p521?: .es512
            default: nil
            }
        case .rsa: .rs256
        case .okp: .eddsa
        default: nil
        }
    }
}

/// Makes DPoP proofs with one key, its header (with the public JWK) prepared once: what a client keeps per key.
public struct DPoPSigner: Sendable {
    /// The signature algorithm.
    public let algorithm: JWSAlgorithm
    /// The RFC 7638 thumbprint of the key (`cnf.jkt`).
    public let thumbprint: String
    private let key: JWK
    private let header: JOSEObject

    /// A signer for `key` (private, asymmetric) with `algorithm` (by default the key's).
    ///
    /// - Throws: ``JOSEError`` for a symmetric or public key, or an algorithm that does not fit it.
    public init(key: JWK, algorithm: JWSAlgorithm? = nil) throws {
        guard key.isPrivate, key.keyType != .octet else {
            throw JOSEError(.invalidKey, "a DPoP proof needs a private asymmetric key")
        }
        guard let algorithm = algorithm ?? key.algorithm ?? DPoPProof.defaultAlgorithm(for: key), !algorithm.isSymmetric
        else { throw JOSEError(.algorithmNotAllowed, "no asymmetric algorithm fits the DPoP key") }
        self.algorithm = algorithm
        // The key is identified by the embedded jwk, never by a kid.
        self.key = key.keyID == nil ? key : key.with(keyID: nil, algorithm: algorithm)
        let publicKey = try key.publicKey().with(keyID: nil, algorithm: nil)
        header = ["typ": .string(DPoPProof.type), "jwk": publicKey.jsonValue()]
        thumbprint = publicKey.thumbprint
    }

    /// A proof for `method` `url`, as ``DPoPProof/make(key:algorithm:method:url:accessToken:nonce:issuedAt:jti:)``.
    ///
    /// - Throws: ``JOSEError`` when signing fails.
    public func proof(
        method: String, url: URL, accessToken: String? = nil, nonce: String? = nil, issuedAt: Date,
        jti: String = Base64URL.encode(JOSECrypto.randomBytes(16))
    ) throws -> String {
        var claims: JOSEObject = [
            "jti": .string(jti), "htm": .string(method), "htu": .string(DPoPProof.targetURI(url)),
            "iat": .integer(Int64(issuedAt.timeIntervalSince1970.rounded(.down))),
        ]
        if let accessToken { claims["ath"] = .string(DPoPProof.accessTokenHash(accessToken)) }
        if let nonce { claims["nonce"] = .string(nonce) }
        return try JWS.sign(payload: JOSEValue.object(claims).jsonBytes, key: key, algorithm: algorithm, header: header)
    }
}

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
