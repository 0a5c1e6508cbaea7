public import Foundation
public import SesameJOSE

/// A provider's JWK Set, fetched once and refetched when a token names a key it does not have — such refetches at
/// most once per ``minimumRefetchInterval``, so a stream of forged `kid`s cannot make the client hammer the
/// provider.
public actor JWKSCache {
    /// The `jwks_uri`.
    public nonisolated let url: URL
    /// The shortest time between two fetches caused by unknown keys.
    ///
    /// Default 60 s.
    public nonisolated let minimumRefetchInterval: TimeInterval
    private let transport: any HTTPTransport
    private let timeSource: any TimeSource
    private var current: JWKSet?
    private var refetchedAt: Date?
    private var inFlight: Task<JWKSet, any Error>?

    /// Creates a cache; nothing is fetched until keys are needed.
    public init(
        url: URL, transport: any HTTPTransport = SesameHTTP.platformTransport,
        timeSource: any TimeSource = SystemTimeSource(), minimumRefetchInterval: TimeInterval = 60
    ) {
        self.url = url
        self.transport = transport
        self.timeSource = timeSource
        self.minimumRefetchInterval = minimumRefetchInterval
    }

    /// The cached keys, fetched the first time.
    public func keys() async throws -> JWKSet {
        if let current { return current }
        return try await fetch()
    }

    /// Fetches again for a key the cache does not have, unless such a refetch happened less than
    /// ``minimumRefetchInterval`` ago; nil when it is too soon.
    public func refreshedKeys() async throws -> JWKSet? {
        if let refetchedAt, timeSource.now.timeIntervalSince(refetchedAt) < minimumRefetchInterval { return nil }
        refetchedAt = timeSource.now
        return try await fetch()
    }

    private func fetch() async throws -> JWKSet {
        if let inFlight { return try await inFlight.value }
        let task = Task { [url, transport] in
            let response = try await transport.send(
                SesameHTTP.Request(method: "GET", url: url, headers: ["Accept": "application/json"]))
            guard response.status == 200 else { throw AuthError.unexpected(response) }
            do {
                return try JWKSet(json: response.body)
            } catch {
                throw AuthError(.invalidResponse, "the provider's JWKS at \(url.absoluteString) is unusable: \(error)")
            }
        }
        inFlight = task
        defer { inFlight = nil }
        let keys = try await task.value
        current = keys
        return keys
    }
}

/// Validates ID tokens as OIDC Core §3.1.3.7 says, and more strictly than it requires: the signature is always
/// verified (also for tokens from the token endpoint), with an algorithm the provider lists and the key allows.
public struct IDTokenValidator: Sendable {
    /// The issuer, compared byte for byte.
    public var issuer: String
    /// The client ID: `aud` must contain it, and `azp` must name it when present or when `aud` has others.
    public var clientID: String
    /// The acceptable signature algorithms: the provider's `id_token_signing_alg_values_supported` (RS256 when it
    /// lists none), never `none` nor HMAC.
    public var allowedAlgorithms: Set<JWSAlgorithm>
    /// Clock-skew allowance for `exp`, `iat` and `auth_time`.
    ///
    /// Default 60 s.
    public var leeway: TimeInterval = 60
    /// Added to the local clock: the provider's clock minus ours, when learned (from an HTTP `Date` header).
    public var clockOffset: TimeInterval = 0
    /// The oldest `iat` accepted, in seconds: an ID token is issued for this sign-in or this refresh.
    ///
    /// Default one day.
    public var maximumTokenAge: TimeInterval = 86400
    /// Audiences besides the client that an ID token may list (OIDC Core §3.1.3.7 step 3: any other is refused).
    ///
    /// Default none.
    public var trustedAudiences: Set<String> = []

    /// A validator for `issuer` and `clientID`.
    public init(issuer: String, clientID: String, algorithms: [String] = []) {
        self.issuer = issuer
        self.clientID = clientID
        let listed = Set(algorithms.compactMap(JWSAlgorithm.init(name:))).intersection(JWSAlgorithm.asymmetric)
        allowedAlgorithms = algorithms.isEmpty ? [.rs256] : listed
    }

    /// What to expect of one ID token.
    ///
    /// Its `description` and mirror never show the access token or the nonce.
    public struct Expectations: Sendable, CustomStringConvertible, CustomReflectable {
        /// The `nonce` sent with the authorization request (nil after a refresh: then it need not be present).
        public var nonce: String?
        /// The access token issued with it, to check `at_hash` when present.
        public var accessToken: String?
        /// The `max_age` requested: `auth_time` is then required and must be recent enough.
        public var maxAge: TimeInterval?
        /// After a refresh: the original ID token's claims, whose `iss` and `sub` must not change (OIDC Core
        /// §12.2).
        public var original: JWTClaims?
        /// The `acr_values` requested (a step-up, RFC 9470): `acr` must then be one of them (catalog STEP-03).
        public var acrValues: [String]?
        /// The user the ID token must name: a Native SSO sign-in's shared user (catalog NSSO-02).
        public var subject: String?

