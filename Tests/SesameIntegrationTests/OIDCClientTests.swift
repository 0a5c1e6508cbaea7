import Foundation
import Sesame
import SesameDevServer
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import SesameTesting
import Testing

extension OIDCProviderMetadata {
    /// Endpoints configured by hand at `https://as.example` (plain OAuth: no JWKS), for scripted-transport tests;
    /// `device` adds a device authorization endpoint.
    static func scripted(device: Bool = false) throws -> OIDCProviderMetadata {
        OIDCProviderMetadata(
            authorizationEndpoint: try #require(URL(string: "https://as.example/authorize")),
            tokenEndpoint: try #require(URL(string: "https://as.example/token")),
            deviceAuthorizationEndpoint: device ? URL(string: "https://as.example/device") : nil)
    }
}

/// The client's side of the one OIDC test bed: an `OIDCAuthProvider` against it, and the code flow through the real
/// sign-in form.
extension OIDCTestServer {
    func provider(
        client: String = "sesame-cli", scopes: [String] = ["openid", "email", "offline_access"],
        timeSource: (any TimeSource)? = nil, sleep: @escaping @Sendable (TimeInterval) async throws -> Void = { _ in }
    ) async throws -> OIDCAuthProvider {
        let metadata = try await OIDCProviderMetadata.discover(issuer: issuer)
        var configuration = OIDCAuthProvider.Configuration(
            clientID: client, redirectURI: "http://127.0.0.1:5555/callback", scopes: scopes)
        configuration.pushedRequests = .whenRequired
        return OIDCAuthProvider(
            metadata: metadata, configuration: configuration, timeSource: timeSource ?? clock, sleep: sleep)
    }

    func signIn(_ provider: OIDCAuthProvider, _ options: AuthorizationOptions = AuthorizationOptions()) async throws
        -> TokenSet
    {
        let pending = try await provider.authorizationRequest(options)
        return try await provider.completeAuthorization(redirect: try userAgent(pending.url), pending: pending)
    }
}

