/// A JWS signature algorithm (RFC 7518 §3, RFC 8037, RFC 9864).
///
/// The set is closed on purpose: only algorithms this library implements exist as values, and there is no
/// `none`. Names compare case-sensitively, so `None`, `NONE` or `rs256` never match anything.
public struct JWSAlgorithm: Hashable, Sendable, CustomStringConvertible {
    /// The registered name, as sent in `alg`.
    public let name: String

    package enum Family: Sendable { case rsaPKCS1, rsaPSS, ecdsa, eddsa, hmac }
    package enum Hash: Sendable { case sha256, sha384, sha512 }

    package let family: Family
    package let hash: Hash
    /// A small dense number (the position in ``all``), for per-algorithm tables.
    package let index: Int

    private init(_ name: String, _ family: Family, _ hash: Hash, _ index: Int) {
        self.name = name
        self.family = family
        self.hash = hash
        self.index = index
    }

    /// Algorithms are equal when their names are.
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.name == rhs.name }
    /// Hashes the name.
    public func hash(into hasher: inout Hasher) { hasher.combine(name) }
    /// The registered name.
    public var description: String { name }

    /// RSASSA-PKCS1-v1_5 with SHA-256.
    public static let rs256 = Self("RS256", .rsaPKCS1, .sha256, 0)
    /// RSASSA-PKCS1-v1_5 with SHA-384.
    public static let rs384 = Self("RS384", .rsaPKCS1, .sha384, 1)
    /// RSASSA-PKCS1-v1_5 with SHA-512.
    public static let rs512 = Self("RS512", .rsaPKCS1, .sha512, 2)
    /// RSASSA-PSS with SHA-256, MGF1-SHA-256 and a 32-octet salt.
    public static let ps256 = Self("PS256", .rsaPSS, .sha256, 3)
    /// RSASSA-PSS with SHA-384, MGF1-SHA-384 and a 48-octet salt.
    public static let ps384 = Self("PS384", .rsaPSS, .sha384, 4)
    /// RSASSA-PSS with SHA-512, MGF1-SHA-512 and a 64-octet salt.
    public static let ps512 = Self("PS512", .rsaPSS, .sha512, 5)
    /// ECDSA on P-256 with SHA-256; the signature is the 64-octet `R‖S`.
    public static let es256 = Self("ES256", .ecdsa, .sha256, 6)
    /// ECDSA on P-384 with SHA-384; the signature is the 96-octet `R‖S`.
    public static let es384 = Self("ES384", .ecdsa, .sha384, 7)
    /// ECDSA on P-521 with SHA-512; the signature is the 132-octet `R‖S`.
    public static let es512 = Self("ES512", .ecdsa, .sha512, 8)
    /// EdDSA (RFC 8037); Sesame supports the Ed25519 curve.
    public static let eddsa = Self("EdDSA", .eddsa, .sha512, 9)
    /// Ed25519, the fully specified name of RFC 9864.
    public static let ed25519 = Self("Ed25519", .eddsa, .sha512, 10)
    /// HMAC with SHA-256.
    ///
    /// Only usable with a key created as symmetric on purpose.
    public static let hs256 = Self("HS256", .hmac, .sha256, 11)
    /// HMAC with SHA-384.
    public static let hs384 = Self("HS384", .hmac, .sha384, 12)
    /// HMAC with SHA-512.
    public static let hs512 = Self("HS512", .hmac, .sha512, 13)

    /// Every supported algorithm.
    public static let all: [JWSAlgorithm] = [
        .rs256, .rs384, .rs512, .ps256, .ps384, .ps512, .es256, .es384, .es512, .eddsa, .ed25519, .hs256, .hs384,
        .hs512,
    ]

    /// The asymmetric algorithms: the default allowlist for tokens from an issuer.
    public static let asymmetric: Set<JWSAlgorithm> = Set(all.filter { $0.family != .hmac })

    /// Looks up a registered name, case-sensitively.
    ///
    /// Returns nil for `none` and every unknown name.
    public init?(name: String) {
        guard let found = Self.all.first(where: { $0.name == name }) else { return nil }
        self = found
    }

    /// Whether this is an HMAC algorithm.
    public var isSymmetric: Bool { family == .hmac }

    /// The curve an ECDSA algorithm requires (RFC 7518 §3.4).
    package var requiredCurve: JWK.Curve? {
        switch self {
        case .es256: .p256
        case .es384: .p384
        case .es512: .p521
        case .eddsa, .ed25519: .ed25519
        default: nil
        }
    }

    /// The digest length in octets.
    package var digestLength: Int {
        switch hash {
        case .sha256: 32
        case .sha384: 48
        case .sha512: 64
        }
    }
}
