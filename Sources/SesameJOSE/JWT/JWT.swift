public import Foundation

/// A JSON Web Token (RFC 7519): a compact JWS whose payload is a JSON claim set.
public struct JWT: Sendable {
    /// The protected header.
    public let header: JWSHeader
    /// The claims.
    public let claims: JWTClaims

    /// Decodes a JWT **without verifying its signature or its claims**.
    ///
    /// For display only: never base a decision
    /// on what this returns.
    ///
    /// - Throws: ``JOSEError`` when the token is not a well-formed compact JWS with a JSON-object payload.
    public static func unverified(_ token: String, maxSize: Int = JWS.defaultMaxSize) throws -> JWT {
        try JWS.withParts(token, maxSize: maxSize) { parts throws(JOSEError) in
            JWT(header: try parts.header(), claims: try claims(from: parts))
        }
    }

    /// The claims of a JWT, **unverified**.
    ///
    /// For display only.
    ///
    /// - Throws: ``JOSEError`` when the token is malformed.
    public static func unverifiedClaims(of token: String) throws -> JWTClaims {
        try JWS.withParts(token, maxSize: JWS.defaultMaxSize) { parts throws(JOSEError) in try claims(from: parts) }
    }

    static func claims(from parts: CompactParts) throws(JOSEError) -> JWTClaims {
        let value = try Base64URL.withDecoded(parts.payloadText) { json throws(JOSEError) -> JOSEValue in
            do throws(JOSEError) {
                return try JOSEValue.parse(buffer: json)
            } catch  where error.code == .malformedJSON {
                throw JOSEError(.malformedClaims, "the payload is not a JSON claim set")
            }
        }
        guard let members = value.objectValue else {
            throw JOSEError(.malformedClaims, "the payload is not a JSON object")
        }
        return JWTClaims(members)
    }

    /// Signs a claim set.
    ///
    /// - Parameters:
    ///   - claims: the claims.
    ///   - key: a private key (or symmetric key for HS*); its `kid` goes into the header.
    ///   - algorithm: the signature algorithm.
    ///   - type: the `typ` header, `JWT` by default.
    ///   - header: further header parameters.
    /// - Returns: the compact JWT.
    /// - Throws: ``JOSEError`` as ``JWS/sign(payload:key:algorithm:header:)`` does.
    public static func sign(
        _ claims: JWTClaims,
        key: JWK,
        algorithm: JWSAlgorithm,
        type: String? = "JWT",
        header: JOSEObject = [:]
    ) throws -> String {
        var parameters = header
        if let type { parameters["typ"] = .string(type) }
        return try JWS.sign(payload: claims.jsonValue.jsonBytes, key: key, algorithm: algorithm, header: parameters)
    }
}

/// Verifies JWTs: signature with a trusted key set, then the claims with a policy.
///
/// Build one per issuer and reuse it: keys are parsed once and their backend objects reused by every call.
public struct JWTVerifier: Sendable {
    /// The trusted keys.
    public var keys: JWKSet
    /// The claim checks.
    public var policy: ClaimValidationPolicy
    /// Acceptable algorithms.
    ///
    /// Default: every asymmetric algorithm; HMAC only when listed.
    public var allowedAlgorithms: Set<JWSAlgorithm>
    /// The size cap on a token, checked before decoding.
    ///
    /// Default 64 KiB.
    public var maxTokenSize: Int = JWS.defaultMaxSize

    /// Creates a verifier.
    public init(
        keys: JWKSet,
        policy: ClaimValidationPolicy = ClaimValidationPolicy(),
        allowedAlgorithms: Set<JWSAlgorithm> = JWSAlgorithm.asymmetric
    ) {
        self.keys = keys
        self.policy = policy
        self.allowedAlgorithms = allowedAlgorithms
    }

    /// Verifies `token` at time `now` and returns it.
    ///
    /// - Parameters:
    ///   - token: the compact JWT.
    ///   - now: the current time, injected (tests and the CLI's `--now` pass a fixed clock).
    /// - Returns: the verified token.
    /// - Throws: ``JOSEError``: structure and encoding codes, ``JOSEError/Code/unsupportedAlgorithm``,
    ///   ``JOSEError/Code/algorithmNotAllowed``, ``JOSEError/Code/keyNotFound``,
    ///   ``JOSEError/Code/signatureInvalid``, then one code per claim check.
    public func verify(_ token: String, now: Date) throws -> JWT {
        try JWS.withParts(token, maxSize: maxTokenSize) { parts throws(JOSEError) in
            let header = try parts.header()
            try parts.verifySignature(header: header, keys: keys, allowedAlgorithms: allowedAlgorithms)
            try checkType(header)
            let claims = try JWT.claims(from: parts)
            try policy.check(claims, now: now)
            return JWT(header: header, claims: claims)
        }
    }

    /// The verified claims of `token` at time `now`.
    ///
    /// - Throws: ``JOSEError`` as ``verify(_:now:)`` does.
    public func verifiedClaims(of token: String, now: Date) throws -> JWTClaims {
        try verify(token, now: now).claims
    }

    /// A `typ`/`cty` value lower-cased (ASCII) without an `application/` prefix (RFC 7515 §4.1.9).
    static func mediaType(_ value: String) -> String {
        var normalized = String(
            value.unicodeScalars.map { $0.isASCII ? Character($0.properties.lowercaseMapping) : Character($0) })
        if normalized.hasPrefix("application/") { normalized.removeFirst("application/".count) }
        return normalized
    }

    private func checkType(_ header: JWSHeader) throws(JOSEError) {
        // RFC 7519 §5.2: `cty: JWT` (any case, with or without `application/`) announces a nested JWT.
        if let contentType = header.contentType, Self.mediaType(contentType) == "jwt" {
            throw JOSEError(.invalidHeader, "nested JWTs are not accepted", parameter: "cty")
        }
        guard let type = header.type else { return }
        guard policy.acceptedTypes.contains(Self.mediaType(type)) else {
            throw JOSEError(
                .invalidHeader, "typ \(type.prefix(32)) is not an accepted token type here", parameter: "typ")
        }
    }
}
