import Foundation

extension JWK {
    /// Parses a JWK from its JSON text.
    ///
    /// - Parameters:
    ///   - json: the JWK's JSON text.
    ///   - allowSymmetric: whether an `oct` key is acceptable. Off by default: a symmetric key is only ever
    ///     used when the caller asks for HMAC explicitly.
    /// - Throws: ``JOSEError`` (``JOSEError/Code/malformedJSON``, ``JOSEError/Code/invalidKey``,
    ///   ``JOSEError/Code/weakKey``, ``JOSEError/Code/duplicateMember``).
    public init(json: some Collection<UInt8>, allowSymmetric: Bool = false) throws {
        try self.init(value: try JOSEValue.parse(json), allowSymmetric: allowSymmetric)
    }

    /// Parses a JWK from its JSON text.
    public init(json: String, allowSymmetric: Bool = false) throws {
        try self.init(json: Array(json.utf8), allowSymmetric: allowSymmetric)
    }

    /// Builds a JWK from a parsed JSON object.
    public init(value: JOSEValue, allowSymmetric: Bool = false) throws {
        guard let members = value.objectValue else { throw JOSEError(.malformedJSON, "a JWK must be a JSON object") }
        let reader = MemberReader(members: members)
        guard let kty = try reader.string("kty") else { throw JOSEError(.invalidKey, "a JWK without kty") }
        let components: Components
        switch kty {
        case "RSA":
            let n = try reader.requiredBytes("n")
            let e = try reader.requiredBytes("e")
            var privatePart: RSAPrivate?
            if let d = try reader.bytes("d") {
                privatePart = RSAPrivate(
                    d: d,
                    p: try reader.requiredBytes("p"),
                    q: try reader.requiredBytes("q"),
                    dp: try reader.requiredBytes("dp"),
                    dq: try reader.requiredBytes("dq"),
                    qi: try reader.requiredBytes("qi")
                )
            }
            components = .rsa(n: n, e: e, private: privatePart)
        case "EC":
            let curve = try reader.curve()
            components = .ec(
                curve: curve, x: try reader.requiredBytes("x"), y: try reader.requiredBytes("y"),
                d: try reader.bytes("d"))
        case "OKP":
            components = .okp(curve: try reader.curve(), x: try reader.requiredBytes("x"), d: try reader.bytes("d"))
        case "oct":
            guard allowSymmetric else {
                throw JOSEError(.invalidKey, "a symmetric (oct) key where only asymmetric keys are allowed")
            }
            components = .octet(k: try reader.requiredBytes("k"))
        default:
            throw JOSEError(.invalidKey, "unsupported key type \(kty.prefix(16))")
        }
        var keyOperations: [String]?
        if let ops = members["key_ops"] {
            guard let array = ops.arrayValue else { throw JOSEError(.invalidKey, "key_ops must be an array") }
            keyOperations = try array.map { element in
                guard let string = element.stringValue else {
                    throw JOSEError(.invalidKey, "key_ops must hold strings")
                }
                return string
            }
        }
        try self.init(
            components: components,
            keyID: try reader.string("kid"),
            declaredAlgorithm: try reader.string("alg"),
            use: try reader.string("use"),
            keyOperations: keyOperations
        )
    }

    /// The key as a JWK JSON object: public members, plus private ones when `includingPrivate` is true.
    ///
    /// > Warning: `includingPrivate: true` puts secret material in the result. Never log it.
    public func jsonValue(includingPrivate: Bool = false) -> JOSEValue {
        var members = Self.requiredMembers(of: components)
        if includingPrivate {
            switch components {
            case .rsa(_, _, let p?):
                for (name, bytes) in [("d", p.d), ("p", p.p), ("q", p.q), ("dp", p.dp), ("dq", p.dq), ("qi", p.qi)] {
                    members[name] = .string(Base64URL.encode(bytes))
                }
            case .ec(_, _, _, let d?), .okp(_, _, let d?):
                members["d"] = .string(Base64URL.encode(d))
            default:
                break
            }
        } else if case .octet = components {
            members["k"] = nil
        }
        if let keyID { members["kid"] = .string(keyID) }
        if let declaredAlgorithm { members["alg"] = .string(declaredAlgorithm) }
        if let use { members["use"] = .string(use) }
        if let keyOperations { members["key_ops"] = .array(keyOperations.map(JOSEValue.string)) }
        return .object(members)
    }

    /// The public key as compact JWK JSON (members sorted).
    ///
    /// Holds no private material.
    public var jwkRepresentation: String { jsonValue().jsonString }

    /// The JWK SHA-256 thumbprint (RFC 7638), base64url-encoded.
    ///
    /// Only the required public members take part, so `kid`, `alg` and private members never change it.
    public var thumbprint: String {
        let canonical = JOSEValue.object(Self.requiredMembers(of: components)).jsonBytes
        return Base64URL.encode(JOSECrypto.sha256(canonical))
    }

    /// The members RFC 7638 §3.2 requires, per key type.
    private static func requiredMembers(of components: Components) -> JOSEObject {
        switch components {
        case .rsa(let n, let e, _):
            ["kty": "RSA", "n": .string(Base64URL.encode(n)), "e": .string(Base64URL.encode(e))]
        case .ec(let curve, let x, let y, _):
            [
                "kty": "EC", "crv": .string(curve.name), "x": .string(Base64URL.encode(x)),
                "y": .string(Base64URL.encode(y)),
            ]
        case .okp(let curve, let x, _):
            ["kty": "OKP", "crv": .string(curve.name), "x": .string(Base64URL.encode(x))]
        case .octet(let k):
            ["kty": "oct", "k": .string(Base64URL.encode(k))]
        }
    }
}

/// Reads typed JWK members with precise errors.
private struct MemberReader {
    let members: JOSEObject

    func string(_ name: String) throws(JOSEError) -> String? {
        guard let value = members[name] else { return nil }
        guard let string = value.stringValue else {
            throw JOSEError(.invalidKey, "the JWK member \(name) must be a string")
        }
        return string
    }

    func bytes(_ name: String) throws(JOSEError) -> [UInt8]? {
        guard let text = try string(name) else { return nil }
        var copy = text
        do {
            return try copy.withUTF8 { buffer throws(JOSEError) in try Base64URL.decode(UnsafeRawBufferPointer(buffer))
            }
        } catch {
            throw JOSEError(.invalidKey, "the JWK member \(name) is not strict base64url")
        }
    }

    func requiredBytes(_ name: String) throws(JOSEError) -> [UInt8] {
        guard let bytes = try bytes(name) else { throw JOSEError(.invalidKey, "the JWK lacks its \(name) member") }
        return bytes
    }

    func curve() throws(JOSEError) -> JWK.Curve {
        guard let name = try string("crv") else { throw JOSEError(.invalidKey, "the JWK lacks its crv member") }
        guard let curve = JWK.Curve(name: name) else {
            throw JOSEError(.invalidKey, "unsupported curve \(name.prefix(16))")
        }
        return curve
    }
}
