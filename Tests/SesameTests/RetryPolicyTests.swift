import Foundation
import SesameTesting
import Testing

@testable import Sesame

/// Retries of transient failures (issue 23).
///
/// Capped exponential back-off with jitter, `Retry-After` honoured up to a limit, idempotent requests only by
/// default, definitive answers never, and a refresh only when the server cannot have used the refresh token. Waits
/// are recorded, never slept.
@Suite struct RetryPolicyTests {
    /// The waits a policy asked for.
    final class Waits: @unchecked Sendable {
        private let lock = NSLock()
        private var recorded: [TimeInterval] = []
        var values: [TimeInterval] { lock.withLock { recorded } }
        func add(_ value: TimeInterval) { lock.withLock { recorded.append(value) } }
    }

    static func policy(
        _ waits: Waits, attempts: Int = 3, nonIdempotent: Bool = false, random: Double = 1
    ) -> RetryPolicy {
        RetryPolicy(
            maximumAttempts: attempts, baseDelay: 0.5, maximumDelay: 8, maximumRetryAfter: 30,
            retriesNonIdempotent: nonIdempotent, sleep: { waits.add($0) }, random: { random })
    }

    static func client(_ transport: ScriptedTransport, _ retry: RetryPolicy) throws -> AuthorizedClient {
        let session = AuthSession(provider: ScriptedProvider(), store: InMemoryTokenStore())
        return AuthorizedClient(
            session: session, baseURL: try #require(URL(string: "https://api.example")), transport: transport,
            retry: retry)
    }

    static let open = AuthorizedClient.Authorization.none

    @Test("GET: 503, 503, 200 — two back-offs within the capped exponential ceiling, then the answer")
    func backOff() async throws {
        for random in [1.0, 0.25] {
            let waits = Waits()
            let transport = ScriptedTransport()
            transport.enqueue(.empty(503), .empty(503), .json(200, "{}"))
            let response = try await Self.client(transport, Self.policy(waits, random: random)).send(
                .get("/items", authorization: Self.open))
            #expect(response.status == 200 && transport.requests.count == 3)
            #expect(waits.values == [0.5 * random, 1.0 * random])
        }
        // The ceiling doubles up to maximumDelay and stays there; the last 503 is returned.
        let waits = Waits()
        let transport = ScriptedTransport()
        for _ in 0..<7 { transport.enqueue(.empty(503)) }
        let last = try await Self.client(transport, Self.policy(waits, attempts: 7)).send(
            .get("/items", authorization: Self.open))
        #expect(last.status == 503 && transport.requests.count == 7)
        #expect(waits.values == [0.5, 1, 2, 4, 8, 8])
    }

    @Test("definitive answers are never retried: 400, 401 without a session, 403, 404, 501")
    func definitive() async throws {
        for status in [400, 403, 404, 409, 501] {
            let waits = Waits()
            let transport = ScriptedTransport()
            transport.enqueue(.empty(status), .json(200, "{}"))
            let response = try await Self.client(transport, Self.policy(waits)).send(
                .get("/items", authorization: Self.open))
            #expect(response.status == status && transport.requests.count == 1 && waits.values.isEmpty)
        }
    }

