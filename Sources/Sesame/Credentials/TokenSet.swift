public import Foundation
public import SesameJOSE

/// The credentials of one signed-in identity.
///
/// `Codable` for storage. Its `description` and `debugDescription` never show a token: print it, log it, put it
/// in an error — only the shape and expiry appear.
public struct TokenSet: Sendable, Codable, Hashable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// Who the tokens belong to.
    public struct User: Sendable, Codable, Hashable {
        /// The stable user identifier (REST `user.id`, OIDC `sub`).
        public var id: String
        /// The email address, when known.
        public var email: String?
        /// Every claim the backend sent about the user (the REST `user` object, or the ID token's claims).
        public var claims: [String: JOSEValue]?

        /// Creates a user.
        public init(id: String, email: String? = nil, claims: [String: JOSEValue]? = nil) {
            self.id = id
            self.email = email
            self.claims = claims
        }
    }

    /// The access token.
    ///
    /// RFC 6749 §5.1 `access_token`; REST `accessToken`.
    public var accessToken: String
    /// `Bearer` or `DPoP` (compared case-insensitively).
    ///
    /// RFC 6749 §5.1 `token_type`.
    public var tokenType: String
    /// The refresh token, when the server issued one.
    public var refreshToken: String?
    /// The OIDC ID token, when there is one.
    public var idToken: String?
    /// When the access token expires: from `expires_in` at receipt, else the JWT's `exp`, else unknown (nil).
    public var expiresAt: Date?
    /// When the tokens were received (used to keep the refresh leeway below half the token's lifetime).
    public var receivedAt: Date?
    /// The granted scope, space-separated.
    public var scope: String?
    /// The user.
    public var user: User?
    /// For DPoP-bound tokens (RFC 9449), the RFC 7638 thumbprint of the key they are bound to.
    ///
    /// Stored with the tokens so that a missing or replaced key is noticed before anything is sent:
    /// ``AuthError/Code/dpopKeyMismatch`` ("sign in again"), never a Bearer request.
    public var dpopKeyThumbprint: String?
    /// An OpenID Connect Native SSO device secret that came with the tokens (`device_secret`), before
    /// ``OIDCAuth`` moves it to the store the vendor's apps share (``NativeSSOStore``); a session's own stored tokens
    /// never carry one.
    public var deviceSecret: String?

    /// These tokens without ``deviceSecret``.
    var withoutDeviceSecret: TokenSet {
        var copy = self
        copy.deviceSecret = nil
        return copy
    }

    /// Whether the tokens are bound to a DPoP key.
    ///
    /// True when the type is `DPoP` (in any ASCII case) or a key thumbprint is recorded; such tokens are never sent
    /// as Bearer.
    public var isDPoPBound: Bool { SesameHTTP.Headers.same(tokenType, "dpop") || dpopKeyThumbprint != nil }

    /// Creates a token set.
    public init(
        accessToken: String,
        tokenType: String = "Bearer",
        refreshToken: String? = nil,
        idToken: String? = nil,
        expiresAt: Date? = nil,
        receivedAt: Date? = nil,
        scope: String? = nil,
        user: User? = nil,
        dpopKeyThumbprint: String? = nil,
        deviceSecret: String? = nil
    ) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.refreshToken = refreshToken
        self.idToken = idToken
        self.expiresAt = expiresAt
        self.receivedAt = receivedAt
        self.scope = scope
        self.user = user
        self.dpopKeyThumbprint = dpopKeyThumbprint
        self.deviceSecret = deviceSecret
    }

    /// The expiry to assume for a freshly received access token.
    ///
    /// - `expires_in` ≤ 0: expired now (the token is refreshed before its first use).
    /// - `expires_in` a number of seconds up to ``maximumLifetime``: that long after `receivedAt`.
    /// - `expires_in` absent, not a number (`"3600"`), not finite or beyond ``maximumLifetime`` (`1e308`): treated
    ///   as absent — the token's own `exp` when it is a JWT and within ``maximumLifetime`` (read for scheduling
    ///   only, never trusted for access decisions); else nil: the lifetime is unknown and the token is refreshed
    ///   after a 401. A nonsense value is never taken as "never expires".
    public static func expiry(expiresIn: Double?, accessToken: String, receivedAt: Date) -> Date? {
        if let expiresIn, !expiresIn.isNaN {
            if expiresIn <= 0 { return receivedAt }
            if expiresIn <= maximumLifetime { return receivedAt.addingTimeInterval(expiresIn) }
        }
        guard let exp = (try? JWT.unverifiedClaims(of: accessToken))?.expiresAt,
            exp.timeIntervalSince(receivedAt) <= maximumLifetime
        else { return nil }
        return max(exp, receivedAt)  // an exp in the past (down to -1e308) is "expired now"
    }

    /// The longest access-token lifetime taken at face value: one year.
    public static let maximumLifetime: TimeInterval = 365 * 86400

    /// Whether the access token expires within `leeway` of `now` (false when the expiry is unknown).
    ///
    /// The leeway is capped at half the token's lifetime when ``receivedAt`` is known, so that a token that lives
    /// 2 s is not "about to expire" the moment it arrives (with a 60 s leeway every such token would be refreshed
    /// on every use).
    public func needsRefresh(at now: Date, leeway: TimeInterval = 60) -> Bool {
        guard let expiresAt else { return false }
        return expiresAt.timeIntervalSince(now) <= effectiveLeeway(leeway)
    }

    /// `leeway`, but never more than half the lifetime (``expiresAt`` − ``receivedAt``) when both are known.
    public func effectiveLeeway(_ leeway: TimeInterval) -> TimeInterval {
        guard let expiresAt, let receivedAt else { return leeway }
        return min(leeway, max(0, expiresAt.timeIntervalSince(receivedAt) / 2))
    }

    /// Shape and expiry only; never a token.
    public var description: String {
        var parts = ["type: \(tokenType)", "refresh token: \(refreshToken == nil ? "no" : "yes")"]
        if idToken != nil { parts.append("ID token: yes") }
        if let expiresAt { parts.append("expires: \(ISO8601DateFormatter().string(from: expiresAt))") }
        if let user { parts.append("user: \(user.id)") }
        if let dpopKeyThumbprint { parts.append("DPoP key: \(dpopKeyThumbprint)") }
        if deviceSecret != nil { parts.append("device secret: yes") }
        return "TokenSet(\(parts.joined(separator: ", ")))"
    }

    /// The same as ``description``.
    public var debugDescription: String { description }

    /// A mirror without tokens, so that `dump()` shows no secret either.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "accessToken": "<redacted>", "tokenType": tokenType,
                "refreshToken": refreshToken == nil ? "none" : "<redacted>",
                "idToken": idToken == nil ? "none" : "<redacted>", "expiresAt": expiresAt as Any,
                "scope": scope as Any, "user": user?.id as Any, "dpopKeyThumbprint": dpopKeyThumbprint as Any,
                "deviceSecret": deviceSecret == nil ? "none" : "<redacted>",
            ], displayStyle: .struct)
    }
}
