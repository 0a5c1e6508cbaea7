import Foundation
import SesameJOSE
import SesameLoopback

/// Dynamic client registration (RFC 7591, OIDC Dynamic Client Registration 1.0) at `POST /connect/register`, behind
/// ``DevServer/Configuration/dynamicRegistration``. Every client registered here is public and uses PKCE.
extension DevServer {
    /// The most clients registered this way (each costs memory until the server stops).
    static let registrationLimit = 1000
    /// The ID-token algorithms a client may register.
    static let idTokenAlgorithms: [JWSAlgorithm] = [.rs256, .es256, .eddsa]

    func registerClient(_ request: HTTPServerRequest) -> HTTPServerResponse {
        guard configuration.dynamicRegistration else {
            return Self.error(
                404, "not_found",
                pathPrefix.isEmpty
                    ? "dynamic registration is off (start the server with --registration)"
                    : "dynamic registration is off for this issuer (\"dynamic_registration\": true in its configuration)"
            )
        }
        return Self.withJSONBody(request) { metadata in
            func invalid(_ code: String, _ why: String) -> HTTPServerResponse {
                Self.oauthError(OAuthFailure(code, why))
            }
            guard let uris = metadata["redirect_uris"]?.arrayValue, !uris.isEmpty, uris.count <= 20 else {
                return invalid("invalid_redirect_uri", "redirect_uris is a list of 1 to 20 URIs")
            }
            var redirectURIs: [String] = []
            for value in uris {
                guard let uri = value.stringValue, RegisteredClient.isRegistrable(uri) else {
                    let scriptable = value.stringValue.map(RegisteredClient.isWellFormed) == true
                    return invalid(
                        "invalid_redirect_uri",
                        scriptable
                            ? "a redirect URI cannot have a scheme a browser runs or opens locally (javascript:, data:, …)"
                            : "every redirect URI is absolute, without a fragment")
                }
                redirectURIs.append(uri)
            }
            var logoutURIs: [String]?
            if let values = metadata["post_logout_redirect_uris"] {
                guard let list = values.arrayValue, list.count <= 20,
                    list.allSatisfy({ $0.stringValue.map(RegisteredClient.isRegistrable) == true })
                else {
                    return invalid("invalid_client_metadata", "post_logout_redirect_uris is a list of absolute URIs")
                }
                logoutURIs = list.compactMap(\.stringValue)
            }
            if let method = metadata["token_endpoint_auth_method"], method != "none" {
                return invalid(
                    "invalid_client_metadata", "clients here are public: token_endpoint_auth_method must be none")
            }
            let grants = metadata["grant_types"]?.arrayValue?.compactMap(\.stringValue) ?? ["authorization_code"]
            guard metadata["grant_types"].map({ $0.arrayValue?.count == grants.count }) ?? true,
                RegisteredClient.grantTypes(grants) != nil, !grants.contains(Self.clientCredentialsGrantType)
            else {
                return invalid(
                    "invalid_client_metadata",
                    "grant_types: authorization_code, refresh_token, urn:ietf:params:oauth:grant-type:device_code, "
                        + "urn:ietf:params:oauth:grant-type:token-exchange (clients registered here are public)")
            }
            if let types = metadata["response_types"], types != ["code"] {
                return invalid("invalid_client_metadata", "response_types must be [\"code\"]")
            }
            var algorithm = JWSAlgorithm.rs256
            if let name = metadata["id_token_signed_response_alg"] {
                guard let text = name.stringValue, let chosen = JWSAlgorithm(name: text),
                    Self.idTokenAlgorithms.contains(chosen)
                else {
                    return invalid("invalid_client_metadata", "id_token_signed_response_alg is RS256, ES256 or EdDSA")
                }
                algorithm = chosen
            }
            let name = metadata["client_name"]?.stringValue.map(PrintableTextForPage.short)
            var client = RegisteredClient(
                id: "dyn-" + DevStore.newSecret().prefix(22), redirectURIs: redirectURIs,
                idTokenSigningAlgorithm: algorithm, postLogoutRedirectURIs: logoutURIs)
            client.requiresConsent = true
            client.grantTypes = Set(grants)
            let added = registeredClients.withLock { clients -> Bool in
                guard clients.count < Self.registrationLimit + 1 + configuration.clients.count else { return false }
                clients.add(client)
                return true
            }
            guard added else { return Self.error(503, "temporarily_unavailable", "too many registered clients") }
            // The key of a new algorithm is made now, so it is published before the first token.
            _ = try? signingKey(for: algorithm)
            var answer: JOSEObject = [
                "client_id": .string(client.id), "client_id_issued_at": .integer(now),
                "redirect_uris": .array(redirectURIs.map(JOSEValue.string)), "token_endpoint_auth_method": "none",
                "grant_types": .array(grants.map(JOSEValue.string)), "response_types": ["code"],
                "id_token_signed_response_alg": .string(algorithm.name),
            ]
            if let logoutURIs { answer["post_logout_redirect_uris"] = .array(logoutURIs.map(JOSEValue.string)) }
            if let name { answer["client_name"] = .string(name) }
            state.withLock { $0.counters.clientRegistrations += 1 }
            var response = HTTPServerResponse.json(201, JOSEValue.object(answer).jsonData)
            response.headers.set("Cache-Control", "no-store")
            return response
        }
    }
}
