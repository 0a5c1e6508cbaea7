public import Foundation

/// Sesame's HTTP vocabulary: the values that cross the ``HTTPTransport`` seam.
///
/// The types are nested so that they never collide with `HTTPRequest`/`HTTPResponse` from swift-http-types,
/// NIO, Alamofire or an app's own code.
public enum SesameHTTP {
    /// Header fields in order, with case-insensitive names (RFC 9110 §5.1) and repeated fields kept.
    ///
    /// Reading a name that occurs several times through the subscript gives the values joined with `", "`, which
    /// is their meaning for list-valued fields such as `WWW-Authenticate` (RFC 9110 §5.3).
    public struct Headers: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral, CustomStringConvertible,
        CustomDebugStringConvertible, CustomReflectable
    {
        /// One field.
        public struct Field: Sendable, Hashable {
            /// The name as sent.
            public var name: String
            /// The value.
            public var value: String

            /// Creates a field.
            public init(name: String, value: String) {
                self.name = name
                self.value = value
            }

            /// The field of one received header line (`Name: value`, its line ending included or not): the name
            /// up to the first byte `:` (not Character: `:` followed by a combining mark is one Character), the
            /// value after it without the blanks and line breaks around it; nil without a `:`.
            package init?(line: String) {
                guard let colon = line.utf8.firstIndex(of: UInt8(ascii: ":")) else { return nil }
                name = String(line[..<colon])
                value = line[line.utf8.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
            }
        }

        /// The fields, in order.
        public private(set) var fields: [Field]

        /// Creates headers from fields.
        public init(_ fields: [Field] = []) { self.fields = fields }

        /// Creates headers from a dictionary (order unspecified).
        public init(_ dictionary: [String: String]) {
            fields = dictionary.sorted { $0.key < $1.key }.map { Field(name: $0.key, value: $0.value) }
        }

        /// Creates headers from a literal.
        public init(dictionaryLiteral elements: (String, String)...) {
            fields = elements.map { Field(name: $0.0, value: $0.1) }
        }

        /// Every value of the field `name`, or nil; setting replaces every field of that name (nil removes them).
        public subscript(name: String) -> String? {
            get {
                let found = values(name)
                return found.isEmpty ? nil : found.joined(separator: ", ")
            }
            set {
                let index = fields.firstIndex { Self.same($0.name, name) }
                fields.removeAll { Self.same($0.name, name) }
                guard let newValue else { return }
                fields.insert(Field(name: name, value: newValue), at: Swift.min(index ?? fields.count, fields.count))
            }
        }

        /// Every value of the field `name`, in order.
        public func values(_ name: String) -> [String] { fields.filter { Self.same($0.name, name) }.map(\.value) }

        /// Appends a field, keeping any others of the same name.
        public mutating func add(_ name: String, _ value: String) { fields.append(Field(name: name, value: value)) }

        /// Removes every field `name`.
        public mutating func remove(_ name: String) { fields.removeAll { Self.same($0.name, name) } }

        /// Whether a field `name` is present.
        public func contains(_ name: String) -> Bool { fields.contains { Self.same($0.name, name) } }

        /// Iterates the fields in order.
        public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }

        /// The field names only: values may be credentials.
        public var description: String { "Headers(\(fields.map(\.name).joined(separator: ", ")))" }

        /// The same as ``description``.
        public var debugDescription: String { description }

        /// A mirror with the names only, for `dump()`.
        public var customMirror: Mirror { Mirror(self, children: ["names": fields.map(\.name)], displayStyle: .struct) }

        /// ASCII case-insensitive name comparison (only letters fold: `^` is not `~`).
        static func same(_ lhs: String, _ rhs: String) -> Bool {
            lhs.utf8.count == rhs.utf8.count && zip(lhs.utf8, rhs.utf8).allSatisfy { folded($0) == folded($1) }
        }

        private static func folded(_ byte: UInt8) -> UInt8 { (0x41...0x5A).contains(byte) ? byte | 0x20 : byte }
    }

