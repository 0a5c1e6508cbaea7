/// One challenge of a `WWW-Authenticate` field (RFC 9110 §11.6.1): a scheme with either a `token68` or
/// parameters.
///
/// ```swift
/// let challenges = AuthenticationChallenge.parse(#"Bearer realm="api", error="invalid_token", DPoP algs="ES256""#)
/// challenges[0].scheme            // "Bearer"
/// challenges[0]["error"]          // "invalid_token"
/// challenges[1].isScheme("dpop")  // true
/// ```
public struct AuthenticationChallenge: Sendable, Hashable {
    /// The scheme as sent (compare with ``isScheme(_:)``, which ignores case).
    public let scheme: String
    /// The parameters, names lower-cased, values unquoted.
    ///
    /// A name repeated within one challenge keeps its first
    /// value (RFC 9110 requires names to be unique).
    public let parameters: [String: String]
    /// The `token68` form (`Negotiate abc==`), when the challenge uses it.
    public let token68: String?
    /// Parameter names (lower-cased) that appeared more than once, which RFC 9110 §11.2 forbids: a reader that
    /// depends on one of them should not trust the challenge.
    public let repeatedParameters: Set<String>

    /// Creates a challenge.
    public init(
        scheme: String, parameters: [String: String] = [:], token68: String? = nil,
        repeatedParameters: Set<String> = []
    ) {
        self.scheme = scheme
        self.parameters = parameters
        self.token68 = token68
        self.repeatedParameters = repeatedParameters
    }

    /// The parameter `name` (case-insensitive).
    public subscript(name: String) -> String? { parameters[name.lowercased()] }

    /// Whether the scheme is `name`, ignoring ASCII case.
    public func isScheme(_ name: String) -> Bool { SesameHTTP.Headers.same(scheme, name) }

    /// Parses a `WWW-Authenticate` (or `Proxy-Authenticate`) field value into its challenges.
    ///
    /// Lenient where RFC 9110 allows it (optional whitespace around `=`, empty list elements, any case) and never
    /// fails: malformed pieces are skipped.
    public static func parse(_ value: String) -> [AuthenticationChallenge] {
        var parser = ChallengeParser(Array(value.utf8))
        return parser.challenges()
    }
}

/// A hand-written scanner over the field's bytes.
private struct ChallengeParser {
    private let bytes: [UInt8]
    private var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    private var atEnd: Bool { index >= bytes.count }
    private var peek: UInt8? { atEnd ? nil : bytes[index] }

    mutating func challenges() -> [AuthenticationChallenge] {
        var found: [AuthenticationChallenge] = []
        while true {
            skip(whitespace: true, commas: true)
            guard !atEnd else { return found }
            guard let scheme = read(Self.isTokenByte) else {
                index += 1  // garbage: skip it
                continue
            }
            let hadSpace = peek == 0x20 || peek == 0x09
            skip(whitespace: true, commas: false)
            if hadSpace, let token68 = readToken68() {
                found.append(AuthenticationChallenge(scheme: scheme, token68: token68))
            } else {
                let (parameters, repeated) = readParameters()
                found.append(
                    AuthenticationChallenge(scheme: scheme, parameters: parameters, repeatedParameters: repeated))
            }
        }
    }

    /// `token68` followed by the end or a comma; otherwise nothing is consumed.
    private mutating func readToken68() -> String? {
        let start = index
        guard var value = read(Self.isToken68Byte) else { return nil }
        while peek == 0x3D {
            value.append("=")
            index += 1
        }
        skip(whitespace: true, commas: false)
        if atEnd || peek == 0x2C { return value }
        index = start
        return nil
    }

    private mutating func readParameters() -> ([String: String], repeated: Set<String>) {
        var parameters: [String: String] = [:]
        var repeated: Set<String> = []
        while true {
            let start = index
            skip(whitespace: true, commas: true)
            guard let name = read(Self.isTokenByte) else {
                index = start
                return (parameters, repeated)
            }
            skip(whitespace: true, commas: false)
            guard peek == 0x3D else {
                index = start  // the next challenge's scheme
                return (parameters, repeated)
            }
            index += 1
            skip(whitespace: true, commas: false)
            let value = peek == 0x22 ? readQuoted() : (read(Self.isTokenByte) ?? "")
            let key = name.lowercased()
            if parameters[key] == nil { parameters[key] = value } else { repeated.insert(key) }
        }
    }

    private mutating func readQuoted() -> String {
        index += 1  // the opening quote
        var value: [UInt8] = []
        while let byte = peek {
            index += 1
            if byte == 0x22 { break }
            if byte == 0x5C, let escaped = peek {
                index += 1
                value.append(escaped)
            } else {
                value.append(byte)
            }
        }
        return String(decoding: value, as: UTF8.self)
    }

    private mutating func read(_ accepts: (UInt8) -> Bool) -> String? {
        let start = index
        while let byte = peek, accepts(byte) { index += 1 }
        return index > start ? String(decoding: bytes[start..<index], as: UTF8.self) : nil
    }

    private mutating func skip(whitespace: Bool, commas: Bool) {
        while let byte = peek, (whitespace && (byte == 0x20 || byte == 0x09)) || (commas && byte == 0x2C) {
            index += 1
        }
    }

    /// RFC 9110 `tchar`.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
            UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default: false
        }
    }

    /// RFC 9110 `token68` characters (without the trailing `=`).
    private static func isToken68Byte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "+"),
            UInt8(ascii: "/"):
            true
        default: false
        }
    }
}
