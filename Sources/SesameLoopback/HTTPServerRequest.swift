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
    public static func decodePairs(_ text: String) -> [(name: String, value: String)] {
        text.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (unescape(parts[0]), parts.count > 1 ? unescape(parts[1]) : "")
        }
    }

    /// Encodes pairs in the given order.
    public static func encode(_ pairs: [(String, String)]) -> String {
        pairs.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&")
    }

    private static let unreserved = CharacterSet(
        charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._*")

    /// Percent-encodes everything but the unreserved set, spaces as `+`.
    public static func escape(_ text: String) -> String {
        (text.addingPercentEncoding(withAllowedCharacters: unreserved.union([" "])) ?? "")
            .replacingOccurrences(of: " ", with: "+")
    }

    private static func unescape(_ text: Substring) -> String {
        let spaced = text.replacingOccurrences(of: "+", with: " ")
        return spaced.removingPercentEncoding ?? spaced
    }
}