    /// A request as the transport seam sees it: plain values, easy to script in tests.
    ///
    /// Its `description`, `debugDescription` and `Mirror` (so `dump()`) show the method, the URL without its
    /// query and the header names only: header values and bodies may hold credentials.
    public struct Request: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
        /// The method, for example `GET`.
        public var method: String
        /// The absolute URL.
        public var url: URL
        /// Header fields.
        public var headers: Headers
        /// The body.
        public var body: Data?
        /// The timeout for the whole exchange.
        public var timeout: TimeInterval

        /// Creates a request.
        public init(method: String, url: URL, headers: Headers = [:], body: Data? = nil, timeout: TimeInterval = 30) {
            self.method = method
            self.url = url
            self.headers = headers
            self.body = body
            self.timeout = timeout
        }

        /// Whether ``method`` is an RFC 9110 token (so it cannot smuggle a second request line).
        public var hasValidMethod: Bool {
            !method.isEmpty && method.utf8.count <= 32
                && method.utf8.allSatisfy { byte in
                    (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                        || "!#$%&'*+-.^_`|~".utf8.contains(byte)
                }
        }

        /// This request's origin, or nil when its URL has no scheme or host.
        public var origin: Origin? { Origin(url) }

        /// Method, redacted URL and header names; never a value or the body.
        public var description: String {
            "Request(\(method) \(Redaction.url(url)), headers: [\(headers.fields.map(\.name).joined(separator: ", "))]"
                + ", body: \(body?.count ?? 0) bytes)"
        }

        /// The same as ``description``.
        public var debugDescription: String { description }

        /// A mirror without secrets, for `dump()`.
        public var customMirror: Mirror {
            Mirror(
                self,
                children: [
                    "method": method, "url": Redaction.url(url), "headers": headers.fields.map(\.name),
                    "body": "\(body?.count ?? 0) bytes", "timeout": timeout,
                ], displayStyle: .struct)
        }
    }

    /// A response.
    public struct Response: Sendable, CustomStringConvertible, CustomReflectable {
        /// The status code.
        public var status: Int
        /// Header fields.
        public var headers: Headers
        /// The body (empty for 204 and friends).
        public var body: Data

        /// Creates a response.
        public init(status: Int, headers: Headers = [:], body: Data = Data()) {
            self.status = status
            self.headers = headers
            self.body = body
        }

        /// The header `name` (case-insensitive; repeated fields joined with `", "`).
        public func header(_ name: String) -> String? { headers[name] }

        /// The `WWW-Authenticate` challenges (RFC 9110 §11.6.1), parsed; empty when there are none.
        public var challenges: [AuthenticationChallenge] {
            headers.values("WWW-Authenticate").flatMap { AuthenticationChallenge.parse($0) }
        }

        /// Whether the status is 2xx.
        public var isSuccess: Bool { (200..<300).contains(status) }

        /// Status and header names; never a value or the body.
        public var description: String {
            "Response(\(status), headers: [\(headers.fields.map(\.name).joined(separator: ", "))], body: \(body.count) bytes)"
        }

        /// A mirror without secrets, for `dump()`.
        public var customMirror: Mirror {
            Mirror(
                self,
                children: ["status": status, "headers": headers.fields.map(\.name), "body": "\(body.count) bytes"],
                displayStyle: .struct)
        }
    }

    /// A web origin (RFC 6454): scheme, host and port, compared exactly after ASCII lower-casing of the scheme and
    /// host and filling in the scheme's default port.
    public struct Origin: Sendable, Hashable, CustomStringConvertible {
        /// `http` or `https` (lower-cased).
        public let scheme: String
        /// The host (lower-cased ASCII; IPv6 literals without brackets).
        public let host: String
        /// The port, the scheme's default filled in.
        public let port: Int

