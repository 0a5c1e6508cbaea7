public import Foundation
public import SesameJOSE

/// The proprietary REST backend contract: `POST /register`, `/login`, `/refresh-token`, `/logout`, `GET /me`,
/// `POST /auth/apple`, with the field names of DESIGN.md §4 by default.
///
/// Backends that differ only in paths and field names are described by a ``Contract``:
///
/// ```swift
/// var contract = RESTAuthProvider.Contract()
/// contract.refreshPath = "auth/refresh"
/// contract.refreshBody = { token in ["refreshToken": .string(token), "deviceId": "my-device"] }
/// let provider = RESTAuthProvider(baseURL: api, contract: contract)
/// ```
public struct RESTAuthProvider: AuthProvider {
    /// Paths, request bodies and response field names.
    public struct Contract: Sendable {
        /// Paths relative to the base URL.
        public var registerPath = "register"
        /// The login path.
        public var loginPath = "login"
        /// The refresh path.
        public var refreshPath = "refresh-token"
        /// The logout path.
        public var logoutPath = "logout"
        /// The current-user path.
        public var mePath = "me"
        /// The Sign in with Apple exchange path.
        public var applePath = "auth/apple"
        /// Builds the refresh request body from the refresh token.
        public var refreshBody: @Sendable (String) -> JOSEValue = { ["refreshToken": .string($0)] }
        /// Reads a token set from an AuthResponse body received at a given time.
        public var parseTokens: @Sendable (JOSEValue, Date) -> TokenSet? = RESTAuthProvider.parseAuthResponse

        /// The contract of DESIGN.md §4.
        public init() {}
    }

    /// The API base URL.
    public let baseURL: URL
    /// The contract.
    public let contract: Contract
    private let transport: any HTTPTransport
    private let timeSource: any TimeSource

    /// Creates a provider.
    public init(
        baseURL: URL,
        contract: Contract = Contract(),
        transport: any HTTPTransport = URLSessionTransport(),
        timeSource: any TimeSource = SystemTimeSource()
    ) {
        self.baseURL = baseURL
        self.contract = contract
        self.transport = transport
        self.timeSource = timeSource
    }

    /// Signs in with email and password.
    ///
    /// - Throws: ``AuthError``: `server` with `invalid_credentials`, or transport errors.
    public func login(email: String, password: String) async throws -> TokenSet {
        try await tokens(from: post(contract.loginPath, ["email": .string(email), "password": .string(password)]))
    }

    /// Creates an account and signs in.
    ///
    /// - Throws: ``AuthError``: `server` with `email_taken` or `invalid_request`, or transport errors.
    public func register(email: String, password: String) async throws -> TokenSet {
        try await tokens(from: post(contract.registerPath, ["email": .string(email), "password": .string(password)]))
    }

    /// Exchanges a Sign in with Apple identity token (and the raw nonce whose SHA-256 it carries).
    ///
    /// - Throws: ``AuthError``.
    public func signInWithApple(identityToken: String, rawNonce: String, deviceID: String) async throws -> TokenSet {
        try await tokens(
            from: post(
                contract.applePath,
                ["identityToken": .string(identityToken), "nonce": .string(rawNonce), "deviceId": .string(deviceID)]))
    }

    /// Rotates the refresh token.
    ///
    /// - Throws: ``AuthError``; `invalid_grant` (or any 401) is definitive.
    public func refresh(_ tokens: TokenSet) async throws -> TokenSet {
        guard let refreshToken = tokens.refreshToken else {
            throw AuthError(
                .sessionExpired, "there is no refresh token", serverResponse: OAuthErrorResponse(error: .invalidGrant))
        }
        let response = try await post(contract.refreshPath, contract.refreshBody(refreshToken))
        if response.status == 401 {
            // The contract's 401 on refresh is definitive, whatever the body says.
            let serverError = Self.error(from: response).serverResponse
            throw AuthError(
                .server, "the refresh token was rejected", statusCode: 401,
                serverResponse: OAuthErrorResponse(
                    error: .invalidGrant, errorDescription: serverError?.errorDescription))
        }
        var refreshed = try self.tokens(from: response)
        if refreshed.user == nil { refreshed.user = tokens.user }
        if refreshed.refreshToken == nil { refreshed.refreshToken = tokens.refreshToken }
        return refreshed
    }

