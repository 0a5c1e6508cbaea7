import Foundation
import SesameJOSE
import SesameLoopback

/// Client authentication at the token, revocation, PAR and device endpoints (RFC 6749 §2.3, RFC 7523 §3, OIDC Core
/// §9), and the client credentials grant (RFC 6749 §4.4) for service accounts.
///
/// A public client sends its `client_id` and nothing else; a confidential one proves itself with exactly the method
/// it registered: a signed assertion (`private_key_jwt`), or its secret in the `Authorization` header
/// (`client_secret_basic`) or in the body (`client_secret_post`).
/// The outcome of client authentication: the client, or the refusal to send.
enum ClientCheck {
    case client(RegisteredClient)
    case refused(HTTPServerResponse)
}

extension DevServer {
    static let clientAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    static let clientCredentialsGrantType = "client_credentials"
    /// The longest an assertion may live (`exp` − now), in seconds: a short-lived, single-use proof.
    static let maximumAssertionLifetime: Int64 = 300
    static let clientAuthenticationMethods: JOSEValue = [
        "none", "private_key_jwt", "client_secret_basic", "client_secret_post",
    ]
    static let assertionAlgorithms: JOSEValue = ["RS256", "PS256", "ES256", "EdDSA"]

    /// The calling client, authenticated as it registered, or the refusal to send.
    ///
    /// - Parameters:
    ///   - request: the request.
    ///   - parameters: its form parameters.
    ///   - endpoint: the endpoint's path (`/token`, `/revoke`, …): its URL is an accepted assertion audience
    ///     besides the issuer and the token endpoint.
    /// - Returns: the client, or the refusal to send.
    func authenticateClient(_ request: HTTPServerRequest, _ parameters: OAuthParameters, endpoint: String)
        -> ClientCheck
    {
        func refuse(_ code: String, _ why: String, status: Int = 401, basic: Bool = false)
            -> ClientCheck
        {
            var response = Self.oauthError(OAuthFailure(code, why, status: status))
            if status == 401 {
                response.headers.set(
                    "WWW-Authenticate", basic ? "Basic realm=\"sesame\"" : "Bearer error=\"\(code)\"")
            }
            state.withLock { $0.counters.clientAuthenticationFailures += 1 }
            return .refused(response)
        }
        var basic: (id: String, secret: String)?
        if let header = request.headers["Authorization"] {
            guard let credentials = Self.basicCredentials(header) else {
                return refuse(
                    "invalid_client",
                    "the Authorization header is not HTTP Basic client authentication (RFC 6749 §2.3.1)")
            }
            basic = credentials
        }
        let assertion = parameters["client_assertion"]
        let assertionType = parameters["client_assertion_type"]
        let postedSecret = parameters["client_secret"]
        let methods = [basic != nil, assertion != nil || assertionType != nil, postedSecret != nil].filter { $0 }
        guard methods.count <= 1 else {
            return refuse(
                "invalid_request", "use one client authentication method per request (RFC 6749 §2.3)", status: 400)
        }
        // Who claims to call: the header's ID, the assertion's subject, or client_id — which must agree.
        var claimed = basic?.id
        if let assertion {
            guard let subject = try? JWT.unverifiedClaims(of: assertion).subject else {
                return refuse("invalid_client", "the client assertion is not a JWT with a sub")
            }
            claimed = subject
        }
        if let stated = parameters["client_id"] {
            if let claimed, !ByteExact.equals(claimed, stated) {
                return refuse("invalid_client", "client_id is not the authenticated client", basic: basic != nil)
            }
            claimed = stated
        }
        guard let clientID = claimed else {
            return refuse("invalid_request", "client_id is required", status: 400)
        }
        guard let client = clients[clientID] else {
            return refuse("invalid_client", "the client \(clientID) is not registered", basic: basic != nil)
        }
        switch client.tokenEndpointAuthentication {
        case .none:
            guard methods.isEmpty else {
                return refuse(
                    "invalid_client", "\(clientID) is a public client: send client_id and no credentials",
                    basic: basic != nil)
            }
        case .clientSecretBasic(let secret):
            guard let basic else {
                return refuse(
                    "invalid_client", "\(clientID) authenticates with HTTP Basic (client_secret_basic)", basic: true)
            }
            guard Self.sameSecret(basic.secret, secret) else {
                return refuse("invalid_client", "the client secret is wrong", basic: true)
            }
        case .clientSecretPost(let secret):
            guard let postedSecret else {
                return refuse("invalid_client", "\(clientID) sends client_secret in the body (client_secret_post)")
            }
            guard Self.sameSecret(postedSecret, secret) else {
                return refuse("invalid_client", "the client secret is wrong")
            }
        case .privateKeyJWT(let jwks):
            guard let assertion else {
                return refuse(
                    "invalid_client", "\(clientID) authenticates with a signed client assertion (private_key_jwt)")
            }
            guard let assertionType, ByteExact.equals(assertionType, Self.clientAssertionType) else {
                return refuse("invalid_client", "client_assertion_type must be \(Self.clientAssertionType)")
            }
            if let problem = checkAssertion(assertion, clientID: clientID, jwks: jwks, endpoint: endpoint) {
                return refuse("invalid_client", problem)
            }
        }
        return .client(client)
    }

