public import Foundation

/// A JWT claim set (RFC 7519 §4): the registered claims as typed properties, every claim by name.
///
/// The typed properties are lenient readers (nil when absent or of the wrong type); ``JWTVerifier`` is what
/// enforces types and values.
public struct JWTClaims: Sendable, Hashable {
    /// Every claim, by name.
    public let values: JOSEObject

    /// Creates a claim set.
    public init(_ values: JOSEObject) { self.values = values }

    /// Creates a claim set from a dictionary.
    public init(_ values: [String: JOSEValue]) { self.values = JOSEObject(values) }

    /// The claim named `name`.
    public subscript(name: String) -> JOSEValue? { values[name] }

    /// `iss`: the issuer.
    public var issuer: String? { values[Names.iss]?.stringValue }
    /// `sub`: the subject.
    public var subject: String? { values[Names.sub]?.stringValue }
    /// `aud`: the audiences (a single string is a one-element list).
    public var audience: [String]? {
        switch values[Names.aud] {
        case .string(let single)?: [single]
        case .array(let many)?: many.compactMap(\.stringValue)
        default: nil
        }
    }
    /// `exp`: the expiry time.
    public var expiresAt: Date? { date(Names.exp) }
    /// `nbf`: not valid before.
    public var notBefore: Date? { date(Names.nbf) }
    /// `iat`: when it was issued.
    public var issuedAt: Date? { date(Names.iat) }
    /// `jti`: the token's unique ID.
    public var jwtID: String? { values[Names.jti]?.stringValue }
    /// `azp`: the authorized party (OIDC Core §2).
    public var authorizedParty: String? { values[Names.azp]?.stringValue }
    /// `nonce` (OIDC Core §2).
    public var nonce: String? { values[Names.nonce]?.stringValue }

    private func date(_ name: JOSEObject.Name) -> Date? {
        values[name]?.doubleValue.map { Date(timeIntervalSince1970: $0) }
    }

    /// The registered claim names, with their fingerprints computed once.
    package enum Names {
        package static let iss = JOSEObject.Name("iss")
        package static let sub = JOSEObject.Name("sub")
        package static let aud = JOSEObject.Name("aud")
        package static let exp = JOSEObject.Name("exp")
        package static let nbf = JOSEObject.Name("nbf")
        package static let iat = JOSEObject.Name("iat")
        package static let jti = JOSEObject.Name("jti")
        package static let azp = JOSEObject.Name("azp")
        package static let nonce = JOSEObject.Name("nonce")
        package static let events = JOSEObject.Name("events")
    }

    /// The claims as JSON (members sorted).
    public var jsonValue: JOSEValue { .object(values) }
}