        /// The origin of `url`, or nil when it has no scheme or host.
        public init?(_ url: URL) {
            guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased(), !host.isEmpty else {
                return nil
            }
            let port = url.port ?? (scheme == "https" ? 443 : scheme == "http" ? 80 : -1)
            guard port >= 0 else { return nil }
            self.scheme = scheme
            self.host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
            self.port = port
        }

        /// `scheme://host:port`.
        public var description: String {
            "\(scheme)://\(host.contains(":") ? "[\(host)]" : host):\(port)"
        }
    }
}

/// Redaction helpers for descriptions.
enum Redaction {
    /// The URL without query, fragment or user info.
    static func url(_ url: URL) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else { return "<url>" }
        let hadQuery = components.query != nil
        components.query = nil
        components.fragment = nil
        components.user = nil
        components.password = nil
        return (components.string ?? "<url>") + (hadQuery ? "?…" : "")
    }

    /// An endpoint's path as written (relative, with a `?query`, or an absolute URL) without query, fragment or
    /// user info.
    static func path(_ text: String) -> String {
        if text.contains("://") || text.contains("@") {
            guard let url = URL(string: text), url.scheme != nil else { return "<url>" }
            return Redaction.url(url)
        }
        // The bytes `?` and `#` (as the request is built): followed by a combining mark, either is one Character.
        guard let end = text.utf8.firstIndex(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) else {
            return text
        }
        return String(text[..<end]) + (text.utf8[end] == UInt8(ascii: "?") ? "?…" : "")
    }
}

/// Sends HTTP requests: the one seam between Sesame and the network.
///
/// Implement it to route Sesame through your own networking stack, or use `ScriptedTransport` (in
/// `SesameTesting`) to fake a server in your tests.
///
/// A transport **never follows redirects**: it returns a 3xx response as it is, and ``AuthorizedClient`` decides
/// whether to follow it and with which credentials. Implementations throw ``AuthError`` with code
/// ``AuthError/Code/transport`` when no response arrived, and `CancellationError` when the task was cancelled.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the response, whatever its status.
    func send(_ request: SesameHTTP.Request) async throws -> SesameHTTP.Response
}

extension SesameHTTP {
    /// `path` under `base`: the one rule for ``AuthorizedClient`` endpoints and ``RESTAuthProvider`` paths.
    ///
    /// The path is appended to the base URL's path (`https://api.example/v1` + `me` is
    /// `https://api.example/v1/me`, with or without slashes); a `?query` part is taken as the query.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/configuration`` for `..` segments (a path stays under the base
    ///   URL's path).
    package static func url(path text: String, under base: URL) throws -> URL? {
        try url(path: text, under: base, baseText: nil)
    }