    @Test("POST is not retried unless asked; a connection never made is, whatever the method")
    func nonIdempotent() async throws {
        let waits = Waits()
        let transport = ScriptedTransport()
        transport.enqueue(.empty(503), .json(200, "{}"))
        let refused = try await Self.client(transport, Self.policy(waits)).send(
            AuthorizedClient.Endpoint.post("/orders", body: Data("{}".utf8), authorization: Self.open))
        #expect(refused.status == 503 && transport.requests.count == 1)
        let lost = ScriptedTransport()
        lost.enqueue(.failure(AuthError(.transport, "the connection was lost")), .json(200, "{}"))
        await #expect(throws: AuthError.self) {
            _ = try await Self.client(lost, Self.policy(waits)).send(
                AuthorizedClient.Endpoint.post("/orders", body: Data("{}".utf8), authorization: Self.open))
        }
        #expect(lost.requests.count == 1)
        var unreached = AuthError(.transport, "cannot connect")
        unreached.reason = "cannot_connect"
        let never = ScriptedTransport()
        never.enqueue(.failure(unreached), .json(200, "{}"))
        let sent = try await Self.client(never, Self.policy(waits)).send(
            AuthorizedClient.Endpoint.post("/orders", body: Data("{}".utf8), authorization: Self.open))
        #expect(sent.status == 200 && never.requests.count == 2)
        let asked = ScriptedTransport()
        asked.enqueue(.empty(503), .json(200, "{}"))
        let retried = try await Self.client(asked, Self.policy(waits, nonIdempotent: true)).send(
            AuthorizedClient.Endpoint.post("/orders", body: Data("{}".utf8), authorization: Self.open))
        #expect(retried.status == 200 && asked.requests.count == 2)
    }

    @Test("429 with Retry-After: waited as given (seconds or a date); a huge one is the caller's at once")
    func retryAfter() async throws {
        let waits = Waits()
        let transport = ScriptedTransport()
        transport.enqueue(.empty(429, headers: ["Retry-After": "2"]), .json(200, "{}"))
        _ = try await Self.client(transport, Self.policy(waits)).send(.get("/items", authorization: Self.open))
        #expect(waits.values == [2])
        let huge = Waits()
        let busy = ScriptedTransport()
        busy.enqueue(.empty(429, headers: ["Retry-After": "86400"]), .json(200, "{}"))
        let answer = try await Self.client(busy, Self.policy(huge)).send(.get("/items", authorization: Self.open))
        #expect(answer.status == 429 && busy.requests.count == 1 && huge.values.isEmpty)
        let absurd = ScriptedTransport()
        absurd.enqueue(.empty(503, headers: ["Retry-After": "99999999999999999999"]), .json(200, "{}"))
        let kept = try await Self.client(absurd, Self.policy(huge)).send(.get("/items", authorization: Self.open))
        #expect(kept.status == 503 && huge.values.isEmpty)
        let date = SesameHTTP.Response(
            status: 503, headers: ["Retry-After": "Sun, 06 Nov 1994 08:49:37 GMT"], body: Data())
        #expect(
            RetryPolicy.retryAfter(date, now: Date(timeIntervalSince1970: 784_111_767)) == 10)
        // Non-ASCII where the date should be (it trapped Foundation's DateFormatter): no wait, no crash.
        let hostile = SesameHTTP.Response(
            status: 503, headers: ["Retry-After": "Sun, 15\u{0D4A}\u{FFFD} 202550 :16:40 GMT"], body: Data())
        #expect(RetryPolicy.retryAfter(hostile) == nil)
        // Leading zeros are not digits of the wait.
        let padded = SesameHTTP.Response(status: 503, headers: ["Retry-After": "0000000005"], body: Data())
        #expect(RetryPolicy.retryAfter(padded) == 5)
        #expect(RetryPolicy.retryAfter(SesameHTTP.Response(status: 503, headers: ["Retry-After": "000"])) == 0)
    }

    @Test("AuthError.retryAfter is finite, at most a year, whatever the server asked: an app may sleep on it")
    func finiteRetryAfter() {
        for (asked, reported) in [("99999999999999999999", 366.0 * 86_400), ("5", 5), ("0", 0)] {
            let error = AuthError.unexpected(
                SesameHTTP.Response(status: 503, headers: ["Retry-After": asked], body: Data()))
            #expect(error.retryAfter == reported, "\(asked)")
        }
        let far = AuthError.unexpected(
            SesameHTTP.Response(status: 429, headers: ["Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"], body: Data()))
        #expect(far.retryAfter == TimeInterval(366 * 86_400))
    }

    @Test("a refresh is retried only when the server cannot have used the token (408, 429, 503, no connection)")
    func refresh() async throws {
        let start = TokenSet(accessToken: "a", refreshToken: "r", expiresAt: Date().addingTimeInterval(-1))
        let next = TokenSet(accessToken: "b", refreshToken: "r2", expiresAt: Date().addingTimeInterval(3600))
        // 503 then success: one retry, the session refreshed.
        let waits = Waits()
        let provider = ScriptedProvider()
        await provider.enqueue(
            .failure(AuthError(.transport, "the server answered 503", statusCode: 503)), .tokens(next))
        let session = AuthSession(provider: provider, store: InMemoryTokenStore(), retry: Self.policy(waits))
        try await session.signIn(with: start)
        #expect(try await session.validTokens().accessToken == "b")
        #expect(await provider.refreshes == 2 && waits.values.count == 1)
        // A lost connection (the server may have rotated the token): not sent again; the session is kept.
        for failure in [AuthError(.transport, "the connection was lost"), AuthError(.transport, "x", statusCode: 502)] {
            let lost = ScriptedProvider()
            await lost.enqueue(.failure(failure), .tokens(next))
            let kept = AuthSession(provider: lost, store: InMemoryTokenStore(), retry: Self.policy(Waits()))
            try await kept.signIn(with: start)
            await #expect(throws: AuthError.self) { _ = try await kept.validTokens() }
            #expect(await lost.refreshes == 1)
            #expect(try await kept.currentTokens?.accessToken == "a")
        }
        // 429 asking for an hour: no wait, the error at once.
        let busy = ScriptedProvider()
        let answer = SesameHTTP.Response(status: 429, headers: ["Retry-After": "3600"], body: Data())
        await busy.enqueue(.failure(AuthError.unexpected(answer)), .tokens(next))
        let patient = Waits()
        let limited = AuthSession(provider: busy, store: InMemoryTokenStore(), retry: Self.policy(patient))
        try await limited.signIn(with: start)
        await #expect(throws: AuthError.self) { _ = try await limited.validTokens() }
        #expect(await busy.refreshes == 1 && patient.values.isEmpty)
    }

    @Test("a client's retry never resends a refresh that got no answer, nor a request a redirect's host refused")
    func notTheSessionsRefresh() async throws {
        let provider = ScriptedProvider()
        await provider.enqueue(.failure(AuthError(.transport, "the connection was lost")))
        let session = AuthSession(provider: provider, store: InMemoryTokenStore())
        try await session.signIn(
            with: TokenSet(accessToken: "a", refreshToken: "r", expiresAt: Date().addingTimeInterval(-5)))
        let transport = ScriptedTransport()
        let client = AuthorizedClient(
            session: session, baseURL: try #require(URL(string: "https://api.example")), transport: transport,
            retry: Self.policy(Waits()))
        await #expect(throws: AuthError.self) { _ = try await client.send(.get("/items")) }
        #expect(await provider.refreshes == 1 && transport.requests.isEmpty)
        // A POST answered with a redirect to a host that refuses connections: the server acted; never again.
        var unreached = AuthError(.transport, "cannot connect")
        unreached.reason = "cannot_connect"
        let redirected = ScriptedTransport()
        redirected.enqueue(
            .empty(307, headers: ["Location": "https://gone.example/x"]), .failure(unreached),
            .empty(307, headers: ["Location": "https://gone.example/x"]), .failure(unreached))
        await #expect(throws: AuthError.self) {
            _ = try await Self.client(redirected, Self.policy(Waits())).send(
                AuthorizedClient.Endpoint.post("/orders", body: Data("{}".utf8), authorization: Self.open))
        }
        #expect(redirected.requests.count == 2)
    }
}
