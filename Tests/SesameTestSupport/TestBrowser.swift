import Foundation
package import SesameJOSE

/// A minimal browser for tests of the provider's pages: raw HTTP/1.1 over loopback (one connection a request),
/// a cookie jar, no redirects followed, and form helpers that read hidden fields out of the HTML.
// @unchecked Sendable: the cookie jar is only touched under `lock`.
package final class TestBrowser: @unchecked Sendable {
    package let port: Int
    package let host: String
    private let lock = NSLock()
    private var jar: [String: String] = [:]

    package init(port: Int, host: String = "127.0.0.1") {
        self.port = port
        self.host = host
    }

    /// A response as the browser saw it.
    package struct Page: Sendable {
        package let status: Int
        package let headers: [(name: String, value: String)]
        package let body: String

        package func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }

        package func headers(_ name: String) -> [String] {
            headers.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
        }

        package var location: String? { header("Location") }
        package var json: JOSEValue? { try? JOSEValue.parse(Data(body.utf8)) }
        package var error: String? { json?["error"]?.stringValue }

        /// The decoded query parameters of the `Location` (the authorization response).
        package var redirectParameters: [String: String] {
            guard let location, let query = URLComponents(string: location)?.percentEncodedQuery else { return [:] }
            var result: [String: String] = [:]
            for pair in query.split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1).map {
                    String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0)
                }
                result[parts[0]] = parts.count > 1 ? parts[1] : ""
            }
            return result
        }

        /// The hidden fields of the `index`th form on the page, HTML entities decoded.
        package func hiddenFields(form index: Int = 0) -> [(String, String)] {
            let forms = body.components(separatedBy: "<form").dropFirst()
            guard index < forms.count else { return [] }
            let form = forms[forms.index(forms.startIndex, offsetBy: index)]
            var fields: [(String, String)] = []
            for piece in form.components(separatedBy: "<input type=\"hidden\" name=\"").dropFirst() {
                guard let nameEnd = piece.range(of: "\" value=\"") else { continue }
                let name = String(piece[..<nameEnd.lowerBound])
                let rest = piece[nameEnd.upperBound...]
                guard let valueEnd = rest.firstIndex(of: "\"") else { continue }
                fields.append((Self.unescape(name), Self.unescape(String(rest[..<valueEnd]))))
            }
            return fields
        }

        static func unescape(_ text: String) -> String {
            text.replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&#39;", with: "'")
                .replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
                .replacingOccurrences(of: "&amp;", with: "&")
        }
    }

    package func cookie(_ name: String) -> String? { lock.withLock { jar[name] } }

    package func clearCookies() { lock.withLock { jar = [:] } }

    package func setCookie(_ name: String, _ value: String) { lock.withLock { jar[name] = value } }

    package func get(_ target: String, headers: [(String, String)] = []) throws -> Page {
        try request("GET", target, headers: headers)
    }

    /// POSTs `application/x-www-form-urlencoded` fields.
    package func post(_ target: String, form: [(String, String)], headers: [(String, String)] = []) throws -> Page {
        let body = form.map { "\(Self.formEscape($0.0))=\(Self.formEscape($0.1))" }.joined(separator: "&")
        return try request(
            "POST", target, headers: [("Content-Type", "application/x-www-form-urlencoded")] + headers,
            body: Array(body.utf8))
    }

    package func request(_ method: String, _ target: String, headers: [(String, String)] = [], body: [UInt8] = [])
        throws -> Page
    {
        // A generous timeout: a loaded machine (the whole suite, a browser) may take seconds to answer.
        let client = try RawClient(port: port, host: host, timeout: 30)
        var head = "\(method) \(target) HTTP/1.1\r\n"
        if !headers.contains(where: { $0.0.lowercased() == "host" }) {
            head += "Host: \(host.contains(":") ? "[\(host)]" : host):\(port)\r\n"
        }
        head += "Connection: close\r\nContent-Length: \(body.count)\r\n"
        let cookies = lock.withLock { jar.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" } }
        if !cookies.isEmpty { head += "Cookie: \(cookies.joined(separator: "; "))\r\n" }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        client.send(Array((head + "\r\n").utf8) + body)
        let text = client.readToEnd()
        guard let split = text.range(of: "\r\n\r\n") else { throw RawClientError.connect }
        let lines = text[..<split.lowerBound].components(separatedBy: "\r\n")
        let status = Int(lines[0].split(separator: " ").dropFirst().first ?? "") ?? 0
        var fields: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields.append(
                (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        for value in fields.filter({ $0.name.lowercased() == "set-cookie" }).map(\.value) {
            let pair = value.split(separator: ";")[0]
            guard let equals = pair.firstIndex(of: "=") else { continue }
            let name = String(pair[..<equals])
            let cookieValue = String(pair[pair.index(after: equals)...])
            let expired = value.lowercased().contains("max-age=0")
            lock.withLock { jar[name] = expired || cookieValue.isEmpty ? nil : cookieValue }
        }
        return Page(status: status, headers: fields, body: String(text[split.upperBound...]))
    }

    package static func formEscape(_ text: String) -> String {
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._*")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }
}
