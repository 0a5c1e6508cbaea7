import Foundation
import SesameJOSE
import SesameLoopback

/// The OpenID Connect provider's keys, discovery, token minting and development controls (DESIGN §4).
extension DevServer {
    // MARK: Clients and keys

    /// `sesame-cli` plus the configured clients, by ID.
    static func registry(_ configured: [RegisteredClient], cliExchangeAudiences: [String] = []) -> ClientRegistry {
        var clients = ClientRegistry()
        var cli = RegisteredClient.sesameCLI
        cli.exchangeAudiences = cliExchangeAudiences
        clients.add(cli)
        for client in configured { clients.add(client) }
        return clients
    }

    /// How long a retired key stays published: until the longest-lived token it signed has expired.
    var keyRetention: Int64 { max(configuration.accessTokenTTL, configuration.idTokenTTL) + 60 }

    /// Rebuilds the access-token verifier from the keys still published.
    func reloadVerifier() throws {
        let keys = try JWKSet(keys: try store.publicKeys(purpose: "access", now: now, retention: keyRetention))
        state.withLock { state in
            var policy = ClaimValidationPolicy(
                issuer: state.issuer, audience: state.issuer, requiredClaims: ["exp", "sub", "iat"])
            policy.acceptedTypes = ["at+jwt"]
            policy.leeway = 0
            state.accessVerifier = JWTVerifier(keys: keys, policy: policy)
        }
    }

    /// Makes a new signing key active; the previous one stays in `/jwks` for ``keyRetention`` seconds.
    @discardableResult
    func rotateKeys() throws -> JWK {
        let issued = now
        for algorithm in otherIDTokenAlgorithms() {
            _ = try store.rotateSigningKey(purpose: "id-" + algorithm.name, algorithm: algorithm, now: issued)
        }
        let key = try store.rotateSigningKey(purpose: "access", algorithm: configuration.signingAlgorithm, now: issued)
        state.withLock {
            $0.accessKey = key
            $0.accessKeyCreatedAt = issued
        }
        try reloadVerifier()
        return key
    }

    /// The active signing key, rotated first when ``Configuration/keyRotationInterval`` says it is due.
    func currentKey() throws -> JWK {
        let (key, created) = state.withLock { ($0.accessKey, $0.accessKeyCreatedAt) }
        if let every = configuration.keyRotationInterval, now - created >= every {
            return try rotationLock.withLock {
                // Another request may have rotated while this one waited.
                if let fresh = state.withLock({ $0.accessKey }), state.withLock({ now - $0.accessKeyCreatedAt < every })
                {
                    return fresh
                }
                return try rotateKeys()
            }
        }
        guard let key else { throw DevServerError("no signing key") }
        return key
    }

    /// A further key of `algorithm` used only by an RP test mode (published only while the mode is on).
    func testKey(_ algorithm: JWSAlgorithm, name: String) throws -> JWK {
        try store.signingKey(purpose: "rp-test-\(name)", algorithm: algorithm, now: now)
    }

    // MARK: Discovery and JWKS