@Suite struct OIDCClientTests {
    @Test(
        "RP-01 RP-26 RP-35 REV-01 BCP-01 BCP-03 BCP-20 NAT-02: discovery, code + PKCE (S256) through the real form, ID token, UserInfo, refresh, revocation"
    )
    func happyPath() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let provider = try await oidc.provider()
        let pending = try await provider.authorizationRequest(AuthorizationOptions(loginHint: "alice@example.com"))
        let query = try #require(URLComponents(url: pending.url, resolvingAgainstBaseURL: false)?.queryItems)
        #expect(query.first { $0.name == "code_challenge_method" }?.value == "S256")
        #expect(query.first { $0.name == "code_challenge" }?.value == pending.codeChallenge)
        #expect(pending.codeVerifier.count == 43 && pending.state.count == 43 && pending.nonce?.count == 43)
        #expect(!String(describing: pending).contains(pending.codeVerifier))
        #expect(!String(describing: pending).contains(pending.state))
        let tokens = try await provider.completeAuthorization(
            redirect: try oidc.userAgent(pending.url), pending: pending)
        #expect(tokens.idToken != nil && tokens.refreshToken != nil && tokens.user?.email == "alice@example.com")
        let info = try await provider.userInfo(for: tokens)
        #expect(info["sub"] == .string(tokens.user?.id ?? "-"))
        let refreshed = try await provider.refresh(tokens)
        #expect(refreshed.refreshToken != tokens.refreshToken && refreshed.user?.id == tokens.user?.id)
        try await provider.signOut(refreshed)
        await #expect(throws: AuthError.self) { try await provider.userInfo(for: refreshed) }
        do {
            _ = try await provider.refresh(refreshed)
            Issue.record("a revoked refresh token refreshed")
        } catch let error as AuthError {
            #expect(error.code == .refreshRejected)
        }
    }

    @Test(
        "BCP-04 RP-32: error redirects are typed errors carrying the provider's description; a foreign state is refused"
    )
    func errorRedirects() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let provider = try await oidc.provider()
        let pending = try await provider.authorizationRequest(AuthorizationOptions(prompt: "none"))
        do {
            _ = try await provider.completeAuthorization(redirect: try oidc.userAgent(pending.url), pending: pending)
            Issue.record("login_required accepted")
        } catch let error as AuthError {
            #expect(error.code == .authorizationFailed && error.serverResponse?.error == "login_required")
        }
        let other = try await provider.authorizationRequest()
        let redirect = try oidc.userAgent(other.url)
        let stranger = try await provider.authorizationRequest()
        do {
            _ = try await provider.completeAuthorization(redirect: redirect, pending: stranger)
            Issue.record("another request's response accepted")
        } catch let error as AuthError {
            #expect(error.code == .invalidAuthorizationResponse)
        }
    }

    /// What a conforming client does in each RP test mode: accept, or reject with this code and reason.
    static let outcomes: [RPTestMode: (AuthError.Code, Set<String>)?] = [
        .invalidIssuer: (.idTokenRejected, ["issuer_mismatch"]),
        .invalidAudience: (.idTokenRejected, ["audience_mismatch"]),
        .missingSubject: (.idTokenRejected, ["missing_claim"]),
        .missingIssuedAt: (.idTokenRejected, ["missing_claim"]),
        .invalidNonce: (.idTokenRejected, ["nonce_mismatch"]),
        .invalidSignatureRS256: (.idTokenRejected, ["signature_invalid"]),
        .invalidSignatureES256: (.idTokenRejected, ["signature_invalid"]),
        .signatureNone: (.idTokenRejected, ["algorithm_not_allowed"]),
        .kidAbsentSingleJWKS: nil,
        .kidAbsentMultipleJWKS: (.idTokenRejected, ["ambiguous_key"]),
        .userInfoInvalidSubject: (.userInfoRejected, ["subject_mismatch"]),
        .discoveryIssuerMismatch: (.issuerMismatch, []),
        .signingKeyRotation: nil,
        .signingKeyRotationJustBeforeSigning: nil,
        .refreshTokenInvalidSubject: (.idTokenRejected, ["subject_changed"]),
        .refreshTokenInvalidIssuer: (.idTokenRejected, ["issuer_mismatch", "issuer_changed"]),
        .invalidAtHash: (.idTokenRejected, ["at_hash_mismatch"]),
        .missingAtHash: nil,
        .invalidAuthorizationResponseIssuer: (.issuerMismatch, []),
        .removedAuthorizationResponseIssuer: (.invalidAuthorizationResponse, []),
        .invalidState: (.invalidAuthorizationResponse, []),
        .happyPathNoDPoPNonce: nil,
        // Met by a step-up (acr_values and max_age asked for): the weaker answers are refused (STEP-03).
        .stepUpWeakerACR: (.idTokenRejected, ["acr_not_met"]),
        .stepUpOldAuthTime: (.idTokenRejected, ["auth_time_too_old"]),
        .nativeSSOMissingDeviceSecretHash: (.invalidResponse, []),
        .nativeSSOOtherSubject: (.idTokenRejected, ["subject_mismatch"]),
        .tokenExchangeWrongIssuedType: (.invalidResponse, []),
        .clientCredentialsRefreshToken: nil,
    ]

    /// The RP test modes, grouped as the tests below name them by catalog ID.
    static let modeGroups: [[RPTestMode]] = [
        badSignatures, keySelection, brokenClaims, atHash, [.userInfoInvalidSubject], [.discoveryIssuerMismatch],
        refreshedIDTokens, authorizationResponses, otherModes,
    ]
    static let badSignatures: [RPTestMode] = [.signatureNone, .invalidSignatureRS256, .invalidSignatureES256]
    static let keySelection: [RPTestMode] = [
        .kidAbsentSingleJWKS, .kidAbsentMultipleJWKS, .signingKeyRotation, .signingKeyRotationJustBeforeSigning,
    ]
    static let brokenClaims: [RPTestMode] = [
        .invalidIssuer, .invalidAudience, .missingIssuedAt, .missingSubject, .invalidNonce,
    ]
    static let atHash: [RPTestMode] = [.invalidAtHash, .missingAtHash]
    static let refreshedIDTokens: [RPTestMode] = [.refreshTokenInvalidIssuer, .refreshTokenInvalidSubject]
    static let authorizationResponses: [RPTestMode] = [
        .invalidAuthorizationResponseIssuer, .removedAuthorizationResponseIssuer, .invalidState,
    ]
    static let otherModes: [RPTestMode] = [
        .happyPathNoDPoPNonce, .stepUpWeakerACR, .stepUpOldAuthTime, .nativeSSOMissingDeviceSecretHash,
        .nativeSSOOtherSubject, .tokenExchangeWrongIssuedType, .clientCredentialsRefreshToken,
    ]

    @Test("The groups below run every RP test mode of the dev server, each once")
    func everyModeGrouped() {
        let grouped = Self.modeGroups.flatMap { $0 }
        #expect(Set(grouped) == Set(RPTestMode.allCases))
        #expect(grouped.count == RPTestMode.allCases.count)
        #expect(Set(Self.outcomes.keys) == Set(RPTestMode.allCases))
    }

    @Test(
        "RP-03 RP-04 RP-05 RP-65 OIDC-04: an unsigned ID token, or one whose signature is corrupt, is refused",
        arguments: badSignatures)
    func rpBadSignatures(_ mode: RPTestMode) async throws { try await Self.rpTestMode(mode) }

    @Test(
        "RP-07 RP-08 RP-09 RP-10: no kid with one key or several; a signing key rotated before or after sign-in",
        arguments: keySelection)
    func rpKeySelection(_ mode: RPTestMode) async throws { try await Self.rpTestMode(mode) }

    @Test(
        "RP-11 RP-12 RP-14 RP-15 RP-16 BCP-11: an ID token with a wrong iss, aud or nonce, or no sub or iat, is refused",
        arguments: brokenClaims)
    func rpBrokenClaims(_ mode: RPTestMode) async throws { try await Self.rpTestMode(mode) }

    @Test("RP-18: in the code flow a wrong at_hash is refused and a missing one accepted", arguments: atHash)
    func rpAtHash(_ mode: RPTestMode) async throws { try await Self.rpTestMode(mode) }

    @Test("RP-20 OIDC-10: a UserInfo answer about another subject is refused")
    func rpUserInfoSubject() async throws { try await Self.rpTestMode(.userInfoInvalidSubject) }

    @Test("RP-28 RP-55 OIDC-13: a discovery document naming another issuer is refused before any authorization")
    func rpDiscoveryIssuer() async throws { try await Self.rpTestMode(.discoveryIssuerMismatch) }

    @Test("RP-36 RP-37 OIDC-11: a refreshed ID token with another iss or sub is refused", arguments: refreshedIDTokens)
    func rpRefreshedIDTokens(_ mode: RPTestMode) async throws { try await Self.rpTestMode(mode) }

    @Test(
        "RP-56 RP-57 RP-58 OIDC-14: an authorization response with a wrong or missing iss, or another state, is refused",
        arguments: authorizationResponses)
    func rpAuthorizationResponses(_ mode: RPTestMode) async throws { try await Self.rpTestMode(mode) }

    @Test(
        "STEP-03 NSSO-02 TX-02 PKJ-03: the FAPI 2 happy path without a nonce and the step-up, Native SSO, token exchange and client credentials modes",
        arguments: otherModes)
    func rpOtherModes(_ mode: RPTestMode) async throws { try await Self.rpTestMode(mode) }

    /// Runs the dev server in `mode` and checks that the client accepts or rejects as a conforming one does.
    static func rpTestMode(_ mode: RPTestMode) async throws {
        let oidc = try OIDCTestServer {
            $0.rpTest = mode
            $0.exchangeAudiences = ["https://api.example"]
        }
        defer { oidc.stop() }
        let expected = try #require(Self.outcomes[mode])
        do {
            if mode == .tokenExchangeWrongIssuedType {
                let auth = OIDCAuth(provider: try await oidc.provider(), store: InMemoryTokenStore())
                try await auth.signIn(with: FormUserAgent(harness: oidc))
                _ = try await auth.exchangedToken(for: .audience("https://api.example"))
                #expect(expected == nil, "\(mode.rawValue): accepted, but a conforming client rejects")
                return
            }
            if mode == .clientCredentialsRefreshToken {
                // Renewal uses the grant again, never the refresh token (which the server would refuse).
                try await ServiceAccountClientTests.renewTwice(rpTest: mode)
                #expect(expected == nil, "\(mode.rawValue): rejected, but a conforming client accepts")
                return
            }
            if mode.rawValue.hasPrefix("sesame-client-test-native-sso") {
                // Through the vendor's two apps: the first signs in, the second from its shared sign-in.
                try await NativeSSOClientTests.bothApps(rpTest: mode)
                #expect(expected == nil, "\(mode.rawValue): accepted, but a conforming client rejects")
                return
            }
            let provider = try await oidc.provider()
            // An app that already holds the provider's keys (so rotation modes meet a stale cache).
            _ = try await provider.keys?.keys()
            let stepUp = [RPTestMode.stepUpWeakerACR, .stepUpOldAuthTime].contains(mode)
            let tokens = try await oidc.signIn(
                provider,
                stepUp ? AuthorizationOptions(maxAge: 300, acrValues: [DevServer.mfaACR]) : AuthorizationOptions())
            _ = try await provider.userInfo(for: tokens)
            let refreshed = try await provider.refresh(tokens)
            _ = try await provider.userInfo(for: refreshed)
            #expect(expected == nil, "\(mode.rawValue): accepted, but a conforming client rejects")
        } catch let error as AuthError {
            guard let (code, reasons) = expected else {
                Issue.record("\(mode.rawValue): rejected (\(error)), but a conforming client accepts")
                return
            }
            #expect(error.code == code, "\(mode.rawValue): \(error)")
            if !reasons.isEmpty { #expect(reasons.contains(error.reason ?? "-"), "\(mode.rawValue): \(error)") }
        }
    }

    @Test("DEV-01..DEV-06: the device flow polls with the interval, slows down, and yields tokens once approved")
    func deviceFlow() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let clock = oidc.clock
        let browser = oidc.browser
        let sleeps = LockedBox(0)
        let code = LockedBox("")
        // Waiting moves the shared clock instead of sleeping; during the third wait the user approves in the browser.
        let provider = try await oidc.provider(sleep: { seconds in
            clock.advance(by: seconds)
            sleeps.value += 1
            guard sleeps.value == 3 else { return }
            let page = try browser.get("/device?user_code=\(code.value)")
            let confirmation = try browser.post(
                "/device",
                form: page.hiddenFields() + [
                    ("user_code", code.value), ("email", OIDCTestServer.email),
                    ("password", OIDCTestServer.password), ("action", "approve"),
                ])
            _ = try browser.post("/device", form: confirmation.hiddenFields() + [("action", "approve")])
        })
        let authorization = try await provider.deviceAuthorization()
        code.value = authorization.userCode
        #expect(authorization.userCode.count == 9 && authorization.interval == 5)
        #expect(!String(describing: authorization).contains("device_code"))
        var waits = 0
        var tokens: TokenSet?
        for try await progress in provider.deviceTokens(for: authorization) {
            switch progress {
            case .waiting(let left, let interval):
                waits += 1
                #expect(left > 0 && interval >= 5)
            case .signedIn(let result): tokens = result
            }
        }
        #expect(tokens?.idToken != nil && tokens?.user?.email == "alice@example.com")
        #expect(waits == 3 && sleeps.value == 3)
    }

    @Test("DEV-06: a denied device request ends the stream with a typed error")
    func deviceDenied() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let clock = oidc.clock
        let provider = try await oidc.provider(sleep: { clock.advance(by: $0) })
        let authorization = try await provider.deviceAuthorization()
        let page = try oidc.browser.get("/device")
        let confirmation = try oidc.browser.post(
            "/device",
            form: page.hiddenFields() + [
                ("user_code", authorization.userCode), ("email", OIDCTestServer.email),
                ("password", OIDCTestServer.password), ("action", "deny"),
            ])
        _ = try oidc.browser.post("/device", form: confirmation.hiddenFields() + [("action", "deny")])
        do {
            for try await _ in provider.deviceTokens(for: authorization) {}
            Issue.record("a denied request signed in")
        } catch let error as AuthError {
            #expect(error.code == .cancelled)
        }
    }

    @Test("OIDC-13 RP-28 RP-55: https is required except on loopback; discovery refuses an issuer that names another")
    func discoveryRules() async throws {
        await #expect(throws: AuthError.self) {
            _ = try await OIDCProviderMetadata.discover(issuer: URL(string: "http://id.example.com")!)
        }
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        // The same server under another name for itself: its discovery names 127.0.0.1, not localhost.
        let other = URL(string: oidc.issuer.absoluteString.replacingOccurrences(of: "127.0.0.1", with: "localhost"))!
        do {
            _ = try await OIDCProviderMetadata.discover(issuer: other)
            Issue.record("a mismatched issuer was accepted")
        } catch let error as AuthError {
            #expect(error.code == .issuerMismatch)
        }
    }
}

