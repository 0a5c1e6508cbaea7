import Foundation

/// Member names that JOSE headers, JWT claim sets and JWKs use all the time.
///
/// The parser hands out these
/// constants instead of creating a new string for each occurrence.
enum JOSEKnownNames {
    private static let names: [String] = [
        // JWS header (RFC 7515 §4.1) and JWK (RFC 7517 §4, RFC 7518 §6).
        "alg", "kid", "typ", "cty", "crit", "jwk", "jku", "x5u", "x5c", "x5t", "b64", "enc", "zip", "kty", "use",
        "key_ops", "crv", "x", "y", "d", "n", "e", "p", "q", "dp", "dq", "qi", "k", "keys", "nonce",
        // JWT (RFC 7519 §4.1), OIDC Core §2 and §5.1, RFC 9068, RFC 9449.
        "iss", "sub", "aud", "exp", "nbf", "iat", "jti", "azp", "auth_time", "acr", "amr", "at_hash", "c_hash",
        "sid", "scope", "client_id", "cnf", "jkt", "htm", "htu", "ath", "email", "email_verified", "name",
        "given_name", "family_name", "nickname", "preferred_username", "picture", "locale", "updated_at", "events",
    ]

    private struct Table: @unchecked Sendable {
        // Immutable after initialisation; read concurrently.
        let slots: UnsafeMutablePointer<Int16>  // 256 slots: index into `names`, or -1
        let fingerprints: [UInt64]
        let bytes: UnsafeMutablePointer<UInt8>  // every name's UTF-8, back to back
        let offsets: [Int]  // where each name starts in `bytes`; one more entry marks the end
    }

    private static let table: Table = {
        let slots = UnsafeMutablePointer<Int16>.allocate(capacity: 256)
        slots.initialize(repeating: -1, count: 256)
        let fingerprints = names.map(JOSEObject.fingerprint(of:))
        for (index, fingerprint) in fingerprints.enumerated() {
            var slot = Int(fingerprint >> 56)
            while slots[slot] >= 0 { slot = (slot + 1) & 255 }
            slots[slot] = Int16(index)
        }
        let utf8 = names.flatMap(\.utf8)
        let bytes = UnsafeMutablePointer<UInt8>.allocate(capacity: utf8.count)
        bytes.initialize(from: utf8, count: utf8.count)
        var offsets = [0]
        for name in names { offsets.append((offsets.last ?? 0) + name.utf8.count) }
        return Table(slots: slots, fingerprints: fingerprints, bytes: bytes, offsets: offsets)
    }()

    /// The constant for `raw`, when it is a known name.
    static func lookup(_ raw: UnsafeRawBufferPointer, fingerprint: UInt64) -> String? {
        let table = table
        var slot = Int(fingerprint >> 56)
        while true {
            let index = Int(table.slots[slot])
            if index < 0 { return nil }
            if table.fingerprints[index] == fingerprint {
                let start = table.offsets[index]
                guard table.offsets[index + 1] - start == raw.count, let base = raw.baseAddress,
                    memcmp(table.bytes + start, base, raw.count) == 0
                else { return nil }
                return names[index]
            }
            slot = (slot + 1) & 255
        }
    }
}