    func discovery() -> HTTPServerResponse {
        let (issuer, mode) = state.withLock { ($0.issuer, $0.rpTest) }
        // RS256 is mandatory (OIDC Core §15.1); each client's ID tokens use its registered algorithm.
        var algorithms: [JOSEValue] = ["RS256", "ES256", "EdDSA"]
        if mode == .signatureNone { algorithms = ["none"] }
        let document: JOSEObject = [
            "issuer": .string(mode == .discoveryIssuerMismatch ? issuer + "/mismatch" : issuer),
            "authorization_endpoint": .string(issuer + "/authorize"),
            "token_endpoint": .string(issuer + "/token"),
            "userinfo_endpoint": .string(issuer + "/userinfo"),
            "jwks_uri": .string(issuer + "/jwks"),
            "revocation_endpoint": .string(issuer + "/revoke"),
            "end_session_endpoint": .string(issuer + "/end-session"),
            "device_authorization_endpoint": .string(issuer + "/device_authorization"),
            "pushed_authorization_request_endpoint": .string(issuer + "/par"),
            "scopes_supported": .array(AuthorizationRequest.supportedScopes.sorted().map(JOSEValue.string)),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query", "form_post"],
            "grant_types_supported": [
                "authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code",
                .string(Self.tokenExchangeGrantType), "client_credentials",
            ],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": .array(algorithms),
            "token_endpoint_auth_methods_supported": Self.clientAuthenticationMethods,
            "token_endpoint_auth_signing_alg_values_supported": Self.assertionAlgorithms,
            "revocation_endpoint_auth_methods_supported": Self.clientAuthenticationMethods,
            "revocation_endpoint_auth_signing_alg_values_supported": Self.assertionAlgorithms,
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": true,
            "require_pushed_authorization_requests": false,
            "request_parameter_supported": false,
            "request_uri_parameter_supported": false,
            "claims_parameter_supported": true,
            "acr_values_supported": .array(Self.supportedACRs.map(JOSEValue.string)),
            "claim_types_supported": ["normal"],
            "prompt_values_supported": ["none", "login", "consent", "select_account"],
            "dpop_signing_alg_values_supported": ["ES256", "EdDSA", "RS256", "PS256"],
            "claims_supported": .array(
                (["iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "at_hash", "azp", "acr"]
                    + StandardClaims.byScope.keys.sorted().flatMap { StandardClaims.byScope[$0] ?? [] })
                    .map(JOSEValue.string)),
            "userinfo_endpoint_auth_methods_supported": ["header", "form"],
            "native_sso_supported": true,
        ]
        var discovered = document
        if configuration.dynamicRegistration {
            discovered["registration_endpoint"] = .string(issuer + "/connect/register")
        }
        var response = HTTPServerResponse.json(200, JOSEValue.object(discovered).jsonData)
        response.headers.set("Cache-Control", "no-cache")
        return response
    }

    func publishedKeys() throws -> [JWK] {
        let mode = state.withLock { $0.rpTest }
        var keys = try store.publicKeys(purpose: "access", now: now, retention: keyRetention)
        for algorithm in otherIDTokenAlgorithms() {
            // Made once if missing, never rotated here: only signing rotates (a GET must not make keys).
            _ = try store.signingKey(purpose: "id-" + algorithm.name, algorithm: algorithm, now: now)
            keys += try store.publicKeys(purpose: "id-" + algorithm.name, now: now, retention: keyRetention)
        }
        switch mode {
        case .kidAbsentSingleJWKS:
            keys = [try signingKey(for: idTokenAlgorithm(for: RegisteredClient.sesameCLI.id)).publicKey()]
        case .kidAbsentMultipleJWKS:
            let algorithm = idTokenAlgorithm(for: RegisteredClient.sesameCLI.id)
            keys = [
                try signingKey(for: algorithm).publicKey(), try testKey(algorithm, name: "second").publicKey(),
            ]
        case .invalidSignatureRS256 where configuration.signingAlgorithm != .rs256:
            keys.append(try testKey(.rs256, name: "rs256").publicKey())
        case .invalidSignatureES256 where configuration.signingAlgorithm != .es256:
            keys.append(try testKey(.es256, name: "es256").publicKey())
        default: break
        }
        return keys
    }

    func jwks() -> HTTPServerResponse {
        guard let keys = try? publishedKeys() else { return Self.error(500, "server_error", "keys unavailable") }
        var response = HTTPServerResponse.json(
            200, JOSEValue.object(["keys": .array(keys.map { $0.jsonValue() })]).jsonData)
        response.headers.set("Cache-Control", "no-cache")
        return response
    }

    // MARK: Tokens

    /// An RFC 9068 access token for a grant; `gid` names the grant so that revoking it ends the token too.
    func oidcAccessToken(
        for grant: DevStore.Grant, scope: [String], issuedAt: Int64, confirmation: String? = nil,
        audience: String? = nil, actor: JOSEValue? = nil, expiresAt: Int64? = nil
    ) throws -> String {
        let issuer = state.withLock { $0.issuer }
        var claims: JOSEObject = [
            "iss": .string(issuer), "sub": .string(grant.user.id), "aud": .string(audience ?? issuer),
            "client_id": .string(grant.clientID), "scope": .string(scope.joined(separator: " ")),
            "iat": .integer(issuedAt), "exp": .integer(expiresAt ?? issuedAt + configuration.accessTokenTTL),
            "auth_time": .integer(grant.authTime), "jti": .string(UUID().uuidString.lowercased()),
            "gid": .string(grant.id),
            // RFC 9470 §6.1: the resource decides on acr and auth_time.
            "acr": .string(grant.acr ?? Self.passwordACR), "amr": Self.amr(for: grant.acr ?? Self.passwordACR),
        ]
        if let confirmation { claims["cnf"] = ["jkt": .string(confirmation)] }
        if let actor { claims["act"] = actor }
        return try JWT.sign(
            JWTClaims(claims), key: try currentKey(), algorithm: configuration.signingAlgorithm, type: "at+jwt")
    }

    /// An ID token (OIDC Core §2) for a grant, misbehaving as the RP test mode says.
    func idToken(
        for grant: DevStore.Grant, scope: [String], accessToken: String, nonce: String?, issuedAt: Int64,
        fromRefresh: Bool, nativeSSO: Bool = false
    ) throws -> String {
        let (issuer, mode) = state.withLock { ($0.issuer, $0.rpTest) }
        let profile = profile(of: grant.user)
        var claims = customClaims(for: grant, profile: profile)
        if let extra = grant.claims, let object = try? JOSEValue.parse(Data(extra.utf8)).objectValue {
            for member in object { claims[member.name] = member.value }
        }
        if scope.contains("email"), let email = grant.user.email {
            claims["email"] = .string(email)
            claims["email_verified"] = claims["email_verified"] ?? profile["email_verified"] ?? false
        }
        let request = grant.requestClaims.flatMap { try? ClaimsRequest.parse($0).get() } ?? ClaimsRequest()
        let acr = grant.acr ?? Self.passwordACR
        for member in requestedClaims(request.idToken, profile: profile, acr: acr) {
            claims[member.name] = member.value
        }
        // A stepped-up sign-in says so whether or not acr was asked for (RFC 9470 §4).
        if claims["acr"] != nil || !ByteExact.equals(acr, Self.passwordACR) {
            claims["acr"] = .string(acr)
            claims["amr"] = Self.amr(for: acr)
        }
        claims["iss"] = .string(issuer)
        claims["sub"] = .string(grant.user.id)
        claims["aud"] = .string(grant.clientID)
        claims["azp"] = .string(grant.clientID)
        claims["iat"] = .integer(issuedAt)
        claims["exp"] = .integer(issuedAt + configuration.idTokenTTL)
        claims["auth_time"] = .integer(grant.authTime)
        if let nonce, !fromRefresh { claims["nonce"] = .string(nonce) }
        // Native SSO §3.2: the device session and the binding to its secret.
        if let sid = grant.deviceSession, let session = try store.deviceSession(id: sid) {
            claims["sid"] = .string(sid)
            claims["ds_hash"] = .string(session.dsHash)
        }
        var algorithm = idTokenAlgorithm(for: grant.clientID)
        claims["at_hash"] = .string(Self.atHash(accessToken, algorithm: algorithm))
        var key = try signingKey(for: algorithm)
        let chosen = algorithm
        var corrupt = false
        let first = state.withLock { state -> Bool in
            defer { state.rpTestIDTokens += 1 }
            return state.rpTestIDTokens == 0
        }
        switch mode {
        case .invalidIssuer: claims["iss"] = .string(issuer + "/invalid")
        case .invalidAudience: claims["aud"] = .string(grant.clientID + "-invalid")
        case .missingSubject: claims["sub"] = nil
        case .missingIssuedAt: claims["iat"] = nil
        case .invalidNonce: claims["nonce"] = .string("invalid-" + DevStore.newSecret())
        case .invalidAtHash: claims["at_hash"] = .string(Self.atHash(accessToken + "x", algorithm: algorithm))
        case .missingAtHash: claims["at_hash"] = nil
        case .refreshTokenInvalidSubject where fromRefresh: claims["sub"] = .string(grant.user.id + "-invalid")
        case .refreshTokenInvalidIssuer where fromRefresh: claims["iss"] = .string(issuer + "/invalid")
        case .stepUpWeakerACR where claims["acr"] != nil:
            claims["acr"] = .string(Self.passwordACR)
            claims["amr"] = Self.amr(for: Self.passwordACR)
        case .stepUpOldAuthTime: claims["auth_time"] = .integer(grant.authTime - 30 * 86400)
        case .nativeSSOMissingDeviceSecretHash: claims["ds_hash"] = nil
        case .nativeSSOOtherSubject where nativeSSO: claims["sub"] = .string(grant.user.id + "-other")
        case .invalidSignatureRS256:
            corrupt = true
            if algorithm != .rs256 { (key, algorithm) = (try testKey(.rs256, name: "rs256"), .rs256) }
        case .invalidSignatureES256:
            corrupt = true
            if algorithm != .es256 { (key, algorithm) = (try testKey(.es256, name: "es256"), .es256) }
        case .kidAbsentSingleJWKS, .kidAbsentMultipleJWKS: key = key.with(keyID: nil, algorithm: algorithm)
        case .signingKeyRotationJustBeforeSigning where first:
            try rotateKeys()
            key = try signingKey(for: algorithm)
        case .signatureNone:
            let header = Base64URL.encode(JOSEValue.object(["alg": "none", "typ": "JWT"]).jsonBytes)
            return header + "." + Base64URL.encode(JOSEValue.object(claims).jsonBytes) + "."
        default: break
        }
        if algorithm != chosen {
            claims["at_hash"] = claims["at_hash"].map { _ in .string(Self.atHash(accessToken, algorithm: algorithm)) }
        }
        let token = try JWT.sign(JWTClaims(claims), key: key, algorithm: algorithm)
        if mode == .signingKeyRotation, first { try rotateKeys() }
        return corrupt ? Self.corruptingSignature(of: token) : token
    }

    /// `at_hash`: the left half of the access token's hash with the ID token's algorithm (OIDC Core §3.1.3.6).
    static func atHash(_ accessToken: String, algorithm: JWSAlgorithm) -> String {
        let digest: [UInt8] =
            switch algorithm.digestLength {
            case 48: JOSECrypto.sha384(Array(accessToken.utf8))
            case 64: JOSECrypto.sha512(Array(accessToken.utf8))
            default: JOSECrypto.sha256(Array(accessToken.utf8))
            }
        return Base64URL.encode(digest.prefix(digest.count / 2))
    }

    /// The token with one bit of its signature flipped.
    static func corruptingSignature(of token: String) -> String {
        guard let dot = token.lastIndex(of: "."),
            var signature = try? Base64URL.decode(String(token[token.index(after: dot)...])), !signature.isEmpty
        else { return token }
        signature[signature.count / 2] ^= 0x01
        return token[...dot] + Base64URL.encode(signature)
    }

    // MARK: Development controls

    func setRPTest(_ request: HTTPServerRequest) -> HTTPServerResponse {
        Self.withJSONBody(request) { body in
            let mode: RPTestMode?
            switch body["test"] {
            case nil: return Self.error(400, "invalid_request", "test is required: a mode name, or null to end it")
            case .null?: mode = nil
            case .string(let name)?:
                guard let known = RPTestMode(rawValue: name) else {
                    return Self.error(400, "invalid_request", "unknown RP test \(name); GET /_dev/rp-tests lists them")
                }
                mode = known
            default: return Self.error(400, "invalid_request", "test is a name or null")
            }
            state.withLock {
                $0.rpTest = mode
                $0.rpTestIDTokens = 0
            }
            return .json(200, JOSEValue.object(["test": mode.map { .string($0.rawValue) } ?? .null]).jsonData)
        }
    }

    func listRPTests() -> HTTPServerResponse {
        let current = state.withLock { $0.rpTest }
        let tests = RPTestMode.allCases.map { mode -> JOSEValue in
            [
                "name": .string(mode.rawValue), "expected": .string(mode.expectedOutcome),
                "summary": .string(mode.summary),
            ]
        }
        return .json(
            200,
            JOSEValue.object(["current": current.map { .string($0.rawValue) } ?? .null, "tests": .array(tests)])
                .jsonData)
    }

    /// `POST /_dev/rotate-keys`: a new signing key now; the previous one stays published.
    func rotateKeysNow() -> HTTPServerResponse {
        do {
            let key = try rotateKeys()
            return .json(200, JOSEValue.object(["kid": key.keyID.map(JOSEValue.string) ?? .null]).jsonData)
        } catch {
            return Self.error(500, "server_error", "the key could not be rotated")
        }
    }

    /// Answers `POST /_dev/token {"sub", "claims"?, "aud"?, "expiresIn"?, "clientId"?, "scope"?}`.
    ///
    /// An access token and an ID token from the issuer's key with any claims, for users' backend tests. No user or
    /// grant is created.
    func mintToken(_ request: HTTPServerRequest) -> HTTPServerResponse {
        Self.withJSONBody(request) { body in
            guard let subject = body["sub"]?.stringValue, !subject.isEmpty else {
                return Self.error(400, "invalid_request", "sub is a required string")
            }
            var lifetime = configuration.accessTokenTTL
            if let value = body["expiresIn"] {
                guard let seconds = value.doubleValue, seconds.isFinite, seconds >= 1, seconds <= 366 * 86400,
                    seconds == seconds.rounded()
                else {
                    return Self.error(400, "invalid_request", "expiresIn is a whole number of seconds, 1 to 1 year")
                }
                lifetime = Int64(seconds)
            }
            var extra = JOSEObject()
            switch body["claims"] {
            case nil, .null?: break
            case .object(let object)?: extra = object
            default: return Self.error(400, "invalid_request", "claims is a JSON object")
            }
            let issuer = state.withLock { $0.issuer }
            let audience = body["aud"] ?? .string(issuer)
            guard audience.stringValue != nil || audience.arrayValue?.allSatisfy({ $0.stringValue != nil }) == true
            else { return Self.error(400, "invalid_request", "aud is a string or an array of strings") }
            let clientID = body["clientId"]?.stringValue ?? RegisteredClient.sesameCLI.id
            let issued = now
            func token(_ audience: JOSEValue, type: String) throws -> String {
                var claims: JOSEObject = [
                    "iss": .string(issuer), "sub": .string(subject), "aud": audience, "iat": .integer(issued),
                    "exp": .integer(issued + lifetime), "jti": .string(UUID().uuidString.lowercased()),
                ]
                if type == "at+jwt" {
                    claims["client_id"] = .string(clientID)
                    if let scope = body["scope"]?.stringValue { claims["scope"] = .string(scope) }
                }
                // The lifetime is expiresIn's (so the key outlives the token); the issuer is this one.
                for member in extra where !["iss", "iat", "exp", "nbf"].contains(member.name) {
                    claims[member.name] = member.value
                }
                return try JWT.sign(
                    JWTClaims(claims), key: try currentKey(), algorithm: configuration.signingAlgorithm, type: type)
            }
            do {
                if let kid = try currentKey().keyID { try store.extendKeyLife(kid: kid, until: issued + lifetime) }
                let access = try token(audience, type: "at+jwt")
                let id = try token(body["aud"] ?? .string(clientID), type: "JWT")
                recordIssued(access, kind: "access token (/_dev/token)", clientID: clientID)
                recordIssued(id, kind: "ID token (/_dev/token)", clientID: clientID)
                let answer: JOSEValue = [
                    "access_token": .string(access), "id_token": .string(id), "token_type": "Bearer",
                    "expires_in": .integer(lifetime),
                ]
                return .json(200, answer.jsonData)
            } catch {
                return Self.error(500, "server_error", "the token could not be signed")
            }
        }
    }
}
