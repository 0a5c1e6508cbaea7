import Foundation
import SesameJOSE
import SesameLoopback

/// `/userinfo` (OIDC Core §5.3), `/revoke` (RFC 7009) and `/end-session` (RP-Initiated Logout 1.0).
extension DevServer {
    /// The grant of a valid OIDC access token, with its claims; nil for an invalid, expired or revoked one.
    ///
    /// A token verified once is remembered (by its exact text) until it expires, so a client calling UserInfo in
    /// a loop costs a lookup, not a signature verification; expiry and the grant's revocation are still checked on
    /// every call.
    func oidcAccess(_ token: String) -> (grant: DevStore.Grant, claims: JWTClaims)? {
        let time = currentDate
        var claims = verifiedAccessTokens.withLock { cache -> JWTClaims? in
            guard let entry = cache[token] else { return nil }
            guard entry.expiresAt > time else {
                cache[token] = nil
                return nil
            }
            return entry.claims
        }
        if claims == nil {
            guard let verifier = state.withLock({ $0.accessVerifier }),
                let verified = try? verifier.verifiedClaims(of: token, now: time), let expiry = verified.expiresAt
            else { return nil }
            verifiedAccessTokens.withLock { cache in
                if cache.count >= 10_000 { cache.removeAll(keepingCapacity: true) }
                cache[token] = (verified, expiry)
            }
            claims = verified
        }
        guard let claims, let grantID = claims["gid"]?.stringValue, let grant = try? store.activeGrant(id: grantID),
            claims.subject.map({ $0.utf8.elementsEqual(grant.user.id.utf8) }) == true
        else { return nil }
        if isRevoked(claims) { return nil }
        return (grant, claims)
    }

    /// Lists an access token's `jti` as revoked until `expiry` (expired entries pruned as the list grows); false
    /// when the list is full (100,000).
    func rememberRevoked(jti: String, until expiry: Date) -> Bool {
        let now = self.now
        return revokedAccessTokens.withLock { revoked -> Bool in
            if revoked.count >= 10_000 { revoked = revoked.filter { $0.value > now } }
            guard revoked.count < 100_000 else { return false }
            revoked[jti] = Int64(expiry.timeIntervalSince1970)
            return true
        }
    }

    /// Whether this access token was revoked by itself (`/revoke` with it); every route that takes tokens asks.
    func isRevoked(_ claims: JWTClaims) -> Bool {
        guard let jti = claims["jti"]?.stringValue else { return false }
        return revokedAccessTokens.withLock { $0[jti] != nil }
    }

    func userInfo(_ request: HTTPServerRequest) -> HTTPServerResponse {
        // RFC 6750 §2.2: a POST may carry the token as `access_token` in a form body instead of the header — one
        // way only (§2: more than one is invalid_request).
        var formToken: String?
        if request.method == "POST", let form = request.formParameters, form["access_token"] != nil {
            guard case .success(let parameters) = OAuthParameters.of(request, fromBody: true),
                let token = parameters["access_token"]
            else { return Self.oauthError(OAuthFailure("invalid_request", "the access_token field is malformed")) }
            guard request.headers["Authorization"] == nil else {
                return Self.oauthError(
                    OAuthFailure("invalid_request", "send the access token in the header or in the body, not both"))
            }
            formToken = token
        }
        guard request.headers["Authorization"] != nil || formToken != nil else {
            var response = Self.oauthError(OAuthFailure("invalid_request", "send the access token", status: 401))
            response.headers.set("WWW-Authenticate", "Bearer realm=\"sesame\"")
            return response
        }
        guard let (token, scheme) = formToken.map({ ($0, "Bearer") }) ?? Self.presentedToken(request),
            let (grant, claims) = oidcAccess(token)
        else {
            return Self.invalidToken("the access token is invalid, expired or revoked")
        }
        if let refusal = checkBinding(request, claims: claims, token: token, scheme: scheme, path: "/userinfo") {
            return refusal
        }
        let scope = (claims["scope"]?.stringValue ?? "").split(separator: " ").map(String.init)
        guard scope.contains("openid") else {
            var response = Self.oauthError(
                OAuthFailure("insufficient_scope", "UserInfo needs the openid scope", status: 403))
            response.headers.set("WWW-Authenticate", "Bearer error=\"insufficient_scope\", scope=\"openid\"")
            return response
        }
        let mode = state.withLock { $0.rpTest }
        var info = userInfoClaims(for: grant, scope: scope)
        info["sub"] = .string(mode == .userInfoInvalidSubject ? grant.user.id + "-invalid" : grant.user.id)
        var response = HTTPServerResponse.json(200, JOSEValue.object(info).jsonData)
        response.headers.set("Cache-Control", "no-store")
        return response
    }

