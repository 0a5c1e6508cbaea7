import Foundation

extension JOSEValue {
    /// The default bound on nesting depth (RFC 8725 resource limits; ATK-14).
    public static let defaultMaxDepth = 32

    /// Parses strict JSON (RFC 8259) from UTF-8 bytes.
    ///
    /// - Parameters:
    ///   - data: the UTF-8 text.
    ///   - maxDepth: how deeply arrays and objects may nest.
    /// - Returns: the parsed value.
    /// - Throws: ``JOSEError`` with ``JOSEError/Code/malformedJSON`` or ``JOSEError/Code/duplicateMember``.
    public static func parse(_ data: some Collection<UInt8>, maxDepth: Int = defaultMaxDepth) throws -> JOSEValue {
        let result = data.withContiguousStorageIfAvailable { buffer in
            Result { () throws(JOSEError) in try parse(buffer: UnsafeRawBufferPointer(buffer), maxDepth: maxDepth) }
        }
        if let result { return try result.get() }
        let copy = Array(data)
        return try copy.withUnsafeBytes { buffer throws(JOSEError) in try parse(buffer: buffer, maxDepth: maxDepth) }
    }

    /// Parses strict JSON from a raw buffer.
    package static func parse(buffer: UnsafeRawBufferPointer, maxDepth: Int = defaultMaxDepth) throws(JOSEError)
        -> JOSEValue
    {
        var parser = JOSEJSONParser(buffer, maxDepth: maxDepth)
        return try parser.parseDocument()
    }
}

/// A recursive-descent JSON parser over bytes, strict where JOSE needs it to be.
struct JOSEJSONParser {
    private let bytes: UnsafeRawBufferPointer
    private var index = 0
    private let maxDepth: Int
    private var depth = 0

    init(_ bytes: UnsafeRawBufferPointer, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    mutating func parseDocument() throws(JOSEError) -> JOSEValue {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        guard index == bytes.count else { throw Self.error("unexpected data after the JSON value") }
        return value
    }

    private static func error(_ message: String) -> JOSEError { JOSEError(.malformedJSON, message) }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func parseValue() throws(JOSEError) -> JOSEValue {
        guard index < bytes.count else { throw Self.error("unexpected end of JSON") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        default: return try parseNumber()
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(JOSEError) {
        let count = literal.utf8CodeUnitCount
        guard bytes.count - index >= count else { throw Self.error("invalid literal") }
        let start = literal.utf8Start
        for offset in 0..<count where bytes[index + offset] != start[offset] {
            throw Self.error("invalid literal")
        }
        index += count
    }

    private mutating func enterContainer() throws(JOSEError) {
        depth += 1
        if depth > maxDepth { throw Self.error("JSON nests deeper than \(maxDepth) levels") }
        index += 1
        skipWhitespace()
    }

    private mutating func parseObject() throws(JOSEError) -> JOSEValue {
        try enterContainer()
        var members: [JOSEObject.Member] = []
        members.reserveCapacity(16)
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return .object(JOSEObject(uniqueMembers: members))
        }
        while true {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                throw Self.error("expected a member name")
            }
            let (key, fingerprint) = try parseName()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw Self.error("expected ':'") }
            index += 1
            skipWhitespace()
            let value = try parseValue()
            // Names are compared as strings only where the fingerprints match.
            if members.contains(where: { $0.fingerprint == fingerprint && $0.name == key }) {
                throw JOSEError(.duplicateMember, "a JSON object names the member \"\(Self.printable(key))\" twice")
            }
            members.append(JOSEObject.Member(name: key, value: value, fingerprint: fingerprint))
            skipWhitespace()
            guard index < bytes.count else { throw Self.error("unterminated object") }
            let byte = bytes[index]
            index += 1
            if byte == UInt8(ascii: "}") { break }
            guard byte == UInt8(ascii: ",") else { throw Self.error("expected ',' or '}'") }
            skipWhitespace()
        }
        depth -= 1
        return .object(JOSEObject(uniqueMembers: members))
    }