@Suite struct OIDCClientRuleTests {
    /// A device clock that is off by `offset` from the provider's.
    struct SkewedClock: TimeSource {
        let base: ManualTimeSource
        let offset: TimeInterval
        var now: Date { base.now.addingTimeInterval(offset) }
    }

    @Test("OIDC-06: a device clock two hours fast: corrected from the token response's Date header, not without it")
    func wrongClock() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let skewed = SkewedClock(base: oidc.clock, offset: 7200)
        let provider = try await oidc.provider(timeSource: skewed)
        let tokens = try await oidc.signIn(provider)
        #expect(tokens.idToken != nil)

        let metadata = provider.metadata
        var configuration = provider.configuration
        configuration.learnsClockFromDateHeader = false
        let naive = OIDCAuthProvider(metadata: metadata, configuration: configuration, timeSource: skewed)
        do {
            _ = try await oidc.signIn(naive)
            Issue.record("an ID token that expired an hour ago by the device's clock was accepted")
        } catch let error as AuthError {
            #expect(error.code == .idTokenRejected && error.reason == "expired")
        }
    }

    @Test(
        "OIDC-06: the clock is learned only from a token response the client took: a 200 page or a refused token response with a Date 20 hours behind moves nothing"
    )
    func clockOnlyFromTakenResponses() async throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let key = try JWK.generate(for: .es256)
        let published = JOSEValue.object(["keys": [try key.publicKey().jsonValue()]]).jsonData
        let answered = LockedBox(0)
        let issuerBox = LockedBox("")
        // A proxy's login page (200, HTML, its own clock 20 hours behind); a token response with that Date refused
        // for its malformed refresh_token; then a token response whose ID token expired 19 hours ago (no Date
        // header: nothing to learn from it). On the 20-hours-behind clock it would be valid.
        let server = try RecordingServer { request in
            if request.path == "/jwks" { return .json(200, published) }
            answered.mutate { $0 += 1 }
            let behind: HTTPServerHeaders = ["Date": "Thu, 14 Jan 2027 12:00:00 GMT"]
            if answered.value == 1 {
                return HTTPServerResponse(
                    status: 200, headers: behind, body: Data("<html>sign in to the proxy</html>".utf8))
            }
            if answered.value == 2 {
                let refused: JOSEValue = ["access_token": "at-2", "token_type": "Bearer", "refresh_token": "a b"]
                return HTTPServerResponse(status: 200, headers: behind, body: refused.jsonData)
            }
            let expired = try? JWT.sign(
                JWTClaims([
                    "iss": .string(issuerBox.value), "sub": "user-1", "aud": "c",
                    "iat": .integer(1_800_000_000 - 73800), "exp": .integer(1_800_000_000 - 68400),
                ]), key: key, algorithm: .es256)
            let body: JOSEValue = ["access_token": "at-2", "token_type": "Bearer", "id_token": .string(expired ?? "")]
            return .json(200, body.jsonData)
        }
        defer { server.stop() }
        let issuer = server.base.absoluteString
        issuerBox.value = issuer
        let metadata = try OIDCProviderMetadata(
            json: [
                "issuer": .string(issuer), "authorization_endpoint": .string(issuer + "/authorize"),
                "token_endpoint": .string(issuer + "/token"), "jwks_uri": .string(issuer + "/jwks"),
                "response_types_supported": ["code"], "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["ES256"],
            ])
        let provider = OIDCAuthProvider(
            metadata: metadata, configuration: .init(clientID: "c", redirectURI: "http://127.0.0.1:5555/callback"),
            timeSource: ManualTimeSource(now))
        let previous = TokenSet(accessToken: "at-1", refreshToken: "rt", expiresAt: now)
        await #expect(throws: AuthError.self) { _ = try await provider.refresh(previous) }
        await #expect(throws: AuthError.self) { _ = try await provider.refresh(previous) }
        do {
            let taken = try await provider.refresh(previous)
            Issue.record("an ID token 19 hours expired was taken on a clock learned from a refused page: \(taken)")
        } catch let error as AuthError {
            #expect(error.code == .idTokenRejected && error.reason == "expired", "\(error)")
        }
    }

    @Test("OIDC-08: max_age requires a recent auth_time; an old browser session fails the check")
    func maxAge() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let provider = try await oidc.provider()
        _ = try await oidc.signIn(provider)
        oidc.clock.advance(by: 600)
        // The provider re-authenticates (the form again) because of max_age: a fresh auth_time passes.
        let fresh = try await oidc.signIn(provider, AuthorizationOptions(maxAge: 60))
        #expect(fresh.idToken != nil)
        // A max_age that is no number of seconds is a configuration error, not a trap.
        for absurd in [Double.nan, .infinity, -1] {
            await #expect(throws: AuthError.self) {
                _ = try await provider.authorizationRequest(AuthorizationOptions(maxAge: absurd))
            }
        }
        // A provider that ignores max_age (an old auth_time) is caught by the client.
        let expectations = IDTokenValidator.Expectations(maxAge: 60)
        var validator = IDTokenValidator(
            issuer: oidc.issuer.absoluteString, clientID: "sesame-cli", algorithms: ["ES256"])
        validator.leeway = 0
        let keys = try #require(provider.keys)
        oidc.clock.advance(by: 120)
        do {
            _ = try await validator.validate(
                try #require(fresh.idToken), expecting: expectations, keys: keys, now: oidc.clock.now)
            Issue.record("an auth_time older than max_age was accepted")
        } catch let error as AuthError {
            #expect(error.reason == "auth_time_too_old")
        }
    }

    @Test("plain OAuth 2.0 endpoints configured by hand: PKCE, state, exchange and refresh, no ID token")
    func plainOAuth() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let base = oidc.issuer.absoluteString
        let metadata = OIDCProviderMetadata(
            authorizationEndpoint: try #require(URL(string: base + "/authorize")),
            tokenEndpoint: try #require(URL(string: base + "/token")),
            revocationEndpoint: URL(string: base + "/revoke"))
        #expect(!metadata.isOpenIDConnect)
        let provider = OIDCAuthProvider(
            metadata: metadata,
            configuration: OIDCAuthProvider.Configuration(
                clientID: "sesame-cli", redirectURI: "http://127.0.0.1:5555/callback",
                scopes: ["email", "offline_access"]),
            timeSource: oidc.clock)
        let pending = try await provider.authorizationRequest()
        #expect(pending.nonce == nil)
        let tokens = try await provider.completeAuthorization(
            redirect: try oidc.userAgent(pending.url), pending: pending)
        #expect(tokens.idToken == nil && tokens.refreshToken != nil && tokens.user == nil)
        let refreshed = try await provider.refresh(tokens)
        #expect(refreshed.refreshToken != tokens.refreshToken)
        try await provider.signOut(refreshed)
    }

    @Test(
        "OIDC-14 BCP-07 BCP-09 RP-56: an authorization response whose iss names another issuer is refused (RFC 9207 mix-up)"
    )
    func mixUp() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let provider = try await oidc.provider()
        let pending = try await provider.authorizationRequest()
        var redirect = try #require(URLComponents(url: try oidc.userAgent(pending.url), resolvingAgainstBaseURL: false))
        redirect.queryItems = redirect.queryItems?.map {
            $0.name == "iss" ? URLQueryItem(name: "iss", value: "https://attacker.example") : $0
        }
        do {
            _ = try await provider.completeAuthorization(redirect: try #require(redirect.url), pending: pending)
            Issue.record("a response from another issuer was accepted")
        } catch let error as AuthError {
            #expect(error.code == .issuerMismatch)
        }
    }
}

