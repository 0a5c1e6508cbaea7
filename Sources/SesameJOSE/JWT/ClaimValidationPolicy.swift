public import Foundation

/// What ``JWTVerifier`` demands of a claim set beyond the signature.
///
/// Defaults are strict: `exp` is required, time claims must be plausible JSON numbers, the leeway is 60 s.
public struct ClaimValidationPolicy: Sendable {
    /// The exact `iss` required (compared byte for byte, OIDC Core §3.1.3.7 step 2), or nil to skip.
    public var issuer: String?
    /// An audience `aud` must contain, byte for byte (OIDC Core §3.1.3.7 step 3), or nil to skip.
    public var audience: String?
    /// Further audiences that may appear beside ``audience`` without requiring `azp`.
    public var additionalTrustedAudiences: Set<String> = []
    /// The required `azp` when present (or when untrusted extra audiences make it mandatory).
    ///
    /// Defaults to
    /// ``audience`` for that check when nil.
    public var authorizedParty: String?
    /// The `nonce` the token must carry (compared in constant time), or nil to skip.
    public var nonce: String?
    /// Clock-skew allowance for `exp`, `nbf` and `iat`.
    ///
    /// Default 60 s.
    public var leeway: TimeInterval = 60
    /// The oldest acceptable `iat`, or nil for no bound.
    public var maxAge: TimeInterval?
    /// Claims that must be present.
    ///
    /// Default `["exp"]`.
    public var requiredClaims: Set<String> = ["exp"]
    /// Acceptable `typ` header values, compared case-insensitively without an `application/` prefix.
    ///
    /// An absent
    /// `typ` is accepted. Default `["jwt"]`, which refuses `at+jwt`, `dpop+jwt`, `logout+jwt` and the like
    /// (RFC 8725 §3.11).
    public var acceptedTypes: Set<String> = ["jwt"]
    /// Whether a token with an `events` claim — a security event or logout token (RFC 8417, OIDC Back-Channel
    /// Logout) — is refused (default true: such a token must never pass as an ID or access token; ATK-19).
    public var rejectsSecurityEventTokens = true

    /// Creates a policy.
    public init(
        issuer: String? = nil,
        audience: String? = nil,
        nonce: String? = nil,
        leeway: TimeInterval = 60,
        requiredClaims: Set<String> = ["exp"]
    ) {
        self.issuer = issuer
        self.audience = audience
        self.nonce = nonce
        self.leeway = leeway
        self.requiredClaims = requiredClaims
    }

    /// Registered claims that must be strings when present.
    private static let stringClaims = [
        JWTClaims.Names.iss, JWTClaims.Names.sub, JWTClaims.Names.jti, JWTClaims.Names.azp, JWTClaims.Names.nonce,
    ]

    /// The latest plausible NumericDate: the end of year 9999.
    ///
    /// Larger values are usually milliseconds.
    static let latestPlausibleDate: Double = 253_402_300_799

    /// Checks `claims` at time `now`.
    ///
    /// - Throws: ``JOSEError`` with a distinct code per failure.
    public func validate(_ claims: JWTClaims, now: Date) throws {
        try check(claims, now: now)
    }

    func check(_ claims: JWTClaims, now: Date) throws(JOSEError) {
        if !requiredClaims.allSatisfy({ claims[$0] != nil }) {
            // Sorted, so that the error names the same claim every time.
            for name in requiredClaims.sorted() where claims[name] == nil {
                throw JOSEError(.missingClaim, "the required claim \(name) is missing", parameter: name)
            }
        }
        let time = now.timeIntervalSince1970
        if let exp = try numericDate(JWTClaims.Names.exp, in: claims), time >= exp + leeway {
            throw JOSEError(.expired, "the token expired", parameter: "exp")
        }
        if let nbf = try numericDate(JWTClaims.Names.nbf, in: claims), time + leeway < nbf {
            throw JOSEError(.notYetValid, "the token is not valid yet", parameter: "nbf")
        }
        if let iat = try numericDate(JWTClaims.Names.iat, in: claims) {
            if iat > time + leeway {
                throw JOSEError(.issuedInFuture, "the token was issued in the future", parameter: "iat")
            }
            if let maxAge, time - iat > maxAge + leeway {
                throw JOSEError(.issuedTooLongAgo, "the token was issued too long ago", parameter: "iat")
            }
        }
        for name in Self.stringClaims {
            if let value = claims.values[name], value.stringValue == nil {
                throw JOSEError(.invalidClaimType, "\(name.name) must be a string", parameter: name.name)
            }
        }
        if rejectsSecurityEventTokens, claims.values[JWTClaims.Names.events] != nil {
            throw JOSEError(
                .invalidClaimType, "a security event token (events claim) is not an ID or access token",
                parameter: "events")
        }
        if let issuer, !(claims.issuer.map { ByteExact.equals($0, issuer) } ?? false) {
            throw JOSEError(
                claims.issuer == nil ? .missingClaim : .issuerMismatch,
                claims.issuer.map { "iss \"\($0.prefix(200))\" is not the expected \"\(issuer)\"" }
                    ?? "iss is missing (expected \"\(issuer)\")",
                parameter: "iss")
        }
        try checkAudience(claims)
        if let nonce {
            guard let actual = claims.nonce, ConstantTime.equals(actual, nonce) else {
                throw JOSEError(.nonceMismatch, "nonce is missing or not the one sent", parameter: "nonce")
            }
        }
    }

    private func checkAudience(_ claims: JWTClaims) throws(JOSEError) {
        if let aud = claims.values[JWTClaims.Names.aud] {
            let valid =
                switch aud {
                case .string: true
                case .array(let items): !items.isEmpty && items.allSatisfy { $0.stringValue != nil }
                default: false
                }
            guard valid else {
                throw JOSEError(.invalidClaimType, "aud must be a string or an array of strings", parameter: "aud")
            }
        }
        let expectedParty = authorizedParty ?? audience
        if let expectedParty, let azp = claims.authorizedParty, !ByteExact.equals(azp, expectedParty) {
            throw JOSEError(.authorizedPartyMismatch, "azp is not the expected party", parameter: "azp")
        }
        guard let audience else { return }
        guard let audiences = claims.audience else {
            throw JOSEError(.missingClaim, "aud is missing", parameter: "aud")
        }
        guard ByteExact.contains(audiences, audience) else {
            let listed = audiences.prefix(5).map { "\"\($0.prefix(100))\"" }.joined(separator: ", ")
            throw JOSEError(
                .audienceMismatch, "aud [\(listed)] does not contain the expected \"\(audience)\"", parameter: "aud")
        }
        let trusted = [audience] + additionalTrustedAudiences
        let untrusted = audiences.filter { !ByteExact.contains(trusted, $0) }
        if !untrusted.isEmpty, claims.authorizedParty != expectedParty {
            throw JOSEError(
                .authorizedPartyMismatch,
                "aud lists untrusted audiences and azp does not name the expected party",
                parameter: "azp"
            )
        }
    }

    private func numericDate(_ key: JOSEObject.Name, in claims: JWTClaims) throws(JOSEError) -> Double? {
        let name = key.name
        guard let value = claims.values[key] else { return nil }
        guard let seconds = value.doubleValue else {
            throw JOSEError(.invalidClaimType, "\(name) must be a NumericDate (a JSON number)", parameter: name)
        }
        guard seconds >= 0, seconds <= Self.latestPlausibleDate else {
            throw JOSEError(
                .invalidClaimType, "\(name) is not a plausible NumericDate (milliseconds?)", parameter: name)
        }
        return seconds
    }
}
