public import Foundation
internal import SesameJOSE

/// Calls an API with the session's credentials attached — only to the origins they belong to.
///
/// Before sending, the session hands out an access token valid for at least its leeway (one refresh for every
/// concurrent caller). The endpoint's ``Authenticator`` applies the credentials and reads the answer: when it
/// says the credentials were rejected, the client asks the session for newer ones — a refresh, unless another
/// caller or process already made one — and retries once; a second rejection is
/// ``AuthError/Code/unauthorized``, never a loop.
///
/// **Origins.** Credentials go only to the base URL's origin and the `additionalOrigins` given at creation. A
/// request to any other origin is sent without credentials and never causes a refresh.
///
/// **Redirects.** Transports never follow redirects; the client does, as its ``RedirectPolicy`` says. By default a
/// redirect within the credential origins is followed with credentials applied afresh, and one to any other origin
/// is followed *without* them (and without `Cookie`/`Proxy-Authorization`).
public struct AuthorizedClient: Sendable {
    /// The session that owns the credentials.
    public let session: AuthSession
    /// The API base URL.
    public let baseURL: URL
    /// The origins credentials may be sent to: the base URL's, plus those given at creation.
    public let credentialOrigins: Set<SesameHTTP.Origin>
    /// The redirect policy.
    public let redirectPolicy: RedirectPolicy
    /// An authenticator given at creation for the session's credentials (``Authorization/session``) in place of
    /// the provider's scheme; nil to use the provider's.
    public let dpop: DPoPAuthenticator?
    /// An authenticator given at creation in place of the session's scheme for ``Authorization/session`` (an
    /// exchanged token's, ``OIDCAuth/client(exchangingFor:baseURL:scope:)``); nil for the session's own.
    public let scheme: (any Authenticator)?
    /// What satisfies a step-up challenge (RFC 9470) before the call is retried once; nil throws
    /// ``AuthError/Code/stepUpRequired`` instead.
    public let stepUp: StepUpHandler?

    /// Signs in again as a ``StepUpChallenge`` asks (``OIDCAuth/stepUp(_:with:)``), storing the new credentials in
    /// the session.
    public typealias StepUpHandler = @Sendable (StepUpChallenge) async throws -> Void
    private let transport: any HTTPTransport
    private let decoder: JSONDecoder
    /// How transient failures are tried again (``RetryPolicy``).
    public let retry: RetryPolicy
    /// `baseURL` as text without a trailing slash, for joining plain paths (nil when it has a query or fragment).
    private let baseText: String?
    /// The URLs of the plain paths called lately (an app calls the same few endpoints again and again).
    private let resolvedPaths = ResolvedPaths()
    /// Whether the base URL has an http(s) origin (so paths under it go to a credential origin).
    private let baseIsCredentialOrigin: Bool
    private static let maximumRedirects = 10
    private static let crossOriginHeaders: Set<String> = [
        "accept", "accept-encoding", "accept-language", "content-type", "user-agent", "cache-control",
    ]

    /// Creates a client.
    ///
    /// - Parameters:
    ///   - session: the session whose credentials are sent.
    ///   - baseURL: relative endpoint paths resolve against it; its origin receives credentials.
    ///   - additionalOrigins: further URLs whose origins receive credentials (for example a resource server).
    ///   - redirectPolicy: what to do with 3xx responses (default ``RedirectPolicy/follow``).
    ///   - transport: the HTTP transport (default: the platform's, see ``SesameHTTP/platformTransport``).
    ///   - decoder: decodes ``request(_:as:)`` bodies.
    ///   - dpop: an authenticator for the session's credentials in place of the provider's own scheme (an
    ///     ``OIDCAuthProvider`` with a DPoP key already supplies one; see ``AuthProvider/credentialScheme``).
    ///   - stepUp: signs in again when a resource asks for a stronger or more recent sign-in (RFC 9470); the call
    ///     is then retried once (``OIDCAuth/client(for:additionalOrigins:stepUpWith:)`` makes one).
    ///   - scheme: the authenticator of ``Authorization/session`` requests in place of the session's (which then
    ///     are neither refreshed nor stepped up by this client).
    ///   - retry: how transient failures (no answer; 408, 429, 500, 502, 503, 504) are tried again: idempotent
    ///     requests only unless the policy says otherwise, `Retry-After` honoured up to its limit; default
    ///     ``RetryPolicy/none``. A refresh the session makes on the way is the session's to retry
    ///     (``AuthSession``'s `retry:`), never this policy's.
    public init(
        session: AuthSession,
        baseURL: URL,
        additionalOrigins: [URL] = [],
        redirectPolicy: RedirectPolicy = .follow,
        transport: any HTTPTransport = SesameHTTP.platformTransport,
        decoder: JSONDecoder = JSONDecoder(),
        dpop: DPoPAuthenticator? = nil,
        stepUp: StepUpHandler? = nil,
        scheme: (any Authenticator)? = nil,
        retry: RetryPolicy = .none
    ) {
        self.retry = retry
        self.scheme = scheme
        self.dpop = dpop
        self.stepUp = stepUp
        self.session = session
        self.baseURL = baseURL
        self.credentialOrigins = Set(([baseURL] + additionalOrigins).compactMap(SesameHTTP.Origin.init))
        self.redirectPolicy = redirectPolicy
        self.transport = transport
        self.decoder = decoder
        baseIsCredentialOrigin = SesameHTTP.Origin(baseURL).map { ["http", "https"].contains($0.scheme) } ?? false
        let text = baseURL.absoluteString
        baseText =
            baseURL.query == nil && baseURL.fragment == nil
            ? (text.hasSuffix("/") ? String(text.dropLast()) : text) : nil
    }

