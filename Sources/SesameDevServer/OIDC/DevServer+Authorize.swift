import Foundation
import SesameJOSE
import SesameLoopback

/// `/authorize` (with its sign-in form and consent page) and `/par` (OIDC Core §3.1.2, RFC 9126, RFC 9207).
extension DevServer {
    /// Fields of the sign-in form that are not part of the authorization request.
    static let formFields: Set<String> = [
        "email", "password", "csrf", "sign_in_as", "claims", "action", "consent", "consent_expiry", "otp", "ticket",
        "second_step",
    ]
    /// Claims the dev panel may not set: the protocol's own.
    static let protocolClaims: Set<String> = [
        "iss", "sub", "aud", "azp", "exp", "iat", "nbf", "auth_time", "nonce", "at_hash", "c_hash", "jti", "sid",
        "ds_hash", "cnf",
    ]
    /// Authorization codes live one minute (RFC 6749 §4.1.2 recommends at most ten).
    static let codeTTL: Int64 = 60

    // MARK: /authorize

    /// `GET /authorize` (and a `POST` of the same parameters, OIDC Core §3.1.2.1; a `POST` with a CSRF token is
    /// the sign-in form).
    func authorize(_ request: HTTPServerRequest) -> HTTPServerResponse {
        let parsed = OAuthParameters.of(request, fromBody: request.method == "POST")
        guard case .success(var parameters) = parsed else {
            if case .failure(let failure) = parsed { return SignInPage.error(failure) }
            return SignInPage.error(OAuthFailure("invalid_request", "unreadable parameters"))
        }
        if request.method == "POST", parameters.values["csrf"] != nil {
            if parameters.values["second_step"] == "1" {
                switch formRequest(parameters) {
                case .success(let valid): return secondStepSubmission(request, valid, parameters)
                case .failure(let rejection): return reject(rejection)
                }
            }
            return parameters.values["consent"] == "1"
                ? consentSubmission(request, parameters) : signInSubmission(request, parameters)
        }
        if let requestURI = parameters["request_uri"] {
            guard let clientID = parameters["client_id"] else {
                return SignInPage.error(OAuthFailure("invalid_request", "client_id is required with request_uri"))
            }
            guard let stored = try? store.takePushed(requestURI, clientID: clientID, now: now),
                case .success(let pushed) = OAuthParameters.parse(stored)
            else {
                return SignInPage.error(
                    OAuthFailure("invalid_request_uri", "the request_uri is unknown, expired or already used"))
            }
            parameters = pushed
        }
        let authorization: AuthorizationRequest
        switch AuthorizationRequest.validate(parameters, clients: clients) {
        case .success(let valid): authorization = valid
        case .failure(let rejection): return reject(rejection)
        }
        if authorization.scope.contains(Self.deviceSSOScope), clients[authorization.clientID]?.nativeSSOGroup == nil {
            return redirect(
                authorization,
                error: OAuthFailure(
                    "invalid_scope",
                    "device_sso needs a client in a Native SSO group (native_sso_group); \(authorization.clientID) is in none"
                ))
        }
        var session = browserSession(request)
        // id_token_hint (OIDC Core §3.1.2.1): an ID token of this issuer; a session of another user is no session
        // for this request.
        if let hint = parameters["id_token_hint"] {
            guard let claims = verifiedHint(hint), let subject = claims.subject else {
                return redirect(
                    authorization,
                    error: OAuthFailure("invalid_request", "the id_token_hint is not an ID token of this issuer"))
            }
            if let current = session, !ByteExact.equals(subject, current.user.id) { session = nil }
        }
        // A stronger sign-in than a password never comes from a session: the second step is asked every time.
        let stepUp = !ByteExact.equals(wantedACR(authorization), Self.passwordACR)
        if stepUp { session = nil }
        let fresh =
            session.map { session in
                // Whole seconds understate the time since sign-in by up to one: only a sign-in strictly younger
                // than max_age is fresh, so max_age=1 a second and a half later always asks again (§3.1.2.1).
                authorization.maxAge.map { now - session.authTime < $0 } ?? true
            } ?? false
        // RFC 8252 §8.6: a code that any local program might receive never goes out on a session alone.
        let loopback =
            !AuthorizationRequest.reachesOnlyItsClient(authorization.redirectURI)
            || clients[authorization.clientID]?.requiresConsent == true
        if authorization.prompt.contains("none") {
            guard let session, fresh else {
                if stepUp {
                    return redirect(
                        authorization,
                        error: OAuthFailure("interaction_required", "the acr asked for needs the user's second step"))
                }
                let why =
                    configuration.rememberBrowser
                    ? "no signed-in browser session"
                    : "this server keeps no browser sessions (start it with --remember-browser to keep them)"
                return redirect(authorization, error: OAuthFailure("login_required", why))
            }
            if loopback {
                return redirect(
                    authorization,
                    error: OAuthFailure("consent_required", "this redirect URI needs the user's consent"))
            }
            return issueCode(authorization, user: session.user, authTime: session.authTime, claims: nil, status: 302)
        }
        if let session, fresh, authorization.prompt.isDisjoint(with: ["login", "select_account", "consent"]) {
            if loopback { return consentPage(request, authorization, session: session) }
            return issueCode(authorization, user: session.user, authTime: session.authTime, claims: nil, status: 302)
        }
        return signInForm(request, authorization, email: authorization.loginHint, error: nil)
    }

