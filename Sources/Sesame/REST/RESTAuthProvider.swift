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
        /// Paths appended to the base URL's path (`https://api.example/v1` + `register` is
        /// `https://api.example/v1/register`), as ``AuthorizedClient`` appends its endpoints.
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
        /// Whether a failed refresh answer means the refresh token is dead (sign out).
        ///
        /// Otherwise the failure is worth retrying. Default: a 400 or 401 whose `error` is `invalid_grant`.
        public var isDefinitiveRejection: @Sendable (SesameHTTP.Response) -> Bool = { response in
            (response.status == 400 || response.status == 401)
                && ServerErrorResponse(response)?.oauthError == .invalidGrant
        }

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
        transport: any HTTPTransport = SesameHTTP.platformTransport,
        timeSource: any TimeSource = SystemTimeSource()
    ) {
        self.baseURL = baseURL
        self.contract = contract
        self.transport = transport
        self.timeSource = timeSource
    }

    /// Signs in with email and password.
    ///
    /// - Throws: ``AuthError``: ``AuthError/Code/server`` with ``RESTErrorCode/invalidCredentials`` and the
    ///   server's description, or transport errors.
    public func login(email: String, password: String) async throws -> TokenSet {
        try await tokens(from: post(contract.loginPath, ["email": .string(email), "password": .string(password)]))
    }

    /// Creates an account and signs in.
    ///
    /// - Throws: ``AuthError``: ``AuthError/Code/server`` with ``RESTErrorCode/emailTaken`` or
    ///   ``RESTErrorCode/invalidRequest`` and the server's description, or transport errors.
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
    /// - Throws: ``AuthError``: ``AuthError/Code/noRefreshToken`` when there is none;
    ///   ``AuthError/Code/refreshRejected`` (with the server's answer) when ``Contract/isDefinitiveRejection``
    ///   says so — by default a 400 or 401 with `invalid_grant`; anything else as the server said it, transient
    ///   for 5xx, 429 and network failures.
    public func refresh(_ tokens: TokenSet) async throws -> TokenSet {
        guard let refreshToken = tokens.refreshToken else {
            throw AuthError(.noRefreshToken, "the credentials have no refresh token")
        }
        let response = try await post(contract.refreshPath, contract.refreshBody(refreshToken))
        guard response.isSuccess else {
            if contract.isDefinitiveRejection(response) {
                throw AuthError(
                    .refreshRejected, "the server rejected the refresh token", statusCode: response.status,
                    serverResponse: ServerErrorResponse(response))
            }
            throw AuthError.unexpected(response)
        }
        var refreshed = try self.tokens(from: response)
        if refreshed.user == nil { refreshed.user = tokens.user }
        // RFC 6749 §6: a server may keep the refresh token; then the old one stays valid.
        if refreshed.refreshToken == nil { refreshed.refreshToken = tokens.refreshToken }
        return refreshed
    }

    /// `POST /logout` with the refresh token in the body and, when it is still valid, the access token (2xx
    /// expected, no body decoded).
    ///
    /// - Throws: ``AuthError`` when the server did not confirm.
    public func signOut(_ tokens: TokenSet) async throws {
        var body: JOSEObject = [:]
        if let refreshToken = tokens.refreshToken { body["refreshToken"] = .string(refreshToken) }
        let bearer = tokens.needsRefresh(at: timeSource.now, leeway: 0) ? nil : tokens.accessToken
        let response = try await send("POST", contract.logoutPath, .object(body), bearer: bearer)
        guard response.isSuccess else { throw AuthError.unexpected(response) }
    }

    /// `GET /me` with the access token: `{"id","email"}`.
    ///
    /// - Throws: ``AuthError``.
    public func me(_ tokens: TokenSet) async throws -> TokenSet.User {
        let response = try await send("GET", contract.mePath, nil, bearer: tokens.accessToken)
        guard response.isSuccess else { throw AuthError.unexpected(response) }
        guard let json = try? JOSEValue.parse(response.body), let id = json["id"]?.stringValue else {
            throw AuthError(.invalidResponse, "the /me answer has no id", statusCode: response.status)
        }
        return TokenSet.User(id: id, email: json["email"]?.stringValue, claims: json.objectValue?.dictionary)
    }

    // MARK: Plumbing

    private func post(_ path: String, _ body: JOSEValue) async throws -> SesameHTTP.Response {
        try await send("POST", path, body, bearer: nil)
    }

    private func send(_ method: String, _ path: String, _ body: JOSEValue?, bearer: String?) async throws
        -> SesameHTTP.Response
    {
        // The same rule as AuthorizedClient: `https://api.example/v1` + `login` is `https://api.example/v1/login`.
        guard let url = try SesameHTTP.url(path: path, under: baseURL) else {
            throw AuthError(.configuration, "bad path \(path)")
        }
        var headers: SesameHTTP.Headers = ["Accept": "application/json"]
        if body != nil { headers["Content-Type"] = "application/json" }
        if let bearer { headers["Authorization"] = "Bearer \(bearer)" }
        return try await transport.send(
            SesameHTTP.Request(method: method, url: url, headers: headers, body: body?.jsonData))
    }

    private func tokens(from response: SesameHTTP.Response) throws -> TokenSet {
        guard response.isSuccess else { throw AuthError.unexpected(response) }
        guard let json = try? JOSEValue.parse(response.body), let tokens = contract.parseTokens(json, timeSource.now)
        else {
            throw AuthError(.invalidResponse, "the response is not an AuthResponse", statusCode: response.status)
        }
        return tokens
    }

    /// Whether `text` is 1–8192 printable ASCII characters without spaces.
    public static func isTokenText(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 8192 && text.utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }

    /// Reads `{"accessToken","refreshToken","expiresIn","tokenType","user":{"id","email"}}`.
    ///
    /// Tokens must be printable ASCII without spaces (RFC 6750's b64token and every real token are) and the type an
    /// HTTP token: anything else — control characters, a CRLF in `tokenType` — is not an AuthResponse.
    public static func parseAuthResponse(_ json: JOSEValue, receivedAt: Date) -> TokenSet? {
        guard let access = json["accessToken"]?.stringValue, isTokenText(access) else { return nil }
        let refresh = json["refreshToken"]?.stringValue
        let type = json["tokenType"]?.stringValue ?? "Bearer"
        guard refresh.map(isTokenText) ?? true, isTokenText(type), type.utf8.count <= 32 else { return nil }
        let user = json["user"]?["id"]?.stringValue.map {
            TokenSet.User(
                id: $0, email: json["user"]?["email"]?.stringValue, claims: json["user"]?.objectValue?.dictionary)
        }
        return TokenSet(
            accessToken: access,
            tokenType: type,
            refreshToken: refresh,
            expiresAt: TokenSet.expiry(
                expiresIn: json["expiresIn"]?.doubleValue, accessToken: access, receivedAt: receivedAt),
            receivedAt: receivedAt,
            user: user
        )
    }
}