/// A user agent that signs in on the dev server's real form (the test's stand-in for a browser).
struct FormUserAgent: AuthorizationUserAgent {
    let harness: OIDCTestServer
    func authorize(url: URL, redirectURI: String, state: String) async throws -> URL {
        try harness.userAgent(url)
    }
}

@Suite struct OIDCAuthTests {
    @Test(
        "the facade: sign in through an agent, a valid token that refreshes on expiry, UserInfo, an API client, sign out"
    )
    func facade() async throws {
        let oidc = try OIDCTestServer { $0.accessTokenTTL = 120 }
        defer { oidc.stop() }
        let store = InMemoryTokenStore()
        let provider = try await oidc.provider()
        let signIn = OIDCAuth(provider: provider, store: store)
        let tokens = try await signIn.signIn(with: FormUserAgent(harness: oidc))
        #expect(try await signIn.accessToken() == tokens.accessToken)
        #expect(try await signIn.userInfo()["email"] == "alice@example.com")
        // Another instance over the same store (the app relaunched) has the session, and refreshes past expiry.
        let relaunched = OIDCAuth(provider: provider, store: store)
        oidc.clock.advance(by: 119)
        let refreshed = try await relaunched.accessToken()
        #expect(refreshed != tokens.accessToken)
        let response = try await relaunched.client(for: oidc.issuer).send(.get("/userinfo"))
        #expect(response.status == 200)
        let result = await relaunched.signOut()
        #expect(result.credentialsRemoved)
        do {
            _ = try await relaunched.accessToken()
            Issue.record("still signed in after signing out")
        } catch let error as AuthError {
            #expect(error.code == .notSignedIn)
        }
    }
}

@Suite struct NoRefreshTokenTests {
    @Test("without a refresh token, a token inside the leeway is still used until it expires; then sign in again")
    func validUntilExpiry() async throws {
        let oidc = try OIDCTestServer { $0.accessTokenTTL = 100 }
        defer { oidc.stop() }
        let provider = try await oidc.provider(scopes: ["openid", "email"])
        let signIn = OIDCAuth(provider: provider, store: InMemoryTokenStore())
        let tokens = try await signIn.signIn(with: FormUserAgent(harness: oidc))
        #expect(tokens.refreshToken == nil)
        oidc.clock.advance(by: 70)  // inside the 50-second leeway, not expired
        #expect(try await signIn.accessToken() == tokens.accessToken)
        oidc.clock.advance(by: 31)  // expired
        do {
            _ = try await signIn.accessToken()
            Issue.record("an expired token without a refresh token was handed out")
        } catch let error as AuthError {
            #expect(error.requiresReauthentication, "\(error)")
        }
    }
}
