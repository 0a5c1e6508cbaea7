public import Foundation

/// A response the server sends.
public struct HTTPServerResponse: Sendable {
    /// The status code.
    public var status: Int
    /// The header fields (`Content-Length` and `Connection` are set by the server).
    public var headers: HTTPServerHeaders
    /// The body.
    public var body: Data
    /// Close the connection after this response.
    public var closesConnection = false
    /// Test hook for fault injection: drop the connection without answering.
    public var dropsConnection = false

    /// Creates a response.
    public init(status: Int, headers: HTTPServerHeaders = [:], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A plain-text response.
    public static func text(_ status: Int, _ text: String) -> HTTPServerResponse {
        HTTPServerResponse(
            status: status, headers: ["Content-Type": "text/plain; charset=utf-8"], body: Data(text.utf8))
    }

    /// A JSON response from already-encoded JSON text.
    public static func json(_ status: Int, _ json: Data) -> HTTPServerResponse {
        HTTPServerResponse(
            status: status, headers: ["Content-Type": "application/json", "Cache-Control": "no-store"], body: json)
    }

    /// An HTML response.
    public static func html(_ status: Int, _ html: String) -> HTTPServerResponse {
        HTTPServerResponse(status: status, headers: ["Content-Type": "text/html; charset=utf-8"], body: Data(html.utf8))
    }

    /// A response that drops the connection without answering (fault injection).
    public static var drop: HTTPServerResponse {
        var response = HTTPServerResponse(status: 500)
        response.dropsConnection = true
        return response
    }

    /// The reason phrase for common status codes.
    public static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 201: "Created"
        case 204: "No Content"
        case 302: "Found"
        case 303: "See Other"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 411: "Length Required"
        case 413: "Content Too Large"
        case 415: "Unsupported Media Type"
        case 421: "Misdirected Request"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        default: "Status"
        }
    }

    /// Whether a header name or value could split the head: a CR, LF or NUL anywhere (response splitting).
    static func breaksHead(_ text: String) -> Bool {
        text.utf8.contains { $0 == 13 || $0 == 10 || $0 == 0 }
    }

    /// The response serialized for the wire.
    ///
    /// A header that contains CR, LF or NUL is never written: the whole response becomes a 500 instead, so a
    /// value taken from a request (a redirect URI in `Location`) cannot inject headers.
    package func serialized(keepAlive: Bool) -> [UInt8] {
        if headers.fields.contains(where: { Self.breaksHead($0.name) || Self.breaksHead($0.value) }) {
            return HTTPServerResponse.text(500, "refused to send a header with a line break\n")
                .serialized(keepAlive: keepAlive)
        }
        var head = "HTTP/1.1 \(status) \(Self.reason(status))\r\n"
        for field in headers.fields
        where !field.name.caseInsensitiveEquals("Content-Length")
            && !field.name.caseInsensitiveEquals("Connection")
        {
            head += "\(field.name): \(field.value)\r\n"
        }
        let hasBody = status != 204 && status != 304 && !(100..<200).contains(status)
        if hasBody { head += "Content-Length: \(body.count)\r\n" }
        head += keepAlive ? "\r\n" : "Connection: close\r\n\r\n"
        var bytes = Array(head.utf8)
        if hasBody { bytes.append(contentsOf: body) }
        return bytes
    }
}