    func revoke(_ request: HTTPServerRequest) -> HTTPServerResponse {
        let parameters: OAuthParameters
        switch OAuthParameters.of(request, fromBody: true) {
        case .success(let parsed): parameters = parsed
        case .failure(let failure): return Self.oauthError(failure)
        }
        guard Self.namesAClient(request, parameters) else {
            return Self.oauthError(OAuthFailure("invalid_client", "a registered client_id is required"))
        }
        let clientID: String
        switch authenticateClient(request, parameters, endpoint: "/revoke") {
        case .client(let client): clientID = client.id
        case .refused(let refusal): return refusal
        }
        guard let token = parameters["token"] else {
            return Self.oauthError(OAuthFailure("invalid_request", "token is required"))
        }
        do {
            // A token of another client is left alone, and answered like an unknown one (RFC 7009 §2.2).
            if let (grantID, owner) = try store.grantID(ofRefreshToken: token) {
                if owner.map({ $0.utf8.elementsEqual(clientID.utf8) }) == true { try store.revokeGrant(id: grantID) }
            } else if let (grant, claims) = oidcAccess(token), grant.clientID.utf8.elementsEqual(clientID.utf8),
                let jti = claims["jti"]?.stringValue, let expiry = claims.expiresAt
            {
                // An access token revokes that token only: ending the grant takes its refresh token. (A DPoP-bound
                // access token needs no proof here, so whoever holds a copy must not be able to end the session.)
                let kept = rememberRevoked(jti: jti, until: expiry)
                // A full list never refuses a revocation: the token's grant ends instead (the stricter answer).
                if !kept { try store.revokeGrant(id: grant.id) }
            } else if !revokeServiceToken(token, clientID: clientID) {
                // A Native SSO device secret ends its device session: every app's grant from it (NSSO-04).
                _ = try revokeDeviceSecret(token, clientID: clientID)
            }
        } catch {
            return Self.error(503, "temporarily_unavailable", "the token could not be revoked; try again")
        }
        state.withLock { $0.counters.revocations += 1 }
        var response = HTTPServerResponse(status: 200)
        response.headers.set("Cache-Control", "no-store")
        return response
    }

    /// Answers `GET|POST /end-session` (RP-Initiated Logout 1.0).
    ///
    /// With a valid `id_token_hint` the browser session ends at once; without one the user confirms first (a
    /// forged link must not sign anyone out). Only a registered `post_logout_redirect_uri` is followed.
    static let logoutHeading = "This sign-out request cannot be completed"

    /// An ID token this issuer signed, expired or not (RP-Initiated Logout §2, OIDC Core §3.1.2.1 `id_token_hint`).
    func verifiedHint(_ hint: String) -> JWTClaims? {
        var policy = ClaimValidationPolicy(issuer: state.withLock { $0.issuer }, requiredClaims: ["sub", "aud"])
        policy.leeway = 10 * 365 * 86400
        guard let keys = try? JWKSet(keys: publishedKeys()) else { return nil }
        return try? JWTVerifier(keys: keys, policy: policy).verifiedClaims(of: hint, now: currentDate)
    }

