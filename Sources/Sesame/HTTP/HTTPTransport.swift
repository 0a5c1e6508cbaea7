public import Foundation

/// An HTTP request as Sesame's transport seam sees it: plain values, easy to script in tests.
public struct HTTPRequest: Sendable {
    /// The method, for example `GET`.
    public var method: String
    /// The absolute URL.
    public var url: URL
    /// Header fields (names compared case-insensitively by servers).
    public var headers: [String: String]
    /// The body.
    public var body: Data?
    /// The timeout for this request.
    public var timeout: TimeInterval

    /// Creates a request.
    public init(
        method: String, url: URL, headers: [String: String] = [:], body: Data? = nil, timeout: TimeInterval = 30
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

/// An HTTP response.
public struct HTTPResponse: Sendable {
    /// The status code.
    public var status: Int
    /// Header fields with lower-cased names.
    public var headers: [String: String]
    /// The body (empty for 204 and friends).
    public var body: Data

    /// Creates a response; header names are lower-cased.
    public init(status: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.status = status
        self.headers = Dictionary(
            headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { first, _ in first })
        self.body = body
    }

    /// The header `name` (case-insensitive).
    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// Sends HTTP requests: the one seam between Sesame and the network.
///
/// Implement it to route Sesame through your own networking stack, or use `ScriptedTransport` (in
/// `SesameTesting`) to fake a server in your tests. Implementations throw ``AuthError`` with code
/// ``AuthError/Code/transport`` when no response arrived, and `CancellationError` when cancelled.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the response, whatever its status.
    func send(_ request: HTTPRequest) async throws -> HTTPResponse
}
