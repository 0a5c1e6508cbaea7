import Foundation
import SesameJOSE
import Synchronization

@testable import Sesame

/// The targets that read what a provider or a resource server answers.
extension Fixtures {
    static func discovery(_ bytes: [UInt8]) {
        let answer = FuzzResponse(bytes)
        _ = try? OIDCProviderMetadata(json: JOSEValue.parse(answer.body))
        blocking {
            guard
                let found = try? await OIDCProviderMetadata.discover(
                    issuer: url(issuer), transport: FuzzTransport(answer: answer))
            else { return }
            // OIDC Discovery §4.3: the document's issuer is the one asked for, byte for byte.
            require(found.issuer == issuer, "discovery accepted issuer \(String(describing: found.issuer))")
        }
    }

    /// The response with its `id_token` signed by the fixtures' key when the fuzzer wrote it as a JSON object.
    ///
    /// A `nonce` claim of `NONCE` becomes `nonce`, the request's, which the fuzzer cannot guess. The fuzzer cannot
    /// sign: without this nothing checked after an ID token's signature would be fuzzed.
    static func signingIDToken(_ answer: FuzzResponse, nonce: String?) -> FuzzResponse {
        guard let body = try? JOSEValue.parse(answer.body), case .object(var object) = body,
            case .object(var claims)? = object["id_token"]
        else { return answer }
        if claims["nonce"] == .string("NONCE"), let nonce { claims["nonce"] = .string(nonce) }
        guard let token = try? JWT.sign(JWTClaims(claims), key: signingKey, algorithm: .es256) else { return answer }
        object["id_token"] = .string(token)
        return FuzzResponse(
            status: answer.status, headers: answer.headers, body: Data(JOSEValue.object(object).jsonBytes))
    }

    /// What any accepted token response must give: a token of the type asked for (RFC 9449 §5: with a DPoP key, DPoP
    /// only, bound to that key), and an ID token from the provider for this client.
    static func checkAccepted(_ tokens: TokenSet, dpop: Bool, clock: TimeInterval) {
        require(!tokens.accessToken.isEmpty, "an empty access token was accepted")
        require(
            tokens.tokenType.lowercased() == (dpop ? "dpop" : "bearer"),
            "token type \(tokens.tokenType) accepted with DPoP \(dpop ? "on" : "off")")
        require(
            dpop ? tokens.dpopKeyThumbprint == dpopKey.thumbprint : tokens.dpopKeyThumbprint == nil,
            "the tokens' key binding does not match the client's key")
        // A refresh answered without an ID token keeps the one it had (validated when it came).
        guard let token = tokens.idToken, token != idToken else { return }
        let claims = try? JWT.unverifiedClaims(of: token)
        require(claims?.issuer.map { ByteExact.equals($0, issuer) } == true, "an ID token of another issuer")
        require(
            claims?.audience?.contains { ByteExact.equals($0, "fuzz-client") } == true,
            "an ID token for another client")
        require(claims?.subject?.isEmpty == false, "an ID token without a subject")
        // On the provider's clock (learned from its Date header, up to a day off), as the validator computes it.
        let time = now.addingTimeInterval(clock).timeIntervalSince1970
        require(
            claims?["exp"]?.doubleValue.map { !(time >= $0 + 60) } == true, "an ID token expired beyond the 60 s leeway"
        )
        require(
            claims?["iat"]?.doubleValue.map { !($0 > time + 60) } == true, "an ID token issued in the future")
    }

    /// The clock offset a taken token response leaves the provider with (OIDC-06), worked out here rather than read
    /// from the provider: its `Date` header's distance from now when that is over 5 s and at most a day, else 0.
    static func expectedClock(_ answer: FuzzResponse) -> TimeInterval {
        guard let header = answer.headers["Date"], let date = HTTPDate.parse(header, now: now) else { return 0 }
        let offset = date.timeIntervalSince(now)
        return abs(offset) > 5 && abs(offset) <= 86400 ? offset : 0
    }

