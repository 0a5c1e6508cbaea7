import Foundation

extension JWK {
    /// Generates a new private key for `algorithm`: RSA 2048 for RS*/PS*, the algorithm's curve for ES*,
    /// Ed25519 for EdDSA, and 256 to 512 random bits for HS*.
    ///
    /// - Parameters:
    ///   - algorithm: what the key will sign with; the key declares it as its `alg`.
    ///   - keyID: the `kid`; by default the RFC 7638 thumbprint.
    /// - Returns: the new private key.
    /// - Throws: ``JOSEError`` with ``JOSEError/Code/cryptoFailure`` if the platform cannot generate the key.
    public static func generate(for algorithm: JWSAlgorithm, keyID: String? = nil) throws -> JWK {
        if algorithm.isSymmetric {
            let key = try JWK(
                components: .octet(k: JOSECrypto.randomBytes(algorithm.digestLength)), declaredAlgorithm: algorithm.name
            )
            return key.with(keyID: keyID ?? key.thumbprint, algorithm: algorithm)
        }
        let (backing, components) = try BackingKey.generate(for: algorithm)
        let key = JWK(components: components, backing: backing, keyID: nil, declaredAlgorithm: algorithm.name)
        return key.with(keyID: keyID ?? key.thumbprint, algorithm: algorithm)
    }

    /// Wraps secret bytes as an HMAC key for `algorithm`.
    ///
    /// - Throws: ``JOSEError`` with ``JOSEError/Code/weakKey`` when the key is shorter than the hash output
    ///   (RFC 7518 §3.2).
    public init(symmetricKey: some Collection<UInt8>, algorithm: JWSAlgorithm, keyID: String? = nil) throws {
        guard algorithm.isSymmetric else { throw JOSEError(.invalidKey, "\(algorithm) is not an HMAC algorithm") }
        guard symmetricKey.count >= algorithm.digestLength else {
            throw JOSEError(.weakKey, "an \(algorithm) key must be at least \(algorithm.digestLength) bytes")
        }
        try self.init(components: .octet(k: Array(symmetricKey)), keyID: keyID, declaredAlgorithm: algorithm.name)
    }

    /// Imports a PEM SubjectPublicKeyInfo (`PUBLIC KEY`) or unencrypted PKCS#8 (`PRIVATE KEY`) key.
    ///
    /// Exactly one block; SEC1 (`EC PRIVATE KEY`), PKCS#1 (`RSA PRIVATE KEY`), encrypted keys and compressed EC
    /// points are refused, and a PKCS#8 key whose embedded public key is not its own is refused — the same on
    /// every platform.
    ///
    /// - Throws: ``JOSEError`` with ``JOSEError/Code/invalidKey`` or ``JOSEError/Code/weakKey``.
    public init(pemRepresentation pem: String, keyID: String? = nil, algorithm: JWSAlgorithm? = nil) throws {
        let (embedded, normalized) = try DER.checkedPEM(pem)
        let components = try BackingKey.fromPEM(normalized ?? pem).components()
        if let embedded {
            let derived: [UInt8] =
                switch components {
                case .ec(_, let x, let y, _): x + y
                case .okp(_, let x, _): x
                default: []
                }
            guard derived == embedded else {
                throw JOSEError(.invalidKey, "the PKCS#8 key's public key is not the one its private key derives")
            }
        }
        try self.init(components: components, keyID: keyID, declaredAlgorithm: algorithm?.name)
    }

    /// The public key as PEM SubjectPublicKeyInfo.
    public var pemRepresentation: String {
        get throws {
            guard let backing else { throw JOSEError(.invalidKey, "a symmetric key has no PEM form") }
            return try backing.pem(includingPrivate: false)
        }
    }

    /// The private key as PEM PKCS#8.
    ///
    /// > Warning: The result is secret. Store it with 0600 permissions and never log it.
    public var unsafePrivatePEMRepresentation: String {
        get throws {
            guard let backing, isPrivate else { throw JOSEError(.invalidKey, "not a private asymmetric key") }
            return try backing.pem(includingPrivate: true)
        }
    }
}