        /// Creates expectations.
        public init(
            nonce: String? = nil, accessToken: String? = nil, maxAge: TimeInterval? = nil, original: JWTClaims? = nil,
            acrValues: [String]? = nil, subject: String? = nil
        ) {
            self.subject = subject
            self.nonce = nonce
            self.accessToken = accessToken
            self.maxAge = maxAge
            self.original = original
            self.acrValues = acrValues
        }

        /// Which checks apply; never the access token or the nonce.
        public var description: String {
            "Expectations(nonce: \(nonce == nil ? "none" : "<redacted>"), accessToken: "
                + "\(accessToken == nil ? "none" : "<redacted>"), maxAge: \(maxAge.map { "\($0)" } ?? "none"), "
                + "original: \(original == nil ? "none" : "present"), acrValues: \(acrValues ?? []), "
                + "subject: \(subject.map { PrintableText.sanitized($0, limit: 200) } ?? "none"))"
        }

        /// A mirror without the access token or the nonce.
        public var customMirror: Mirror {
            Mirror(
                self,
                children: [
                    "nonce": nonce == nil ? "none" : "<redacted>",
                    "accessToken": accessToken == nil ? "none" : "<redacted>", "maxAge": maxAge as Any,
                    "original": original == nil ? "none" : "present", "acrValues": acrValues as Any,
                    "subject": subject as Any,
                ], displayStyle: .struct)
        }
    }

