import Foundation
import SesameJOSE
import SesameLoopback

/// `/token`: the authorization-code grant with PKCE S256, refresh with rotation and reuse detection, and the
/// device grant (RFC 6749 §4.1.3 and §6, RFC 7636, RFC 9700 §4.14, RFC 8628 §3.4).
extension DevServer {
    static let deviceGrantType = "urn:ietf:params:oauth:grant-type:device_code"

    func token(_ request: HTTPServerRequest) -> HTTPServerResponse {
        let parameters: OAuthParameters
        switch OAuthParameters.of(request, fromBody: true) {
        case .success(let parsed): parameters = parsed
        case .failure(let failure): return Self.oauthError(failure)
        }
        // A DPoP proof binds what this request issues to its key (RFC 9449 §5). Checked first: a nonce demand
        // must not spend the client's single-use assertion.
        var key: String?
        switch dpopProof(request, path: "/token", accessToken: nil) {
        case .absent: break
        case .valid(let thumbprint): key = thumbprint
        case .refused(let response): return response
        }
        let client: RegisteredClient
        switch authenticateClient(request, parameters, endpoint: "/token") {
        case .client(let authenticated): client = authenticated
        case .refused(let refusal): return refusal
        }
        let clientID = client.id
        if let grantType = parameters["grant_type"], !client.allows(grantType) {
            return Self.oauthError(
                OAuthFailure("unauthorized_client", "the client \(clientID) is not registered for \(grantType)"))
        }
        do {
            switch parameters["grant_type"] {
            case "authorization_code"?: return try exchangeCode(parameters, clientID: clientID, key: key)
            case "refresh_token"?: return try refreshGrant(parameters, clientID: clientID, key: key)
            case Self.deviceGrantType?: return try deviceGrant(parameters, clientID: clientID, key: key)
            case Self.tokenExchangeGrantType?: return try tokenExchange(parameters, clientID: clientID, key: key)
            case Self.clientCredentialsGrantType?:
                return try clientCredentialsGrant(parameters, client: client, key: key)
            case nil: return Self.oauthError(OAuthFailure("invalid_request", "grant_type is required"))
            case let other?:
                return Self.oauthError(
                    OAuthFailure("unsupported_grant_type", "the grant type \(other) is not supported"))
            }
        } catch {
            return Self.error(500, "server_error", "the token request could not be completed")
        }
    }

    private func exchangeCode(_ parameters: OAuthParameters, clientID: String, key: String?) throws
        -> HTTPServerResponse
    {
        guard let code = parameters["code"], let redirectURI = parameters["redirect_uri"] else {
            return Self.oauthError(OAuthFailure("invalid_request", "code and redirect_uri are required"))
        }
        guard let verifier = parameters["code_verifier"] else {
            return Self.oauthError(OAuthFailure("invalid_request", "code_verifier is required (PKCE)"))
        }
        let invalid = { (reason: String) -> HTTPServerResponse in
            self.state.withLock { $0.counters.codeFailures += 1 }
            return Self.oauthError(OAuthFailure("invalid_grant", reason))
        }
        let issued = now
        let outcome = try store.exchangeCode(code, now: issued) { record in
            let authorization = record.request
            guard authorization.clientID.utf8.elementsEqual(clientID.utf8) else {
                return "the code was issued to another client"
            }
            guard authorization.redirectURI.utf8.elementsEqual(redirectURI.utf8) else {
                return "redirect_uri differs from the authorization request's"
            }
            guard (43...128).contains(verifier.utf8.count), verifier.utf8.allSatisfy(Self.isVerifierCharacter) else {
                return "code_verifier must be 43 to 128 unreserved characters (RFC 7636 §4.1)"
            }
            let challenge = Base64URL.encode(JOSECrypto.sha256(Array(verifier.utf8)))
            guard ConstantTime.equals(Array(challenge.utf8), Array(authorization.codeChallenge.utf8)) else {
                return "code_verifier does not match the code_challenge"
            }
            // dpop_jkt (RFC 9449 §10): the code is good only with a proof by that key.
            if let bound = authorization.dpopJKT, key.map({ ByteExact.equals($0, bound) }) != true {
                return "the code is bound to a DPoP key (dpop_jkt): send a proof by that key"
            }
            return nil
        }
        switch outcome {
        case .unknown: return invalid("the authorization code is unknown")
        case .expired: return invalid("the authorization code has expired")
        case .refused(let reason): return invalid(reason)
        case .reused:
            state.withLock { $0.counters.codeReuses += 1 }
            return invalid(
                "the authorization code was already used (or tried with a wrong verifier); any tokens it issued are revoked"
            )
        case .granted(let record, let grantID):
            if let key { try store.bind(grantID: grantID, toKey: key) }
            guard var grant = try store.activeGrant(id: grantID) else { return invalid("the grant is gone") }
            state.withLock { $0.counters.codeExchanges += 1 }
            var extra: JOSEObject = [:]
            if let (attached, secret) = try startDeviceSession(
                for: grant, presented: parameters["device_secret"], now: issued)
            {
                grant = attached
                extra["device_secret"] = .string(secret)
            }
            return try tokenResponse(
                grant, scope: record.request.scope, nonce: record.request.nonce, issuedAt: issued, refreshToken: nil,
                fromRefresh: false, key: key, extra: extra)
        }
    }

