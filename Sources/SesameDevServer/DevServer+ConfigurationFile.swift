public import Foundation
import SesameJOSE

extension DevServer.Configuration {
    /// Adds what a configuration file says (`sesame serve --config dev-idp.json`): users with claims, clients,
    /// claim templates, dynamic registration and further issuers.
    ///
    /// ```json
    /// {
    ///   "claims": {"tenant": "dev", "greeting": "hello ${email_local}"},
    ///   "users": [{"email": "alice@example.com", "password": "correct-horse", "sub": "alice",
    ///              "claims": {"given_name": "Alice", "family_name": "Liddell", "groups": ["admins"]}}],
    ///   "clients": [{"client_id": "web", "redirect_uris": ["https://app.example/callback"],
    ///                "id_token_signed_response_alg": "RS256", "claims": {"role": "viewer"}}],
    ///   "dynamic_registration": true,
    ///   "issuers": {"partner": {"users": [], "clients": []}}
    /// }
    /// ```
    ///
    /// Users and clients are added to those already configured; `claims` and `dynamic_registration` replace
    /// them. A client's `id_token_signed_response_alg` is RS256 when not given (OIDC Registration §2). Each
    /// issuer takes the same members except `issuers`. Unknown members are refused, so a typo is not silently
    /// ignored.
    ///
    /// - Throws: ``DevServerError`` naming the member that is wrong.
    public mutating func load(json data: Data) throws {
        let value: JOSEValue
        do {
            value = try JOSEValue.parse(data)
        } catch let error as JOSEError {
            throw DevServerError("the configuration file is not valid JSON: \(error.message)")
        }
        guard let object = value.objectValue else {
            throw DevServerError("the configuration file is not a JSON object")
        }
        try apply(object, path: "", nested: false)
        var emails = Set<String>()
        for user in seededUsers where !emails.insert(DevServer.normalize(email: user.email)).inserted {
            throw DevServerError("users: \(user.email) appears twice")
        }
    }

    /// Claims from a file, refusing the protocol's own (`iss`, `sub`, `aud`, `exp`, `nonce`, `acr`, …): they are
    /// the server's to set, and silently dropping them would hide a mistake.
    private static func claims(_ value: JOSEValue, at path: String) throws -> [String: JOSEValue] {
        guard let members = value.objectValue else { throw DevServerError("\(path): an object") }
        if let reserved = members.first(where: { DevServer.reservedClaims.contains($0.name) }) {
            let hint = reserved.name == "sub" ? " (a user's sub is its \"sub\" member)" : ""
            throw DevServerError("\(path).\(reserved.name): the server sets this claim itself\(hint)")
        }
        return Dictionary(members.map { ($0.name, $0.value) }, uniquingKeysWith: { $1 })
    }