    /// Validates `token` and returns its claims.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/idTokenRejected`` and the failing rule in
    ///   ``AuthError/reason``; transport errors while fetching keys.
    public func validate(_ token: String, expecting expectations: Expectations, keys: JWKSCache, now: Date)
        async throws -> JWTClaims
    {
        let time = now.addingTimeInterval(clockOffset)
        var policy = ClaimValidationPolicy(
            issuer: issuer, audience: clientID, nonce: expectations.nonce, leeway: leeway,
            requiredClaims: ["exp", "iat", "sub", "aud", "iss"])
        policy.acceptedTypes = ["jwt"]
        policy.maxAge = maximumTokenAge
        var claims: JWTClaims
        let algorithm: JWSAlgorithm
        do {
            // Only the header, for the algorithm and kid checks; the verifier parses the whole token once.
            let (name, keyID) = try Self.algorithmAndKeyID(of: token)
            guard let listed = JWSAlgorithm(name: name), allowedAlgorithms.contains(listed) else {
                throw JOSEError(
                    .algorithmNotAllowed,
                    "the ID token is signed with \(PrintableText.sanitized(name, limit: 20)), which this provider does not list"
                )
            }
            algorithm = listed
            // No kid and several keys that could have signed it: refuse rather than try them all.
            let cached = try await keys.keys()
            if keyID == nil, cached.keys.filter({ $0.canVerify(algorithm) }).count > 1 {
                throw JOSEError(.ambiguousKey, "the ID token names no kid and several provider keys fit \(algorithm)")
            }
            do {
                claims = try JWTVerifier(keys: cached, policy: policy, allowedAlgorithms: allowedAlgorithms)
                    .verifiedClaims(of: token, now: time)
            } catch let error as JOSEError where error.code == .keyNotFound {
                // The provider may have rotated its keys: refetch once (rate-limited), then try again.
                guard let fresh = try await keys.refreshedKeys() else { throw error }
                claims = try JWTVerifier(keys: fresh, policy: policy, allowedAlgorithms: allowedAlgorithms)
                    .verifiedClaims(of: token, now: time)
            }
        } catch let error as JOSEError {
            throw Self.rejection(error.code.rawValue, "the ID token was rejected: \(error)")
        }
        // OIDC Core §2: a locally unique identifier of at most 255 ASCII characters.
        guard let subject = claims.subject, !subject.isEmpty, subject.utf8.count <= 255 else {
            throw Self.rejection("invalid_subject", "the ID token's sub is empty or longer than 255 characters")
        }
        if let audiences = claims.audience,
            let stranger = audiences.first(where: { audience in
                !ByteExact.equals(audience, clientID) && !trustedAudiences.contains { ByteExact.equals($0, audience) }
            })
        {
            throw Self.rejection(
                "untrusted_audience",
                "the ID token also names the audience \(PrintableText.sanitized(stranger, limit: 100))")
        }
        if let accessToken = expectations.accessToken, let atHash = claims["at_hash"] {
            guard let stated = atHash.stringValue,
                ByteExact.equals(stated, Self.leftHalfHash(accessToken, algorithm: algorithm))
            else { throw Self.rejection("at_hash_mismatch", "the ID token's at_hash does not match the access token") }
        }
        // A sign-in cannot have happened after the token was checked (the leeway allowing for skew).
        if let authTime = claims["auth_time"]?.doubleValue, authTime > time.timeIntervalSince1970 + leeway {
            throw Self.rejection("auth_time_in_future", "the ID token's auth_time is in the future")
        }
        if let maxAge = expectations.maxAge {
            guard let authTime = claims["auth_time"]?.doubleValue else {
                throw Self.rejection("auth_time_missing", "max_age was requested but the ID token has no auth_time")
            }
            guard time.timeIntervalSince1970 - authTime <= maxAge + leeway else {
                throw Self.rejection("auth_time_too_old", "the sign-in is older than the max_age requested")
            }
        }
        if let wanted = expectations.acrValues, !wanted.isEmpty {
            // A weaker answer than asked for is refused, not stored (OIDC Core §3.1.3.7 (12), RFC 9470 §4).
            guard let acr = claims["acr"]?.stringValue, wanted.contains(where: { ByteExact.equals($0, acr) }) else {
                let stated =
                    claims["acr"]?.stringValue.map { "acr \(PrintableText.sanitized($0, limit: 100))" } ?? "no acr"
                throw Self.rejection(
                    "acr_not_met",
                    "the ID token has \(stated), not one of the acr_values requested "
                        + "(\(PrintableText.sanitized(wanted.joined(separator: " "), limit: 200)))")
            }
        }
        if let subject = expectations.subject, claims.subject.map({ ByteExact.equals($0, subject) }) != true {
            throw Self.rejection("subject_mismatch", "the ID token names another user than the shared sign-in")
        }
        if let original = expectations.original {
            guard let sub = claims.subject, let originalSub = original.subject, ByteExact.equals(sub, originalSub)
            else { throw Self.rejection("subject_changed", "the refreshed ID token names another subject") }
            guard let iss = claims.issuer, let originalIss = original.issuer, ByteExact.equals(iss, originalIss) else {
                throw Self.rejection("issuer_changed", "the refreshed ID token names another issuer")
            }
            let audiences = Set((claims.audience ?? []).map { Array($0.utf8) })
            guard audiences == Set((original.audience ?? []).map { Array($0.utf8) }),
                original.authorizedParty == nil
                    || claims.authorizedParty.map({ Array($0.utf8) })
                        == original.authorizedParty.map({ Array($0.utf8) })
            else { throw Self.rejection("audience_changed", "the refreshed ID token names other audiences") }
            if let originalAuthTime = original["auth_time"] {
                guard claims["auth_time"] == originalAuthTime else {
                    throw Self.rejection("auth_time_changed", "the refreshed ID token has another auth_time")
                }
            }
        }
        return claims
    }

    /// `alg` and `kid` from the protected header alone.
    static func algorithmAndKeyID(of token: String) throws -> (String, String?) {
        guard let dot = token.utf8.firstIndex(of: UInt8(ascii: ".")),
            token.utf8.distance(from: token.utf8.startIndex, to: dot) <= 4096
        else { throw JOSEError(.malformedToken, "the ID token is not a compact JWS") }
        let header = try JOSEValue.parse(try Base64URL.decode(String(token[..<dot])))
        guard let name = header["alg"]?.stringValue else { throw JOSEError(.invalidHeader, "the ID token has no alg") }
        return (name, header["kid"]?.stringValue)
    }

    static func rejection(_ reason: String, _ message: String) -> AuthError {
        var error = AuthError(.idTokenRejected, message)
        error.reason = reason
        return error
    }

    /// The base64url left half of the access token's hash with the ID token's algorithm's hash (OIDC Core
    /// §3.1.3.6; SHA-512 for EdDSA).
    static func leftHalfHash(_ text: String, algorithm: JWSAlgorithm) -> String {
        let bytes = Array(text.utf8)
        let digest: [UInt8] =
            switch algorithm.name {
            case "RS384", "PS384", "ES384": JOSECrypto.sha384(bytes)
            case "RS512", "PS512", "ES512", "EdDSA", "Ed25519": JOSECrypto.sha512(bytes)
            default: JOSECrypto.sha256(bytes)
            }
        return Base64URL.encode(digest.prefix(digest.count / 2))
    }
}
