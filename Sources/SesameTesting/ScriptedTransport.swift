public import Foundation
public import Sesame

/// An ``HTTPTransport`` for your tests: it answers from a queue of scripted responses and records every request.
///
/// ```swift
/// let transport = ScriptedTransport()
/// transport.enqueue(.json(200, #"{"id":"u1","email":"a@example.com"}"#))
/// let client = AuthorizedClient(session: session, baseURL: api, transport: transport)
/// let me: User = try await client.get("/me")
/// #expect(transport.requests[0].headers["Authorization"] == "Bearer …")
/// ```
public final class ScriptedTransport: HTTPTransport, @unchecked Sendable {
    /// One scripted outcome.
    public enum Step: Sendable {
        /// A response.
        case response(SesameHTTP.Response)
        /// A transport failure (no response arrived).
        case failure(AuthError)

        /// A JSON response.
        public static func json(_ status: Int, _ body: String, headers: SesameHTTP.Headers = [:]) -> Step {
            var headers = headers
            if !headers.contains("Content-Type") { headers["Content-Type"] = "application/json" }
            return .response(SesameHTTP.Response(status: status, headers: headers, body: Data(body.utf8)))
        }

        /// An empty response (204 by default).
        public static func empty(_ status: Int = 204, headers: SesameHTTP.Headers = [:]) -> Step {
            .response(SesameHTTP.Response(status: status, headers: headers))
        }
    }

    // `steps` and `recorded` are only touched under `lock`.
    private let lock = NSLock()
    private var steps: [Step] = []
    private var recorded: [SesameHTTP.Request] = []

    /// An empty script.
    public init() {}

    /// Appends steps to the script.
    public func enqueue(_ steps: Step...) {
        lock.lock()
        self.steps.append(contentsOf: steps)
        lock.unlock()
    }

    /// Every request sent so far, in order.
    public var requests: [SesameHTTP.Request] {
        lock.lock()
        defer { lock.unlock() }
        return recorded
    }

    /// Records the request and plays the next step; an empty script is a transport failure.
    public func send(_ request: SesameHTTP.Request) async throws -> SesameHTTP.Response {
        try Task.checkCancellation()
        let step: Step? = {
            lock.lock()
            defer { lock.unlock() }
            recorded.append(request)
            return steps.isEmpty ? nil : steps.removeFirst()
        }()
        switch step {
        case .response(let response)?: return response
        case .failure(let error)?: throw error
        case nil: throw AuthError(.transport, "the scripted transport has no more responses")
        }
    }
}

/// A ``TimeSource`` that only moves when told to.
public final class ManualTimeSource: TimeSource, @unchecked Sendable {
    // `current` is only touched under `lock`.
    private let lock = NSLock()
    private var current: Date

    /// Starts at `start`.
    public init(_ start: Date = Date(timeIntervalSince1970: 1_700_000_000)) { current = start }

    /// The current (manual) time.
    public var now: Date {
        lock.lock()
        defer { lock.unlock() }
        return current
    }

    /// Moves the clock forward.
    public func advance(by seconds: TimeInterval) {
        lock.lock()
        current = current.addingTimeInterval(seconds)
        lock.unlock()
    }
}