    private mutating func apply(_ object: JOSEObject, path: String, nested: Bool) throws {
        let known = ["claims", "users", "clients", "dynamic_registration"] + (nested ? [] : ["issuers"])
        if let unknown = object.first(where: { !known.contains($0.name) }) {
            throw DevServerError("\(path)\(unknown.name): unknown member (known: \(known.joined(separator: ", ")))")
        }
        if let claims = object["claims"] { self.claims = try Self.claims(claims, at: "\(path)claims") }
        if let flag = object["dynamic_registration"] {
            guard case .bool(let on) = flag else { throw DevServerError("\(path)dynamic_registration: true or false") }
            dynamicRegistration = on
        }
        for (index, user) in (try list(object["users"], "\(path)users")).enumerated() {
            let where_ = "\(path)users[\(index)]"
            let members = ["email", "password", "sub", "claims"]
            if let unknown = user.objectValue?.first(where: { !members.contains($0.name) }) {
                throw DevServerError(
                    "\(where_).\(unknown.name): unknown member (known: \(members.joined(separator: ", ")))")
            }
            guard let user = user.objectValue, let email = user["email"]?.stringValue,
                let password = user["password"]?.stringValue
            else { throw DevServerError("\(where_): an object with email and password (8 characters or more)") }
            var subject: String?
            if let sub = user["sub"] {
                guard let text = sub.stringValue else { throw DevServerError("\(where_).sub: a string") }
                subject = text
            }
            let claims = try user["claims"].map { try Self.claims($0, at: "\(where_).claims") } ?? [:]
            seededUsers.append(DevServer.SeededUser(email: email, password: password, subject: subject, claims: claims))
        }
        for (index, client) in (try list(object["clients"], "\(path)clients")).enumerated() {
            clients.append(try Self.client(client, at: "\(path)clients[\(index)]"))
        }
        if let issuers = object["issuers"] {
            guard let members = issuers.objectValue else { throw DevServerError("issuers: an object of issuers") }
            for member in members {
                guard let settings = member.value.objectValue else {
                    throw DevServerError("issuers.\(member.name): an object")
                }
                var child = self.issuers[member.name] ?? DevServer.Configuration()
                // Settings of the whole server unless the issuer says otherwise.
                child.dynamicRegistration = dynamicRegistration
                child.dpopNonce = dpopNonce
                child.refreshReuseGrace = refreshReuseGrace
                child.keyRotationInterval = keyRotationInterval
                child.faults = faults
                child.faultSeed = faultSeed
                child.rpTest = rpTest
                child.signingAlgorithm = signingAlgorithm
                child.accessTokenTTL = accessTokenTTL
                child.idTokenTTL = idTokenTTL
                child.refreshTokenTTL = refreshTokenTTL
                child.passwordIterations = passwordIterations
                child.devEndpoints = devEndpoints
                child.rememberBrowser = rememberBrowser
                try child.apply(settings, path: "issuers.\(member.name).", nested: true)
                self.issuers[member.name] = child
            }
        }
    }

    /// `value` as a list of strings, or nil when it is anything else (or has anything else in it).
    private static func strings(_ value: JOSEValue?) -> [String]? {
        guard let items = value?.arrayValue else { return nil }
        let strings = items.compactMap(\.stringValue)
        return strings.count == items.count ? strings : nil
    }

    private func list(_ value: JOSEValue?, _ path: String) throws -> [JOSEValue] {
        guard let value else { return [] }
        guard let items = value.arrayValue else { throw DevServerError("\(path): a list") }
        return items
    }