    /// `POST /logout` with the access token and the refresh token (204 expected, no body decoded).
    ///
    /// - Throws: ``AuthError``.
    public func signOut(_ tokens: TokenSet) async throws {
        var body: JOSEObject = [:]
        if let refreshToken = tokens.refreshToken { body["refreshToken"] = .string(refreshToken) }
        let response = try await send("POST", contract.logoutPath, .object(body), bearer: tokens.accessToken)
        guard (200..<300).contains(response.status) else { throw Self.error(from: response) }
    }

    /// `GET /me` with the access token: `{"id","email"}`.
    ///
    /// - Throws: ``AuthError``.
    public func me(_ tokens: TokenSet) async throws -> TokenSet.User {
        let response = try await send("GET", contract.mePath, nil, bearer: tokens.accessToken)
        guard response.status == 200, let json = try? JOSEValue.parse(response.body), let id = json["id"]?.stringValue
        else { throw Self.error(from: response) }
        return TokenSet.User(id: id, email: json["email"]?.stringValue, claims: json.objectValue?.dictionary)
    }

    // MARK: Plumbing

    private func post(_ path: String, _ body: JOSEValue) async throws -> HTTPResponse {
        try await send("POST", path, body, bearer: nil)
    }

    private func send(_ method: String, _ path: String, _ body: JOSEValue?, bearer: String?) async throws
        -> HTTPResponse
    {
        guard let url = URL(string: path, relativeTo: baseURL) else {
            throw AuthError(.configuration, "bad path \(path)")
        }
        var headers = ["Accept": "application/json"]
        if body != nil { headers["Content-Type"] = "application/json" }
        if let bearer { headers["Authorization"] = "Bearer \(bearer)" }
        return try await transport.send(HTTPRequest(method: method, url: url, headers: headers, body: body?.jsonData))
    }

    private func tokens(from response: HTTPResponse) throws -> TokenSet {
        guard (200..<300).contains(response.status) else { throw Self.error(from: response) }
        guard let json = try? JOSEValue.parse(response.body), let tokens = contract.parseTokens(json, timeSource.now)
        else {
            throw AuthError(.invalidResponse, "the response is not an AuthResponse", statusCode: response.status)
        }
        return tokens
    }

    /// Reads `{"accessToken","refreshToken","expiresIn","tokenType","user":{"id","email"}}`.
    public static func parseAuthResponse(_ json: JOSEValue, receivedAt: Date) -> TokenSet? {
        guard let access = json["accessToken"]?.stringValue, !access.isEmpty else { return nil }
        let user = json["user"]?["id"]?.stringValue.map {
            TokenSet.User(
                id: $0, email: json["user"]?["email"]?.stringValue, claims: json["user"]?.objectValue?.dictionary)
        }
        return TokenSet(
            accessToken: access,
            tokenType: json["tokenType"]?.stringValue ?? "Bearer",
            refreshToken: json["refreshToken"]?.stringValue,
            expiresAt: TokenSet.expiry(
                expiresIn: json["expiresIn"]?.doubleValue, accessToken: access, receivedAt: receivedAt),
            user: user
        )
    }

    /// Maps an error response: an error body becomes `server` (401 without a known code counts as `invalid_grant`
    /// on refresh); 5xx and 429 without a body are `transport`.
    static func error(from response: HTTPResponse) -> AuthError {
        if let json = try? JOSEValue.parse(response.body), let code = json["error"]?.stringValue {
            return AuthError(
                .server, "the server refused the request", statusCode: response.status,
                serverResponse: OAuthErrorResponse(
                    error: OAuthErrorCode(rawValue: code), errorDescription: json["error_description"]?.stringValue))
        }
        if response.status >= 500 || response.status == 429 {
            return AuthError(.transport, "the server answered \(response.status)", statusCode: response.status)
        }
        return AuthError(.invalidResponse, "the server answered \(response.status)", statusCode: response.status)
    }
}