    /// Parses a member name and its fingerprint in one pass.
    ///
    /// Well-known JOSE names come back as shared
    /// constants, so the common case creates no string at all.
    private mutating func parseName() throws(JOSEError) -> (String, UInt64) {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        var position = index + 1
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                let fingerprint = hash | 1
                let raw = UnsafeRawBufferPointer(rebasing: bytes[(index + 1)..<position])
                if let known = JOSEKnownNames.lookup(raw, fingerprint: fingerprint) {
                    index = position + 1
                    return (known, fingerprint)
                }
                break
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 || byte >= 0x80 { break }
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
            position += 1
        }
        let name = try parseString()
        return (name, JOSEObject.fingerprint(of: name))
    }

    /// A member name cut short and stripped of control characters, for error messages.
    private static func printable(_ key: String) -> String {
        String(key.unicodeScalars.prefix(40).filter { $0.value >= 0x20 && $0 != "\"" }.map(Character.init))
    }

    private mutating func parseArray() throws(JOSEError) -> JOSEValue {
        try enterContainer()
        var elements: [JOSEValue] = []
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array(elements)
        }
        while true {
            elements.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw Self.error("unterminated array") }
            let byte = bytes[index]
            index += 1
            if byte == UInt8(ascii: "]") { break }
            guard byte == UInt8(ascii: ",") else { throw Self.error("expected ',' or ']'") }
            skipWhitespace()
        }
        depth -= 1
        return .array(elements)
    }

    private mutating func parseString() throws(JOSEError) -> String {
        index += 1  // opening quote
        let start = index
        // Fast path: no escapes; the UTF-8 check runs only when a non-ASCII byte was seen.
        var highBits: UInt8 = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
                index += 1
                if highBits & 0x80 != 0, !UTF8Validation.isValid(slice) {
                    throw Self.error("a string is not valid UTF-8")
                }
                return UTF8Validation.string(slice)
            }
            highBits |= byte
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw Self.error("a string contains a control character") }
            index += 1
        }
        var scratch = Array(bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard scratch.withUnsafeBytes({ UTF8Validation.isValid($0) }) else {
                    throw Self.error("a string is not valid UTF-8")
                }
                return scratch.withUnsafeBytes { UTF8Validation.string($0) }
            case UInt8(ascii: "\\"):
                try parseEscape(into: &scratch)
            case 0..<0x20:
                throw Self.error("a string contains a control character")
            default:
                scratch.append(byte)
            }
        }
        throw Self.error("unterminated string")
    }

    private mutating func parseEscape(into scratch: inout [UInt8]) throws(JOSEError) {
        guard index < bytes.count else { throw Self.error("unterminated escape") }
        let byte = bytes[index]
        index += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scratch.append(byte)
        case UInt8(ascii: "b"): scratch.append(0x08)
        case UInt8(ascii: "f"): scratch.append(0x0C)
        case UInt8(ascii: "n"): scratch.append(0x0A)
        case UInt8(ascii: "r"): scratch.append(0x0D)
        case UInt8(ascii: "t"): scratch.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try parseHex4()
            if (0xD800..<0xDC00).contains(scalar) {
                guard bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"),
                    bytes[index + 1] == UInt8(ascii: "u")
                else { throw Self.error("an unpaired surrogate escape") }
                index += 2
                let low = try parseHex4()
                guard (0xDC00..<0xE000).contains(low) else { throw Self.error("an unpaired surrogate escape") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00..<0xE000).contains(scalar) {
                throw Self.error("an unpaired surrogate escape")
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw Self.error("an invalid \\u escape") }
            scratch.append(contentsOf: String(unicode).utf8)
        default:
            throw Self.error("an invalid escape sequence")
        }
    }

    private mutating func parseHex4() throws(JOSEError) -> UInt32 {
        guard bytes.count - index >= 4 else { throw Self.error("a short \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            index += 1
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw Self.error("an invalid \\u escape")
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    /// RFC 8259 §6 number grammar; integers that fit become `.integer`, the rest `.number` (finite only).
    private mutating func parseNumber() throws(JOSEError) -> JOSEValue {
        let start = index
        var isInteger = true
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, Self.isDigit(bytes[index]) else { throw Self.error("invalid value") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < bytes.count, Self.isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard index < bytes.count, Self.isDigit(bytes[index]) else { throw Self.error("invalid number") }
            while index < bytes.count, Self.isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] | 0x20 == UInt8(ascii: "e") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard index < bytes.count, Self.isDigit(bytes[index]) else { throw Self.error("invalid number") }
            while index < bytes.count, Self.isDigit(bytes[index]) { index += 1 }
        }
        if isInteger, index - start <= 18 {
            // Up to 18 digits always fit in Int64: accumulate directly.
            var value: Int64 = 0
            let negative = bytes[start] == UInt8(ascii: "-")
            for position in (negative ? start + 1 : start)..<index {
                value = value * 10 + Int64(bytes[position] &- UInt8(ascii: "0"))
            }
            return .integer(negative ? -value : value)
        }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if isInteger, let integer = Int64(text) { return .integer(integer) }
        guard let double = Double(text), double.isFinite else { throw Self.error("a number is out of range") }
        return .number(double)
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte &- UInt8(ascii: "0") < 10 }
}
