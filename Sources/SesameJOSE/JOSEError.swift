public import Foundation

/// The one error type that `SesameJOSE` throws.
///
/// Codes are open (static constants over a string), so new codes never break a caller's `switch`. The
/// ``description`` is written for a person reading a log or a terminal and never contains a token, a key or a
/// signature: only the name of what failed.
public struct JOSEError: Error, Sendable, Hashable, CustomStringConvertible, LocalizedError {
    /// What went wrong, as a stable machine-readable name (also the CLI's `error: <code>:` prefix).
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The code's wire name, for example `signature_invalid`.
        public let rawValue: String
        /// Creates a code from its name (for codes this version does not define yet).
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The code's name.
        public var description: String { rawValue }

        // Structure and encoding.
        /// The input is larger than the configured limit (checked before any decoding).
        public static let tooLarge = Code(rawValue: "too_large")
        /// Not a compact JWS: other than three dot-separated base64url parts (a JWE, a JSON serialization, …).
        public static let malformedToken = Code(rawValue: "malformed_token")
        /// A base64url part is not strict unpadded base64url.
        public static let malformedBase64URL = Code(rawValue: "malformed_base64url")
        /// A header, payload, key or key set is not valid JSON of the expected shape.
        public static let malformedJSON = Code(rawValue: "malformed_json")
        /// A JSON object names the same member twice (RFC 7515 §4, RFC 7519 §4).
        public static let duplicateMember = Code(rawValue: "duplicate_member")
        /// A header parameter has the wrong type or value (for example `typ` naming another token kind).
        public static let invalidHeader = Code(rawValue: "invalid_header")
        /// `crit` lists an extension this library does not understand, or is malformed (RFC 7515 §4.1.11).
        public static let unsupportedCriticalHeader = Code(rawValue: "unsupported_critical_header")
        /// `b64: false` (RFC 7797) is never accepted in a JWT.
        public static let unencodedPayload = Code(rawValue: "unencoded_payload")

        // Algorithms and keys.
        /// The header names an algorithm this library does not implement (including every spelling of `none`).
        public static let unsupportedAlgorithm = Code(rawValue: "unsupported_algorithm")
        /// The algorithm is implemented but not allowed by the caller's policy or by the key.
        public static let algorithmNotAllowed = Code(rawValue: "algorithm_not_allowed")
        /// No key in the set fits the token's `kid` and algorithm.
        public static let keyNotFound = Code(rawValue: "key_not_found")
        /// More than one key fits the token's `kid` and algorithm, so the choice would be a guess.
        public static let ambiguousKey = Code(rawValue: "ambiguous_key")
        /// A key set mixes symmetric and asymmetric keys.
        public static let mixedKeySet = Code(rawValue: "mixed_key_set")
        /// A key is malformed, of an unsupported type, or fails a sanity check (point not on the curve, …).
        public static let invalidKey = Code(rawValue: "invalid_key")
        /// A key is too weak to use: RSA under 2048 bits, a bad public exponent, an HMAC key shorter than the hash.
        public static let weakKey = Code(rawValue: "weak_key")
        /// The signature does not verify.
        ///
        /// One code for every way that can happen, with no detail.
        public static let signatureInvalid = Code(rawValue: "signature_invalid")
        /// The cryptographic backend failed for a reason other than a bad signature.
        public static let cryptoFailure = Code(rawValue: "crypto_failure")

        // Claims.
        /// The payload is not a JSON object.
        public static let malformedClaims = Code(rawValue: "malformed_claims")
        /// A registered claim has the wrong JSON type (`exp` as a string, `aud` as an object, …).
        public static let invalidClaimType = Code(rawValue: "invalid_claim_type")
        /// A claim the policy requires is absent.
        public static let missingClaim = Code(rawValue: "missing_claim")
        /// `exp` has passed (beyond the leeway).
        public static let expired = Code(rawValue: "expired")
        /// `nbf` is still in the future (beyond the leeway).
        public static let notYetValid = Code(rawValue: "not_yet_valid")
        /// `iat` is in the future (beyond the leeway).
        public static let issuedInFuture = Code(rawValue: "issued_in_future")
        /// `iat` is older than the policy's maximum age.
        public static let issuedTooLongAgo = Code(rawValue: "issued_too_long_ago")
        /// `iss` is not exactly the expected issuer.
        public static let issuerMismatch = Code(rawValue: "issuer_mismatch")
        /// `aud` does not contain the expected audience, or contains audiences that are not trusted.
        public static let audienceMismatch = Code(rawValue: "audience_mismatch")
        /// `azp` is missing where several audiences require it, or is not the expected party.
        public static let authorizedPartyMismatch = Code(rawValue: "authorized_party_mismatch")
        /// `nonce` is missing or differs from the expected one.
        public static let nonceMismatch = Code(rawValue: "nonce_mismatch")
    }

    /// The stable code.
    public let code: Code
    /// A human explanation without secrets.
    public let message: String
    /// The claim or header parameter the error is about, when there is one.
    public let parameter: String?

    /// Creates an error; control characters in `message` are replaced (it may quote a token's header).
    public init(_ code: Code, _ message: String, parameter: String? = nil) {
        self.code = code
        self.message = PrintableText.isClean(message) ? message : PrintableText.sanitized(message)
        self.parameter = parameter
    }

    /// Runs `body`, which can only throw `JOSEError` but goes through a `rethrows` API that erases the type.
    package static func typed<R>(_ body: () throws -> R) throws(JOSEError) -> R {
        do {
            return try body()
        } catch let error as JOSEError {
            throw error
        } catch {
            throw JOSEError(.cryptoFailure, "unexpected error")
        }
    }

    /// `code: message`, with no secrets.
    public var description: String { "\(code.rawValue): \(message)" }
    /// The same text as ``description`` (apps localize by ``code``).
    public var errorDescription: String? { description }
}