    /// Whether a request names a client at all: a `client_id`, an `Authorization` header or a client assertion.
    static func namesAClient(_ request: HTTPServerRequest, _ parameters: OAuthParameters) -> Bool {
        parameters["client_id"] != nil || request.headers["Authorization"] != nil
            || parameters["client_assertion"] != nil
    }

    /// PKJ-01 / PKJ-02: what is wrong with a client assertion, or nil.
    ///
    /// A signature by one of the client's registered keys with an asymmetric algorithm (never `none` or a MAC);
    /// `iss` and `sub` the client; `aud` this issuer, its token endpoint or the endpoint called; `exp` in the
    /// future and at most five minutes away; `iat` and `nbf` not in the future; a `jti` never seen before.
    func checkAssertion(_ assertion: String, clientID: String, jwks: String, endpoint: String) -> String? {
        guard let keys = try? JWKSet(json: jwks) else { return "the client's registered JWKS is unusable" }
        var policy = ClaimValidationPolicy(
            issuer: clientID, leeway: 5, requiredClaims: ["iss", "sub", "aud", "exp", "jti"])
        policy.acceptedTypes = ["jwt"]
        let claims: JWTClaims
        do {
            claims = try JWTVerifier(keys: keys, policy: policy).verifiedClaims(of: assertion, now: currentDate)
        } catch let error as JOSEError {
            return "the client assertion was refused: \(error.message)"
        } catch {
            return "the client assertion was refused"
        }
        guard claims.subject.map({ ByteExact.equals($0, clientID) }) == true else {
            return "the client assertion's sub must be the client ID"
        }
        let issuer = state.withLock { $0.issuer }
        let accepted = [issuer, issuer + "/token", issuer + endpoint]
        guard let audience = claims.audience, audience.contains(where: { ByteExact.contains(accepted, $0) }) else {
            return "the client assertion's aud must name this server (\(issuer) or \(issuer)/token)"
        }
        let now = self.now
        guard let expiry = claims.expiresAt.map({ Int64($0.timeIntervalSince1970) }),
            expiry - now <= Self.maximumAssertionLifetime
        else { return "the client assertion lives too long: exp at most 5 minutes ahead" }
        guard let jti = claims["jti"]?.stringValue, !jti.isEmpty, jti.utf8.count <= 256 else {
            return "the client assertion needs a jti"
        }
        // Single use (RFC 7523 §3 item 7): the jti is remembered until the assertion can no longer be accepted —
        // its exp plus the leeway, and a margin.
        guard
            (try? store.markUsed(
                token: "client-assertion\u{0}\(clientID)\u{0}\(jti)", expiresAt: expiry + 60, now: now)) == true
        else { return "the client assertion was already used (its jti)" }
        return nil
    }