    /// As ``url(path:under:)``; `baseText` is `base.absoluteString` without a trailing slash, when the caller keeps
    /// it: then a plain path (letters, digits, `/ - _ ~`) is joined as text, the cheapest way to a URL.
    package static func url(path text: String, under base: URL, baseText: String?) throws -> URL? {
        if let baseText, !text.isEmpty, text.utf8.allSatisfy(isPlainPathByte) {
            let joined = text.utf8.first == UInt8(ascii: "/") ? baseText + text : baseText + "/" + text
            if let url = URL(string: joined) { return url }
        }
        // The common case — no query, no escapes, no dot segments — without a trip through URLComponents.
        if !text.utf8.contains(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: ".") })
        {
            return base.appendingPathComponent(text)
        }
        // Cut on the bytes `?` and `/`, not on Swift characters: `/` followed by a combining mark is one Character,
        // and `/../\u{301}x` would hide from a character split the `..` segment a server resolves.
        let bytes = Array(text.utf8)
        let question = bytes.firstIndex(of: UInt8(ascii: "?"))
        let path = bytes[..<(question ?? bytes.endIndex)]
        // `..`, its escaped spellings, and `..;params` (which Tomcat and Spring take for `..`) may not escape the base.
        guard !path.split(separator: UInt8(ascii: "/")).contains(where: isDotDotSegment) else {
            throw AuthError(.configuration, "an endpoint path may not contain '..' segments")
        }
        var components = URLComponents(
            url: base.appendingPathComponent(String(decoding: path, as: UTF8.self)), resolvingAgainstBaseURL: true)
        if let question { components?.percentEncodedQuery = queryEscapingInvalid(bytes[(question + 1)...]) }
        return components?.url
    }

    /// Whether a path segment is `..` as a server reads it: up to a `;`, with `.` also spelt `%2e` or `%2E`.
    private static func isDotDotSegment(_ segment: ArraySlice<UInt8>) -> Bool {
        let name = segment.prefix { $0 != UInt8(ascii: ";") }
        var dots = 0
        var index = name.startIndex
        while index < name.endIndex {
            if name[index] == UInt8(ascii: ".") {
                index += 1
            } else if name[index] == UInt8(ascii: "%"), index + 2 < name.endIndex,
                name[index + 1] == UInt8(ascii: "2"), name[index + 2] | 0x20 == UInt8(ascii: "e")
            {
                index += 3
            } else {
                return false
            }
            dots += 1
        }
        return dots == 2
    }

    /// A query as written, with what may not stand in one percent-encoded: a space, a `%` that starts no escape,
    /// a byte outside RFC 3986's query characters (`URLComponents` traps on such a query instead of refusing it).
    static func queryEscapingInvalid(_ text: ArraySlice<UInt8>) -> String {
        let bytes = Array(text)
        func isHex(_ byte: UInt8) -> Bool {
            (byte | 0x20) >= 0x61 && (byte | 0x20) <= 0x66 || (0x30...0x39).contains(byte)
        }
        var encoded: [UInt8] = []
        encoded.reserveCapacity(bytes.count)
        for (index, byte) in bytes.enumerated() {
            let escape =
                byte == UInt8(ascii: "%") && index + 2 < bytes.count && isHex(bytes[index + 1])
                && isHex(bytes[index + 2])
            if escape || isQueryByte(byte) {
                encoded.append(byte)
            } else {
                appendPercentEscape(byte, to: &encoded)
            }
        }
        return String(decoding: encoded, as: UTF8.self)
    }

    /// Appends `%XX` for `byte` (upper-case hexadecimal, RFC 3986 §2.1), without a trip through `String(format:)`.
    static func appendPercentEscape(_ byte: UInt8, to encoded: inout [UInt8]) {
        encoded.append(UInt8(ascii: "%"))
        encoded.append(upperHexDigits[Int(byte >> 4)])
        encoded.append(upperHexDigits[Int(byte & 0x0F)])
    }

    private static let upperHexDigits = Array("0123456789ABCDEF".utf8)

    /// RFC 3986 §3.4: unreserved, sub-delims, `:`, `@`, `/` and `?`.
    private static func isQueryByte(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
            || "-._~!$&'()*+,;=:@/?".utf8.contains(byte)
    }

    /// Letters, digits and `/ - _ ~`: path bytes that need no escaping and make no dot segment, query or fragment.
    private static func isPlainPathByte(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
            || byte == UInt8(ascii: "/") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
            || byte == UInt8(ascii: "~")
    }

    /// The platform's transport.
    ///
    /// On Linux, libcurl waiting in the kernel (``CurlTransport``); on Apple platforms `URLSession`
    /// (``URLSessionTransport``). Neither follows redirects.
    public static var platformTransport: any HTTPTransport {
        #if canImport(CSesameCurl)
            CurlTransport()
        #else
            URLSessionTransport()
        #endif
    }
}

extension SesameHTTP {
    /// `host` or `host:port` of `url`, for messages ("no response from 127.0.0.1:8081"): the port is what a person
    /// most often got wrong.
    static func hostAndPort(_ url: URL) -> String {
        guard let host = url.host, !host.isEmpty else { return "the server" }
        let shown = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return url.port.map { "\(shown):\($0)" } ?? shown
    }
}
