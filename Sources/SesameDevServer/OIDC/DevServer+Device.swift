import Foundation
import SesameJOSE
import SesameLoopback

/// The device authorization grant (RFC 8628): `/device_authorization` for the device, `/device` for the user.
extension DevServer {
    static let deviceCodeTTL: Int64 = 600
    static let deviceInterval: Int64 = 5

    func deviceAuthorization(_ request: HTTPServerRequest) -> HTTPServerResponse {
        let parameters: OAuthParameters
        switch OAuthParameters.of(request, fromBody: true) {
        case .success(let parsed): parameters = parsed
        case .failure(let failure): return Self.oauthError(failure)
        }
        guard Self.namesAClient(request, parameters) else {
            return Self.oauthError(OAuthFailure("invalid_client", "a registered client_id is required"))
        }
        let client: RegisteredClient
        switch authenticateClient(request, parameters, endpoint: "/device_authorization") {
        case .client(let authenticated): client = authenticated
        case .refused(let refusal): return refusal
        }
        let clientID = client.id
        guard client.allows(Self.deviceGrantType) else {
            return Self.oauthError(
                OAuthFailure("unauthorized_client", "the client \(clientID) is not registered for the device grant"))
        }
        let scope = (parameters["scope"] ?? "openid").split(separator: " ").map(String.init)
        if let unknown = scope.first(where: { !AuthorizationRequest.supportedScopes.contains($0) }) {
            return Self.oauthError(OAuthFailure("invalid_scope", "the scope \(unknown) is not supported"))
        }
        if scope.contains(Self.deviceSSOScope) {
            // Native SSO shares a sign-in between apps on one device; the device flow signs in another device.
            return Self.oauthError(OAuthFailure("invalid_scope", "device_sso is for the authorization code flow"))
        }
        guard
            let (deviceCode, userCode) = try? store.storeDevice(
                clientID: clientID, scope: scope, ttl: Self.deviceCodeTTL, interval: Self.deviceInterval, now: now)
        else { return Self.error(500, "server_error", "the device code could not be stored") }
        let verification = state.withLock { $0.issuer } + "/device"
        let body: JOSEValue = [
            "device_code": .string(deviceCode), "user_code": .string(userCode),
            "verification_uri": .string(verification),
            "verification_uri_complete": .string(verification + "?user_code=" + userCode),
            "expires_in": .integer(Self.deviceCodeTTL), "interval": .integer(Self.deviceInterval),
        ]
        return .json(200, body.jsonData)
    }

    func devicePage(_ request: HTTPServerRequest) -> HTTPServerResponse {
        let code = request.queryParameters["user_code"]
        return devicePage(request, userCode: code, message: nil, isError: false, status: 200)
    }

    private func devicePage(
        _ request: HTTPServerRequest, userCode: String?, message: String?, isError: Bool, status: Int
    ) -> HTTPServerResponse {
        let csrf = csrfCookie(for: request)
        let session = browserSession(request)
        var response = SignInPage.response(
            status,
            SignInPage.device(
                userCode: userCode, signedInAs: session.map { $0.user.email ?? $0.user.id },
                hidden: [("csrf", csrfToken(cookie: csrf.value, purpose: "device"))], message: message,
                isError: isError))
        for set in csrf.setCookie { response.headers.add("Set-Cookie", set) }
        return response
    }

