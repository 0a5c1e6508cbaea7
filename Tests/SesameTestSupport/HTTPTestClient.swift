package import Foundation
package import SesameJOSE

#if canImport(FoundationNetworking)
    package import FoundationNetworking
#endif

/// A JSON-over-HTTP client for tests that talk to a real server on loopback (URLSession, no mocks).
package struct HTTPTestClient: Sendable {
    package let base: URL
    package let session: URLSession

    package init(base: URL) {
        self.base = base
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = 64
        // Under a sanitizer's slowdown, with the whole suite running at once, a request queued behind the 64
        // connections can take longer: tests using this client are about what is answered, not how fast.
        configuration.timeoutIntervalForRequest = underSanitizer ? 120 : 30
        session = URLSession(configuration: configuration)
    }

    /// A response: status, headers (lower-cased names) and the body parsed as JSON when it is JSON.
    package struct Response: Sendable {
        package let status: Int
        package let headers: [String: String]
        package let body: Data
        package var json: JOSEValue? { try? JOSEValue.parse(body) }
        package var error: String? { json?["error"]?.stringValue }
    }

    package func send(
        _ method: String, _ path: String, json: JOSEValue? = nil, body: Data? = nil, contentType: String? = nil,
        bearer: String? = nil
    ) async throws -> Response {
        guard let url = URL(string: path, relativeTo: base) else { throw URLError(.badURL) }
        var request = URLRequest(url: url)
        request.httpMethod = method
        if let json {
            request.httpBody = json.jsonData
            request.setValue(contentType ?? "application/json", forHTTPHeaderField: "Content-Type")
        } else if let body {
            request.httpBody = body
            if let contentType { request.setValue(contentType, forHTTPHeaderField: "Content-Type") }
        }
        if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await session.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
        }
        return Response(status: http.statusCode, headers: headers, body: data)
    }
}
