public import Foundation

/// When and how a transient failure is tried again: capped exponential back-off with full jitter, honouring a
/// server's `Retry-After` up to a limit.
///
/// A failure is transient when no answer came (the network), or the answer is 408, 429, 500, 502, 503 or 504. A
/// definitive answer (any other status: 400, 401, 403, 404, …) is never retried, and neither is a request that may
/// have changed something on the server unless you say so: only `GET`, `HEAD`, `OPTIONS`, `TRACE`, `PUT` and
/// `DELETE` are retried by default (RFC 9110 §9.2.2). A token refresh — a `POST` that rotates a refresh token — is retried only
/// when the server cannot have used it: it answered 408, 429 or 503, or the connection was never made.
///
/// ```swift
/// let api = AuthorizedClient(session: session, baseURL: apiBase, retry: .standard)
/// ```
public struct RetryPolicy: Sendable {
    /// Attempts in all, the first included (1: no retry).
    public let maximumAttempts: Int
    /// The back-off before the first retry; each further one doubles, up to ``maximumDelay``.
    public let baseDelay: TimeInterval
    /// The longest back-off.
    public let maximumDelay: TimeInterval
    /// The longest `Retry-After` waited for; a server asking for more gets its answer returned at once (a 429 with
    /// `Retry-After: 3600` is the caller's to handle, not a hung call).
    public let maximumRetryAfter: TimeInterval
    /// Whether non-idempotent requests (`POST`, `PATCH`) are retried too (default false).
    public let retriesNonIdempotent: Bool
    /// How a wait is made (tests record it instead of sleeping).
    let sleep: @Sendable (TimeInterval) async throws -> Void
    /// A number in 0...1 for the jitter.
    let random: @Sendable () -> Double

    /// A policy.
    public init(
        maximumAttempts: Int = 3, baseDelay: TimeInterval = 0.5, maximumDelay: TimeInterval = 8,
        maximumRetryAfter: TimeInterval = 30, retriesNonIdempotent: Bool = false
    ) {
        self.init(
            maximumAttempts: maximumAttempts, baseDelay: baseDelay, maximumDelay: maximumDelay,
            maximumRetryAfter: maximumRetryAfter, retriesNonIdempotent: retriesNonIdempotent,
            sleep: { try await Task.sleep(for: .seconds($0)) }, random: { Double.random(in: 0...1) })
    }

    /// A policy that waits through `sleep` (and draws its jitter from `random`): for tests.
    package init(
        maximumAttempts: Int, baseDelay: TimeInterval, maximumDelay: TimeInterval, maximumRetryAfter: TimeInterval,
        retriesNonIdempotent: Bool, sleep: @escaping @Sendable (TimeInterval) async throws -> Void,
        random: @escaping @Sendable () -> Double
    ) {
        self.maximumAttempts = max(1, maximumAttempts)
        self.baseDelay = baseDelay.isFinite ? max(0, baseDelay) : 0
        self.maximumDelay = maximumDelay.isFinite ? max(0, maximumDelay) : 0
        self.maximumRetryAfter = maximumRetryAfter.isFinite ? max(0, maximumRetryAfter) : 0
        self.retriesNonIdempotent = retriesNonIdempotent
        self.sleep = sleep
        self.random = random
    }

    /// No retries.
    public static let none = RetryPolicy(maximumAttempts: 1)
    /// Three attempts, waiting up to 0.5 s then up to 1 s (full jitter), `Retry-After` up to 30 s.
    public static let standard = RetryPolicy()

    /// The statuses that say "not now", not "no".
    static let transientStatuses: Set<Int> = [408, 429, 500, 502, 503, 504]
    /// The statuses that say the server did not act on the request (safe to repeat even a refresh).
    static let unprocessedStatuses: Set<Int> = [408, 429, 503]

    /// Whether `method` may be repeated without changing the outcome.
    static func isIdempotent(_ method: String) -> Bool {
        ["GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"].contains(method.uppercased())
    }

    /// The wait before retry `retry` (1 for the first): a `Retry-After` of at most ``maximumRetryAfter`` as given,
    /// else a random wait up to `min(maximumDelay, baseDelay × 2^(retry−1))`; nil when the server asks for longer
    /// than ``maximumRetryAfter`` (do not retry).
    func delay(beforeRetry retry: Int, retryAfter: TimeInterval?) -> TimeInterval? {
        if let retryAfter {
            return retryAfter <= maximumRetryAfter ? max(0, retryAfter) : nil
        }
        let ceiling = min(maximumDelay, baseDelay * pow(2, Double(max(0, retry - 1))))
        return ceiling * min(1, max(0, random()))
    }

    /// `Retry-After` in seconds (delay-seconds or an HTTP-date, RFC 9110 §10.2.3), or nil.
    static func retryAfter(_ response: SesameHTTP.Response, now: Date = Date()) -> TimeInterval? {
        guard let text = response.header("Retry-After")?.trimmingCharacters(in: .whitespaces), !text.isEmpty
        else { return nil }
        if text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            // Leading zeros say nothing (`0000000005` is 5 s); ten or more significant digits: longer than anyone waits.
            let significant = text.drop { $0 == "0" }
            return significant.utf8.count <= 9
                ? TimeInterval(significant.isEmpty ? "0" : String(significant)) : .infinity
        }
        return HTTPDate.parse(text, now: now).map { max(0, $0.timeIntervalSince(now)) }
    }

    /// A transport failure of the request itself, as ``run(idempotent:_:)``'s attempt reports it (any other error
    /// is not retried).
    struct Unanswered: Error {
        let error: AuthError
    }

    /// Runs `attempt` until it gives a lasting answer or the attempts are spent; `idempotent` says whether a
    /// transient answer may be repeated.
    func run(idempotent: Bool, _ attempt: () async throws -> SesameHTTP.Response) async throws -> SesameHTTP.Response {
        let repeatable = idempotent || retriesNonIdempotent
        var made = 0
        while true {
            made += 1
            let last = made >= maximumAttempts
            do {
                let response = try await attempt()
                guard !last, repeatable, Self.transientStatuses.contains(response.status),
                    let wait = delay(beforeRetry: made, retryAfter: Self.retryAfter(response))
                else { return response }
                SesameLog.log(.warning, .http, "HTTP \(response.status): retry \(made) in \(seconds: wait)")
                try await sleep(wait)
            } catch let failure as Unanswered {
                // No answer to the request itself (never to a refresh the session made on the way: that is the
                // session's to retry). A request that reached nobody may be sent again whatever it is.
                let error = failure.error
                guard !last, repeatable || error.reason == "cannot_connect",
                    let wait = delay(beforeRetry: made, retryAfter: nil)
                else { throw error }
                SesameLog.log(.warning, .http, "no answer to the request (\(error)): retry \(made) in \(seconds: wait)")
                try await sleep(wait)
            }
            try Task.checkCancellation()
        }
    }
}