    /// Sends the request and returns the response without decoding it (for 204s and empty bodies).
    ///
    /// - Throws: ``AuthError`` (transport, session, ``AuthError/Code/unauthorized``,
    ///   ``AuthError/Code/redirectRefused`` and ``AuthError/Code/stepUpRequired`` errors) or `CancellationError`.
    ///   Non-2xx statuses other than a persistent rejection or a step-up challenge are returned, not thrown.
    public func send(_ endpoint: Endpoint) async throws -> SesameHTTP.Response {
        let (request, underBase) = try request(for: endpoint)
        return try await send(request, authorization: endpoint.authorization, underBase: underBase)
    }

    /// Sends an already built request with `authorization` applied where its origin allows.
    ///
    /// - Throws: as ``send(_:)``.
    public func send(_ request: SesameHTTP.Request, authorization: Authorization = .session) async throws
        -> SesameHTTP.Response
    {
        try await send(request, authorization: authorization, underBase: false)
    }

    /// The exchange across its redirects; `underBase`: the request was built from a path under the base URL, so
    /// its origin is the base URL's (one parse of the URL fewer on every call).
    ///
    /// Credentials are applied only while the request stays within the credential origins: one that starts outside
    /// them, or leaves them through a redirect, never gets them again (a foreign origin cannot redirect a request
    /// into the API to have it signed).
    @inline(__always)
    private func send(_ request: SesameHTTP.Request, authorization: Authorization, underBase: Bool) async throws
        -> SesameHTTP.Response
    {
        let (response, credentialed) = try await retried(request, authorization: authorization, underBase: underBase)
        // RFC 9470: a valid token from too weak or too old a sign-in. Never a refresh; one step-up, one retry.
        guard response.status == 401, credentialed, let challenge = StepUpChallenge(response) else { return response }
        guard let stepUp else { throw Self.stepUpRequired(challenge, response, afterStepUp: false) }
        try await stepUp(challenge)
        let (again, stillCredentialed) = try await retried(
            request, authorization: authorization, underBase: underBase)
        if again.status == 401, stillCredentialed, let second = StepUpChallenge(again) {
            throw Self.stepUpRequired(second, again, afterStepUp: true)
        }
        return again
    }

    static func stepUpRequired(_ challenge: StepUpChallenge, _ response: SesameHTTP.Response, afterStepUp: Bool)
        -> AuthError
    {
        AuthError.stepUpRequired(
            challenge, statusCode: response.status,
            message: afterStepUp
                ? "the resource still wants a stronger or more recent sign-in after a step-up (\(challenge))" : nil)
    }

    /// ``exchange(_:authorization:underBase:)`` tried again by ``retry`` while its failure is transient.
    private func retried(_ request: SesameHTTP.Request, authorization: Authorization, underBase: Bool) async throws
        -> (SesameHTTP.Response, credentialed: Bool)
    {
        if retry.maximumAttempts == 1 {
            return try await exchange(request, authorization: authorization, underBase: underBase)
        }
        var credentialed = false
        let response = try await retry.run(idempotent: RetryPolicy.isIdempotent(request.method)) {
            let (response, carried) = try await exchange(
                request, authorization: authorization, underBase: underBase, marksUnanswered: true)
            credentialed = carried
            return response
        }
        return (response, credentialed)
    }

