public import Foundation

/// A request as the server received it.
public struct HTTPServerRequest: Sendable {
    /// The method, for example `GET`.
    public let method: String
    /// The request target as sent (path and query).
    public let target: String
    /// The path, percent-encoded as sent, without the query.
    public let path: String
    /// The query string without `?`, if any.
    public let query: String?
    /// The header fields.
    public let headers: HTTPServerHeaders
    /// The body (empty when there is none).
    public let body: Data

    /// Creates a request.
    public init(method: String, target: String, headers: HTTPServerHeaders, body: Data) {
        self.method = method
        self.target = target
        if let question = target.firstIndex(of: "?") {
            path = String(target[..<question])
            query = String(target[target.index(after: question)...])
        } else {
            path = target
            query = nil
        }
        self.headers = headers
        self.body = body
    }

    /// The query parameters, decoded (`application/x-www-form-urlencoded` rules).
    public var queryParameters: [String: String] { HTTPFormEncoding.decode(query ?? "") }

    /// The body's form parameters, when the content type is `application/x-www-form-urlencoded`.
    public var formParameters: [String: String]? {
        guard let type = headers["Content-Type"], type.hasPrefixCaseInsensitive("application/x-www-form-urlencoded")
        else { return nil }
        return HTTPFormEncoding.decode(String(decoding: body, as: UTF8.self))
    }

    /// Whether the content type is JSON (`application/json`, with or without parameters).
    public var hasJSONBody: Bool {
        guard let type = headers["Content-Type"] else { return false }
        let mediaType = type.split(separator: ";", maxSplits: 1).first.map(String.init) ?? type
        return mediaType.trimmingCharacters(in: .whitespaces).caseInsensitiveEquals("application/json")
    }

    /// The credentials of an `Authorization` header with the given scheme (compared case-insensitively).
    public func authorization(scheme: String) -> String? {
        guard let value = headers["Authorization"], let space = value.firstIndex(of: " ") else { return nil }
        guard String(value[..<space]).caseInsensitiveEquals(scheme) else { return nil }
        let credentials = value[value.index(after: space)...].drop { $0 == " " }
        return credentials.isEmpty || credentials.utf8.contains(UInt8(ascii: " ")) ? nil : String(credentials)
    }
}

/// `application/x-www-form-urlencoded` (WHATWG URL §5) encoding and decoding.
public enum HTTPFormEncoding {
    /// Decodes `a=1&b=x+y`; a repeated name keeps its first value.
    public static func decode(_ text: String) -> [String: String] {
        var result: [String: String] = [:]
        for (name, value) in decodePairs(text) where result[name] == nil { result[name] = value }
        return result
    }

    /// Decodes `a=1&b=x+y` into its pairs, in order, repeated names included (OAuth refuses those).
    ///
    /// Split on the bytes `&` and `=`, as WHATWG URL §5.1 says: not on Swift characters, where `&` followed by a
    /// combining mark is one character and would hide a separator that every other parser sees.
    public static func decodePairs(_ text: String) -> [(name: String, value: String)] {
        Array(text.utf8).split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            return (unescape(parts[0]), parts.count > 1 ? unescape(parts[1]) : "")
        }
    }

    /// Encodes pairs in the given order.
    public static func encode(_ pairs: [(String, String)]) -> String {
        pairs.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&")
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// Percent-encodes everything but the unreserved set (`-._*`, letters, digits), spaces as `+`, byte by byte.
    public static func escape(_ text: String) -> String {
        var encoded: [UInt8] = []
        encoded.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "*"):
                encoded.append(byte)
            case UInt8(ascii: " "):
                encoded.append(UInt8(ascii: "+"))
            default:
                encoded.append(UInt8(ascii: "%"))
                encoded.append(hexDigits[Int(byte >> 4)])
                encoded.append(hexDigits[Int(byte & 0x0F)])
            }
        }
        return String(decoding: encoded, as: UTF8.self)
    }

    /// One component decoded byte for byte: `+` as a space, `%XX` as its byte; nil for a `%` without two hex digits
    /// or bytes that are not UTF-8.
    ///
    /// Not Foundation's `removingPercentEncoding`, which drops a leading U+FEFF and so makes `%EF%BB%BFx` and `x`
    /// the same value: identifiers compare byte for byte.
    public static func decodeComponent(_ text: some StringProtocol) -> String? {
        decodeComponent(bytes: text.utf8)
    }

    private static func decodeComponent(bytes text: some Collection<UInt8>) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.count)
        var iterator = text.makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue)
                else { return nil }
                bytes.append(high << 4 | low)
            } else {
                bytes.append(byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            }
        }
        // Valid UTF-8 exactly when decoding replaced nothing (`String(validating:)` needs iOS 18 / macOS 15).
        let text = String(decoding: bytes, as: UTF8.self)
        return text.utf8.elementsEqual(bytes) ? text : nil
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// A component as `decodeComponent` reads it, or with only `+` made a space when it does not decode (the bytes
    /// are UTF-8 already: they were cut from a string at ASCII separators).
    private static func unescape(_ bytes: ArraySlice<UInt8>) -> String {
        decodeComponent(bytes: bytes)
            ?? String(decoding: bytes.map { $0 == UInt8(ascii: "+") ? UInt8(ascii: " ") : $0 }, as: UTF8.self)
    }
}