    static func tokenResponse(_ bytes: [UInt8]) {
        // The first byte's top bit turns DPoP on, the next one asks for a step-up (max_age, acr_values) without it
        // (its value modulo 10 picks the status, as in every response target).
        let dpop = (bytes.first ?? 0) & 0x80 != 0
        let stepUp = !dpop && (bytes.first ?? 0) & 0x40 != 0
        let pending = dpop ? dpopPending : stepUp ? stepUpPending : pending
        let answer = signingIDToken(FuzzResponse(bytes), nonce: pending.nonce)
        let provider = provider(answer, dpop: dpop)
        // Only a response taken moves the provider's clock (a refused one, a proxy's page, must not).
        let learned = expectedClock(answer)
        blocking {
            var clock: TimeInterval = 0
            var previous = TokenSet(
                accessToken: "a", tokenType: dpop ? "DPoP" : "Bearer", refreshToken: "r", idToken: idToken,
                expiresAt: now)
            if dpop { previous.dpopKeyThumbprint = dpopKey.thumbprint }
            let refreshed = await attempt { try await provider.refresh(previous) }
            trace("refresh: \(refreshed)")
            if case .success(let tokens) = refreshed {
                clock = learned
                checkAccepted(tokens, dpop: dpop, clock: clock)
                // OIDC Core §12.2: a refreshed ID token names the same subject.
                let claims = tokens.idToken.flatMap { try? JWT.unverifiedClaims(of: $0) }
                require(claims?.subject == "user-1", "a refresh changed the ID token's subject")
            }
            require(provider.clock.withLock { $0 } == clock, "the provider's clock after a refresh: \(refreshed)")
            // The code exchange, with the request's own state: its ID token carries the request's nonce.
            let exchanged = await attempt {
                try await provider.completeAuthorization(redirect: codeRedirect(pending), pending: pending)
            }
            trace("code exchange: \(exchanged)")
            if case .success(let tokens) = exchanged {
                clock = learned
                checkAccepted(tokens, dpop: dpop, clock: clock)
                let claims = tokens.idToken.flatMap { try? JWT.unverifiedClaims(of: $0) }
                require(claims != nil, "a sign-in without an ID token")
                require(
                    claims?.nonce.map { ByteExact.equals($0, pending.nonce ?? "") } == true,
                    "an ID token without this request's nonce")
                if stepUp {
                    // OIDC Core §3.1.3.7 (11), (12): a sign-in within max_age (leeway 60 s, on the provider's clock)
                    // and one of the acr values asked for.
                    let time = now.addingTimeInterval(clock).timeIntervalSince1970
                    require(
                        claims?["auth_time"]?.doubleValue.map { !(time - $0 > 600 + 60) && !($0 > time + 60) } == true,
                        "a sign-in older than max_age, or in the future, was accepted")
                    require(claims?["acr"]?.stringValue == "mfa", "a weaker acr than asked for was accepted")
                }
            }
            require(provider.clock.withLock { $0 } == clock, "the provider's clock after a code exchange: \(exchanged)")
        }
    }

    static func deviceResponse(_ bytes: [UInt8]) {
        let provider = provider(FuzzResponse(bytes))
        blocking {
            guard let authorization = try? await provider.deviceAuthorization() else { return }
            // RFC 8628 §3.2 with BCP 212: a URI the user opens is https, or http on this machine (127.0.0.0/8 as a
            // dotted quad, localhost, ::1).
            for shown in [authorization.verificationURI, authorization.verificationURIComplete].compactMap({ $0 }) {
                require(isWebOrLoopback(shown), "a verification URI to show the user: \(shown)")
            }
            require(authorization.interval >= 1, "a polling interval under a second")
        }
    }

    static func parResponse(_ bytes: [UInt8]) {
        let provider = provider(FuzzResponse(bytes), pushed: true)
        blocking {
            guard let pending = try? await provider.authorizationRequest() else { return }
            require(pending.url.host == "op.example", "the authorization URL left the provider: \(pending.url)")
        }
    }

    static func errorResponse(_ bytes: [UInt8]) {
        let response = FuzzResponse(bytes).response
        let error = ServerErrorResponse(response)
        let definitive = ServerErrorResponse.isDefinitiveRefreshRejection(response)
        if definitive { require(error != nil, "a definitive rejection without an OAuth error body") }
        _ = StepUpChallenge(response)
        _ = error.map { "\($0)" }
        // A `Retry-After` date once reached Foundation's DateFormatter, which traps on some non-ASCII text.
        if let wait = RetryPolicy.retryAfter(response, now: now) { require(wait >= 0, "a negative Retry-After wait") }
    }

    static let restBase = url("https://api.example/v1")

