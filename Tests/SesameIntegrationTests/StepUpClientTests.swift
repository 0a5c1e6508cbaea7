import Foundation
import Sesame
import SesameDevServer
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

/// The client's side of RFC 9470 step-up against the dev server's `/protected` (catalog STEP-01..STEP-04).
@Suite struct StepUpClientTests {
    /// A user agent that plays the real pages, second step included, and counts how often it was asked.
    struct CountingAgent: AuthorizationUserAgent {
        let harness: OIDCTestServer
        let uses = LockedBox(0)
        var email = OIDCTestServer.email
        var password = OIDCTestServer.password

        func authorize(url: URL, redirectURI: String, state: String) async throws -> URL {
            uses.mutate { $0 += 1 }
            let target = url.path + (url.query.map { "?" + $0 } ?? "")
            var page = try harness.browser.get(target)
            if page.status == 200 {
                page = try harness.browser.post(
                    "/authorize", form: page.hiddenFields() + [("email", email), ("password", password)])
            }
            if OIDCTestServer.isSecondStep(page) { page = try harness.secondStep(page) }
            guard let location = page.location, let redirect = URL(string: location) else {
                throw HarnessError("no redirect: \(page.status)")
            }
            return redirect
        }
    }

    static func signedIn(_ oidc: OIDCTestServer) async throws -> (OIDCAuth, CountingAgent) {
        let auth = OIDCAuth(provider: try await oidc.provider(), store: InMemoryTokenStore())
        let agent = CountingAgent(harness: oidc)
        try await auth.signIn(with: agent)
        return (auth, agent)
    }

