import Foundation
import SesameJOSE

/// The nonce of a Sign in with Apple request: a random raw value the app keeps, and its SHA-256 (lowercase hex)
/// that goes into the Apple request and comes back as the identity token's `nonce` claim.
///
/// Send ``hashed`` to Apple (`ASAuthorizationAppleIDRequest.nonce`) and ``raw`` to your backend with the identity
/// token; the backend hashes the raw value and compares. A fresh nonce per request stops token replay.
public struct SignInWithAppleNonce: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// The raw nonce: 32 random bytes, base64url.
    ///
    /// Keep it until the exchange; send it only to your backend.
    public let raw: String

    /// A fresh random nonce.
    public init() { raw = Base64URL.encode(JOSECrypto.randomBytes(32)) }

    /// A nonce from a known raw value (for tests and restoration).
    public init(raw: String) { self.raw = raw }

    /// SHA-256 of ``raw``, lowercase hex: what Apple receives and echoes in the token.
    public var hashed: String { JOSECrypto.sha256(Array(raw.utf8)).map { String(format: "%02x", $0) }.joined() }

    /// Never the raw value.
    public var description: String { "SignInWithAppleNonce(hashed: \(hashed.prefix(8))…)" }

    /// What `dump()` and debuggers show: the hash's first characters, never the raw value.
    public var customMirror: Mirror {
        Mirror(self, children: ["hashed": "\(hashed.prefix(8))…"], displayStyle: .struct)
    }
}