    private static func client(_ value: JOSEValue, at path: String) throws -> RegisteredClient {
        let members = [
            "client_id", "redirect_uris", "post_logout_redirect_uris", "id_token_signed_response_alg", "grant_types",
            "claims", "exchange_audiences", "native_sso_group", "token_endpoint_auth_method", "jwks", "client_secret",
            "scope",
        ]
        if let unknown = value.objectValue?.first(where: { !members.contains($0.name) }) {
            throw DevServerError("\(path).\(unknown.name): unknown member (known: \(members.joined(separator: ", ")))")
        }
        guard let object = value.objectValue, let id = object["client_id"]?.stringValue else {
            throw DevServerError("\(path): an object with a client_id (a string)")
        }
        let grantTypes = try object["grant_types"].map { value in
            guard let grants = Self.strings(value), let known = RegisteredClient.grantTypes(grants) else {
                throw DevServerError(
                    "\(path).grant_types: a list of authorization_code, refresh_token, "
                        + "urn:ietf:params:oauth:grant-type:device_code, urn:ietf:params:oauth:grant-type:token-exchange, "
                        + "client_credentials")
            }
            return known
        }
        // A service account (client_credentials only) needs no redirect URI, and must be confidential.
        let serviceOnly = grantTypes == ["client_credentials"]
        guard let uris = Self.strings(object["redirect_uris"] ?? (serviceOnly ? [] : nil)) else {
            throw DevServerError(
                "\(path).redirect_uris: a list of redirect URIs (strings); only a client whose grant_types is "
                    + "[\"client_credentials\"] has none")
        }
        try RegisteredClient.check(id: id, redirectURIs: uris, serviceOnly: serviceOnly)
        var logout: [String]?
        if let value = object["post_logout_redirect_uris"] {
            guard let list = Self.strings(value), list.allSatisfy(RegisteredClient.isRegistrable)
            else { throw DevServerError("\(path).post_logout_redirect_uris: a list of absolute URIs") }
            logout = list
        }
        var algorithm = JWSAlgorithm.rs256
        if let name = object["id_token_signed_response_alg"] {
            guard let text = name.stringValue, let chosen = JWSAlgorithm(name: text),
                DevServer.idTokenAlgorithms.contains(chosen)
            else { throw DevServerError("\(path).id_token_signed_response_alg: RS256, ES256 or EdDSA") }
            algorithm = chosen
        }
        let claims = try object["claims"].map { try Self.claims($0, at: "\(path).claims") } ?? [:]
        var client = RegisteredClient(
            id: id, redirectURIs: uris, idTokenSigningAlgorithm: algorithm, postLogoutRedirectURIs: logout,
            claims: claims)
        if let value = object["exchange_audiences"] {
            guard let audiences = Self.strings(value), audiences.count <= 20,
                audiences.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 2048 })
            else { throw DevServerError("\(path).exchange_audiences: a list of up to 20 audience or resource URIs") }
            client.exchangeAudiences = audiences
        }
        client.tokenEndpointAuthentication = try Self.authentication(object, at: path)
        if let value = object["scope"] {
            guard let text = value.stringValue, text.utf8.count <= 1024,
                text.split(separator: " ").allSatisfy({ PrintableText.isQuotableWord(String($0)) })
            else { throw DevServerError("\(path).scope: space-separated scope names") }
            client.allowedScopes = text.split(separator: " ").map(String.init)
        }
        if let value = object["native_sso_group"] {
            guard let group = value.stringValue, (1...64).contains(group.utf8.count),
                group.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F })
            else { throw DevServerError("\(path).native_sso_group: a name of 1 to 64 visible ASCII characters") }
            client.nativeSSOGroup = group
        }
        client.grantTypes = grantTypes
        if grantTypes?.contains(DevServer.clientCredentialsGrantType) == true,
            client.tokenEndpointAuthentication == .none
        {
            throw DevServerError(
                "\(path): client_credentials needs a confidential client: \"token_endpoint_auth_method\": "
                    + "\"private_key_jwt\" with a \"jwks\", or \"client_secret_basic\"/\"client_secret_post\" with a "
                    + "\"client_secret\"")
        }
        return client
    }

    /// `token_endpoint_auth_method` with its `jwks` or `client_secret` (RFC 7591 §2): none by default.
    private static func authentication(_ object: JOSEObject, at path: String) throws
        -> RegisteredClient.TokenEndpointAuthentication
    {
        let method = object["token_endpoint_auth_method"]
        let secret = object["client_secret"]?.stringValue
        switch method?.stringValue {
        case nil where method == nil:
            guard object["jwks"] == nil, object["client_secret"] == nil else {
                throw DevServerError("\(path): jwks and client_secret need a token_endpoint_auth_method")
            }
            return .none
        case "none"?:
            guard object["jwks"] == nil, object["client_secret"] == nil else {
                throw DevServerError("\(path): a public client (none) has no jwks or client_secret")
            }
            return .none
        case "private_key_jwt"?:
            guard object["client_secret"] == nil else {
                throw DevServerError(
                    "\(path).client_secret: a secret goes with client_secret_basic or client_secret_post, not private_key_jwt"
                )
            }
            guard let jwks = object["jwks"], let keys = try? JWKSet(json: jwks.jsonBytes), !keys.keys.isEmpty,
                keys.keys.allSatisfy({ !$0.isPrivate && $0.keyType != .octet })
            else {
                throw DevServerError(
                    "\(path).jwks: private_key_jwt needs a JWK Set of the client's public keys, {\"keys\": [...]}, "
                        + "without private parts (`sesame jwk public key.jwk` prints one)")
            }
            return .privateKeyJWT(jwks: String(decoding: jwks.jsonBytes, as: UTF8.self))
        case "client_secret_basic"?, "client_secret_post"?:
            guard object["jwks"] == nil else {
                throw DevServerError("\(path).jwks: a JWK Set goes with private_key_jwt, not a client secret")
            }
            guard let secret, secret.utf8.count >= 16, secret.utf8.count <= 512 else {
                throw DevServerError("\(path).client_secret: a secret of 16 to 512 bytes")
            }
            return method?.stringValue == "client_secret_basic"
                ? .clientSecretBasic(secret: secret) : .clientSecretPost(secret: secret)
        default:
            throw DevServerError(
                "\(path).token_endpoint_auth_method: none, private_key_jwt, client_secret_basic or client_secret_post")
        }
    }
}
