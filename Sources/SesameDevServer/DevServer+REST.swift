import Foundation
import SesameJOSE
import SesameLoopback

/// The proprietary REST contract (DESIGN.md §4).
extension DevServer {
    /// A fixed salt for the dummy hash computed when an email is unknown, so that a login for an unknown account
    /// costs the same time as one with a wrong password (no user enumeration by timing).

    func register(_ request: HTTPServerRequest) -> HTTPServerResponse {
        Self.withJSONBody(request) { body in
            guard let rawEmail = body["email"]?.stringValue, let password = body["password"]?.stringValue else {
                return Self.error(400, "invalid_request", "email and password are required strings")
            }
            let email = Self.normalize(email: rawEmail)
            guard Self.isPlausible(email: email) else {
                return Self.error(400, "invalid_request", "the email is not valid")
            }
            guard password.count >= 8 else {
                return Self.error(400, "invalid_request", "the password must have at least 8 characters")
            }
            guard password.utf8.count <= 1024 else {
                return Self.error(400, "invalid_request", "the password is too long")
            }
            let iterations = configuration.passwordIterations
            let salt = JOSECrypto.randomBytes(16)
            let hash = hashPassword(password, salt: salt, iterations: iterations)
            do {
                guard
                    let user = try store.createUser(
                        email: email, passwordHash: hash, salt: salt, iterations: iterations, now: now)
                else { return Self.error(409, "email_taken", "an account with this email exists") }
                state.withLock { $0.counters.registrations += 1 }
                return try authResponse(for: user, status: 201)
            } catch {
                return Self.error(500, "server_error", "the account could not be stored")
            }
        }
    }

    func login(_ request: HTTPServerRequest) -> HTTPServerResponse {
        Self.withJSONBody(request) { body in
            guard let rawEmail = body["email"]?.stringValue, let password = body["password"]?.stringValue else {
                return Self.error(400, "invalid_request", "email and password are required strings")
            }
            let email = Self.normalize(email: rawEmail)
            guard Self.isPlausible(email: email) else {
                return Self.error(400, "invalid_request", "the email is not valid (control or invisible characters?)")
            }
            do {
                switch checkPassword(email: email, password: password) {
                case .wrong: return Self.error(401, "invalid_credentials", "the email or password is wrong")
                case .backOff(let seconds):
                    var response = Self.error(
                        429, "too_many_attempts", "too many wrong passwords for this account; wait \(seconds) s")
                    response.headers.set("Retry-After", String(seconds))
                    return response
                case .user(let user):
                    state.withLock { $0.counters.logins += 1 }
                    return try authResponse(for: user, status: 200)
                }
            } catch {
                return Self.error(500, "server_error", "the sign-in could not be completed")
            }
        }
    }

    func refresh(_ request: HTTPServerRequest) -> HTTPServerResponse {
        Self.withJSONBody(request) { body in
            guard let token = body["refreshToken"]?.stringValue, !token.isEmpty else {
                return Self.error(400, "invalid_request", "refreshToken is a required string")
            }
            do {
                switch try store.rotate(
                    token, ttl: configuration.refreshTokenTTL, grace: configuration.refreshReuseGrace, now: now)
                {
                case .rotated(let user, let next):
                    state.withLock { $0.counters.refreshes += 1 }
                    return try authResponse(for: user, status: 200, refreshToken: next)
                case .withinGrace(let user, let next):
                    state.withLock {
                        $0.counters.refreshes += 1
                        $0.counters.reuseGraceRefreshes += 1
                    }
                    return try authResponse(for: user, status: 200, refreshToken: next)
                case .reused:
                    state.withLock {
                        $0.counters.reuseDetections += 1
                        $0.counters.refreshFailures += 1
                    }
                    return Self.error(
                        401, "invalid_grant", "the refresh token was already used; its session is revoked")
                case .unknown, .expired, .revoked:
                    state.withLock { $0.counters.refreshFailures += 1 }
                    return Self.error(401, "invalid_grant", "the refresh token is invalid, expired or revoked")
                }
            } catch {
                return Self.error(500, "server_error", "the refresh could not be completed")
            }
        }
    }

