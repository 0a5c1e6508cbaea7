public import Foundation
internal import SesameJOSE

/// What an exchanged token is for (RFC 8693 §2.1): a logical `audience` name, or a `resource` URL.
public enum ExchangeTarget: Sendable, Hashable, CustomStringConvertible {
    /// `audience`: the API's name as the provider knows it.
    case audience(String)
    /// `resource`: the API's URL (RFC 8707).
    case resource(URL)

    /// The target, a resource URL without its user information and query (which may carry secrets); the request
    /// sends it whole.
    public var description: String {
        switch self {
        case .audience(let name): "audience \(PrintableText.sanitized(name, limit: 300))"
        case .resource(let url): "resource \(Redaction.url(url))"
        }
    }
}

/// An access token for another API, exchanged for the session's (RFC 8693).
///
/// Its `description` and `dump()` never show the token.
public struct ExchangedToken: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// The access token.
    public let accessToken: String
    /// `Bearer`, or `DPoP` when bound to the provider's DPoP key.
    public let tokenType: String
    /// `issued_token_type` (`urn:ietf:params:oauth:token-type:access_token`).
    public let issuedTokenType: String
    /// When it expires, if the provider said (`expires_in`).
    public let expiresAt: Date?
    /// The scope granted, if the provider said.
    public let scope: String?
    /// What it was exchanged for.
    public let target: ExchangeTarget

    /// Whether it is DPoP-bound (then sent only as `Authorization: DPoP` with a proof).
    public var isDPoPBound: Bool { SesameHTTP.Headers.same(tokenType, "dpop") }

    /// The target and expiry; never the token.
    public var description: String {
        "ExchangedToken(\(target), tokenType: \(tokenType), expiresAt: \(expiresAt.map { "\($0)" } ?? "unknown"))"
    }

    /// A mirror without the token.
    public var customMirror: Mirror {
        Mirror(
            self, children: ["target": target, "tokenType": tokenType, "expiresAt": expiresAt as Any],
            displayStyle: .struct)
    }
}

extension OIDCAuthProvider {
    static let tokenExchangeGrant = "urn:ietf:params:oauth:grant-type:token-exchange"
    static let accessTokenType = "urn:ietf:params:oauth:token-type:access_token"

    /// Exchanges `tokens`' access token for one scoped to `target` (RFC 8693, catalog TX-01/TX-02).
    ///
    /// With a DPoP key the request carries a proof, so the new token is bound to the same key.
    ///
    /// - Parameters:
    ///   - tokens: whose access token is the `subject_token`.
    ///   - target: the audience or resource.
    ///   - scope: a narrower scope, if wanted.
    ///   - actorToken: for delegation (RFC 8693 §4.1): the actor's access token; the new token names it in `act`.
    /// - Returns: the exchanged token.
    /// - Throws: ``AuthError`` — ``AuthError/Code/exchangeRejected`` with the provider's error (`invalid_target`:
    ///   not allowed for that target; `invalid_grant`, `invalid_scope`, …), ``AuthError/Code/invalidResponse`` for
    ///   an answer without `access_token`, `issued_token_type` or `token_type`, or not an access token; transport.
    public func exchange(
        _ tokens: TokenSet, for target: ExchangeTarget, scope: [String]? = nil, actorToken: String? = nil
    ) async throws -> ExchangedToken {
        var pairs: [(String, String)] = [
            ("grant_type", Self.tokenExchangeGrant), ("client_id", configuration.clientID),
            ("subject_token", tokens.accessToken), ("subject_token_type", Self.accessTokenType),
            ("requested_token_type", Self.accessTokenType),
        ]
        switch target {
        case .audience(let name): pairs.append(("audience", name))
        case .resource(let url): pairs.append(("resource", url.absoluteString))
        }
        if let scope, !scope.isEmpty { pairs.append(("scope", scope.joined(separator: " "))) }
        if let actorToken {
            pairs.append(("actor_token", actorToken))
            pairs.append(("actor_token_type", Self.accessTokenType))
        }
        let sent = timeSource.now
        let response = try await postWithProof(metadata.tokenEndpoint, pairs)
        guard response.status == 200 else {
            if [400, 401].contains(response.status), let body = ServerErrorResponse(response) {
                throw AuthError(
                    .exchangeRejected, "the token exchange for \(target) was refused", serverResponse: body)
            }
            throw Self.failure(response, "the token exchange was refused")
        }
        // TX-02: the three required members, and an access token (asked for; N_A is no access token).
        guard let json = try? JOSEValue.parse(response.body), let token = json["access_token"]?.stringValue,
            !token.isEmpty, let issued = json["issued_token_type"]?.stringValue,
            let type = json["token_type"]?.stringValue
        else {
            throw AuthError(
                .invalidResponse, "the token exchange answer lacks access_token, issued_token_type or token_type",
                statusCode: 200)
        }
        // The same rules as any token answer: printable token text of sane length, and with a DPoP key a DPoP
        // token (a Bearer answer would silently drop the binding).
        guard RESTAuthProvider.isTokenText(token) else {
            throw AuthError(.invalidResponse, "the exchanged access token is not token text", statusCode: 200)
        }
        guard ByteExact.equals(issued, Self.accessTokenType),
            configuration.usesDPoP
                ? SesameHTTP.Headers.same(type, "dpop")
                : SesameHTTP.Headers.same(type, "bearer") || SesameHTTP.Headers.same(type, "dpop")
        else {
            throw AuthError(
                .invalidResponse,
                "the token exchange issued \(PrintableText.sanitized(issued, limit: 100)) as "
                    + "\(PrintableText.sanitized(type, limit: 20)), not an access token",
                statusCode: 200)
        }
        let lifetime = json["expires_in"]?.doubleValue.flatMap { $0.isFinite && $0 > 0 ? $0 : nil }
        var expiresAt = lifetime.map { sent.addingTimeInterval(min($0, 366 * 86400)) }
        // A JWT's own exp, when it says sooner, wins (read, not trusted for anything else); never one over a year
        // ahead (the cache would keep the token until then).
        if let exp = (try? JWT.unverified(token))?.claims.expiresAt, exp.timeIntervalSince(sent) <= 366 * 86400,
            expiresAt.map({ exp < $0 }) ?? true
        {
            expiresAt = exp
        }
        return ExchangedToken(
            accessToken: token, tokenType: type, issuedTokenType: issued, expiresAt: expiresAt,
            scope: json["scope"]?.stringValue.map { PrintableText.sanitized($0, limit: 1024) }, target: target)
    }
}