    func endSession(_ request: HTTPServerRequest) -> HTTPServerResponse {
        let parsed = OAuthParameters.of(request, fromBody: request.method == "POST")
        guard case .success(let parameters) = parsed else {
            if case .failure(let failure) = parsed { return SignInPage.error(failure, heading: Self.logoutHeading) }
            return SignInPage.error(
                OAuthFailure("invalid_request", "unreadable parameters"), heading: Self.logoutHeading)
        }
        var clientID = parameters["client_id"]
        var hinted = false
        var hintClaims: JWTClaims?
        if let hint = parameters["id_token_hint"] {
            guard let claims = verifiedHint(hint), let audience = claims.audience, audience.count == 1 else {
                return SignInPage.error(
                    OAuthFailure("invalid_request", "the id_token_hint is not an ID token of this issuer"),
                    heading: Self.logoutHeading)
            }
            if let clientID, !clientID.utf8.elementsEqual(audience[0].utf8) {
                return SignInPage.error(
                    OAuthFailure("invalid_request", "client_id does not match the id_token_hint"),
                    heading: Self.logoutHeading)
            }
            clientID = audience[0]
            hintClaims = claims
            // Someone else's ID token is no reason to end this browser's session without asking.
            let session = browserSession(request)
            hinted =
                session.map { session in claims.subject.map { ByteExact.equals($0, session.user.id) } ?? false } ?? true
        }
        var target: String?
        if let uri = parameters["post_logout_redirect_uri"] {
            guard let clientID, let client = clients[clientID] else {
                return SignInPage.error(
                    OAuthFailure(
                        "invalid_request",
                        "a post_logout_redirect_uri needs the client: send id_token_hint or client_id"),
                    heading: Self.logoutHeading)
            }
            guard client.accepts(postLogoutRedirectURI: uri) else {
                return SignInPage.error(
                    OAuthFailure(
                        "invalid_request",
                        "the post_logout_redirect_uri \(PrintableTextForPage.short(uri)) is not registered for \(clientID)"
                    ),
                    heading: Self.logoutHeading)
            }
            target = parameters["state"].map { AuthorizationRequest.redirect(uri, adding: [("state", $0)]) } ?? uri
        }
        let confirmed =
            request.method == "POST" && checkCSRF(request, token: parameters.values["csrf"], purpose: "end-session")
        guard hinted || confirmed else {
            let who = browserSession(request).map { "You are signed in as \($0.user.email ?? $0.user.id). " } ?? ""
            let csrf = csrfCookie(for: request)
            let hidden =
                parameters.values.filter { $0.key != "csrf" }.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
                + [("csrf", csrfToken(cookie: csrf.value, purpose: "end-session"))]
            var response = SignInPage.response(
                200,
                SignInPage.page(
                    title: "Sign out",
                    body: """
                        <h1>Sign out?</h1>
                        <p>\(SignInPage.escape(who))You will be signed out of the Sesame dev server in this browser. To stay signed in, close this page.</p>
                        <form method="post" action="end-session">
                        \(SignInPage.hiddenFields(hidden))
                        <div class="row"><button type="submit" id="sign-out">Sign out</button></div>
                        </form>
                        """))
            for set in csrf.setCookie { response.headers.add("Set-Cookie", set) }
            return response
        }
        if let token = cookie(Self.sessionCookie, in: request) { try? store.deleteSession(token) }
        // An ID token of a Native SSO device session ends that session in every app (NSSO-04).
        if let hintClaims { endDeviceSession(named: hintClaims) }
        state.withLock { $0.counters.endSessions += 1 }
        var response: HTTPServerResponse
        if let target {
            response = HTTPServerResponse(status: request.method == "POST" ? 303 : 302)
            response.headers.set("Location", target)
        } else {
            response = SignInPage.response(
                200, SignInPage.message(title: "Signed out", text: "You can close this page."))
        }
        for set in setCookie(Self.sessionCookie, "", maxAge: 0) { response.headers.add("Set-Cookie", set) }
        response.headers.set("Cache-Control", "no-store")
        return response
    }
}