    func deviceSubmission(_ request: HTTPServerRequest) -> HTTPServerResponse {
        guard case .success(let parameters) = OAuthParameters.of(request, fromBody: true) else {
            return SignInPage.error(OAuthFailure("invalid_request", "send the form"))
        }
        let typed = parameters["user_code"] ?? ""
        guard checkCSRF(request, token: parameters.values["csrf"], purpose: "device") else {
            return devicePage(
                request, userCode: typed, message: "This form has expired. Enter the code again.", isError: true,
                status: 403)
        }
        // RFC 8628 §5.1: user codes are short, so wrong guesses are limited: 5 a minute per account. Who answers
        // signs in before any code is looked up, so one guesser's limit is nobody else's. (Not per browser: a
        // neighbour on another loopback port can plant its own CSRF cookie in a victim's browser and use up that
        // cookie's budget.)
        let time = now
        func tooManyCodes() -> HTTPServerResponse {
            var page = devicePage(
                request, userCode: typed, message: "Too many wrong codes. Wait a minute, then try again.",
                isError: true, status: 429)
            page.headers.set("Retry-After", "60")
            return page
        }
        // Whoever answers (approve or deny) signs in first, on the first step (a remembered browser's session or the
        // password); the second step, the decision, takes only the ticket the first one put in its page — never a
        // session alone, so no other page can decide for the user (RFC 8628 §5.4).
        var setSession: [String] = []
        var setKnown: [String] = []
        let user: DevStore.User
        let authTime: Int64
        let confirmed = parameters.values["confirmed"] == "1"
        if confirmed {
            guard let ticketed = deviceTicketUser(request, parameters, userCode: typed) else {
                return devicePage(
                    request, userCode: typed, message: "This confirmation has expired. Enter the code again.",
                    isError: true, status: 403)
            }
            (user, authTime) = ticketed
        } else if let session = browserSession(request) {
            (user, authTime) = (session.user, session.authTime)
        } else {
            let email = Self.normalize(email: parameters.values["email"] ?? "")
            switch checkPassword(email: email, password: parameters.values["password"] ?? "", request: request) {
            case .user(let found):
                (user, authTime) = (found, now)
                setKnown = knownBrowserCookie(for: email)
            case .wrong:
                return devicePage(
                    request, userCode: typed, message: "The email or password is wrong. Try again.", isError: true,
                    status: 200)
            case .backOff(let seconds):
                var page = devicePage(
                    request, userCode: typed,
                    message: "Too many wrong passwords for this account. Wait \(seconds) s, then try again.",
                    isError: true, status: 429)
                page.headers.set("Retry-After", String(seconds))
                return page
            }
            setSession = newBrowserSession(user, authTime: authTime) ?? []
        }
        let account = "account " + user.id
        if state.withLock({ $0.deviceCodeFailures.isOver(account, now: time) }) { return tooManyCodes() }
        guard let pending = try? store.pendingDevice(userCode: typed, now: now) else {
            state.withLock { $0.deviceCodeFailures.record(account, now: time) }
            return devicePage(
                request, userCode: typed, message: "That code is not valid or has expired.", isError: true,
                status: 200)
        }
        var response: HTTPServerResponse
        if !confirmed {
            // RFC 8628 §5.4 (remote phishing): say which client asks for what, and decide on a second step.
            response = SignInPage.response(
                200,
                SignInPage.deviceConfirmation(
                    userCode: DevStore.canonicalUserCode(typed), clientID: pending.clientID, scope: pending.scope,
                    signedInAs: user.email ?? user.id,
                    hidden: [
                        ("csrf", csrfToken(cookie: csrfCookie(for: request).value, purpose: "device")),
                        ("user_code", DevStore.canonicalUserCode(typed)), ("confirmed", "1"),
                    ] + deviceTicket(request, user: user, authTime: authTime, userCode: typed)))
        } else if parameters.values["action"] == "deny" {
            _ = try? store.decideDevice(userCode: typed, userID: nil, authTime: now, now: now)
            response = SignInPage.response(
                200, SignInPage.message(title: "Request denied", text: "The device was not connected."))
        } else if parameters.values["action"] == "approve",
            (try? store.decideDevice(userCode: typed, userID: user.id, authTime: authTime, now: now)) == true
        {
            response = SignInPage.response(
                200, SignInPage.message(title: "Device connected", text: "You can return to your device."))
        } else {
            return devicePage(
                request, userCode: typed, message: "That code is not valid or has expired.", isError: true,
                status: 200)
        }
        for set in setSession + setKnown { response.headers.add("Set-Cookie", set) }
        return response
    }

    /// How long the confirmation step may take after signing in on the device page.
    static let deviceTicketTTL: Int64 = 300

    /// The confirmation's proof that `user` signed in on this browser's device page for this code a moment ago (no
    /// browser session needed): the user, the sign-in time and an expiry, MACed with the browser's CSRF cookie.
    private func deviceTicket(_ request: HTTPServerRequest, user: DevStore.User, authTime: Int64, userCode: String)
        -> [(String, String)]
    {
        let fields = [user.id, String(authTime), String(now + Self.deviceTicketTTL)]
        let mac = csrfToken(
            cookie: csrfCookie(for: request).value,
            purpose: (["device-ticket", DevStore.canonicalUserCode(userCode)] + fields).joined(separator: "\n"))
        return [
            ("ticket_user", fields[0]), ("ticket_auth_time", fields[1]), ("ticket_expiry", fields[2]), ("ticket", mac),
        ]
    }

    /// The user and sign-in time of a valid ticket for this code and this browser, unexpired; nil otherwise.
    private func deviceTicketUser(_ request: HTTPServerRequest, _ parameters: OAuthParameters, userCode: String)
        -> (DevStore.User, Int64)?
    {
        guard let userID = parameters["ticket_user"], let authText = parameters["ticket_auth_time"],
            let expiryText = parameters["ticket_expiry"], let authTime = Int64(authText),
            let expiry = Int64(expiryText), now < expiry,
            checkCSRF(
                request, token: parameters["ticket"],
                purpose: ["device-ticket", DevStore.canonicalUserCode(userCode), userID, authText, expiryText]
                    .joined(separator: "\n")),
            let user = try? store.user(id: userID)
        else { return nil }
        return (user, authTime)
    }

}