    @Test("STEP-01: without a step-up handler the challenge is a typed error with acr_values, and nothing refreshes")
    func typedError() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let (auth, _) = try await Self.signedIn(oidc)
        let before = try await auth.session.currentTokens
        do {
            _ = try await auth.client(for: oidc.issuer).send(.get("/protected"))
            Issue.record("a step-up challenge was returned as a response")
        } catch let error as AuthError {
            #expect(error.code == .stepUpRequired && error.statusCode == 401)
            #expect(error.stepUpChallenge?.acrValues == [DevServer.mfaACR])
            #expect(!error.requiresReauthentication && !error.isTransient)
        }
        #expect(try await auth.session.currentTokens == before, "a step-up challenge is not a refresh")
        #expect(try oidc.browser.get("/_dev/counters").json?["refreshes"] == 0)
    }

    @Test("STEP-02..STEP-04: with an agent, one step-up for five concurrent calls, each retried once, then 200")
    func automaticStepUp() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let (auth, agent) = try await Self.signedIn(oidc)
        let client = auth.client(for: oidc.issuer, stepUpWith: agent)
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<5 { group.addTask { try await client.send(.get("/protected")).status } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses == [200, 200, 200, 200, 200])
        #expect(agent.uses.value == 2, "the sign-in and one shared step-up")
        let stored = try #require(try await auth.session.currentTokens)
        #expect(try JWT.unverified(try #require(stored.idToken)).claims["acr"] == .string(DevServer.mfaACR))
        // The request carried acr_values (STEP-02): the ID token could only say mfa after the second step.
        #expect(oidc.oneTimeCodes.value.count == 1)
    }

    @Test("Step-up article: its snippets run as written against the dev server")
    func article() async throws {
        let oidc = try OIDCTestServer {
            $0.clients = [RegisteredClient(id: "my-app", redirectURIs: ["com.example.app:/oauth"])]
        }
        defer { oidc.stop() }
        let issuer = oidc.issuer
        let store = InMemoryTokenStore()
        let agent = CountingAgent(harness: oidc)

        let auth = try await OIDCAuth.configure(
            issuer: issuer, clientID: "my-app", redirectURI: "com.example.app:/oauth", store: store)
        try await auth.signIn(with: agent)  // SesameApple's WebAuthenticationSessionAgent(anchor:), or yours
        let api = auth.client(for: issuer, stepUpWith: agent)
        let report = try await api.send(.get("/protected"))  // challenged, stepped up, retried: 200
        #expect(report.status == 200)

        #expect(try oidc.dev("/_dev/protected", ["acrValues": .null, "maxAge": 0]).status == 200)
        oidc.clock.advance(by: 5)
        do {
            _ = try await auth.client(for: issuer).send(.get("/protected"))
        } catch let error as AuthError where error.code == .stepUpRequired {
            guard let challenge = error.stepUpChallenge else { throw error }
            try await auth.stepUp(challenge, with: agent)  // then call again
        }
        #expect(try await auth.client(for: issuer).send(.get("/protected")).status == 200)
        #expect(agent.uses.value == 3)

        // The handler of your own, on another user's fresh session that needs the second step.
        #expect(try oidc.dev("/_dev/protected", ["acrValues": [.string(DevServer.mfaACR)]]).status == 200)
        let asked = LockedBox(0)
        @Sendable func confirmStepUp(_ challenge: StepUpChallenge) async -> Bool {
            asked.mutate { $0 += 1 }
            return true
        }
        do {
            let auth = try await OIDCAuth.configure(
                issuer: issuer, clientID: "my-app", redirectURI: "com.example.app:/oauth", store: InMemoryTokenStore())
            try await auth.signIn(with: agent)
            let api = AuthorizedClient(session: auth.session, baseURL: issuer) { challenge in
                guard await confirmStepUp(challenge) else { throw CancellationError() }  // your @MainActor prompt
                try await auth.stepUp(challenge, with: agent)
            }
            #expect(try await api.send(.get("/protected")).status == 200)
        }
        #expect(agent.uses.value == 5 && asked.value == 1)
    }

    @Test("STEP-04: a resource that challenges again after the step-up is an error, never a loop")
    func noLoop() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let (auth, _) = try await Self.signedIn(oidc)
        let calls = LockedBox(0)
        let client = AuthorizedClient(
            session: auth.session, baseURL: oidc.issuer, stepUp: { _ in calls.mutate { $0 += 1 } })
        do {
            _ = try await client.send(.get("/protected"))
            Issue.record("a second challenge was not an error")
        } catch let error as AuthError {
            #expect(error.code == .stepUpRequired && error.message.contains("after a step-up"))
        }
        #expect(calls.value == 1)
    }

    @Test("STEP-03: a weaker acr, a stale auth_time or another user is refused and the session kept")
    func weakerAnswersRefused() async throws {
        for mode in [RPTestMode.stepUpWeakerACR, .stepUpOldAuthTime] {
            let oidc = try OIDCTestServer()
            defer { oidc.stop() }
            let (auth, agent) = try await Self.signedIn(oidc)
            let before = try await auth.session.currentTokens
            #expect(try oidc.dev("/_dev/rp-test", ["test": .string(mode.rawValue)]).status == 200)
            let challenge =
                mode == .stepUpWeakerACR
                ? StepUpChallenge(acrValues: [DevServer.mfaACR]) : StepUpChallenge(maxAge: 300)
            do {
                try await auth.stepUp(challenge, with: agent)
                Issue.record("\(mode.rawValue): the weaker answer was accepted")
            } catch let error as AuthError {
                #expect(error.code == .idTokenRejected, "\(mode.rawValue)")
                #expect(error.reason == (mode == .stepUpWeakerACR ? "acr_not_met" : "auth_time_too_old"))
            }
            #expect(try await auth.session.currentTokens == before, "\(mode.rawValue): nothing stored")
        }
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let (auth, agent) = try await Self.signedIn(oidc)
        let before = try await auth.session.currentTokens
        var bob = agent
        bob.email = "bob@example.com"
        bob.password = "battery-staple"
        do {
            try await auth.stepUp(StepUpChallenge(acrValues: [DevServer.mfaACR]), with: bob)
            Issue.record("a step-up as another user replaced the session")
        } catch let error as AuthError {
            #expect(error.code == .idTokenRejected && error.reason == "subject_changed")
        }
        #expect(try await auth.session.currentTokens == before)
    }

    /// An agent that waits until cancelled, recording how many sign-ins ran at once.
    struct BlockingAgent: AuthorizationUserAgent {
        let entered = LockedBox(0)
        let active = LockedBox(0)
        let mostAtOnce = LockedBox(0)
        let cancelled = LockedBox(0)
        func authorize(url: URL, redirectURI: String, state: String) async throws -> URL {
            entered.mutate { $0 += 1 }
            active.mutate { $0 += 1 }
            let now = active.value
            mostAtOnce.mutate { $0 = max($0, now) }
            defer { active.mutate { $0 -= 1 } }
            do {
                try await Task.sleep(nanoseconds: 3_600_000_000_000)
            } catch {
                cancelled.mutate { $0 += 1 }
                throw error
            }
            throw HarnessError("not reached")
        }
    }

    /// Waits (yielding, no sleep) until `condition` holds.
    static func until(_ condition: () -> Bool) async {
        while !condition() { await Task.yield() }
    }

    @Test(
        "a step-up queued behind another's sheet returns at once when cancelled; the sheet stays, and a new caller gets its own sheet after it",
        .timeLimit(.minutes(1)))
    func queuedCancel() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let (auth, agent, front) = try await Self.sheetUp(oidc)
        let queued = Task { try await auth.stepUp(StepUpChallenge(maxAge: 60), with: agent) }
        for _ in 0..<200 { await Task.yield() }  // (mostly waiting by now; cancelled before it starts, the same)
        queued.cancel()
        // Before, it waited for the sheet in front to close (here, an hour): then the test closes it after 30 s.
        let returned = await Self.ends(queued, within: .seconds(30))
        #expect(returned, "the cancelled step-up returned while the sheet in front is up")
        if !returned { front.cancel() }
        await #expect(throws: CancellationError.self) { try await queued.value }
        #expect(agent.entered.value == 1 && agent.cancelled.value == 0, "the sheet in front is still up")
        // A caller with the same requirements as the cancelled one: queued behind the front sheet (no second one
        // meanwhile), then its own sheet — not the cancelled step-up's CancellationError.
        let again = Task { try await auth.stepUp(StepUpChallenge(maxAge: 60), with: agent) }
        for _ in 0..<2000 { await Task.yield() }
        try await Task.sleep(for: .milliseconds(100))  // (a second sheet, were one to open, would be up by now)
        #expect(agent.entered.value == 1, "no second sheet while the first is up")
        front.cancel()
        await #expect(Self.ends(front, within: .seconds(30)))
        let deadline = ContinuousClock.now + .seconds(30)
        await Self.until { agent.entered.value == 2 || ContinuousClock.now >= deadline }
        #expect(agent.entered.value == 2, "the new caller got its own sheet")
        again.cancel()
        _ = try? await again.value
        #expect(agent.mostAtOnce.value == 1, "one sign-in sheet at a time")
    }

    /// A signed-in session with a step-up (for the MFA `acr`) whose sheet is up in a ``BlockingAgent``.
    static func sheetUp(_ oidc: OIDCTestServer) async throws -> (OIDCAuth, BlockingAgent, Task<TokenSet, any Error>) {
        let (auth, _) = try await signedIn(oidc)
        let agent = BlockingAgent()
        let step = Task { try await auth.stepUp(StepUpChallenge(acrValues: [DevServer.mfaACR]), with: agent) }
        await until { agent.entered.value == 1 }
        return (auth, agent, step)
    }

    /// Whether `task` ends within `limit`; if not, the test goes on (and says so) instead of hanging.
    static func ends<Success>(_ task: Task<Success, any Error>, within limit: Duration) async -> Bool {
        let ended = LockedBox(false)
        Task {
            _ = try? await task.value
            ended.mutate { $0 = true }
        }
        let deadline = ContinuousClock.now + limit
        await until { ended.value || ContinuousClock.now >= deadline }
        return ended.value
    }

    @Test(
        "step-ups: one sheet at a time across requirements, a cancelled caller cancels the sign-in, no session no step-up",
        .timeLimit(.minutes(1)))
    func coordination() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        // The second starts once the first's sheet is up (two tasks started together may run in either order).
        let (auth, agent, first) = try await Self.sheetUp(oidc)
        let second = Task { try await auth.stepUp(StepUpChallenge(maxAge: 60), with: agent) }
        first.cancel()
        await Self.until { agent.entered.value == 2 }
        second.cancel()
        for task in [first, second] {
            do {
                _ = try await task.value
                Issue.record("a cancelled step-up finished")
            } catch {
                #expect(error is CancellationError || (error as? AuthError)?.code == .cancelled, "\(error)")
            }
        }
        #expect(agent.mostAtOnce.value == 1, "one sign-in sheet at a time")
        #expect(agent.cancelled.value == 2, "the agent saw each cancellation")

        let empty = OIDCAuth(provider: try await oidc.provider(), store: InMemoryTokenStore())
        do {
            try await empty.stepUp(StepUpChallenge(acrValues: [DevServer.mfaACR]), with: agent)
            Issue.record("a step-up without a session signed in")
        } catch let error as AuthError {
            #expect(error.code == .notSignedIn)
        }
        // Without an ID token there is no user to compare: no step-up.
        let noOpenID = OIDCAuth(
            provider: try await oidc.provider(scopes: ["offline_access"]), store: InMemoryTokenStore())
        try await noOpenID.signIn(with: FormUserAgent(harness: oidc))
        do {
            try await noOpenID.stepUp(StepUpChallenge(acrValues: [DevServer.mfaACR]), with: agent)
            Issue.record("a step-up without an ID token went ahead")
        } catch let error as AuthError {
            #expect(error.code == .configuration && error.message.contains("openid"))
        }
        let built = AuthError.stepUpRequired(StepUpChallenge(maxAge: 5))
        #expect(built.code == .stepUpRequired && built.stepUpChallenge?.maxAge == 5 && built.statusCode == 401)
    }

    @Test("a caller right after a step-up uses its result; a max_age step-up keeps the stronger acr")
    func reuseAndKeepACR() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let (auth, agent) = try await Self.signedIn(oidc)
        let mfa = StepUpChallenge(acrValues: [DevServer.mfaACR])
        let stepped = try await auth.stepUp(mfa, with: agent)
        #expect(try await auth.stepUp(mfa, with: agent) == stepped && agent.uses.value == 2, "reused")
        oidc.clock.advance(by: 10)
        let recent = try await auth.stepUp(StepUpChallenge(maxAge: 5), with: agent)
        #expect(agent.uses.value == 3 && oidc.oneTimeCodes.value.count == 2, "the second step again")
        #expect(try JWT.unverified(try #require(recent.idToken)).claims["acr"] == .string(DevServer.mfaACR))
        // The same max_age much later is not met by the old result: a new sign-in.
        oidc.clock.advance(by: 10)
        _ = try await auth.stepUp(StepUpChallenge(maxAge: 5), with: agent)
        #expect(agent.uses.value == 4)
    }

    @Test("STEP-01: challenges are read strictly — other errors, other schemes, absurd max_age, control characters")
    func parsing() {
        func response(_ value: String, status: Int = 401) -> SesameHTTP.Response {
            var headers = SesameHTTP.Headers()
            headers.add("WWW-Authenticate", value)
            return SesameHTTP.Response(status: status, headers: headers, body: Data())
        }
        let full = StepUpChallenge(
            response(#"Bearer error="insufficient_user_authentication", acr_values="a b", max_age="30""#))
        #expect(full?.acrValues == ["a", "b"] && full?.maxAge == 30)
        let dpop = StepUpChallenge(
            response(#"DPoP algs="ES256", error="insufficient_user_authentication", max_age="5""#))
        #expect(dpop?.maxAge == 5 && dpop?.acrValues == [])
        #expect(StepUpChallenge(response(#"Bearer error="invalid_token""#)) == nil)
        #expect(StepUpChallenge(response(#"Basic error="insufficient_user_authentication""#)) == nil)
        #expect(StepUpChallenge(response(#"Bearer error="insufficient_user_authentication""#, status: 403)) == nil)
        let hostile = StepUpChallenge(
            response(
                "Bearer error=\"insufficient_user_authentication\", acr_values=\"ok \u{1B}[31mred\", max_age=\"-5\""))
        #expect(hostile?.acrValues == ["ok"] && hostile?.maxAge == nil)
        let repeated = StepUpChallenge(
            response(#"Bearer error="insufficient_user_authentication", max_age="5", max_age="1""#))
        #expect(repeated == nil, "a repeated max_age is ambiguous")
        let spoofed = StepUpChallenge(
            response(
                "Bearer error=\"insufficient_user_authentication\", acr_values=\"x\u{A0}),\u{A0}run\u{A0}this ok a\\\"b\""
            ))
        #expect(spoofed?.acrValues == ["ok"], "no look-alike spaces, quotes or backslashes")
        let huge = StepUpChallenge(
            response(#"Bearer error="insufficient_user_authentication", max_age="99999999999999999999""#))
        #expect(huge?.maxAge == nil)
    }
}
