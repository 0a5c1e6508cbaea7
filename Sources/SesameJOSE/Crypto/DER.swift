import Foundation

/// The little ASN.1 DER that key import and export need: RSA PKCS#1 keys, SubjectPublicKeyInfo, PKCS#8, and the
/// Ed25519 forms of RFC 8410.
///
/// The Apple backend (Security and CryptoKit) speaks these encodings, so they live here, in portable code that
/// the Linux tests check against libcrypto's own output.
package enum DER {
    /// One decoded TLV: its tag and its content bytes.
    package struct Node {
        package let tag: UInt8
        package let content: ArraySlice<UInt8>

        /// The children of a constructed node (SEQUENCE).
        package func children() throws(JOSEError) -> [Node] {
            var reader = Reader(content)
            var nodes: [Node] = []
            while !reader.isAtEnd { nodes.append(try reader.next()) }
            return nodes
        }

        /// The unsigned big-endian value of an INTEGER, without the sign-padding zero.
        package func unsignedInteger() throws(JOSEError) -> [UInt8] {
            guard tag == 0x02, let first = content.first else { throw DER.error("expected an INTEGER") }
            guard first & 0x80 == 0 else { throw DER.error("a negative INTEGER") }
            let value = content.drop { $0 == 0 }
            return value.isEmpty ? [0] : Array(value)
        }
    }

    /// Reads consecutive TLVs with definite lengths.
    package struct Reader {
        private var bytes: ArraySlice<UInt8>

        package init(_ bytes: ArraySlice<UInt8>) { self.bytes = bytes }
        package var isAtEnd: Bool { bytes.isEmpty }

        package mutating func next() throws(JOSEError) -> Node {
            guard let tag = bytes.popFirst(), let first = bytes.popFirst() else { throw DER.error("truncated DER") }
            var length = 0
            if first < 0x80 {
                length = Int(first)
            } else {
                let count = Int(first & 0x7F)
                guard count >= 1, count <= 3, bytes.count >= count else { throw DER.error("a bad DER length") }
                for _ in 0..<count { length = length << 8 | Int(bytes.removeFirst()) }
                guard length >= 0x80 else { throw DER.error("a non-minimal DER length") }
            }
            guard bytes.count >= length else { throw DER.error("truncated DER") }
            let content = bytes.prefix(length)
            bytes = bytes.dropFirst(length)
            return Node(tag: tag, content: content)
        }
    }

    static func error(_ message: String) -> JOSEError { JOSEError(.invalidKey, message) }

    /// Parses exactly one TLV covering all of `bytes`.
    package static func parse(_ bytes: [UInt8]) throws(JOSEError) -> Node {
        var reader = Reader(bytes[...])
        let node = try reader.next()
        guard reader.isAtEnd else { throw error("trailing bytes after DER") }
        return node
    }

    // MARK: Encoding

    package static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [tag]
        let count = content.count
        if count < 0x80 {
            out.append(UInt8(count))
        } else if count <= 0xFF {
            out += [0x81, UInt8(count)]
        } else if count <= 0xFFFF {
            out += [0x82, UInt8(count >> 8), UInt8(count & 0xFF)]
        } else {
            out += [0x83, UInt8(count >> 16), UInt8((count >> 8) & 0xFF), UInt8(count & 0xFF)]
        }
        return out + content
    }

    package static func sequence(_ items: [[UInt8]]) -> [UInt8] { tlv(0x30, items.flatMap { $0 }) }

    /// An INTEGER from an unsigned big-endian magnitude.
    package static func integer(_ magnitude: [UInt8]) -> [UInt8] {
        var value = Array(magnitude.drop { $0 == 0 })
        if value.isEmpty { value = [0] }
        if let first = value.first, first & 0x80 != 0 { value.insert(0, at: 0) }
        return tlv(0x02, value)
    }

    package static func bitString(_ bytes: [UInt8]) -> [UInt8] { tlv(0x03, [0] + bytes) }
    package static func octetString(_ bytes: [UInt8]) -> [UInt8] { tlv(0x04, bytes) }
    package static let null: [UInt8] = [0x05, 0x00]

    /// rsaEncryption (1.2.840.113549.1.1.1).
    package static let rsaEncryptionOID: [UInt8] = [0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01]
    /// id-Ed25519 (1.3.101.112), RFC 8410.
    package static let ed25519OID: [UInt8] = [0x06, 0x03, 0x2B, 0x65, 0x70]

    // MARK: Key structures

    /// RFC 8017 A.1.1 RSAPublicKey.
    package static func rsaPublicKey(n: [UInt8], e: [UInt8]) -> [UInt8] {
        sequence([integer(n), integer(e)])
    }

    /// RFC 8017 A.1.2 RSAPrivateKey (two-prime).
    package static func rsaPrivateKey(n: [UInt8], e: [UInt8], _ p: JWK.RSAPrivate) -> [UInt8] {
        sequence([integer([0]), integer(n), integer(e)] + [p.d, p.p, p.q, p.dp, p.dq, p.qi].map(integer))
    }

    /// Parses RFC 8017 RSAPublicKey or RSAPrivateKey into JWK components.
    package static func rsaComponents(pkcs1 bytes: [UInt8]) throws(JOSEError) -> JWK.Components {
        let fields = try parse(bytes).children()
        if fields.count == 2 {
            return .rsa(n: try fields[0].unsignedInteger(), e: try fields[1].unsignedInteger(), private: nil)
        }
        guard fields.count == 9, try fields[0].unsignedInteger() == [0] else {
            throw error("not a two-prime PKCS#1 RSA key")
        }
        var values: [[UInt8]] = []
        for field in fields.dropFirst() { values.append(try field.unsignedInteger()) }
        return .rsa(
            n: values[0], e: values[1],
            private: JWK.RSAPrivate(
                d: values[2], p: values[3], q: values[4], dp: values[5], dq: values[6], qi: values[7])
        )
    }

    /// SubjectPublicKeyInfo (RFC 5280 §4.1) for an RSA or Ed25519 public key.
    package static func subjectPublicKeyInfo(_ components: JWK.Components) throws(JOSEError) -> [UInt8] {
        switch components {
        case .rsa(let n, let e, _):
            return sequence([sequence([rsaEncryptionOID, null]), bitString(rsaPublicKey(n: n, e: e))])
        case .okp(_, let x, _):
            return sequence([sequence([ed25519OID]), bitString(x)])
        default:
            throw error("SubjectPublicKeyInfo here covers RSA and Ed25519")
        }
    }

    /// PKCS#8 PrivateKeyInfo (RFC 5208; RFC 8410 for Ed25519) for an RSA or Ed25519 private key.
    package static func privateKeyInfo(_ components: JWK.Components) throws(JOSEError) -> [UInt8] {
        switch components {
        case .rsa(let n, let e, let p?):
            return sequence([
                integer([0]), sequence([rsaEncryptionOID, null]), octetString(rsaPrivateKey(n: n, e: e, p)),
            ])
        case .okp(_, _, let d?):
            return sequence([integer([0]), sequence([ed25519OID]), octetString(octetString(d))])
        default:
            throw error("PKCS#8 here covers RSA and Ed25519 private keys")
        }
    }

    /// Parses SubjectPublicKeyInfo or PKCS#8 holding an RSA or Ed25519 key.
    package static func components(keyInfo bytes: [UInt8]) throws(JOSEError) -> JWK.Components {
        let fields = try parse(bytes).children()
        let isPrivate = fields.count >= 3 && fields[0].tag == 0x02
        let algorithmIndex = isPrivate ? 1 : 0
        guard fields.count > algorithmIndex + 1 else { throw error("not a key info structure") }
        let algorithm = try fields[algorithmIndex].children()
        guard let oid = algorithm.first else { throw error("no key algorithm") }
        let oidBytes = [oid.tag, UInt8(oid.content.count)] + Array(oid.content)
        let keyField = fields[algorithmIndex + 1]
        switch (oidBytes, isPrivate) {
        case (rsaEncryptionOID, false):
            guard keyField.tag == 0x03, keyField.content.first == 0 else { throw error("a bad BIT STRING") }
            return try rsaComponents(pkcs1: Array(keyField.content.dropFirst()))
        case (rsaEncryptionOID, true):
            guard keyField.tag == 0x04 else { throw error("a bad OCTET STRING") }
            return try rsaComponents(pkcs1: Array(keyField.content))
        case (ed25519OID, false):
            guard keyField.tag == 0x03, keyField.content.first == 0, keyField.content.count == 33 else {
                throw error("a bad Ed25519 public key")
            }
            return .okp(curve: .ed25519, x: Array(keyField.content.dropFirst()), d: nil)
        case (ed25519OID, true):
            let inner = try parse(Array(keyField.content))
            guard keyField.tag == 0x04, inner.tag == 0x04, inner.content.count == 32 else {
                throw error("a bad Ed25519 private key")
            }
            return .okp(curve: .ed25519, x: [], d: Array(inner.content))
        default:
            throw error("an unsupported key algorithm")
        }
    }

    // MARK: PEM

    /// PEM armour (RFC 7468) around DER.
    package static func pem(_ der: [UInt8], label: String) -> String {
        let base64 = Data(der).base64EncodedString()
        var lines = ["-----BEGIN \(label)-----"]
        var index = base64.startIndex
        while index < base64.endIndex {
            let end = base64.index(index, offsetBy: 64, limitedBy: base64.endIndex) ?? base64.endIndex
            lines.append(String(base64[index..<end]))
            index = end
        }
        lines.append("-----END \(label)-----")
        return lines.joined(separator: "\n") + "\n"
    }

    /// id-ecPublicKey (1.2.840.10045.2.1).
    package static let ecPublicKeyOID: [UInt8] = [0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01]

    /// What every backend's PEM import checks first, so that both accept exactly the same inputs: one block,
    /// labelled `PUBLIC KEY` (SubjectPublicKeyInfo) or `PRIVATE KEY` (unencrypted PKCS#8) — no SEC1, PKCS#1 or
    /// encrypted keys — with EC points uncompressed.
    ///
    /// - Returns: the public key a PKCS#8 key carries beside its private key (EC `x‖y`, Ed25519 `x`), which the
    ///   caller compares with the one derived from the private key (nil when there is none); and, for an Ed25519
    ///   OneAsymmetricKey v2 (RFC 8410 §7), the same key as v1 PKCS#8, which every backend reads.
    package static func checkedPEM(_ pem: String) throws(JOSEError) -> (embedded: [UInt8]?, normalized: String?) {
        let blocks = pem.components(separatedBy: "-----BEGIN ").count - 1
        guard blocks == 1 else { throw error("expected exactly one PEM block, found \(blocks)") }
        let isPrivate: Bool
        if pem.contains("-----BEGIN PUBLIC KEY-----") {
            isPrivate = false
        } else if pem.contains("-----BEGIN PRIVATE KEY-----") {
            isPrivate = true
        } else {
            throw error("only PUBLIC KEY (SubjectPublicKeyInfo) and unencrypted PRIVATE KEY (PKCS#8) PEM are accepted")
        }
        let fields = try parse(try der(fromPEM: pem, label: isPrivate ? "PRIVATE KEY" : "PUBLIC KEY")).children()
        func algorithm(_ node: Node) throws(JOSEError) -> [UInt8] {
            guard node.tag == 0x30, let oid = try node.children().first, oid.tag == 0x06 else {
                throw error("no key algorithm")
            }
            return [oid.tag, UInt8(oid.content.count)] + Array(oid.content)
        }
        func uncompressed(_ bitString: Node) throws(JOSEError) -> [UInt8] {
            let content = Array(bitString.content)
            guard content.count > 2, content[0] == 0, content[1] == 0x04 else {
                throw error("EC points must be uncompressed")
            }
            return Array(content.dropFirst(2))
        }
        if !isPrivate {
            guard fields.count == 2, fields[1].tag == 0x03 else { throw error("not a SubjectPublicKeyInfo") }
            if try algorithm(fields[0]) == ecPublicKeyOID { _ = try uncompressed(fields[1]) }
            return (nil, nil)
        }
        guard fields.count >= 3, fields[0].tag == 0x02, fields[2].tag == 0x04 else { throw error("not PKCS#8") }
        switch try algorithm(fields[1]) {
        case ecPublicKeyOID:
            // ECPrivateKey (RFC 5915): version, privateKey, [0] parameters, [1] publicKey.
            let inner = try parse(Array(fields[2].content)).children()
            guard let embedded = inner.first(where: { $0.tag == 0xA1 }) else { return (nil, nil) }
            guard let bitString = try embedded.children().first, bitString.tag == 0x03 else {
                throw error("a bad EC public key in PKCS#8")
            }
            return (try uncompressed(bitString), nil)
        case ed25519OID:
            // OneAsymmetricKey (RFC 8410 §7, version 2): [1] IMPLICIT publicKey.
            guard let embedded = fields.dropFirst(3).first(where: { $0.tag == 0x81 }) else { return (nil, nil) }
            let content = Array(embedded.content)
            guard content.count == 33, content[0] == 0 else { throw error("a bad Ed25519 public key in PKCS#8") }
            let v1 = sequence([tlv(0x02, [0]), sequence([ed25519OID]), tlv(0x04, Array(fields[2].content))])
            return (Array(content.dropFirst()), DER.pem(v1, label: "PRIVATE KEY"))
        default:
            return (nil, nil)
        }
    }

    /// The DER inside the first PEM block with `label`.
    package static func der(fromPEM pem: String, label: String) throws(JOSEError) -> [UInt8] {
        let begin = "-----BEGIN \(label)-----"
        let end = "-----END \(label)-----"
        guard let start = pem.range(of: begin), let stop = pem.range(of: end, range: start.upperBound..<pem.endIndex)
        else { throw error("no \(label) PEM block") }
        let body = pem[start.upperBound..<stop.lowerBound].filter { !$0.isWhitespace }
        guard let data = Data(base64Encoded: String(body)) else { throw error("the PEM body is not base64") }
        return Array(data)
    }
}
