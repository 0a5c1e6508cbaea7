public import Foundation

/// Strict base64url (RFC 4648 §5) without padding, as JOSE uses it (RFC 7515 §2).
///
/// Decoding rejects everything a lax decoder lets through: `=` padding, `+` and `/`, white space, any byte
/// outside the alphabet, a length that leaves a single dangling character, and non-zero unused trailing bits
/// (which would give one value two encodings).
public enum Base64URL {
    /// Encodes bytes as unpadded base64url text.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        var output = [UInt8]()
        output.reserveCapacity((bytes.count * 4 + 2) / 3)
        encode(bytes, into: &output)
        return String(decoding: output, as: UTF8.self)
    }

    /// Encodes bytes as unpadded base64url and appends the ASCII to `output`.
    package static func encode(_ bytes: some Collection<UInt8>, into output: inout [UInt8]) {
        var iterator = bytes.makeIterator()
        while let b0 = iterator.next() {
            let b1 = iterator.next()
            let b2 = iterator.next()
            output.append(alphabet[Int(b0 >> 2)])
            output.append(alphabet[Int((b0 & 0x03) << 4 | (b1 ?? 0) >> 4)])
            guard let b1 else { return }
            output.append(alphabet[Int((b1 & 0x0F) << 2 | (b2 ?? 0) >> 6)])
            guard let b2 else { return }
            output.append(alphabet[Int(b2 & 0x3F)])
        }
    }

    /// Decodes strict unpadded base64url text.
    ///
    /// - Throws: ``JOSEError`` with code ``JOSEError/Code/malformedBase64URL``.
    public static func decode(_ text: String) throws -> Data {
        var text = text
        return try text.withUTF8 { Data(try decode(UnsafeRawBufferPointer($0))) }
    }

    /// Decodes strict unpadded base64url from ASCII bytes.
    package static func decode(_ input: UnsafeRawBufferPointer) throws(JOSEError) -> [UInt8] {
        let count = input.count
        if count % 4 == 1 { throw JOSEError(.malformedBase64URL, "base64url text has an impossible length") }
        var output = [UInt8](repeating: 0, count: count / 4 * 3 + max(0, count % 4 - 1))
        let ok = output.withUnsafeMutableBufferPointer { out in
            decodeUnchecked(input, into: out)
        }
        if !ok {
            throw JOSEError(
                .malformedBase64URL,
                "base64url text has a character outside the alphabet or non-canonical trailing bits")
        }
        return output
    }

    /// Decodes into a temporary buffer (on the stack when small) and hands it to `body`.
    package static func withDecoded<R>(
        _ input: UnsafeRawBufferPointer,
        _ body: (UnsafeRawBufferPointer) throws(JOSEError) -> R
    ) throws(JOSEError) -> R {
        guard let length = decodedLength(of: input.count) else {
            throw JOSEError(.malformedBase64URL, "base64url text has an impossible length")
        }
        return try JOSEError.typed {
            try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(length, 1)) {
                buffer throws(JOSEError) -> R in
                let slice = UnsafeMutableBufferPointer(rebasing: buffer[..<length])
                guard decodeUnchecked(input, into: slice) else {
                    throw JOSEError(
                        .malformedBase64URL,
                        "base64url text has a character outside the alphabet or non-canonical trailing bits")
                }
                return try body(UnsafeRawBufferPointer(slice))
            }
        }
    }

    /// The decoded length of `count` base64url characters, or nil for an impossible length.
    package static func decodedLength(of count: Int) -> Int? {
        count % 4 == 1 ? nil : count / 4 * 3 + max(0, count % 4 - 1)
    }

    /// Decodes into a buffer of exactly ``decodedLength(of:)`` bytes; false on any non-canonical input.
    package static func decodeUnchecked(_ input: UnsafeRawBufferPointer, into out: UnsafeMutableBufferPointer<UInt8>)
        -> Bool
    {
        table.withUnsafeBufferPointer { table in decode(input, into: out, table: table) }
    }

    private static func decode(
        _ input: UnsafeRawBufferPointer,
        into out: UnsafeMutableBufferPointer<UInt8>,
        table: UnsafeBufferPointer<UInt8>
    ) -> Bool {
        let count = input.count
        var bad: UInt8 = 0
        var i = 0
        var o = 0
        let whole = count - count % 4
        // Whole quanta through pre-shifted 32-bit tables: one OR per character, and bit 24 flags a bad one.
        let shifted = shiftedTables.pointer
        var badBits: UInt32 = 0
        while i < whole {
            let quantum =
                shifted[Int(input[i])] | shifted[256 + Int(input[i + 1])] | shifted[512 + Int(input[i + 2])]
                | shifted[768 + Int(input[i + 3])]
            badBits |= quantum
            out[o] = UInt8(truncatingIfNeeded: quantum >> 16)
            out[o + 1] = UInt8(truncatingIfNeeded: quantum >> 8)
            out[o + 2] = UInt8(truncatingIfNeeded: quantum)
            i += 4
            o += 3
        }
        if badBits & 0x0100_0000 != 0 { bad = 0x80 }
        switch count - whole {
        case 2:
            let a = table[Int(input[i])]
            let b = table[Int(input[i + 1])]
            bad |= (a | b) & 0x80
            bad |= (b & 0x0F) != 0 ? 0x80 : 0
            out[o] = a << 2 | b >> 4
        case 3:
            let a = table[Int(input[i])]
            let b = table[Int(input[i + 1])]
            let c = table[Int(input[i + 2])]
            bad |= (a | b | c) & 0x80
            bad |= (c & 0x03) != 0 ? 0x80 : 0
            out[o] = a << 2 | b >> 4
            out[o + 1] = b << 4 | c >> 2
        default:
            break
        }
        return bad == 0
    }

    /// Four 256-entry tables: a character's 6-bit value shifted into place for positions 0…3 of a quantum, or
    /// bit 24 for a character outside the alphabet.
    ///
    /// Immutable once built.
    private struct ShiftedTables: @unchecked Sendable {
        let pointer: UnsafeMutablePointer<UInt32>
    }

    private static let shiftedTables: ShiftedTables = {
        let pointer = UnsafeMutablePointer<UInt32>.allocate(capacity: 1024)
        for position in 0..<4 {
            for byte in 0..<256 {
                let value = table[byte]
                pointer[position * 256 + byte] =
                    value == 0xFF ? 0x0100_0000 : UInt32(value) << UInt32(18 - 6 * position)
            }
        }
        return ShiftedTables(pointer: pointer)
    }()

    private static let alphabet: [UInt8] = Array(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Maps an ASCII byte to its 6-bit value, or 0xFF for a byte outside the alphabet.
    private static let table: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()
}
