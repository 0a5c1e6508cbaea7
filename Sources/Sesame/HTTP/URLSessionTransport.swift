#if canImport(FoundationNetworking)
    import Foundation
    public import FoundationNetworking
    import SesameJOSE
#else
    public import Foundation
#endif

/// ``HTTPTransport`` over `URLSession`: the transport on Apple platforms.
///
/// It never follows redirects (a delegate declines them, so a 3xx comes back as it is and ``AuthorizedClient``
/// decides). On Linux use ``CurlTransport`` (``SesameHTTP/platformTransport``): FoundationNetworking's `URLSession`
/// spins on the CPU while it waits for a slow server, and cannot return a 401 that carries a `WWW-Authenticate`
/// challenge (it would wait forever; this transport throws ``AuthError/Code/transport`` instead).
public struct URLSessionTransport: HTTPTransport {
    private let session: URLSession

    /// A transport on its own session — ephemeral by default; cookies and credential storage are always turned
    /// off — that declines every redirect.
    public init(configuration: URLSessionConfiguration = .ephemeral) {
        Self.prepareLibCrypto()
        let configuration = (configuration.copy() as? URLSessionConfiguration) ?? .ephemeral
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        configuration.httpCookieStorage = nil
        configuration.urlCredentialStorage = nil
        session = URLSession(configuration: configuration, delegate: RedirectDecliner(), delegateQueue: nil)
    }

    /// Uses `session`.
    ///
    /// > Important: the session's delegate must decline redirects
    /// > (`urlSession(_:task:willPerformHTTPRedirection:newRequest:completionHandler:)` completing with nil), or
    /// > credentials may follow a redirect to another origin.
    public init(session: URLSession) {
        Self.prepareLibCrypto()
        self.session = session
    }

    /// On Linux, before FoundationNetworking's libcurl initialises libcrypto with its exit handler (`LibCrypto`).
    private static func prepareLibCrypto() {
        #if canImport(FoundationNetworking)
            LibCrypto.prepare()
        #endif
    }

    /// Sends the request.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/transport`` when no response arrived; `CancellationError`
    ///   when the task was cancelled.
    public func send(_ request: SesameHTTP.Request) async throws -> SesameHTTP.Response {
        guard request.hasValidMethod else { throw AuthError(.configuration, "the method is not an HTTP token") }
        var urlRequest = URLRequest(url: request.url, timeoutInterval: request.timeout)
        urlRequest.httpMethod = request.method
        urlRequest.httpBody = request.body
        for field in request.headers { urlRequest.addValue(field.value, forHTTPHeaderField: field.name) }
        do {
            let (data, response) = try await session.data(for: urlRequest)
            guard let http = response as? HTTPURLResponse else {
                throw AuthError(.transport, "the response was not HTTP")
            }
            var headers = SesameHTTP.Headers()
            for (name, value) in http.allHeaderFields {
                if let name = name as? String, let value = value as? String { headers.add(name, value) }
            }
            return SesameHTTP.Response(status: http.statusCode, headers: headers, body: data)
        } catch let error as AuthError {
            throw error
        } catch {
            if Task.isCancelled { throw CancellationError() }
            if (error as? URLError)?.code == .cancelled {
                #if canImport(FoundationNetworking)
                    // Only the challenge handler above cancels a task that the caller did not cancel.
                    throw AuthError(
                        .transport,
                        "FoundationNetworking cannot return a 401 that carries an authentication challenge; "
                            + "use CurlTransport on Linux")
                #else
                    throw CancellationError()
                #endif
            }
            var failure = AuthError(
                .transport, "no response from \(SesameHTTP.hostAndPort(request.url)): \(Self.reason(error))")
            // Nothing reached the server: a request of any kind may be sent again (RetryPolicy).
            if [.cannotConnectToHost, .cannotFindHost].contains((error as? URLError)?.code) {
                failure.reason = "cannot_connect"
            }
            throw failure
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

/// Declines every redirect, so that the 3xx response itself is returned, and answers authentication challenges
/// with the default handling (no stored credentials in an ephemeral session), so that a 401 comes back as it is —
/// except on Linux, where FoundationNetworking cannot return such a 401 at all.
private final class RedirectDecliner: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        #if canImport(FoundationNetworking)
            // FoundationNetworking waits forever on a 401 challenge it has no credentials for
            // (swift-corelibs-foundation #5456): end the task instead of hanging.
            completionHandler(.cancelAuthenticationChallenge, nil)
        #else
            completionHandler(.performDefaultHandling, nil)
        #endif
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