    /// The exchange across its redirects, and whether its last request carried the session's credentials.
    @inline(__always)
    private func exchange(
        _ request: SesameHTTP.Request, authorization: Authorization, underBase: Bool, marksUnanswered: Bool = false
    ) async throws -> (SesameHTTP.Response, credentialed: Bool) {
        let authenticator =
            authorization.usesSessionScheme
            ? (scheme ?? dpop ?? session.provider.credentialScheme) : authorization.authenticator
        var exchange = authenticator.map {
            AuthenticatedExchange(request, authenticator: $0, credentials: .session(session))
        }
        let usesSession = authenticator?.usesSessionCredentials ?? false
        var current = request
        var redirects = 0
        var answered = false
        var mayCarryCredentials = underBase && baseIsCredentialOrigin || mayReceiveCredentials(request.url)
        if exchange != nil, !mayCarryCredentials {
            SesameLog.log(
                .debug, .http,
                "no credentials for \(public: SesameHTTP.hostAndPort(request.url)): not one of this client's origins")
        }
        while true {
            let credentialed = exchange != nil && mayCarryCredentials
            var outgoing = current
            if credentialed {
                exchange?.request = current
                outgoing = try await exchange?.prepare() ?? current
            }
            let response: SesameHTTP.Response
            do {
                response = try await transport.send(outgoing)
            } catch let error as AuthError where marksUnanswered && error.code == .transport && !answered {
                // The request itself got no answer, and nothing of this attempt did (a retry policy may send it
                // again). A refresh failing on the way, or a later hop of a redirect the server already answered,
                // is not marked, and is never retried here.
                throw RetryPolicy.Unanswered(error: error)
            }
            answered = true
            SesameLog.log(
                .debug, .http,
                "\(public: outgoing.method) \(public: SesameHTTP.hostAndPort(outgoing.url)): HTTP \(response.status)")
            if let next = try redirect(current, redirects: redirects, response) {
                // A nonce belongs to the origin that gave it (RFC 9449 §8): none carries over to another.
                if SesameHTTP.Origin(next.url) != SesameHTTP.Origin(current.url) { exchange?.nonce = nil }
                current = next
                redirects += 1
                if mayCarryCredentials, exchange != nil, !mayReceiveCredentials(next.url) {
                    SesameLog.log(
                        .warning, .http,
                        "redirected to \(public: SesameHTTP.hostAndPort(next.url)): followed without credentials")
                }
                if !mayReceiveCredentials(next.url) { mayCarryCredentials = false }
                continue
            }
            guard credentialed, let step = try exchange?.step(after: response, to: outgoing) else {
                return (response, credentialed && usesSession)
            }
            if step == .finished { return (response, usesSession) }
        }
    }

    /// Sends the request and decodes a 2xx JSON body as `T`.
    ///
    /// - Throws: ``AuthError``: as ``send(_:)``, plus ``AuthError/Code/server`` for a non-2xx status (with the
    ///   server's error body when there is one) and ``AuthError/Code/decoding``.
    public func request<T: Decodable>(_ endpoint: Endpoint, as type: T.Type = T.self) async throws -> T {
        let response = try await send(endpoint)
        guard response.isSuccess else { throw AuthError.unexpected(response) }
        do {
            return try decoder.decode(T.self, from: response.body)
        } catch {
            throw AuthError(.decoding, "the response body is not a \(T.self)", statusCode: response.status)
        }
    }

    /// `GET path` decoded as `T`.
    ///
    /// - Throws: as ``request(_:as:)``.
    public func get<T: Decodable>(_ path: String, as type: T.Type = T.self) async throws -> T {
        try await request(Endpoint("GET", path), as: type)
    }

    /// Whether credentials may be sent to `url`'s origin.
    public func mayReceiveCredentials(_ url: URL) -> Bool {
        SesameHTTP.Origin(url).map(credentialOrigins.contains) ?? false
    }

    // MARK: Plumbing