    /// Every other answer a provider reads.
    ///
    /// UserInfo (its `sub` checked against the ID token's), revocation, and the REST contract's login, refresh, `/me`
    /// and logout. What is taken comes from a success: UserInfo from a 200, tokens and the user from a 2xx.
    static func providerResponse(_ bytes: [UInt8]) {
        let answer = FuzzResponse(bytes)
        let oidc = provider(answer)
        let rest = RESTAuthProvider(
            baseURL: restBase, transport: FuzzTransport(answer: answer), timeSource: FixedTime())
        let tokens = TokenSet(
            accessToken: "a", refreshToken: "r", idToken: idToken, expiresAt: now.addingTimeInterval(300))
        blocking {
            let described = await attempt { try await oidc.userInfo(for: tokens) }
            trace("userInfo: \(described.map(\.names))")
            if case .success(let claims) = described {
                // OIDC Core §5.3.2: UserInfo describes the ID token's subject, byte for byte, in a 200 answer.
                require(claims["sub"]?.stringValue == "user-1", "UserInfo of another subject was accepted")
                require(answer.status == 200, "UserInfo taken from a \(answer.status) answer")
            }
            let revoked = await attempt { try await oidc.signOut(tokens) }
            trace("revocation: \(revoked)")
            for signedIn in [
                await attempt { try await rest.login(email: "a@example.com", password: "p") },
                await attempt { try await rest.refresh(tokens) },
            ] {
                trace("REST tokens: \(signedIn)")
                guard case .success(let received) = signedIn else { continue }
                require((200..<300).contains(answer.status), "tokens taken from a \(answer.status) answer")
                require(RESTAuthProvider.isTokenText(received.accessToken), "an unusable access token was accepted")
                require(
                    received.refreshToken.map(RESTAuthProvider.isTokenText) ?? true, "an unusable refresh token")
            }
            let user = await attempt { try await rest.me(tokens) }
            trace("me: \(user.map(\.id))")
            if case .success = user {
                require((200..<300).contains(answer.status), "a user taken from a \(answer.status) answer")
            }
            let loggedOut = await attempt { try await rest.signOut(tokens) }
            trace("logout: \(loggedOut)")
        }
    }

    /// Whether `url` is the resource server's origin, https://api.example, worked out apart from the product's own
    /// `SesameHTTP.Origin`.
    static func isResourceOrigin(_ url: URL) -> Bool {
        guard let parts = URLComponents(url: url, resolvingAgainstBaseURL: true) else { return false }
        return parts.scheme?.lowercased() == "https" && parts.host?.lowercased() == "api.example"
            && (parts.port == nil || parts.port == 443)
    }

    /// A resource server's answers to `AuthorizedClient`.
    ///
    /// Redirects (a `Location` anywhere), 401 and 403 challenges, errors: credentials go only to the base's origin,
    /// and a 401 costs at most one refresh. The first byte's two top bits pick the redirect policy (follow, never,
    /// refuse other origins; 3 follows with DPoP on).
    static func resourceResponse(_ bytes: [UInt8]) {
        let transport = ResourceTransport(answer: FuzzResponse(bytes))
        let mode = (bytes.first ?? 0) >> 6
        let policy: AuthorizedClient.RedirectPolicy = [.follow, .never, .refuseCrossOrigin, .follow][Int(mode)]
        let dpop = mode == 3
        blocking {
            let store = InMemoryTokenStore()
            var tokens = TokenSet(
                accessToken: "at", tokenType: dpop ? "DPoP" : "Bearer", refreshToken: "rt",
                expiresAt: now.addingTimeInterval(3600))
            if dpop { tokens.dpopKeyThumbprint = dpopKey.thumbprint }
            try? await store.save(tokens, profile: "default")
            var configuration = OIDCAuthProvider.Configuration(
                clientID: "fuzz-client", redirectURI: "http://127.0.0.1:8765/callback")
            if dpop { configuration.dpopKey = dpopKey }
            let provider = OIDCAuthProvider(
                metadata: metadata, configuration: configuration, transport: transport, timeSource: FixedTime(),
                sleep: { _ in })
            let session = AuthSession(provider: provider, store: store, timeSource: FixedTime())
            let client = AuthorizedClient(
                session: session, baseURL: restBase, redirectPolicy: policy, transport: transport)
            let response = await attempt { try await client.send(.get("/me")) }
            trace("resource: \(response.map(\.status)); requests: \(transport.sent.withLock { $0.map(\.url) })")
            checkResourceRequests(transport.sent.withLock { $0 })
        }
    }

    /// Credentials only to the resource's origin (a public client's refresh carries none), one refresh at most.
    static func checkResourceRequests(_ sent: [SesameHTTP.Request]) {
        func isRefresh(_ request: SesameHTTP.Request) -> Bool {
            request.method == "POST" && request.url == tokenEndpoint
                && request.body.map { String(decoding: $0, as: UTF8.self).contains("grant_type=refresh_token") } == true
        }
        for request in sent where !isRefresh(request) {
            let carries = request.headers["Authorization"] != nil || request.headers["DPoP"] != nil
            require(!carries || isResourceOrigin(request.url), "credentials went to \(request.url)")
        }
        require(sent.count(where: isRefresh) <= 1, "one request made more than one refresh")
        require(sent.count <= 24, "one request made \(sent.count) requests")
    }
}
