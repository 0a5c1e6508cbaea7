import Foundation

/// A JWK Set (RFC 7517 §5): the keys an issuer publishes at its `jwks_uri`.
///
/// Parsing is forgiving per key and strict per set: a key that is malformed, weak or of a type this library
/// does not support is skipped (and counted in ``skippedKeyCount``) so that one odd key cannot lock out the
/// rest, while a set that is not JSON, is too large, or mixes symmetric and asymmetric keys is refused whole.
public struct JWKSet: Sendable {
    /// Limits on what a key set may hold (RFC 8725 resource limits; ATK-14).
    public struct Limits: Sendable {
        /// The largest JWKS document accepted, in bytes.
        ///
        /// Default 512 KiB.
        public var maxDocumentSize = 512 * 1024
        /// The most keys a set may list.
        ///
        /// Default 100.
        public var maxKeyCount = 100
        /// The defaults: 512 KiB and 100 keys.
        public init() {}
    }

    /// The usable keys, in document order.
    public let keys: [JWK]
    /// How many entries of the document were skipped as malformed, weak or unsupported.
    public let skippedKeyCount: Int
    /// `kty` + `kid` pairs that more than one entry of the document claims (with the same or no `alg`),
    /// counting entries that were skipped: a token naming one of them is ambiguous (ATK-05).
    private let ambiguousKeyIDs: Set<String>

    /// Creates a set from keys.
    ///
    /// - Throws: ``JOSEError`` with ``JOSEError/Code/mixedKeySet`` when symmetric and asymmetric keys are mixed.
    public init(keys: [JWK]) throws {
        try Self.checkNotMixed(keys)
        self.keys = keys
        self.skippedKeyCount = 0
        self.ambiguousKeyIDs = Self.duplicates(
            keys.map { (kty: $0.keyType.rawValue, kid: $0.keyID, alg: $0.declaredAlgorithm) }
        )
    }

    /// Parses a JWK Set document.
    ///
    /// - Parameters:
    ///   - json: the document.
    ///   - allowSymmetric: whether `oct` keys are kept (for HMAC, explicitly requested). When false they are
    ///     skipped like any other unusable key.
    ///   - limits: size limits.
    /// - Throws: ``JOSEError`` (``JOSEError/Code/tooLarge``, ``JOSEError/Code/malformedJSON``,
    ///   ``JOSEError/Code/duplicateMember``, ``JOSEError/Code/mixedKeySet``).
    public init(json: some Collection<UInt8>, allowSymmetric: Bool = false, limits: Limits = Limits()) throws {
        guard json.count <= limits.maxDocumentSize else {
            throw JOSEError(.tooLarge, "the JWK Set is larger than \(limits.maxDocumentSize) bytes")
        }
        let document = try JOSEValue.parse(json)
        guard let entries = document["keys"]?.arrayValue else {
            throw JOSEError(.malformedJSON, "a JWK Set must be an object with a keys array")
        }
        guard entries.count <= limits.maxKeyCount else {
            throw JOSEError(.tooLarge, "the JWK Set lists more than \(limits.maxKeyCount) keys")
        }
        var keys: [JWK] = []
        for entry in entries {
            if let key = try? JWK(value: entry, allowSymmetric: allowSymmetric) { keys.append(key) }
        }
        try Self.checkNotMixed(keys)
        self.keys = keys
        self.skippedKeyCount = entries.count - keys.count
        self.ambiguousKeyIDs = Self.duplicates(
            entries.map { entry in
                (kty: entry["kty"]?.stringValue, kid: entry["kid"]?.stringValue, alg: entry["alg"]?.stringValue)
            }
        )
    }

    /// The `kty|kid` pairs claimed by two entries whose `alg` is equal or absent on either.
    private static func duplicates(_ entries: [(kty: String?, kid: String?, alg: String?)]) -> Set<String> {
        var seen: [String: [String?]] = [:]
        var ambiguous: Set<String> = []
        for entry in entries {
            guard let kty = entry.kty, let kid = entry.kid else { continue }
            let slot = kty + "|" + kid
            if let algorithms = seen[slot],
                algorithms.contains(where: { $0 == nil || entry.alg == nil || $0 == entry.alg })
            {
                ambiguous.insert(slot)
            }
            seen[slot, default: []].append(entry.alg)
        }
        return ambiguous
    }

    /// Parses a JWK Set document from text.
    public init(json: String, allowSymmetric: Bool = false, limits: Limits = Limits()) throws {
        try self.init(json: Array(json.utf8), allowSymmetric: allowSymmetric, limits: limits)
    }

    /// The set as a JWKS document with public members only.
    public var jsonValue: JOSEValue {
        .object(["keys": .array(keys.map { $0.jsonValue() })])
    }

    private static func checkNotMixed(_ keys: [JWK]) throws(JOSEError) {
        let symmetric = keys.filter { $0.keyType == .octet }.count
        if symmetric > 0, symmetric < keys.count {
            throw JOSEError(.mixedKeySet, "the key set mixes symmetric and asymmetric keys")
        }
    }

    /// The keys that may verify a token of `algorithm` with key ID `keyID`.
    ///
    /// With a `kid`, exactly one fitting key must carry it; decoys with the same `kid` but another type or
    /// algorithm are skipped. Without a `kid`, every fitting key is a candidate.
    ///
    /// - Throws: ``JOSEError`` with ``JOSEError/Code/keyNotFound`` or ``JOSEError/Code/ambiguousKey``.
    package func candidates(for algorithm: JWSAlgorithm, keyID: String?) throws(JOSEError) -> [JWK] {
        guard let keyID else {
            let fitting = keys.filter { $0.canVerify(algorithm) }
            guard !fitting.isEmpty else { throw JOSEError(.keyNotFound, "no key in the set fits \(algorithm)") }
            return fitting
        }
        let matching = keys.filter { key in
            key.keyID.map { ByteExact.equals($0, keyID) } ?? false && key.canVerify(algorithm)
        }
        if let first = matching.first, ambiguousKeyIDs.contains(first.keyType.rawValue + "|" + keyID) {
            throw JOSEError(.ambiguousKey, "several keys in the set share the token's kid")
        }
        guard !matching.isEmpty else {
            throw JOSEError(.keyNotFound, "no \(algorithm) key in the set has the token's kid")
        }
        guard matching.count == 1 else {
            throw JOSEError(.ambiguousKey, "several \(algorithm) keys in the set share the token's kid")
        }
        return matching
    }
}

extension JWK {
    /// Whether this key may verify signatures of `algorithm`: its type and curve fit, its declared `alg` (if
    /// any) is exactly that algorithm, its `use` (if any) is `sig`, and its `key_ops` (if any) include `verify`.
    public func canVerify(_ algorithm: JWSAlgorithm) -> Bool {
        if let declaredAlgorithm, declaredAlgorithm != algorithm.name { return false }
        if let use, use != "sig" { return false }
        if let keyOperations, !keyOperations.contains("verify") { return false }
        return fits(algorithm)
    }

    /// Whether the key's type (and curve) fits the algorithm, ignoring `alg`, `use` and `key_ops`.
    package func fits(_ algorithm: JWSAlgorithm) -> Bool {
        switch (algorithm.family, components) {
        case (.rsaPKCS1, .rsa), (.rsaPSS, .rsa): true
        case (.ecdsa, .ec(let curve, _, _, _)): curve == algorithm.requiredCurve
        case (.eddsa, .okp(let curve, _, _)): curve == .ed25519
        case (.hmac, .octet(let k)): k.count >= algorithm.digestLength
        default: false
        }
    }
}