/// Applies an exchanged token (Bearer, or DPoP with a proof of the provider's key); never the session's.
struct ExchangedTokenAuthenticator: Authenticator {
    let auth: OIDCAuth
    let target: ExchangeTarget
    let scope: [String]?

    var usesSessionCredentials: Bool { false }

    func authenticate(_ request: SesameHTTP.Request, context: AuthenticationContext) async throws
        -> SesameHTTP.Request
    {
        let token = try await auth.exchangedToken(for: target, scope: scope)
        if token.isDPoPBound {
            guard let dpop = auth.provider.dpopAuthenticator() else {
                throw AuthError(.dpopKeyMismatch, "the exchanged token is DPoP-bound but no DPoP key is configured")
            }
            var tokens = TokenSet(accessToken: token.accessToken, tokenType: "DPoP")
            tokens.dpopKeyThumbprint = auth.provider.dpopThumbprint
            return try await dpop.authenticate(
                request, context: AuthenticationContext(tokens: tokens, nonce: context.nonce))
        }
        var signed = request
        signed.headers["Authorization"] = "Bearer " + token.accessToken
        return signed
    }

    func classify(_ response: SesameHTTP.Response, for request: SesameHTTP.Request) -> AuthenticationVerdict {
        // A rejected exchanged token is forgotten: the next call exchanges again.
        if response.status == 401, response.challenges.contains(where: { $0["error"] == "invalid_token" }) {
            auth.forgetExchanged(target: target)
        }
        if let nonce = response.header("DPoP-Nonce"), response.status == 401,
            response.challenges.contains(where: { $0.isScheme("DPoP") && $0["error"] == "use_dpop_nonce" })
        {
            return .retry(nonce: nonce)
        }
        return .done
    }
}

extension OIDCAuth {
    /// A valid access token for `target`, exchanged for the session's (RFC 8693) and cached per target and scope
    /// until it is within `minimumValidity` seconds of its expiry; then exchanged again with the session's current
    /// access token (refreshed first when needed).
    ///
    /// - Throws: ``AuthError`` — ``AuthError/Code/notSignedIn``, the session's refresh errors,
    ///   ``AuthError/Code/exchangeRejected`` and the others of ``OIDCAuthProvider/exchange(_:for:scope:actorToken:)``.
    public func exchangedToken(
        for target: ExchangeTarget, scope: [String]? = nil, minimumValidity: TimeInterval = 30,
        forceExchange: Bool = false
    ) async throws -> ExchangedToken {
        let now = provider.timeSource.now
        guard let current = try await session.currentTokens else {
            exchanged.withLock { $0 = [:] }
            throw AuthError(.notSignedIn, "sign in before exchanging tokens")
        }
        // Cached per user and key too: another user's session, or another DPoP key, never gets these.
        let key = ExchangeCacheKey(
            target: target, scope: (scope ?? []).sorted(),
            owner: current.idToken.flatMap { try? JWT.unverified($0).claims.subject } ?? current.user?.id,
            key: current.dpopKeyThumbprint)
        if !forceExchange, let cached = exchanged.withLock({ $0[key] }),
            cached.expiresAt.map({ $0.timeIntervalSince(now) > minimumValidity }) ?? false
        {
            return cached
        }
        let token = try await provider.exchange(try await session.validTokens(), for: target, scope: scope)
        SesameLog.log(.info, .oidc, "token exchanged for \(public: target.description)")
        exchanged.withLock { cache in
            if cache.count >= 64 { cache.removeAll() }
            cache[key] = token
        }
        return token
    }

    /// A client for the API `target` names, sending the exchanged token (never the session's) only to
    /// `baseURL`'s origin (catalog TX-05); a DPoP-bound one with a proof per request.
    ///
    /// - Throws: ``AuthError/Code/configuration`` when `target` is a resource on another origin than `baseURL`.
    public func client(exchangingFor target: ExchangeTarget, baseURL: URL, scope: [String]? = nil) throws
        -> AuthorizedClient
    {
        if case .resource(let url) = target, SesameHTTP.Origin(url) != SesameHTTP.Origin(baseURL) {
            throw AuthError(
                .configuration, "the resource \(url.absoluteString) is not on \(baseURL.absoluteString)'s origin")
        }
        return AuthorizedClient(
            session: session, baseURL: baseURL,
            scheme: ExchangedTokenAuthenticator(auth: self, target: target, scope: scope))
    }
}

/// One cached exchange: the target and the scope asked for, for whom and with which DPoP key.
struct ExchangeCacheKey: Hashable, Sendable {
    let target: ExchangeTarget
    let scope: [String]
    let owner: String?
    let key: String?
}

extension OIDCAuth {
    /// Forgets the exchanged tokens for `target` (an API rejected one).
    func forgetExchanged(target: ExchangeTarget) {
        exchanged.withLock { cache in cache = cache.filter { $0.key.target != target } }
    }
}
