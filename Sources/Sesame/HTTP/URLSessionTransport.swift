#if canImport(FoundationNetworking)
    import Foundation
    public import FoundationNetworking
#else
    public import Foundation
#endif

/// ``HTTPTransport`` over `URLSession` (FoundationNetworking on Linux).
public struct URLSessionTransport: HTTPTransport {
    private let session: URLSession

    /// Uses `session` (by default an ephemeral session: no cookies, no cache, no credential storage).
    public init(session: URLSession = URLSession(configuration: .ephemeral)) {
        self.session = session
    }

    /// Sends the request.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/transport`` when no response arrived; `CancellationError`
    ///   when the task was cancelled.
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var urlRequest = URLRequest(url: request.url, timeoutInterval: request.timeout)
        urlRequest.httpMethod = request.method
        urlRequest.httpBody = request.body
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        do {
            let (data, response) = try await session.data(for: urlRequest)
            guard let http = response as? HTTPURLResponse else {
                throw AuthError(.transport, "the response was not HTTP")
            }
            var headers: [String: String] = [:]
            for (name, value) in http.allHeaderFields {
                if let name = name as? String, let value = value as? String { headers[name] = value }
            }
            return HTTPResponse(status: http.statusCode, headers: headers, body: data)
        } catch let error as AuthError {
            throw error
        } catch {
            if Task.isCancelled || (error as? URLError)?.code == .cancelled { throw CancellationError() }
            throw AuthError(.transport, "no response from \(request.url.host ?? "the server"): \(Self.reason(error))")
        }
    }

    private static func reason(_ error: any Error) -> String {
        switch (error as? URLError)?.code {
        case .timedOut?: "timed out"
        case .cannotConnectToHost?, .cannotFindHost?: "cannot connect"
        case .notConnectedToInternet?, .networkConnectionLost?: "the connection was lost"
        default: "the request failed"
        }
    }
}
