/// Conversions between the JWS ECDSA signature form (`R‖S`, each exactly the curve's length; RFC 7518 §3.4)
/// and ASN.1 DER, which the platform libraries speak.
package enum ECDSASignature {
    private static let p256Order = hex("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551")
    private static let p384Order = hex(
        "ffffffffffffffffffffffffffffffffffffffffffffffffc7634d81f4372ddf581a0db248b0a77aecec196accc52973")
    private static let p521Order = hex(
        "01fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffa51868783bf2f966b7fcc0148f709a5d03bb5c9b8899c47aebb6fb71e91386409"
    )

    /// The group order n of each curve, big-endian, padded to the coordinate length.
    package static func order(of curve: JWK.Curve) -> [UInt8] {
        switch curve {
        case .p256: p256Order
        case .p384: p384Order
        default: p521Order
        }
    }

    private static func hex(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let high = iterator.next(), let low = iterator.next() {
            bytes.append(UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16) ?? 0)
        }
        return bytes
    }

    /// Whether `value` (big-endian, curve length) is in 1..<n — the range check CVE-2022-21449 skipped.
    static func isInRange(_ value: UnsafeRawBufferPointer, order: [UInt8]) -> Bool {
        var isZero = true
        for byte in value where byte != 0 {
            isZero = false
            break
        }
        if isZero { return false }
        for (a, b) in zip(value, order) where a != b { return a < b }
        return false  // equal to n
    }

    /// Whether a raw `R‖S` has exactly the curve's length and 0 < r, s < n.
    static func isWellFormed(raw: UnsafeRawBufferPointer, curve: JWK.Curve) -> Bool {
        let size = curve.coordinateLength
        guard raw.count == 2 * size else { return false }
        let n = order(of: curve)
        return isInRange(UnsafeRawBufferPointer(rebasing: raw[0..<size]), order: n)
            && isInRange(UnsafeRawBufferPointer(rebasing: raw[size...]), order: n)
    }

    /// DER for a raw `R‖S`, or nil when the length is wrong or r or s is out of range.
    package static func der(fromRaw raw: UnsafeRawBufferPointer, curve: JWK.Curve) -> [UInt8]? {
        withDER(fromRaw: raw, curve: curve) { $0.map(Array.init) }
    }

    /// The largest DER signature: SEQUENCE(2 + INTEGER(2 + 1 + 66) × 2) for P-521.
    static let maxDERLength = 3 + 2 * (2 + 1 + 66)

    /// Builds the DER for a raw `R‖S` in a stack buffer and hands it to `body` (nil when the length is wrong or
    /// r or s is out of range: the check CVE-2022-21449 skipped).
    static func withDER<R>(
        fromRaw raw: UnsafeRawBufferPointer,
        curve: JWK.Curve,
        _ body: (UnsafeRawBufferPointer?) -> R
    ) -> R {
        let size = curve.coordinateLength
        guard raw.count == 2 * size else { return body(nil) }
        let n = order(of: curve)
        let r = UnsafeRawBufferPointer(rebasing: raw[0..<size])
        let s = UnsafeRawBufferPointer(rebasing: raw[size..<(2 * size)])
        guard isInRange(r, order: n), isInRange(s, order: n) else { return body(nil) }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: maxDERLength) { buffer in
            // Encode the two INTEGERs after a 3-byte gap, then put the SEQUENCE header right before them.
            var end = 3
            for value in [r, s] {
                let firstNonZero = value.firstIndex { $0 != 0 } ?? value.count
                let magnitude = UnsafeRawBufferPointer(rebasing: value[firstNonZero...])
                let pad = (magnitude.first ?? 0) & 0x80 != 0 ? 1 : 0
                buffer[end] = 0x02
                buffer[end + 1] = UInt8(magnitude.count + pad)
                if pad == 1 { buffer[end + 2] = 0 }
                for (offset, byte) in magnitude.enumerated() { buffer[end + 2 + pad + offset] = byte }
                end += 2 + pad + magnitude.count
            }
            let bodyLength = end - 3
            let start: Int
            if bodyLength < 0x80 {
                start = 1
                buffer[1] = 0x30
                buffer[2] = UInt8(bodyLength)
            } else {
                start = 0
                buffer[0] = 0x30
                buffer[1] = 0x81
                buffer[2] = UInt8(bodyLength)
            }
            return body(UnsafeRawBufferPointer(UnsafeMutableBufferPointer(rebasing: buffer[start..<end])))
        }
    }

    /// The raw `R‖S` of a DER signature produced by the platform, or nil if it is not what we expect.
    static func raw(fromDER der: [UInt8], curve: JWK.Curve) -> [UInt8]? {
        var index = 0
        func readLength() -> Int? {
            guard index < der.count else { return nil }
            let first = der[index]
            index += 1
            if first < 0x80 { return Int(first) }
            guard first == 0x81, index < der.count else { return nil }
            defer { index += 1 }
            return Int(der[index])
        }
        func readInteger() -> [UInt8]? {
            guard index < der.count, der[index] == 0x02 else { return nil }
            index += 1
            guard let length = readLength(), index + length <= der.count else { return nil }
            defer { index += length }
            let bytes = der[index..<(index + length)].drop { $0 == 0 }
            guard bytes.count <= curve.coordinateLength else { return nil }
            return [UInt8](repeating: 0, count: curve.coordinateLength - bytes.count) + bytes
        }
        guard der.first == 0x30 else { return nil }
        index = 1
        guard readLength() != nil, let r = readInteger(), let s = readInteger() else { return nil }
        return r + s
    }
}