    private func refreshGrant(_ parameters: OAuthParameters, clientID: String, key: String?) throws
        -> HTTPServerResponse
    {
        guard let token = parameters["refresh_token"] else {
            return Self.oauthError(OAuthFailure("invalid_request", "refresh_token is required"))
        }
        // Reuse first, whatever else is wrong with the request: a spent token revokes its grant even when it comes
        // without the key a thief has since bound the grant to (else the thief keeps the grant, unseen).
        let spent = try store.isSpentBeyondGrace(token, grace: configuration.refreshReuseGrace, now: now)
        // A public client's DPoP-bound refresh token needs a proof by the same key (RFC 9449 §5); refused before
        // the token is spent.
        var boundKey: String?
        if !spent, let (grantID, _) = try store.grantID(ofRefreshToken: token),
            let bound = try store.grantKey(id: grantID)
        {
            guard let key, ByteExact.equals(key, bound) else {
                // A token already used once (within the grace) shown without the grant's key: whoever bound the
                // grant used it first — a thief, or the victim the thief copied it from. Reuse: the grant ends.
                if try store.isUsed(token) {
                    try store.revokeGrant(id: grantID)
                    state.withLock {
                        $0.counters.reuseDetections += 1
                        $0.counters.refreshFailures += 1
                    }
                    return Self.oauthError(
                        OAuthFailure("invalid_grant", "the refresh token was already used; its grant is revoked"))
                }
                state.withLock { $0.counters.refreshFailures += 1 }
                return Self.oauthError(
                    OAuthFailure("invalid_grant", "the refresh token is bound to a DPoP key: send a proof by that key"))
            }
            boundKey = bound
        }
        // A widened scope is refused before the token is spent, so the client can retry with its token.
        var narrowed: [String]?
        if !spent, let requested = parameters["scope"] {
            let scope = requested.split(separator: " ").map(String.init)
            if let (grantID, _) = try store.grantID(ofRefreshToken: token),
                let grant = try store.activeGrant(id: grantID),
                !Set(scope).isSubset(of: Set(grant.scope))
            {
                return Self.oauthError(OAuthFailure("invalid_scope", "a refresh cannot widen the scope"))
            }
            narrowed = scope
        }
        let issued = now
        let outcome = try store.rotate(
            token, clientID: clientID, ttl: configuration.refreshTokenTTL, grace: configuration.refreshReuseGrace,
            now: issued)
        let fail = { (reason: String) -> HTTPServerResponse in
            self.state.withLock { $0.counters.refreshFailures += 1 }
            return Self.oauthError(OAuthFailure("invalid_grant", reason))
        }
        let grant: DevStore.Grant
        let next: String
        var mayBind = false
        switch outcome {
        case .rotated(let found, let token):
            (grant, next) = (found, token)
            mayBind = true
        case .withinGrace(let found, let token):
            // A grace re-issue answers a client that lost the response: it never binds the grant to a key.
            state.withLock { $0.counters.reuseGraceRefreshes += 1 }
            (grant, next) = (found, token)
        case .unknown: return fail("the refresh token is unknown")
        case .expired: return fail("the refresh token has expired")
        case .revoked: return fail("the refresh token was revoked")
        case .wrongClient: return fail("the refresh token was issued to another client")
        case .reused:
            state.withLock { $0.counters.reuseDetections += 1 }
            return fail("the refresh token was already used; its grant is revoked")
        }
        let scope = narrowed ?? grant.scope
        guard Set(scope).isSubset(of: Set(grant.scope)) else {
            return Self.oauthError(OAuthFailure("invalid_scope", "a refresh cannot widen the scope"))
        }
        // A public client that starts proving a key binds its grant to it from now on (RFC 9449 §5).
        if boundKey == nil, mayBind, let key { try store.bind(grantID: grant.id, toKey: key) }
        let issuedKey = boundKey ?? (mayBind ? key : nil)
        state.withLock { $0.counters.refreshes += 1 }
        return try tokenResponse(
            grant, scope: scope, nonce: nil, issuedAt: issued, refreshToken: next, fromRefresh: true,
            key: issuedKey)
    }