    /// The request to send next when `response` is a redirect this policy follows; nil to return `response`.
    private func redirect(_ request: SesameHTTP.Request, redirects: Int, _ response: SesameHTTP.Response) throws
        -> SesameHTTP.Request?
    {
        guard Self.isRedirect(response.status), redirectPolicy != .never,
            let location = response.header("Location"),
            let resolved = URL(string: location, relativeTo: request.url)?.absoluteURL,
            var components = URLComponents(url: resolved, resolvingAgainstBaseURL: true),
            let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https"
        else { return nil }
        // No credentials chosen by the redirecting server (userinfo), and schemes compared in lower case.
        components.scheme = scheme
        components.user = nil
        components.password = nil
        guard let target = components.url else { return nil }
        let sameOrigin = SesameHTTP.Origin(target) == request.origin
        if !mayReceiveCredentials(target), redirectPolicy == .refuseCrossOrigin {
            throw AuthError(
                .redirectRefused,
                "refused a redirect to another origin (\(SesameHTTP.Origin(target)?.description ?? "?"))")
        }
        guard redirects < Self.maximumRedirects else {
            throw AuthError(.invalidResponse, "too many redirects", statusCode: response.status)
        }
        var next = request
        next.url = target
        // RFC 9110 §15.4: 303 always, and 301/302 after a POST (as browsers do), become a GET without a body.
        if response.status == 303 && request.method != "HEAD"
            || (response.status == 301 || response.status == 302) && request.method == "POST"
        {
            next.method = "GET"
            next.body = nil
            next.headers.remove("Content-Type")
            next.headers.remove("Content-Length")
        }
        if !sameOrigin {
            // Only headers that carry no secret cross origins (custom headers may be API keys).
            next.headers = SesameHTTP.Headers(
                next.headers.fields.filter { field in Self.crossOriginHeaders.contains(field.name.lowercased()) })
        }
        return next
    }

    /// Whether `text` starts with the lower-case ASCII `prefix`, in any case.
    private static func hasPrefix(_ text: String, _ prefix: StaticString) -> Bool {
        let bytes = UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount)
        var iterator = text.utf8.makeIterator()
        for expected in bytes {
            guard let byte = iterator.next(), byte | (0x41...0x5A ~= byte ? 0x20 : 0) == expected else { return false }
        }
        return true
    }

    private static func isRedirect(_ status: Int) -> Bool {
        switch status {
        case 301, 302, 303, 307, 308: true
        default: false
        }
    }

    /// `Accept: application/json`, made once.
    private static let acceptJSON: SesameHTTP.Headers = ["Accept": "application/json"]

    /// The request for `endpoint`, and whether it is under the base URL (a path, not an absolute URL).
    private func request(for endpoint: Endpoint) throws -> (SesameHTTP.Request, underBase: Bool) {
        let absolute = Self.hasPrefix(endpoint.path, "http://") || Self.hasPrefix(endpoint.path, "https://")
        var url =
            absolute
            ? URL(string: endpoint.path)
            : try resolvedPaths.url(endpoint.path) {
                try SesameHTTP.url(path: endpoint.path, under: baseURL, baseText: baseText)
            }
        if !endpoint.query.isEmpty, let resolved = url,
            var components = URLComponents(url: resolved, resolvingAgainstBaseURL: true)
        {
            components.queryItems = (components.queryItems ?? []) + endpoint.query
            url = components.url
        }
        guard let url else {
            throw AuthError(.configuration, "cannot build a URL for \(Redaction.path(endpoint.path))")
        }
        var headers = Self.acceptJSON
        if !endpoint.headers.fields.isEmpty {
            headers = endpoint.headers
            if !headers.contains("Accept") { headers.add("Accept", "application/json") }
        }
        let request = SesameHTTP.Request(
            method: endpoint.method, url: url, headers: headers, body: endpoint.body, timeout: endpoint.timeout)
        return (request, !absolute)
    }
}

/// URLs already resolved for paths under one base URL: the last 16 added (the oldest replaced first), compared byte for byte (an app calls the
/// same few endpoints again and again; a scan of a few short strings is cheaper than hashing one).
private final class ResolvedPaths: Sendable {
    private let table = LockedValue<(entries: [(path: String, url: URL)], next: Int)>(([], 0))
    private static let capacity = 16

    /// The URL for `path`, resolved by `resolve` the first time; only plain ASCII paths are kept (so that byte
    /// equality is the only equality: no two spellings of one Unicode path can share an entry).
    func url(_ path: String, _ resolve: () throws -> URL?) rethrows -> URL? {
        guard path.utf8.count <= 256, path.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return try resolve() }
        let known = table.withLock { table in table.entries.first { $0.path == path }?.url }
        if let known { return known }
        guard let url = try resolve() else { return nil }
        table.withLock { table in
            if table.entries.count < Self.capacity {
                table.entries.append((path, url))
            } else {
                table.entries[table.next] = (path, url)
                table.next = (table.next + 1) % Self.capacity
            }
        }
        return url
    }
}
