public import Foundation

/// The native-app redirect of RFC 8252 §7.3: a one-shot listener on a loopback IP literal that receives the
/// authorization response and shows a small "you can close this tab" page.
///
/// Only the expected path with the expected `state` completes it. A response on that path with another `state` (or
/// none) ends the wait at once with ``Failure/stateMismatch`` — the flow cannot complete any more, as AppAuth and
/// kubelogin also decide — and the browser is told why. Another path is answered 404, a foreign `Host` 421, and a
/// bare request without `state`, `code` or `error` 400; those leave the wait going.
public final class LoopbackRedirectReceiver: Sendable, CustomReflectable {
    /// Why waiting ended without a redirect.
    public enum Failure: Error, Sendable, Equatable {
        /// Nothing came within the timeout.
        case timedOut
        /// The receiver was stopped.
        case stopped
        /// An authorization response arrived whose `state` is not the one expected: forged, or from another sign-in.
        case stateMismatch
    }

    private let server: HTTPServer
    private let path: String
    private let host: String
    private let expectedState = LockedState()

    /// A receiver on `host` (default `127.0.0.1`; never a name) and `port` (0: a free one) for `path`.
    public init(host: String = "127.0.0.1", port: Int = 0, path: String = "/callback") {
        self.host = host
        self.path = path.hasPrefix("/") ? path : "/" + path
        var configuration = HTTPServer.Configuration()
        configuration.host = host
        configuration.port = port
        // Everyone here is 127.0.0.1, so a per-peer cap would let any local process crowd the browser out; a short
        // whole-request deadline evicts half-sent requests instead.
        configuration.maxConnections = 64
        configuration.maxConnectionsPerPeer = 64
        configuration.requestTimeout = 3
        let expected = expectedState
        let callbackPath = self.path
        server = HTTPServer(configuration: configuration) { request in
            guard request.path == callbackPath, request.method == "GET" else { return .text(404, "not found\n") }
            // A page on another name that resolves here (DNS rebinding) is not the browser's redirect.
            // `127.evil.example` and `localhost.evil.example` are names, not loopback (LoopbackHost parses them).
            guard LoopbackHost.isLoopback(hostHeaders: request.headers.values("Host")) else {
                return .text(421, "misdirected\n")
            }
            let query = HTTPFormEncoding.decode(request.query ?? "")
            let isResponse = query["state"] != nil || query["code"] != nil || query["error"] != nil
            switch expected.accept(state: query["state"], isResponse: isResponse, target: request.target) {
            case .completed: break
            case .notAResponse:
                return Self.page(400, "This is not an authorization response. Return to the app.")
            case .mismatch:
                return Self.page(
                    400,
                    "This response does not belong to the sign-in in progress (its state does not match), so the "
                        + "sign-in was stopped and nothing was saved. Return to the app and sign in again.")
            }
            let failed = query["error"] != nil
            // Neutral: the client has not checked the response yet, and may still refuse it.
            return Self.page(
                200,
                failed
                    ? "The provider did not sign you in. You can close this tab."
                    : "Response received. You can close this tab and return to the terminal or app.")
        }
    }

    /// What `dump()` and debuggers show: nothing of the state or the response that arrived (its code).
    public var customMirror: Mirror { Mirror(self, children: [:], displayStyle: .class) }

    /// Starts listening; returns the redirect URI (`http://127.0.0.1:PORT/callback`).
    ///
    /// - Throws: `LoopbackError` when the address cannot be bound.
    public func start() throws -> URL {
        let port = try server.start()
        let literal = host.contains(":") ? "[\(host)]" : host
        guard let url = URL(string: "http://\(literal):\(port)\(path)") else { throw LoopbackError("bad redirect URI") }
        return url
    }

    /// Accepts the redirect that carries `state` from now on (call it before the URL is shown, so a fast browser
    /// is not refused).
    public func expect(state: String) { expectedState.expect(state) }

    /// Waits for the redirect that carries `state` and returns its full URL.
    ///
    /// - Throws: ``Failure/timedOut``; ``Failure/stateMismatch`` as soon as a response with another `state`
    ///   arrives; `CancellationError`.
    public func waitForRedirect(state: String, timeout: TimeInterval = 300) async throws -> URL {
        let target: String = try await withThrowingTaskGroup(of: String.self) { group in
            group.addTask { try await self.expectedState.wait(for: state) }
            group.addTask {
                try await Task.sleep(for: .seconds(timeout.isNaN ? 300 : min(max(timeout, 0), 86_400)))
                throw Failure.timedOut
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw Failure.stopped }
            return first
        }
        let literal = host.contains(":") ? "[\(host)]" : host
        guard let url = URL(string: "http://\(literal):\(server.port)\(target)") else { throw Failure.stopped }
        return url
    }

    /// Stops listening (a request in flight is finished first).
    public func stop() {
        expectedState.cancel()
        server.stop(timeout: 2)
    }

    static func page(_ status: Int, _ text: String) -> HTTPServerResponse {
        var response = HTTPServerResponse.html(
            status,
            """
            <!doctype html><html lang="en"><head><meta charset="utf-8"><title>Sesame</title>
            <style>body{font:16px system-ui,sans-serif;margin:3rem auto;max-width:28rem;padding:0 1rem}</style>
            </head><body><p>\(text)</p></body></html>
            """)
        response.headers.set("Cache-Control", "no-store")
        response.headers.set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
        response.headers.set("Referrer-Policy", "no-referrer")
        return response
    }
}

/// The state the receiver waits for, and the continuation to resume.
private final class LockedState: @unchecked Sendable {
    /// What a request on the callback path did.
    enum Outcome {
        /// It carried the expected state: the wait is over.
        case completed
        /// It carried another state, or none with a code or an error: the wait failed.
        case mismatch
        /// It was no authorization response (no state, code or error), or came after the wait ended.
        case notAResponse
    }

    // Guarded by `lock`.
    private let lock = NSLock()
    private var expected: String?
    private var arrived: String?
    private var failure: LoopbackRedirectReceiver.Failure?
    private var continuation: CheckedContinuation<String, any Error>?
    private var cancelled = false

    func expect(_ state: String) {
        lock.lock()
        defer { lock.unlock() }
        expected = state
    }

    /// Whether a request with `state` completes the wait (then it resumes the waiter with `target`) or fails it.
    func accept(state: String?, isResponse: Bool, target: String) -> Outcome {
        lock.lock()
        defer { lock.unlock() }
        guard arrived == nil, failure == nil, !cancelled, let expected else { return .notAResponse }
        guard let state, Self.equal(expected, state) else {
            guard isResponse else { return .notAResponse }
            failure = .stateMismatch
            continuation?.resume(throwing: LoopbackRedirectReceiver.Failure.stateMismatch)
            continuation = nil
            return .mismatch
        }
        arrived = target
        continuation?.resume(returning: target)
        continuation = nil
        return .completed
    }

    /// Compares without stopping at the first difference.
    private static func equal(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        guard x.count == y.count else { return false }
        return zip(x, y).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    func wait(for state: String) async throws -> String {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<String, any Error>) in
                lock.lock()
                defer { lock.unlock() }
                expected = state
                if let arrived {
                    continuation.resume(returning: arrived)
                } else if let failure {
                    continuation.resume(throwing: failure)
                } else if cancelled || Task.isCancelled {
                    continuation.resume(throwing: CancellationError())
                } else {
                    self.continuation = continuation
                }
            }
        } onCancel: {
            cancel()
        }
    }

    func cancel() {
        lock.lock()
        defer { lock.unlock() }
        cancelled = true
        continuation?.resume(throwing: CancellationError())
        continuation = nil
    }
}
