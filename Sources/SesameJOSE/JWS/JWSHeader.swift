/// A JWS protected header (RFC 7515 §4), parsed strictly.
///
/// Nothing here is trusted before the signature verifies, except `alg` and `kid` for choosing among keys the
/// caller already trusts. `jwk`, `jku`, `x5u`, `x5c` and `x5t` are kept in ``parameters`` but never used to
/// find a key.
public struct JWSHeader: Sendable, Hashable {
    /// The algorithm name as sent in `alg` (it may name an algorithm this library does not support).
    public let algorithmName: String
    /// `kid`, if present.
    public let keyID: String?
    /// `typ`, if present.
    public let type: String?
    /// `cty`, if present.
    public let contentType: String?
    /// Every header parameter.
    public let parameters: JOSEObject

    /// The algorithm, if `alg` names one this library implements (never for `none`).
    public var algorithm: JWSAlgorithm? { JWSAlgorithm(name: algorithmName) }

    /// Builds a header from parameters, applying the checks of RFC 7515 §4 and RFC 7797 §6-7.
    package init(parameters: JOSEObject) throws(JOSEError) {
        guard let alg = parameters["alg"] else {
            throw JOSEError(.invalidHeader, "the header has no alg", parameter: "alg")
        }
        guard let algName = alg.stringValue else {
            throw JOSEError(.invalidHeader, "alg must be a string", parameter: "alg")
        }
        if parameters["enc"] != nil || parameters["zip"] != nil {
            throw JOSEError(.malformedToken, "an encrypted token (JWE) where a JWS is expected", parameter: "enc")
        }
        if let crit = parameters["crit"] {
            // This library understands no extension, so any `crit` (even a well-formed one) is refused.
            let names = crit.arrayValue?.compactMap(\.stringValue) ?? []
            throw JOSEError(
                .unsupportedCriticalHeader,
                "critical header extensions are not supported: \(names.prefix(4).joined(separator: ", "))",
                parameter: "crit"
            )
        }
        if let b64 = parameters["b64"], b64 != .bool(true) {
            throw JOSEError(.unencodedPayload, "unencoded payloads (b64: false) are not accepted", parameter: "b64")
        }
        func optionalString(_ name: String) throws(JOSEError) -> String? {
            guard let value = parameters[name] else { return nil }
            guard let string = value.stringValue else {
                throw JOSEError(.invalidHeader, "\(name) must be a string", parameter: name)
            }
            return string
        }
        self.algorithmName = algName
        self.keyID = try optionalString("kid")
        self.type = try optionalString("typ")
        self.contentType = try optionalString("cty")
        self.parameters = parameters
    }
}