    private func deviceGrant(_ parameters: OAuthParameters, clientID: String, key: String?) throws
        -> HTTPServerResponse
    {
        guard let deviceCode = parameters["device_code"] else {
            return Self.oauthError(OAuthFailure("invalid_request", "device_code is required"))
        }
        switch try store.pollDevice(deviceCode, clientID: clientID, now: now) {
        case .pending:
            return Self.oauthError(OAuthFailure("authorization_pending", "the user has not finished yet"))
        case .slowDown:
            return Self.oauthError(OAuthFailure("slow_down", "polling too fast: wait 5 more seconds between polls"))
        case .expired: return Self.oauthError(OAuthFailure("expired_token", "the device code has expired"))
        case .denied: return Self.oauthError(OAuthFailure("access_denied", "the user denied the request"))
        case .unknown: return Self.oauthError(OAuthFailure("invalid_grant", "the device code is unknown or used"))
        case .approved(let user, let scope, let authTime):
            let issued = now
            let grantID = try store.createGrant(
                userID: user.id, clientID: clientID, scope: scope, authTime: authTime, claims: nil, now: issued)
            guard let grant = try store.activeGrant(id: grantID) else {
                return Self.oauthError(OAuthFailure("invalid_grant", "the grant is gone"))
            }
            if let key { try store.bind(grantID: grantID, toKey: key) }
            state.withLock { $0.counters.deviceGrants += 1 }
            return try tokenResponse(
                grant, scope: scope, nonce: nil, issuedAt: issued, refreshToken: nil, fromRefresh: false, key: key)
        }
    }

    /// The token response (RFC 6749 §5.1, OIDC Core §3.1.3.3): a refresh token only with `offline_access`, an ID
    /// token only with `openid`; `extra` members added (a device secret, an issued token type).
    func tokenResponse(
        _ grant: DevStore.Grant, scope: [String], nonce: String?, issuedAt: Int64, refreshToken: String?,
        fromRefresh: Bool, key: String? = nil, extra: JOSEObject = [:], nativeSSO: Bool = false
    ) throws -> HTTPServerResponse {
        let access = try oidcAccessToken(for: grant, scope: scope, issuedAt: issuedAt, confirmation: key)
        var body: JOSEObject = [
            "access_token": .string(access), "token_type": .string(key == nil ? "Bearer" : "DPoP"),
            "expires_in": .integer(configuration.accessTokenTTL), "scope": .string(scope.joined(separator: " ")),
        ]
        for member in extra { body[member.name] = member.value }
        if let refreshToken {
            body["refresh_token"] = .string(refreshToken)
        } else if grant.scope.contains("offline_access"), clients[grant.clientID]?.allows("refresh_token") ?? true {
            body["refresh_token"] = .string(
                try store.addRefreshToken(grantID: grant.id, ttl: configuration.refreshTokenTTL, now: issuedAt))
        }
        if scope.contains("openid") {
            body["id_token"] = .string(
                try idToken(
                    for: grant, scope: scope, accessToken: access, nonce: nonce, issuedAt: issuedAt,
                    fromRefresh: fromRefresh, nativeSSO: nativeSSO))
        }
        recordIssued(access, kind: "access token", clientID: grant.clientID)
        if let id = body["id_token"]?.stringValue { recordIssued(id, kind: "ID token", clientID: grant.clientID) }
        var response = HTTPServerResponse.json(200, JOSEValue.object(body).jsonData)
        response.headers.set("Pragma", "no-cache")
        if key != nil, configuration.dpopNonce { response.headers.set("DPoP-Nonce", dpopNonce(at: issuedAt)) }
        return response
    }

    /// RFC 7636 §4.1 `unreserved`: `A-Z a-z 0-9 - . _ ~`.
    static func isVerifierCharacter(_ byte: UInt8) -> Bool {
        AuthorizationRequest.isBase64URL(byte) || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "~")
    }
}
