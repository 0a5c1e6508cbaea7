import Foundation
import SesameJOSE
import SesameLoopback

/// OpenID Connect Native SSO for Mobile Apps 1.0: a client of a ``RegisteredClient/nativeSSOGroup`` that asks for
/// `device_sso` gets a `device_secret` with its tokens and an ID token naming the device session (`sid`) and the
/// secret (`ds_hash`); another client of the group exchanges that ID token and secret (RFC 8693, Native SSO §4) for
/// tokens of its own, with no browser. Ending the device session — RP-initiated logout with one of its ID tokens,
/// or revoking the device secret — revokes every grant made from it, in every app.
extension DevServer {
    static let deviceSSOScope = "device_sso"
    static let idTokenType = "urn:ietf:params:oauth:token-type:id_token"
    /// The device secret's token type: the current draft's first, then Native SSO 1.0 ID1's.
    static let deviceSecretTypes = [
        "urn:openid:params:token-type:device-secret", "urn:x-oath:params:oauth:token-type:device-secret",
    ]

    /// At a code exchange whose scope has `device_sso`: a device session for the grant, and its secret for the
    /// response (NSSO-01).
    ///
    /// A `device_secret` the client sends with the code (Native SSO §3.3) of a live session of the same user and
    /// group is kept: the grant joins that session, so one sign-out still ends every app's.
    func startDeviceSession(for grant: DevStore.Grant, presented: String?, now issued: Int64) throws
        -> (grant: DevStore.Grant, secret: String)?
    {
        guard grant.scope.contains(Self.deviceSSOScope), let group = clients[grant.clientID]?.nativeSSOGroup else {
            return nil
        }
        if let presented, let existing = try store.deviceSession(secret: presented, now: issued),
            ByteExact.equals(existing.user.id, grant.user.id), ByteExact.equals(existing.group, group)
        {
            try store.attach(grantID: grant.id, toDeviceSession: existing.id)
            var attached = grant
            attached.deviceSession = existing.id
            return (attached, presented)
        }
        let (session, secret) = try store.createDeviceSession(
            userID: grant.user.id, group: group, authTime: grant.authTime, acr: grant.acr, scope: grant.scope,
            ttl: configuration.refreshTokenTTL, now: issued)
        try store.attach(grantID: grant.id, toDeviceSession: session.id)
        var attached = grant
        attached.deviceSession = session.id
        state.withLock { $0.counters.deviceSessions += 1 }
        return (attached, secret)
    }

    /// The Native SSO token exchange (§4.2, §4.3): the ID token as subject, the device secret as actor.
    func nativeSSOExchange(_ parameters: OAuthParameters, clientID: String, key: String?) throws -> HTTPServerResponse {
        func fail(_ code: String, _ why: String) -> HTTPServerResponse { Self.oauthError(OAuthFailure(code, why)) }
        guard let group = clients[clientID]?.nativeSSOGroup else {
            return fail("unauthorized_client", "the client \(clientID) is in no Native SSO group")
        }
        guard let idToken = parameters["subject_token"], let secret = parameters["actor_token"],
            let secretType = parameters["actor_token_type"],
            Self.deviceSecretTypes.contains(where: { ByteExact.equals($0, secretType) })
        else {
            return fail(
                "invalid_request",
                "Native SSO sends the ID token as subject_token and the device secret as actor_token, with actor_token_type \(Self.deviceSecretTypes[0])"
            )
        }
        if let requested = parameters["requested_token_type"], !ByteExact.equals(requested, Self.accessTokenType) {
            return fail(
                "invalid_request", "only access tokens are issued (requested_token_type \(Self.accessTokenType))")
        }
        let issuer = state.withLock { $0.issuer }
        if parameters["resource"] != nil || parameters["audience"].map({ !ByteExact.equals($0, issuer) }) == true {
            return fail("invalid_target", "a Native SSO exchange names this issuer as its audience, and no resource")
        }
        // NSSO-03: an ID token this issuer signed (expired or not: the device session is what must be live), naming
        // the device session and the secret; the secret's session; the same user; a sibling client.
        guard let claims = verifiedHint(idToken), let subject = claims.subject, let sid = claims["sid"]?.stringValue,
            let dsHash = claims["ds_hash"]?.stringValue, let audience = claims.audience, audience.count == 1
        else {
            return fail("invalid_grant", "the subject_token is not an ID token of this issuer with sid and ds_hash")
        }
        guard let session = try store.deviceSession(secret: secret, now: now) else {
            return fail("invalid_grant", "the device secret is unknown, or its device session has ended or expired")
        }
        guard ByteExact.equals(session.id, sid), ConstantTime.equals(Array(dsHash.utf8), Array(session.dsHash.utf8)),
            ByteExact.equals(session.user.id, subject)
        else {
            return fail(
                "invalid_grant", "the device secret does not belong to this ID token (another device or session)")
        }
        // Not this client's sign-in to share (another vendor's apps): refused as unauthorized, which says nothing
        // against the sign-in itself.
        guard ByteExact.equals(session.group, group), clients[audience[0]]?.nativeSSOGroup == group else {
            return fail(
                "unauthorized_client", "the shared sign-in belongs to another Native SSO group than \(clientID)'s")
        }
        // The second app's scope: what it asks for (openid at least), never more than the first sign-in granted.
        let scope = (parameters["scope"] ?? "openid").split(separator: " ").map(String.init)
        let granted = Set(session.scope)
        guard scope.contains("openid"), scope.allSatisfy({ granted.contains($0) }) else {
            return fail(
                "invalid_scope",
                "a shared sign-in gives at most its own scope (\(session.scope.joined(separator: " "))), with openid")
        }
        let issued = now
        guard
            let grantID = try store.createGrant(
                inDeviceSession: session.id, userID: session.user.id, clientID: clientID, scope: scope,
                authTime: session.authTime, acr: session.acr, now: issued)
        else { return fail("invalid_grant", "the device session has ended") }
        if let key { try store.bind(grantID: grantID, toKey: key) }
        guard let grant = try store.activeGrant(id: grantID) else { return fail("invalid_grant", "the grant is gone") }
        state.withLock { $0.counters.nativeSSOExchanges += 1 }
        return try tokenResponse(
            grant, scope: scope, nonce: nil, issuedAt: issued, refreshToken: nil, fromRefresh: false, key: key,
            extra: ["issued_token_type": .string(Self.accessTokenType)], nativeSSO: true)
    }

    /// Ends the device session an ID token names (RP-initiated logout, NSSO-04); nothing when it names none.
    func endDeviceSession(named claims: JWTClaims) {
        guard let sid = claims["sid"]?.stringValue, let session = try? store.deviceSession(id: sid),
            claims.subject.map({ ByteExact.equals($0, session.user.id) }) == true
        else { return }
        if (try? store.endDeviceSession(id: sid)) != nil { state.withLock { $0.counters.deviceSessionsEnded += 1 } }
    }

    /// Ends the device session whose secret is `secret` (`/revoke` with the device secret, NSSO-04) when
    /// `clientID` is of its group; whether it was one.
    func revokeDeviceSecret(_ secret: String, clientID: String) throws -> Bool {
        guard let session = try store.deviceSession(secret: secret, now: now) else { return false }
        guard let group = clients[clientID]?.nativeSSOGroup, ByteExact.equals(group, session.group) else { return true }
        try store.endDeviceSession(id: session.id)
        state.withLock { $0.counters.deviceSessionsEnded += 1 }
        return true
    }
}
