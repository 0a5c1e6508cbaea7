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
        guard let value = try? JOSEValue.parse(data), let object = value.objectValue else {
            throw DevServerError("the configuration file is not a JSON object")
        }
        try apply(object, path: "", nested: false)
    }

    private mutating func apply(_ object: JOSEObject, path: String, nested: Bool) throws {
        let known = ["claims", "users", "clients", "dynamic_registration"] + (nested ? [] : ["issuers"])
        if let unknown = object.first(where: { !known.contains($0.name) }) {
            throw DevServerError("\(path)\(unknown.name): unknown member (known: \(known.joined(separator: ", ")))")
        }
        if let claims = object["claims"] {
            guard let members = claims.objectValue else { throw DevServerError("\(path)claims: not an object") }
            self.claims = Dictionary(members.map { ($0.name, $0.value) }, uniquingKeysWith: { $1 })
        }
        if let flag = object["dynamic_registration"] {
            guard case .bool(let on) = flag else { throw DevServerError("\(path)dynamic_registration: true or false") }
            dynamicRegistration = on
        }
        for (index, user) in (try list(object["users"], "\(path)users")).enumerated() {
            let where_ = "\(path)users[\(index)]"
            guard let user = user.objectValue, let email = user["email"]?.stringValue,
                let password = user["password"]?.stringValue
            else { throw DevServerError("\(where_): an object with email and password") }
            if let unknown = user.first(where: { !["email", "password", "sub", "claims"].contains($0.name) }) {
                throw DevServerError("\(where_).\(unknown.name): unknown member")
            }
            var subject: String?
            if let sub = user["sub"] {
                guard let text = sub.stringValue else { throw DevServerError("\(where_).sub: a string") }
                subject = text
            }
            var claims: [String: JOSEValue] = [:]
            if let value = user["claims"] {
                guard let members = value.objectValue else { throw DevServerError("\(where_).claims: an object") }
                claims = Dictionary(members.map { ($0.name, $0.value) }, uniquingKeysWith: { $1 })
            }
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

    private func list(_ value: JOSEValue?, _ path: String) throws -> [JOSEValue] {
        guard let value else { return [] }
        guard let items = value.arrayValue else { throw DevServerError("\(path): a list") }
        return items
    }

    private static func client(_ value: JOSEValue, at path: String) throws -> RegisteredClient {
        let members = [
            "client_id", "redirect_uris", "post_logout_redirect_uris", "id_token_signed_response_alg", "claims",
        ]
        guard let object = value.objectValue, let id = object["client_id"]?.stringValue,
            let uris = object["redirect_uris"]?.arrayValue?.compactMap(\.stringValue),
            uris.count == object["redirect_uris"]?.arrayValue?.count
        else { throw DevServerError("\(path): an object with client_id and redirect_uris (strings)") }
        if let unknown = object.first(where: { !members.contains($0.name) }) {
            throw DevServerError("\(path).\(unknown.name): unknown member (known: \(members.joined(separator: ", ")))")
        }
        try RegisteredClient.check(id: id, redirectURIs: uris)
        var logout: [String]?
        if let value = object["post_logout_redirect_uris"] {
            guard let list = value.arrayValue?.compactMap(\.stringValue), list.count == value.arrayValue?.count,
                list.allSatisfy(DevServer.isRegistrable)
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
        var claims: [String: JOSEValue] = [:]
        if let value = object["claims"] {
            guard let members = value.objectValue else { throw DevServerError("\(path).claims: an object") }
            claims = Dictionary(members.map { ($0.name, $0.value) }, uniquingKeysWith: { $1 })
        }
        return RegisteredClient(
            id: id, redirectURIs: uris, idTokenSigningAlgorithm: algorithm, postLogoutRedirectURIs: logout,
            claims: claims)
    }
}