    /// Answers `POST /logout {"refreshToken"}`: ends that refresh token's session.
    ///
    /// The Bearer token is optional, so a
    /// client whose access token expired can still log out; an unknown or already ended refresh token is a 204
    /// too (RFC 7009 §2.2). Without a refresh token a valid access token is required.
    func logout(_ request: HTTPServerRequest) -> HTTPServerResponse {
        let token = (try? JOSEValue.parse(request.body).objectValue)?["refreshToken"]?.stringValue
        if let token, !token.isEmpty {
            do {
                try store.revokeFamily(of: token)
            } catch {
                return Self.error(500, "server_error", "the session could not be ended")
            }
        } else if authenticatedUser(request) == nil {
            return Self.invalidToken("send the refresh token, or a valid access token")
        }
        state.withLock { $0.counters.logouts += 1 }
        return HTTPServerResponse(status: 204)
    }

    func me(_ request: HTTPServerRequest) -> HTTPServerResponse {
        switch authentication(request) {
        case .success(let user): .json(200, Self.userJSON(user).jsonData)
        case .failure(let refusal): refusal.response
        }
    }

    /// The user a valid access token names, or nil.
    func authenticatedUser(_ request: HTTPServerRequest) -> DevStore.User? {
        try? authentication(request).get()
    }

    /// Why a request's access token is refused: the response to send.
    struct Refusal: Error {
        let response: HTTPServerResponse
    }

    /// The user of the request's access token (`Bearer`, or `DPoP` with its proof), verified once; or the answer
    /// to give — a DPoP refusal as such (a nonce to use, a proof to fix), so a DPoP client can recover.
    func authentication(_ request: HTTPServerRequest) -> Result<DevStore.User, Refusal> {
        let invalid = Refusal(response: Self.invalidToken("the access token is invalid or expired"))
        guard let (token, scheme) = Self.presentedToken(request),
            let verifier = state.withLock({ $0.accessVerifier }),
            let claims = try? verifier.verifiedClaims(of: token, now: currentDate),
            let subject = claims.subject
        else { return .failure(invalid) }
        if let refusal = checkBinding(request, claims: claims, token: token, scheme: scheme, path: "/me") {
            return .failure(Refusal(response: refusal))
        }
        // An OIDC access token is good only while its grant is (revocation, a replayed code, a reused refresh).
        if let grant = claims["gid"] {
            guard let id = grant.stringValue, (try? store.activeGrant(id: id)) != nil, !isRevoked(claims) else {
                return .failure(invalid)
            }
        }
        guard let user = try? store.user(id: subject) else { return .failure(invalid) }
        return .success(user)
    }

    static func userJSON(_ user: DevStore.User) -> JOSEValue {
        ["id": .string(user.id), "email": user.email.map(JOSEValue.string) ?? .null]
    }

    /// `AuthResponse`: a new access token, and a refresh token (a new family unless one is given).
    func authResponse(for user: DevStore.User, status: Int, refreshToken: String? = nil) throws -> HTTPServerResponse {
        let issued = now
        let refresh =
            try refreshToken
            ?? store.issueRefreshToken(userID: user.id, ttl: configuration.refreshTokenTTL, now: issued)
        let access = try accessToken(for: user, issuedAt: issued)
        let body: JOSEValue = [
            "accessToken": .string(access), "refreshToken": .string(refresh),
            "expiresIn": .integer(configuration.accessTokenTTL), "tokenType": "Bearer", "user": Self.userJSON(user),
        ]
        return .json(status, body.jsonData)
    }

    /// An RFC 9068-style JWT access token signed by the server key.
    func accessToken(for user: DevStore.User, issuedAt: Int64) throws -> String {
        let (issuer, key) = state.withLock { ($0.issuer, $0.accessKey) }
        guard let key else { throw DevServerError("no signing key") }
        let claims = JWTClaims([
            "iss": .string(issuer), "sub": .string(user.id), "aud": .string(issuer), "iat": .integer(issuedAt),
            "exp": .integer(issuedAt + configuration.accessTokenTTL), "jti": .string(UUID().uuidString.lowercased()),
        ])
        return try JWT.sign(claims, key: key, algorithm: configuration.signingAlgorithm, type: "at+jwt")
    }
}