    /// `Basic base64(id:secret)` with both parts form-urlencoded (RFC 6749 §2.3.1), or nil.
    static func basicCredentials(_ header: String) -> (id: String, secret: String)? {
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "basic", let data = Data(base64Encoded: String(parts[1]))
        else { return nil }
        // Byte for byte: `String(data:encoding:)` drops a leading U+FEFF, and invalid UTF-8 is no credential.
        let text = String(decoding: data, as: UTF8.self)
        guard text.utf8.elementsEqual(data), let colon = text.firstIndex(of: ":") else { return nil }
        guard let id = HTTPFormEncoding.decodeComponent(text[..<colon]),
            let secret = HTTPFormEncoding.decodeComponent(text[text.index(after: colon)...])
        else { return nil }
        return (id, secret)
    }

    /// Compares secrets in constant time (over their SHA-256, so their lengths do not show either).
    static func sameSecret(_ given: String, _ registered: String) -> Bool {
        ConstantTime.equals(JOSECrypto.sha256(Array(given.utf8)), JOSECrypto.sha256(Array(registered.utf8)))
    }

    /// RFC 6749 §4.4: a confidential client's own access token, for its allowed scopes; no refresh token (it can
    /// authenticate again, PKJ-03) and no ID token (there is no user).
    func clientCredentialsGrant(_ parameters: OAuthParameters, client: RegisteredClient, key: String?) throws
        -> HTTPServerResponse
    {
        guard client.tokenEndpointAuthentication != .none else {
            return Self.oauthError(
                OAuthFailure("unauthorized_client", "a public client cannot use the client credentials grant"))
        }
        var scope = client.allowedScopes
        if let requested = parameters["scope"] {
            scope = requested.split(separator: " ").map(String.init)
            guard Set(scope).isSubset(of: Set(client.allowedScopes)) else {
                return Self.oauthError(
                    OAuthFailure(
                        "invalid_scope",
                        "\(client.id) may ask for \(client.allowedScopes.isEmpty ? "no scope" : client.allowedScopes.joined(separator: " "))"
                    ))
            }
        }
        let issued = now
        let issuer = state.withLock { $0.issuer }
        var claims: JOSEObject = [
            "iss": .string(issuer), "sub": .string(client.id), "aud": .string(issuer), "client_id": .string(client.id),
            "iat": .integer(issued), "exp": .integer(issued + configuration.accessTokenTTL),
            "jti": .string(UUID().uuidString.lowercased()),
        ]
        if !scope.isEmpty { claims["scope"] = .string(scope.joined(separator: " ")) }
        if let key { claims["cnf"] = ["jkt": .string(key)] }
        let token = try JWT.sign(
            JWTClaims(claims), key: try currentKey(), algorithm: configuration.signingAlgorithm, type: "at+jwt")
        recordIssued(token, kind: "service access token", clientID: client.id)
        state.withLock { $0.counters.clientCredentialsGrants += 1 }
        var body: JOSEObject = [
            "access_token": .string(token), "token_type": .string(key == nil ? "Bearer" : "DPoP"),
            "expires_in": .integer(configuration.accessTokenTTL),
        ]
        if !scope.isEmpty { body["scope"] = .string(scope.joined(separator: " ")) }
        if state.withLock({ $0.rpTest }) == .clientCredentialsRefreshToken {
            // A token no grant knows: a client that uses it gets invalid_grant.
            body["refresh_token"] = .string(DevStore.newRefreshToken())
        }
        var response = HTTPServerResponse.json(200, JOSEValue.object(body).jsonData)
        response.headers.set("Pragma", "no-cache")
        if key != nil, configuration.dpopNonce { response.headers.set("DPoP-Nonce", dpopNonce(at: issued)) }
        return response
    }

    /// Revokes a client credentials token of `clientID` (it has no grant: its `jti` is listed, as an access
    /// token's is); whether `token` was one.
    func revokeServiceToken(_ token: String, clientID: String) -> Bool {
        guard let verifier = state.withLock({ $0.accessVerifier }),
            let claims = try? verifier.verifiedClaims(of: token, now: currentDate), claims["gid"] == nil,
            claims["client_id"]?.stringValue.map({ ByteExact.equals($0, clientID) }) == true,
            let jti = claims["jti"]?.stringValue, let expiry = claims.expiresAt
        else { return false }
        _ = rememberRevoked(jti: jti, until: expiry)
        return true
    }
}
