import Foundation
import SesameJOSE
import SesameLoopback

/// RFC 8693 token exchange at `/token`: a client trades an access token this issuer gave it for one scoped to
/// another API (`audience` or `resource`), as its ``RegisteredClient/exchangeAudiences`` allow; with an
/// `actor_token`, the new token names the actor in `act` (delegation, RFC 8693 §4.1).
extension DevServer {
    static let tokenExchangeGrantType = "urn:ietf:params:oauth:grant-type:token-exchange"
    static let accessTokenType = "urn:ietf:params:oauth:token-type:access_token"

    func tokenExchange(_ parameters: OAuthParameters, clientID: String, key: String?) throws -> HTTPServerResponse {
        func fail(_ code: String, _ why: String) -> HTTPServerResponse { Self.oauthError(OAuthFailure(code, why)) }
        // TX-01: the subject token and its type; only access tokens of this issuer are exchanged.
        guard let subjectToken = parameters["subject_token"], let subjectType = parameters["subject_token_type"] else {
            return fail("invalid_request", "subject_token and subject_token_type are required")
        }
        if ByteExact.equals(subjectType, Self.idTokenType) {
            return try nativeSSOExchange(parameters, clientID: clientID, key: key)
        }
        guard ByteExact.equals(subjectType, Self.accessTokenType) else {
            return fail("invalid_request", "subject_token_type must be \(Self.accessTokenType)")
        }
        if let requested = parameters["requested_token_type"], !ByteExact.equals(requested, Self.accessTokenType) {
            return fail(
                "invalid_request", "only access tokens are issued (requested_token_type \(Self.accessTokenType))")
        }
        if (parameters["actor_token"] == nil) != (parameters["actor_token_type"] == nil) {
            return fail("invalid_request", "actor_token and actor_token_type go together")
        }
        guard let (grant, subject) = oidcAccess(subjectToken) else {
            return fail(
                "invalid_grant",
                "the subject_token is not a current access token for this issuer (expired, revoked, or one issued for another audience)"
            )
        }
        // A client exchanges the tokens it was given, not another client's.
        guard let owner = subject["client_id"]?.stringValue, ByteExact.equals(owner, clientID) else {
            return fail("invalid_grant", "the subject_token was issued to another client")
        }
        // A DPoP-bound subject token is used only with a proof by its key (the exchange is a use of it).
        if let bound = subject["cnf"]?["jkt"]?.stringValue, key.map({ ByteExact.equals($0, bound) }) != true {
            return fail("invalid_grant", "the subject_token is bound to a DPoP key: send a proof by that key")
        }
        // TX-03 / TX-05: one target, and only one the client's policy names.
        let targets = [parameters["audience"], parameters["resource"]].compactMap { $0 }
        guard targets.count == 1, let target = targets.first else {
            return fail("invalid_target", "name exactly one audience or one resource")
        }
        let allowed = clients[clientID]?.exchangeAudiences ?? []
        guard allowed.contains(where: { ByteExact.equals($0, target) }) else {
            return fail(
                "invalid_target",
                "the client \(clientID) may not exchange tokens for \(PrintableTextForPage.short(target))")
        }
        let granted = (subject["scope"]?.stringValue ?? "").split(separator: " ").map(String.init)
        var scope = granted
        if let requested = parameters["scope"] {
            scope = requested.split(separator: " ").map(String.init)
            guard Set(scope).isSubset(of: Set(granted)) else {
                return fail("invalid_scope", "an exchange cannot widen the scope")
            }
        }
        var actor: JOSEValue?
        if let actorToken = parameters["actor_token"] {
            guard ByteExact.equals(parameters["actor_token_type"] ?? "", Self.accessTokenType),
                let (_, actorClaims) = oidcAccess(actorToken), let actorSubject = actorClaims.subject
            else { return fail("invalid_grant", "the actor_token is not a valid access token of this issuer") }
            // A DPoP-bound actor token is good only with a proof by its key, like any use of it: a stolen copy must
            // not put its user into act.
            if let bound = actorClaims["cnf"]?["jkt"]?.stringValue, key.map({ ByteExact.equals($0, bound) }) != true {
                return fail("invalid_grant", "the actor_token is bound to a DPoP key: send a proof by that key")
            }
            // TX-04: the actor, and the chain of earlier actors nested in it.
            var act: JOSEObject = ["sub": .string(actorSubject)]
            if let actorClient = actorClaims["client_id"] { act["client_id"] = actorClient }
            if let earlier = actorClaims["act"] { act["act"] = earlier }
            actor = .object(act)
        }
        let issued = now
        // Never outliving the token it was exchanged for.
        let expiry = min(
            issued + configuration.accessTokenTTL, subject.expiresAt.map { Int64($0.timeIntervalSince1970) } ?? .max)
        let token = try oidcAccessToken(
            for: grant, scope: scope, issuedAt: issued, confirmation: key, audience: target, actor: actor,
            expiresAt: expiry)
        recordIssued(token, kind: "exchanged access token", clientID: clientID)
        state.withLock { $0.counters.tokenExchanges += 1 }
        // TX-02: the issued token's type besides its scheme; no refresh token (exchange again).
        let wrongType = state.withLock { $0.rpTest } == .tokenExchangeWrongIssuedType
        var body: JOSEObject = [
            "access_token": .string(token),
            "issued_token_type": .string(wrongType ? Self.idTokenType : Self.accessTokenType),
            "token_type": .string(key == nil ? "Bearer" : "DPoP"), "expires_in": .integer(max(0, expiry - issued)),
            "scope": .string(scope.joined(separator: " ")),
        ]
        if scope.isEmpty { body["scope"] = nil }
        var response = HTTPServerResponse.json(200, JOSEValue.object(body).jsonData)
        response.headers.set("Pragma", "no-cache")
        return response
    }
}
