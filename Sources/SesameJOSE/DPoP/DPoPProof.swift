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
        nonce: String? = nil, issuedAt: Date, jti: String = DPoPProof.freshJTI()
    ) throws -> String {
        try DPoPSigner(key: key, algorithm: algorithm).proof(
            method: method, url: url, accessToken: accessToken, nonce: nonce, issuedAt: issuedAt, jti: jti)
    }

    /// A new `jti`: 128 bits from the system's CSPRNG, base64url (RFC 9449 §4.2 asks for at least 96).
    ///
    /// The random bytes are drawn 4 KiB at a time and handed out once each (a draw per proof costs more than the
    /// rest of the proof's assembly); a forked child starts a fresh pool, so it never repeats its parent's.
    public static func freshJTI() -> String {
        let bytes = randomPool.withLock { pool in
            let pid = getpid()
            if pool.offset + 16 > pool.bytes.count || pool.owner != pid {
                pool = RandomPool(bytes: JOSECrypto.randomBytes(4096), offset: 0, owner: pid)
            }
            defer { pool.offset += 16 }
            return pool.bytes[pool.offset..<pool.offset + 16]
        }
        return Base64URL.encode(bytes)
    }

    private struct RandomPool {
        var bytes: [UInt8]
        var offset: Int
        var owner: pid_t
    }
    private static let randomPool = LockedValue(RandomPool(bytes: [], offset: 0, owner: 0))

    /// `ath`: base64url(SHA-256(ASCII(access token))) (RFC 9449 §4.2).
    public static func accessTokenHash(_ accessToken: String) -> String {
        Base64URL.encode(JOSECrypto.sha256(Array(accessToken.utf8)))
    }

    /// `htu`: the URL without query and fragment, scheme and host in lower case (RFC 9449 §4.2, RFC 3986 §6.2.2).
    public static func targetURI(_ url: URL) -> String {
        if let plain = plainTargetURI(url.absoluteString) { return plain }
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

    /// `htu` straight from the text when it is already normal; nil means "normalise the long way".
    ///
    /// Normal: a lower-case scheme and authority without user info or a default port, and a path; cut before `?`
    /// or `#` (every proof's case; URLComponents costs more than the rest of a proof's assembly).
    static func plainTargetURI(_ text: String) -> String? {
        let bytes = text.utf8
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        let scheme = bytes[..<colon]
        let https = scheme.elementsEqual("https".utf8)
        guard https || scheme.elementsEqual("http".utf8) else { return nil }
        let rest = bytes[colon...]
        guard rest.starts(with: "://".utf8) else { return nil }
        let authorityStart = bytes.index(colon, offsetBy: 3)
        let end =
            bytes[authorityStart...].firstIndex { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? bytes.endIndex
        guard let pathStart = bytes[authorityStart..<end].firstIndex(of: UInt8(ascii: "/")) else { return nil }
        let authority = bytes[authorityStart..<pathStart]
        guard !authority.isEmpty,
            !authority.contains(where: {
                ($0 >= 0x41 && $0 <= 0x5A) || $0 == UInt8(ascii: "@") || $0 == UInt8(ascii: "%")
            })
        else { return nil }
        let defaultPort = https ? ":443" : ":80"
        if authority.count > defaultPort.utf8.count,
            authority[authority.index(authority.endIndex, offsetBy: -defaultPort.utf8.count)...].elementsEqual(
                defaultPort.utf8)
        {
            return nil
        }
        return String(text.utf8[..<end])
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

/// A DPoP private key whose material stays where it is kept — the Secure Enclave, a hardware token, another
/// process — and that signs on request.
///
/// Give one to ``DPoPSigner/init(signingKey:checkingSignature:)``; a private ``JWK`` needs none of this
/// (``DPoPSigner/init(key:algorithm:)``).
public protocol DPoPSigningKey: Sendable {
    /// The public half, embedded in every proof's `jwk` header.
    var publicKey: JWK { get }
    /// The algorithm it signs with (it must fit ``publicKey``).
    var algorithm: JWSAlgorithm { get }
    /// The JWS signature of `signingInput`: for ES256 the 64-byte `R‖S` (RFC 7518 §3.4), never DER.
    func signature(for signingInput: [UInt8]) throws -> [UInt8]
}

/// Makes DPoP proofs with one key, its header (with the public JWK) encoded once: what a client keeps per key.
public struct DPoPSigner: Sendable {
    /// The signature algorithm.
    public let algorithm: JWSAlgorithm
    /// The RFC 7638 thumbprint of the key (`cnf.jkt`).
    public let thumbprint: String
    /// The public key the proofs carry.
    public let publicKey: JWK
    private enum Signer: Sendable {
        case key(JWK)
        case external(any DPoPSigningKey)
    }
    private let signer: Signer
    /// base64url(header) and the dot: the same for every proof.
    private let encodedHeader: [UInt8]

    /// A signer for `key` (private, asymmetric) with `algorithm` (by default the key's).
    ///
    /// - Throws: ``JOSEError`` for a symmetric or public key, or an algorithm that does not fit it.
    public init(key: JWK, algorithm: JWSAlgorithm? = nil) throws {
        guard key.isPrivate, key.keyType != .octet else {
            throw JOSEError(.invalidKey, "a DPoP proof needs a private asymmetric key")
        }
        guard let algorithm = algorithm ?? key.algorithm ?? DPoPProof.defaultAlgorithm(for: key), !algorithm.isSymmetric
        else { throw JOSEError(.algorithmNotAllowed, "no asymmetric algorithm fits the DPoP key") }
        guard key.fits(algorithm), key.declaredAlgorithm.map({ $0 == algorithm.name }) ?? true, key.backing != nil
        else { throw JOSEError(.algorithmNotAllowed, "\(algorithm) does not fit the DPoP key") }
        try self.init(publicKey: try key.publicKey(), algorithm: algorithm, signer: .key(key))
    }

    /// A signer for a key kept elsewhere (``DPoPSigningKey``).
    ///
    /// With `checkingSignature` (the default) one signature is made and verified with the public key here, so a
    /// key that answers in the wrong format (DER instead of `R‖S`) or does not match its public half is refused at
    /// once, not by a server later. Skip it for a key already checked when it was made (a signature may cost a
    /// user prompt).
    ///
    /// - Throws: ``JOSEError`` for a private or symmetric `publicKey`, an algorithm that does not fit it, or a key
    ///   whose test signature does not verify; what the key's ``DPoPSigningKey/signature(for:)`` throws.
    public init(signingKey: any DPoPSigningKey, checkingSignature: Bool = true) throws {
        let publicKey = signingKey.publicKey
        let algorithm = signingKey.algorithm
        guard !publicKey.isPrivate, publicKey.keyType != .octet, !algorithm.isSymmetric, publicKey.fits(algorithm)
        else {
            throw JOSEError(.invalidKey, "a DPoP signing key needs an asymmetric public key that fits \(algorithm)")
        }
        try self.init(publicKey: publicKey, algorithm: algorithm, signer: .external(signingKey))
        guard checkingSignature else { return }
        let probe = Array("sesame-dpop-key-check".utf8)
        guard Self.verifies(try sign(probe), probe, publicKey, algorithm) else {
            throw JOSEError(.signatureInvalid, "the DPoP signing key's signature does not verify with its public key")
        }
    }

    private init(publicKey: JWK, algorithm: JWSAlgorithm, signer: Signer) throws {
        self.algorithm = algorithm
        self.signer = signer
        // The key is identified by the embedded jwk, never by a kid.
        let bare = publicKey.with(keyID: nil, algorithm: nil)
        self.publicKey = bare
        thumbprint = bare.thumbprint
        let header: JOSEObject = [
            "typ": .string(DPoPProof.type), "alg": .string(algorithm.name), "jwk": bare.jsonValue(),
        ]
        var encoded: [UInt8] = []
        Base64URL.encode(JOSEValue.object(header).jsonBytes, into: &encoded)
        encoded.append(UInt8(ascii: "."))
        encodedHeader = encoded
    }

    private static func verifies(_ signature: [UInt8], _ input: [UInt8], _ key: JWK, _ algorithm: JWSAlgorithm) -> Bool
    {
        guard let backing = key.backing else { return false }
        return signature.withUnsafeBytes { signature in
            input.withUnsafeBytes { backing.verify(signature: signature, message: $0, algorithm: algorithm) }
        }
    }

    private func sign(_ input: [UInt8]) throws -> [UInt8] {
        switch signer {
        case .key(let key):
            guard let backing = key.backing else { throw JOSEError(.invalidKey, "the key has no backend") }
            return try input.withUnsafeBytes { input throws(JOSEError) in try backing.sign(input, algorithm: algorithm)
            }
        case .external(let key):
            let signature = try key.signature(for: input)
            if let curve = algorithm.requiredCurve, signature.count != 2 * curve.coordinateLength {
                throw JOSEError(
                    .cryptoFailure, "the DPoP signing key returned a \(signature.count)-byte \(algorithm) signature")
            }
            return signature
        }
    }

    /// A compact JWS of `payload` signed with this key, its header `header` plus `alg` (and never the `jwk` that
    /// proofs carry): a client assertion (RFC 7523) from the same kinds of keys as proofs — a JWK, the Secure
    /// Enclave, any ``DPoPSigningKey``.
    ///
    /// - Throws: ``JOSEError`` when signing fails.
    public func compactJWS(payload: [UInt8], header: JOSEObject = [:]) throws -> String {
        var parameters = header
        parameters["alg"] = .string(algorithm.name)
        var signingInput: [UInt8] = []
        Base64URL.encode(JOSEValue.object(parameters).jsonBytes, into: &signingInput)
        signingInput.append(UInt8(ascii: "."))
        Base64URL.encode(payload, into: &signingInput)
        let signature = try sign(signingInput)
        signingInput.append(UInt8(ascii: "."))
        Base64URL.encode(signature, into: &signingInput)
        return String(decoding: signingInput, as: UTF8.self)
    }

    /// A proof for `method` `url`, as ``DPoPProof/make(key:algorithm:method:url:accessToken:nonce:issuedAt:jti:)``.
    ///
    /// - Throws: ``JOSEError`` when signing fails.
    public func proof(
        method: String, url: URL, accessToken: String? = nil, nonce: String? = nil, issuedAt: Date,
        jti: String = DPoPProof.freshJTI()
    ) throws -> String {
        // The claims written directly, members in name order (what JOSEValue would write, without building it).
        var claims: [UInt8] = []
        claims.reserveCapacity(256)
        func member(_ name: StaticString, _ value: String) {
            claims.append(claims.isEmpty ? UInt8(ascii: "{") : UInt8(ascii: ","))
            claims.append(UInt8(ascii: "\""))
            claims.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
            claims.append(contentsOf: "\":".utf8)
            JOSEValue.writeString(value, into: &claims)
        }
        if let accessToken { member("ath", DPoPProof.accessTokenHash(accessToken)) }
        member("htm", method)
        member("htu", DPoPProof.targetURI(url))
        claims.append(contentsOf: ",\"iat\":".utf8)
        claims.append(contentsOf: String(Int64(issuedAt.timeIntervalSince1970.rounded(.down))).utf8)
        member("jti", jti)
        if let nonce { member("nonce", nonce) }
        claims.append(UInt8(ascii: "}"))
        var output = encodedHeader
        output.reserveCapacity(encodedHeader.count + claims.count * 4 / 3 + 100)
        Base64URL.encode(claims, into: &output)
        let signature = try sign(output)
        output.append(UInt8(ascii: "."))
        Base64URL.encode(signature, into: &output)
        return String(decoding: output, as: UTF8.self)
    }
}
