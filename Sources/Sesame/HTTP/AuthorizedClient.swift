public import Foundation

/// An API call: method, path, query, headers, body, and how it is authorized.
public struct Endpoint: Sendable {
    /// How a request proves who is calling (Moya's per-target idea).
    public enum Authorization: Sendable {
        /// `Authorization: Bearer <access token>` from the session; refreshed and retried once on a 401.
        case bearer
        /// `Authorization: Basic` with fixed credentials; never refreshes.
        case basic(user: String, password: String)
        /// No credentials; a 401 never starts a refresh.
        case none
        /// Headers computed from the session's current credentials; refreshed and retried once on a 401.
        case custom(@Sendable (TokenSet) -> [String: String])
    }

    /// The method.
    public var method: String
    /// The path, relative to the client's base URL.
    public var path: String
    /// Query items.
    public var query: [URLQueryItem]
    /// Extra headers.
    public var headers: [String: String]
    /// The body.
    public var body: Data?
    /// The authorization.
    public var authorization: Authorization
    /// The timeout.
    public var timeout: TimeInterval

    /// Creates an endpoint.
    public init(
        _ method: String = "GET",
        _ path: String,
        query: [URLQueryItem] = [],
        headers: [String: String] = [:],
        body: Data? = nil,
        authorization: Authorization = .bearer,
        timeout: TimeInterval = 30
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.authorization = authorization
        self.timeout = timeout
    }

    /// An endpoint with a JSON body encoded by `encoder`.
    ///
    /// - Throws: the encoder's error.
    public static func json(
        _ method: String,
        _ path: String,
        body: some Encodable,
        encoder: JSONEncoder = JSONEncoder(),
        authorization: Authorization = .bearer
    ) throws -> Endpoint {
        Endpoint(
            method, path, headers: ["Content-Type": "application/json"], body: try encoder.encode(body),
            authorization: authorization)
    }
}

/// Calls an API with the session's credentials attached.
///
/// Before sending, the session hands out an access token valid for at least its leeway (one refresh for every
/// concurrent caller). On a 401 whose challenge is `Bearer error="invalid_token"` (or has no challenge), the client
/// asks the session for newer credentials — a refresh if nobody else has already refreshed — and retries once; a
/// second 401 is ``AuthError/Code/unauthorized``, never a loop. Endpoints marked ``Endpoint/Authorization/none``
/// or `.basic` never refresh.
public struct AuthorizedClient: Sendable {
    /// The session that owns the credentials.
    public let session: AuthSession
    /// The API base URL.
    public let baseURL: URL
    private let transport: any HTTPTransport
    private let decoder: JSONDecoder

    /// Creates a client.
    public init(
        session: AuthSession,
        baseURL: URL,
        transport: any HTTPTransport = URLSessionTransport(),
        decoder: JSONDecoder = JSONDecoder()
    ) {
        self.session = session
        self.baseURL = baseURL
        self.transport = transport
        self.decoder = decoder
    }

    /// Sends the request and returns the response without decoding it (for 204s and empty bodies).
    ///
    /// - Throws: ``AuthError`` (transport, session and ``AuthError/Code/unauthorized`` errors) or
    ///   `CancellationError`. Non-2xx statuses other than a persistent 401 are returned, not thrown.
    public func send(_ endpoint: Endpoint) async throws -> HTTPResponse {
        var generation: Int?
        var headers: [String: String] = [:]
        switch endpoint.authorization {
        case .bearer, .custom:
            let (tokens, current) = try await session.validTokens()
            generation = current
            headers = Self.authorizationHeaders(endpoint.authorization, tokens)
        case .basic(let user, let password):
            headers["Authorization"] = "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
        case .none:
            break
        }
        let first = try await transport.send(try request(endpoint, headers))
        guard first.status == 401, let generation, Self.invitesRefresh(first) else { return first }
        let (tokens, _) = try await session.refresh(after: generation)
        let second = try await transport.send(
            try request(endpoint, Self.authorizationHeaders(endpoint.authorization, tokens)))
        guard second.status != 401 else {
            throw AuthError(.unauthorized, "the request is unauthorized even with fresh credentials", statusCode: 401)
        }
        return second
    }

    /// Sends the request and decodes a 2xx JSON body as `T`.
    ///
    /// - Throws: ``AuthError``: as ``send(_:)``, plus `server` for a non-2xx status (with its error body when
    ///   there is one) and ``AuthError/Code/decoding``.
    public func request<T: Decodable>(_ endpoint: Endpoint, as type: T.Type = T.self) async throws -> T {
        let response = try await send(endpoint)
        guard (200..<300).contains(response.status) else { throw RESTAuthProvider.error(from: response) }
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

    private func request(_ endpoint: Endpoint, _ authorization: [String: String]) throws -> HTTPRequest {
        guard
            var components = URLComponents(
                url: baseURL.appendingPathComponent(endpoint.path), resolvingAgainstBaseURL: true)
        else { throw AuthError(.configuration, "cannot build a URL for \(endpoint.path)") }
        if !endpoint.query.isEmpty { components.queryItems = endpoint.query }
        guard let url = components.url else {
            throw AuthError(.configuration, "cannot build a URL for \(endpoint.path)")
        }
        // Credentials go only to the configured origin (RFC 9700 §4.9.1).
        guard url.host == baseURL.host, url.scheme == baseURL.scheme, url.port == baseURL.port else {
            throw AuthError(.configuration, "refusing to send credentials to another origin")
        }
        var headers = endpoint.headers
        headers.merge(authorization) { _, new in new }
        headers["Accept"] = headers["Accept"] ?? "application/json"
        return HTTPRequest(
            method: endpoint.method, url: url, headers: headers, body: endpoint.body, timeout: endpoint.timeout)
    }

    private static func authorizationHeaders(_ authorization: Endpoint.Authorization, _ tokens: TokenSet) -> [String:
        String]
    {
        switch authorization {
        case .custom(let make): make(tokens)
        default: ["Authorization": "Bearer \(tokens.accessToken)"]
        }
    }

    /// Whether a 401 asks for a new token: a Bearer challenge with `error="invalid_token"`, or no challenge at all
    /// (RFC 6750 §3.1; HTTP-01).
    ///
    /// `insufficient_scope` and other errors do not.
    package static func invitesRefresh(_ response: HTTPResponse) -> Bool {
        guard let challenge = response.header("www-authenticate") else { return true }
        let lowered = challenge.lowercased()
        guard lowered.hasPrefix("bearer") else { return false }
        return lowered.contains("error=\"invalid_token\"") || !lowered.contains("error=")
    }
}