    /// "Continue as USER?" for a browser session and a loopback redirect: names the client, the user and the port.
    private func consentPage(
        _ request: HTTPServerRequest, _ authorization: AuthorizationRequest,
        session: (user: DevStore.User, authTime: Int64, token: String)
    ) -> HTTPServerResponse {
        let csrf = csrfCookie(for: request)
        // Good for ten minutes, for this session and this request only.
        let expiry = String(now + 600)
        let token = csrfToken(
            cookie: csrf.value + "\n" + session.token, purpose: "consent\n\(expiry)\n" + authorization.encoded)
        var response = SignInPage.response(
            200,
            SignInPage.consent(
                clientID: authorization.clientID, scope: authorization.scope,
                signedInAs: session.user.email ?? session.user.id,
                destination: AuthorizationRequest.destination(authorization.redirectURI),
                hidden: authorization.hiddenPairs + [("csrf", token), ("consent", "1"), ("consent_expiry", expiry)],
                claims: authorization.claimNames))
        for set in csrf.setCookie { response.headers.add("Set-Cookie", set) }
        return response
    }

    /// The authorization request a form carries (its fields less the form's own), validated again.
    private func formRequest(_ parameters: OAuthParameters) -> Result<AuthorizationRequest, AuthorizationRejection> {
        var values = parameters.values.filter { !Self.formFields.contains($0.key) }
        values["claims"] = values.removeValue(forKey: "request_claims")
        return AuthorizationRequest.validate(OAuthParameters(values: values), clients: clients)
    }

    /// The consent page's `POST`: the same session, a CSRF token made for it and this request, then a code.
    private func consentSubmission(_ request: HTTPServerRequest, _ parameters: OAuthParameters) -> HTTPServerResponse {
        let authorization: AuthorizationRequest
        switch formRequest(parameters) {
        case .success(let valid): authorization = valid
        case .failure(let rejection): return reject(rejection)
        }
        let expiry = parameters.values["consent_expiry"] ?? ""
        guard let session = browserSession(request), let until = Int64(expiry), now < until,
            checkCSRF(
                request, token: parameters.values["csrf"], purpose: "consent\n\(expiry)\n" + authorization.encoded,
                session: session.token)
        else {
            return SignInPage.expiredForm()
        }
        if parameters.values["action"] != "continue" {
            return redirect(authorization, error: OAuthFailure("access_denied", "the user did not continue"))
        }
        return issueCode(authorization, user: session.user, authTime: session.authTime, claims: nil, status: 303)
    }

    func signInForm(_ request: HTTPServerRequest, _ authorization: AuthorizationRequest, email: String?, error: String?)
        -> HTTPServerResponse
    {
        let csrf = csrfCookie(for: request)
        let hidden =
            authorization.hiddenPairs + [("csrf", csrfToken(cookie: csrf.value, purpose: authorization.encoded))]
        var devUsers: [(id: String, label: String)]?
        if configuration.devEndpoints {
            devUsers = ((try? store.users(limit: 20)) ?? []).map { ($0.id, $0.email ?? $0.id) }
        }
        var response = SignInPage.response(
            200,
            SignInPage.signIn(
                clientID: authorization.clientID, scope: authorization.scope, hidden: hidden, email: email,
                error: error, devUsers: devUsers,
                destination: AuthorizationRequest.reachesOnlyItsClient(authorization.redirectURI)
                    ? nil : AuthorizationRequest.destination(authorization.redirectURI),
                claims: authorization.claimNames))
        for set in csrf.setCookie { response.headers.add("Set-Cookie", set) }
        return response
    }

