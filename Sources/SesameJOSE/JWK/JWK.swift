import Foundation

/// A JSON Web Key (RFC 7517): an RSA, EC (P-256, P-384, P-521), OKP (Ed25519) or, when asked for on purpose,
/// symmetric (`oct`) key.
///
/// A `JWK` is parsed and checked once, when it is created: RSA moduli under 2048 bits, even or tiny public
/// exponents and ROCA-weak moduli are refused; EC points must be on the named curve with coordinates of exactly
/// the curve's length; HMAC keys must not be empty. The backend key object is built at the same time and
/// reused by every verification, so verifying never re-parses the key.
public struct JWK: Sendable {
    /// The key type (RFC 7518 §6.1).
    ///
    /// Sent as `kty`.
    public enum KeyType: String, Sendable, Hashable {
        case rsa = "RSA"
        case ec = "EC"
        case okp = "OKP"
        case octet = "oct"
    }

    /// A named curve.
    ///
    /// Sent as `crv`.
    public struct Curve: Hashable, Sendable, CustomStringConvertible {
        /// The registered name (`P-256`, `P-384`, `P-521`, `Ed25519`).
        public let name: String
        /// The length in octets of one coordinate (or of the OKP public key).
        public let coordinateLength: Int

        /// The registered name.
        public var description: String { name }
        /// NIST P-256 (secp256r1).
        public static let p256 = Curve(name: "P-256", coordinateLength: 32)
        /// NIST P-384 (secp384r1).
        public static let p384 = Curve(name: "P-384", coordinateLength: 48)
        /// NIST P-521 (secp521r1).
        public static let p521 = Curve(name: "P-521", coordinateLength: 66)
        /// Edwards25519 for EdDSA (RFC 8037).
        public static let ed25519 = Curve(name: "Ed25519", coordinateLength: 32)

        package static let all: [Curve] = [.p256, .p384, .p521, .ed25519]
        package init?(name: String) {
            guard let curve = Self.all.first(where: { $0.name == name }) else { return nil }
            self = curve
        }
        private init(name: String, coordinateLength: Int) {
            self.name = name
            self.coordinateLength = coordinateLength
        }
    }

    /// The key type.
    ///
    /// Sent as `kty`.
    public var keyType: KeyType { components.keyType }
    /// The key identifier, compared byte for byte.
    ///
    /// Sent as `kid`.
    public let keyID: String?
    /// The algorithm the key is restricted to, as declared.
    ///
    /// Sent as `alg`. A key that declares an algorithm
    /// verifies only tokens of that algorithm (RFC 8725 §3.1).
    public let declaredAlgorithm: String?
    /// The intended use (`sig` or `enc`).
    ///
    /// Sent as `use`.
    public let use: String?
    /// The permitted operations.
    ///
    /// Sent as `key_ops`.
    public let keyOperations: [String]?

    package let components: Components
    package let backing: BackingKey?

    /// The curve, for EC and OKP keys.
    public var curve: Curve? {
        switch components {
        case .ec(let curve, _, _, _), .okp(let curve, _, _): curve
        default: nil
        }
    }

    /// Whether the key holds private (or, for `oct`, secret) material.
    public var isPrivate: Bool { components.isPrivate }

    /// The algorithm this key is tied to: its declared `alg` when that is a supported JWS algorithm, else nil.
    public var algorithm: JWSAlgorithm? { declaredAlgorithm.flatMap(JWSAlgorithm.init(name:)) }

    /// The size of an RSA modulus or of an HMAC key in bits, or the curve's field size.
    public var keySizeInBits: Int {
        switch components {
        case .rsa(let n, _, _): Self.bitLength(of: n)
        case .ec(let curve, _, _, _): curve == .p521 ? 521 : curve.coordinateLength * 8
        case .okp: 256
        case .octet(let k): k.count * 8
        }
    }

    package init(
        components: Components,
        keyID: String? = nil,
        declaredAlgorithm: String? = nil,
        use: String? = nil,
        keyOperations: [String]? = nil
    ) throws(JOSEError) {
        try components.validate()
        self.components = components
        self.keyID = keyID
        self.declaredAlgorithm = declaredAlgorithm
        self.use = use
        self.keyOperations = keyOperations
        if case .octet = components {
            backing = nil
        } else {
            backing = try BackingKey(components: components)
        }
    }

    package init(components: Components, backing: BackingKey, keyID: String?, declaredAlgorithm: String?) {
        self.components = components
        self.backing = backing
        self.keyID = keyID
        self.declaredAlgorithm = declaredAlgorithm
        self.use = nil
        self.keyOperations = nil
    }

    /// The same key without its private material (and with the same `kid`, `alg`, `use`, `key_ops`).
    ///
    /// - Throws: ``JOSEError`` with ``JOSEError/Code/invalidKey`` for a symmetric key, which has no public half.
    public func publicKey() throws -> JWK {
        let publicComponents: Components
        switch components {
        case .rsa(let n, let e, _): publicComponents = .rsa(n: n, e: e, private: nil)
        case .ec(let curve, let x, let y, _): publicComponents = .ec(curve: curve, x: x, y: y, d: nil)
        case .okp(let curve, let x, _): publicComponents = .okp(curve: curve, x: x, d: nil)
        case .octet: throw JOSEError(.invalidKey, "a symmetric key has no public half")
        }
        return try JWK(
            components: publicComponents,
            keyID: keyID,
            declaredAlgorithm: declaredAlgorithm,
            use: use,
            keyOperations: keyOperations
        )
    }

    /// A copy with another key ID and algorithm restriction.
    public func with(keyID: String?, algorithm: JWSAlgorithm?) -> JWK {
        JWK(copying: self, keyID: keyID, declaredAlgorithm: algorithm?.name)
    }

    private init(copying other: JWK, keyID: String?, declaredAlgorithm: String?) {
        components = other.components
        backing = other.backing
        use = other.use
        keyOperations = other.keyOperations
        self.keyID = keyID
        self.declaredAlgorithm = declaredAlgorithm
    }

    package static func bitLength(of bigEndian: [UInt8]) -> Int {
        guard let first = bigEndian.firstIndex(where: { $0 != 0 }) else { return 0 }
        return (bigEndian.count - first) * 8 - bigEndian[first].leadingZeroBitCount
    }
}

extension JWK: CustomStringConvertible {
    /// Type, curve or size, and `kid`; never key material.
    public var description: String {
        var parts = ["kty=\(keyType.rawValue)"]
        if let curve { parts.append("crv=\(curve.name)") } else { parts.append("bits=\(keySizeInBits)") }
        if let keyID { parts.append("kid=\(keyID)") }
        if let declaredAlgorithm { parts.append("alg=\(declaredAlgorithm)") }
        if isPrivate { parts.append("private") }
        return "JWK(\(parts.joined(separator: ", ")))"
    }
}

extension JWK: CustomReflectable {
    /// `dump()` and `Mirror` show what ``description`` shows, never key material.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "keyType": keyType.rawValue, "keyID": keyID as Any, "algorithm": declaredAlgorithm as Any,
                "isPrivate": isPrivate,
            ], displayStyle: .struct)
    }
}