    /// The sign-in form's `POST`: CSRF, then the request again, then the credentials (or the dev panel's choice).
    private func signInSubmission(_ request: HTTPServerRequest, _ parameters: OAuthParameters) -> HTTPServerResponse {
        let authorization: AuthorizationRequest
        switch formRequest(parameters) {
        case .success(let valid): authorization = valid
        case .failure(let rejection): return reject(rejection)
        }
        guard checkCSRF(request, token: parameters.values["csrf"], purpose: authorization.encoded) else {
            return SignInPage.expiredForm()
        }
        if parameters.values["action"] == "cancel" {
            return redirect(authorization, error: OAuthFailure("access_denied", "the user cancelled the sign-in"))
        }
        var claims: String?
        var setKnown: [String] = []
        let user: DevStore.User
        if let chosen = parameters["sign_in_as"], configuration.devEndpoints {
            if let text = parameters["claims"], !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
                guard let object = try? JOSEValue.parse(Data(text.utf8)).objectValue else {
                    return signInForm(
                        request, authorization, email: nil, error: "The extra claims must be a JSON object.")
                }
                let kept = object.filter { !Self.reservedClaims.contains($0.name) }
                var filtered = JOSEObject()
                for member in kept { filtered[member.name] = member.value }
                claims = JOSEValue.object(filtered).jsonString
            }
            guard let found = try? store.user(id: chosen) else {
                return signInForm(request, authorization, email: nil, error: "That user does not exist.")
            }
            user = found
        } else {
            let email = Self.normalize(email: parameters.values["email"] ?? "")
            switch checkPassword(email: email, password: parameters.values["password"] ?? "", request: request) {
            case .user(let found):
                user = found
                setKnown = knownBrowserCookie(for: email)
            case .wrong:
                return signInForm(
                    request, authorization, email: parameters.values["email"],
                    error: "The email or password is wrong. Try again.")
            case .backOff(let seconds):
                var page = signInForm(
                    request, authorization, email: parameters.values["email"],
                    error: "Too many wrong passwords for this account. Wait \(seconds) s, then try again.")
                page.status = 429
                page.headers.set("Retry-After", String(seconds))
                return page
            }
        }
        let authTime = now
        guard let setSession = newBrowserSession(user, authTime: authTime) else {
            return Self.error(500, "server_error", "the session could not be stored")
        }
        state.withLock { $0.counters.logins += 1 }
        // A password is not enough for a stronger acr: the second step first (the dev panel skips it).
        let devPanel = parameters["sign_in_as"] != nil && configuration.devEndpoints
        if !devPanel, !ByteExact.equals(wantedACR(authorization), Self.passwordACR) {
            var page = secondStepPage(request, authorization, user: user, authTime: authTime)
            for set in setSession + setKnown { page.headers.add("Set-Cookie", set) }
            return page
        }
        var response = issueCode(authorization, user: user, authTime: authTime, claims: claims, status: 303)
        for set in setSession + setKnown { response.headers.add("Set-Cookie", set) }
        return response
    }

    /// Redirects with a new code, `state` and `iss`.
    func issueCode(
        _ authorization: AuthorizationRequest, user: DevStore.User, authTime: Int64, claims: String?, status: Int,
        acr: String = DevServer.passwordACR
    ) -> HTTPServerResponse {
        // OIDC Core §5.5.1: a `sub` asked for with a value is that user or nobody; an essential `acr` this sign-in
        // does not meet fails the authentication (§5.5.1.1).
        let requested = authorization.claimsRequest.idToken
        if let entry = requested["sub"], !ClaimsRequest.satisfies(.string(user.id), entry) {
            return redirect(
                authorization, error: OAuthFailure("access_denied", "the signed-in user is not the sub asked for"))
        }
        if let entry = requested["acr"], entry.essential, !ClaimsRequest.satisfies(.string(acr), entry) {
            return redirect(
                authorization,
                error: OAuthFailure("access_denied", "this sign-in cannot meet the essential acr asked for"))
        }
        guard
            let code = try? store.storeCode(
                authorization, userID: user.id, authTime: authTime, claims: claims, ttl: Self.codeTTL, now: now,
                acr: acr)
        else { return Self.error(500, "server_error", "the code could not be stored") }
        return redirect(authorization, pairs: [("code", code)], status: status)
    }

    /// The redirect to the client with `pairs`, `state` and `iss` (RFC 9207), altered as an RP test mode says.
    func redirect(_ authorization: AuthorizationRequest, pairs: [(String, String)], status: Int = 302)
        -> HTTPServerResponse
    {
        let (issuer, mode) = state.withLock { ($0.issuer, $0.rpTest) }
        var all = pairs
        var state = authorization.state
        if mode == .invalidState { state = (state ?? "") + "-invalid" }
        if let state { all.append(("state", state)) }
        switch mode {
        case .invalidAuthorizationResponseIssuer: all.append(("iss", issuer + "/invalid"))
        case .removedAuthorizationResponseIssuer: break
        default: all.append(("iss", issuer))
        }
        if authorization.responseMode == "form_post" {
            return SignInPage.formPost(to: authorization.redirectURI, fields: all)
        }
        var response = HTTPServerResponse(status: status)
        response.headers.set("Location", AuthorizationRequest.redirect(authorization.redirectURI, adding: all))
        response.headers.set("Cache-Control", "no-store")
        response.headers.set("Referrer-Policy", "no-referrer")
        return response
    }

    func redirect(_ authorization: AuthorizationRequest, error: OAuthFailure) -> HTTPServerResponse {
        redirect(authorization, pairs: [("error", error.code), ("error_description", error.description)])
    }

    /// A refused request: redirected when client and redirect URI are known good, else shown.
    func reject(_ rejection: AuthorizationRejection) -> HTTPServerResponse {
        guard let uri = rejection.redirectURI else { return SignInPage.error(rejection.failure) }
        let issuer = state.withLock { $0.issuer }
        var pairs = [("error", rejection.failure.code), ("error_description", rejection.failure.description)]
        if let state = rejection.state { pairs.append(("state", state)) }
        pairs.append(("iss", issuer))
        if rejection.formPost { return SignInPage.formPost(to: uri, fields: pairs) }
        var response = HTTPServerResponse(status: 302)
        response.headers.set("Location", AuthorizationRequest.redirect(uri, adding: pairs))
        response.headers.set("Cache-Control", "no-store")
        return response
    }

    // MARK: /par (RFC 9126)

    func pushAuthorizationRequest(_ request: HTTPServerRequest) -> HTTPServerResponse {
        let parameters: OAuthParameters
        switch OAuthParameters.of(request, fromBody: true) {
        case .success(let parsed): parameters = parsed
        case .failure(let failure): return Self.oauthError(failure)
        }
        guard parameters["request_uri"] == nil else {
            return Self.oauthError(OAuthFailure("invalid_request", "request_uri cannot be pushed"))
        }
        // A confidential client authenticates here too (RFC 9126 §2); a public one sends its client_id.
        if case .refused(let refusal) = authenticateClient(request, parameters, endpoint: "/par") { return refusal }
        switch AuthorizationRequest.validate(parameters, clients: clients) {
        case .failure(let rejection): return Self.oauthError(rejection.failure)
        case .success(var authorization):
            // A proof at PAR binds the code to its key when dpop_jkt was not given (RFC 9449 §10.1).
            switch dpopProof(request, path: "/par", accessToken: nil) {
            case .absent: break
            case .refused(let response): return response
            case .valid(let thumbprint):
                if let stated = authorization.dpopJKT, !ByteExact.equals(stated, thumbprint) {
                    return Self.oauthError(OAuthFailure("invalid_dpop_proof", "dpop_jkt is not the proof's key"))
                }
                authorization.dpopJKT = thumbprint
            }
            guard let uri = try? store.storePushed(authorization, ttl: 60, now: now) else {
                return Self.error(500, "server_error", "the request could not be stored")
            }
            return .json(201, JOSEValue.object(["request_uri": .string(uri), "expires_in": 60]).jsonData)
        }
    }

    /// `{"error","error_description"}` with the failure's status, `Cache-Control: no-store` (RFC 6749 §5.2).
    static func oauthError(_ failure: OAuthFailure) -> HTTPServerResponse {
        var response = HTTPServerResponse.json(
            failure.status,
            JOSEValue.object(["error": .string(failure.code), "error_description": .string(failure.description)])
                .jsonData)
        response.headers.set("Pragma", "no-cache")
        if failure.status == 401 {
            response.headers.set("WWW-Authenticate", "Bearer error=\"\(failure.code)\"")
        }
        return response
    }
}
