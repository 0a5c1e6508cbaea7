public import Foundation
internal import SesameJOSE
internal import SesameLoopback

/// Sign-in for desktop and command-line apps (RFC 8252 §7.3).
///
/// The system browser shows the provider's page, and a listener on a loopback IP literal receives the redirect. The
/// model is AppAuth's `OIDRedirectHTTPHandler`.
///
/// The listener binds when the agent is made, so its ``redirectURI`` — with the port it got — is known before the
/// provider is configured (the redirect URI is part of every authorization request):
///
/// ```swift
/// let agent = try LoopbackUserAgent()   // http://127.0.0.1:PORT/callback, PORT picked now
/// let auth = try await OIDCAuth.configure(
///     issuer: issuer, clientID: "my-cli", redirectURI: agent.redirectURI, store: store)
/// try await auth.signIn(with: agent)
/// ```
///
/// Only the redirect with the sign-in's `state` completes it; one with another `state` ends the sign-in at once
/// (``AuthError/Code/invalidAuthorizationResponse``), the browser told why. An agent serves one sign-in: make a new
/// one for the next.
public final class LoopbackUserAgent: AuthorizationUserAgent, CustomReflectable {
    /// How the authorization URL reaches the user.
    public enum Opener: Sendable {
        /// The system browser: `xdg-open` on Linux, `open` on macOS. Where there is neither, or it fails (a server,
        /// an SSH session), the URL is written to standard error instead, so the sign-in never waits unseen.
        case systemBrowser
        /// Your code: print the URL, show it as a QR code for another device, post it to a test's browser — never an
        /// embedded web view (RFC 8252 §8.12: the app could read the user's password). For a sign-out
        /// (``endSession(url:redirectURI:state:)``) the URL carries the ID token as `id_token_hint`: do not print
        /// or log it as it is. A browser you start here
        /// (`Process`, `posix_spawn`, `system`) inherits none of the listener's descriptors: they are close-on-exec.
        case custom(@Sendable (URL) async throws -> Void)
    }

    /// The redirect URI to register and to configure: `http://127.0.0.1:PORT/PATH` (or `[::1]`).
    public let redirectURI: String
    /// How long ``authorize(url:redirectURI:state:)`` waits for the redirect.
    public let timeout: TimeInterval
    private let receiver: LoopbackRedirectReceiver
    private let opener: Opener
    private let used = LockedValue(false)

    /// What `dump()` and debuggers show: the redirect URI and the timeout, never the state or the response.
    public var customMirror: Mirror {
        Mirror(self, children: ["redirectURI": redirectURI, "timeout": timeout], displayStyle: .class)
    }

    /// Binds the listener now.
    ///
    /// - Parameters:
    ///   - host: `127.0.0.1` or `::1` — an IP literal, never `localhost` (RFC 8252 §8.3).
    ///   - port: the port; 0 (the default) takes a free one (RFC 8252 §7.3: providers accept any port).
    ///   - path: the redirect path.
    ///   - timeout: how long to wait for the user (default 5 minutes).
    ///   - open: how the URL reaches the user (default the system browser).
    /// - Throws: ``AuthError`` — ``AuthError/Code/configuration`` for a host that is not a loopback IP literal,
    ///   ``AuthError/Code/transport`` when the port cannot be bound.
    public init(
        host: String = "127.0.0.1", port: Int = 0, path: String = "/callback", timeout: TimeInterval = 300,
        open: Opener = .systemBrowser
    ) throws {
        guard host == "127.0.0.1" || host == "::1", (0...65535).contains(port) else {
            throw AuthError(.configuration, "a loopback redirect listens on 127.0.0.1 or ::1 and a port up to 65535")
        }
        receiver = LoopbackRedirectReceiver(host: host, port: port, path: path)
        do {
            redirectURI = try receiver.start().absoluteString
        } catch {
            throw AuthError(.transport, "cannot listen on \(host) port \(port): \(error)")
        }
        // NaN or infinity from the app must not trap where the timeout becomes an integer or a Duration.
        self.timeout = timeout.isNaN ? 300 : min(max(timeout, 0), 86_400)
        opener = open
    }

    deinit { receiver.stop() }

    /// Opens `url`, then waits for the redirect carrying `state`; the listener stops when it returns.
    ///
    /// - Throws: ``AuthError`` — ``AuthError/Code/invalidAuthorizationResponse`` (another `state` arrived),
    ///   ``AuthError/Code/cancelled`` (nothing within ``timeout``, or the task was cancelled),
    ///   ``AuthError/Code/configuration`` (another redirect URI, or a second sign-in with one agent); what the
    ///   opener throws.
    public func authorize(url: URL, redirectURI: String, state: String) async throws -> URL {
        try await present(url, redirectURI: redirectURI, state: state, purpose: .signIn)
    }

    /// Opens the provider's logout page and waits for its redirect back, as ``authorize(url:redirectURI:state:)``
    /// does for a sign-in; where no browser opens, the URL written to standard error says "sign out" and leaves
    /// out the ID token (`id_token_hint`), so a terminal's scrollback or a log never holds it.
    public func endSession(url: URL, redirectURI: String, state: String) async throws -> URL {
        try await present(url, redirectURI: redirectURI, state: state, purpose: .signOut)
    }

    /// What a page is opened for.
    enum Purpose { case signIn, signOut }

    private func present(_ url: URL, redirectURI: String, state: String, purpose: Purpose) async throws -> URL {
        guard redirectURI == self.redirectURI else {
            throw AuthError(
                .configuration,
                "the provider redirects to \(redirectURI), but this agent listens at \(self.redirectURI)")
        }
        guard
            used.withLock({ old in
                defer { old = true }
                return !old
            })
        else {
            throw AuthError(.configuration, "a LoopbackUserAgent serves one sign-in; make a new one")
        }
        defer { receiver.stop() }
        // Expected before the URL is shown, so a fast browser is not refused.
        receiver.expect(state: state)
        switch opener {
        case .systemBrowser:
            let message = Self.noBrowserMessage(for: url, purpose: purpose)
            Self.openInSystemBrowser(url) { FileHandle.standardError.write(Data(message.utf8)) }
        case .custom(let open): try await open(url)
        }
        do {
            return try await receiver.waitForRedirect(state: state, timeout: timeout)
        } catch LoopbackRedirectReceiver.Failure.stateMismatch {
            throw AuthError(
                .invalidAuthorizationResponse,
                "the redirect's state does not match this sign-in (another sign-in's, or sent by someone else); "
                    + "nothing was stored")
        } catch LoopbackRedirectReceiver.Failure.timedOut {
            throw AuthError(.cancelled, "no sign-in arrived within \(Int(timeout)) seconds")
        } catch is CancellationError {
            throw AuthError(.cancelled, "the sign-in was cancelled")
        }
    }

    /// Stops listening (a sign-in waiting then ends as cancelled).
    public func stop() { receiver.stop() }

    /// What standard error says when no browser opens: the URL to open, for a sign-out without its ID token (the
    /// provider may then ask the user to confirm the sign-out).
    static func noBrowserMessage(for url: URL, purpose: Purpose) -> String {
        switch purpose {
        case .signIn:
            return "No browser could be opened. Open this URL to sign in:\n\(url.absoluteString)\n"
        case .signOut:
            return "No browser could be opened. Open this URL to sign out (the ID token is left out of it, so the "
                + "provider may ask you to confirm):\n\(withoutIDToken(url))\n"
        }
    }

    /// `url` without its `id_token_hint` parameters, the rest of the query exactly as it was (a re-encoded `%2B`
    /// would reach the provider as a space); with no query at all when it cannot be taken apart (fail closed).
    static func withoutIDToken(_ url: URL) -> String {
        let text = url.absoluteString
        guard let mark = text.firstIndex(of: "?") else { return text }
        let base = text[..<mark]
        var query = text[text.index(after: mark)...]
        var fragment = ""
        if let hash = query.firstIndex(of: "#") {
            fragment = String(query[hash...])
            query = query[..<hash]
        }
        let kept = query.split(separator: "&", omittingEmptySubsequences: false).filter { pair in
            let name = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            guard let decoded = String(name).replacingOccurrences(of: "+", with: " ").removingPercentEncoding else {
                return false  // a name that does not decode may be the hint spelled otherwise: left out
            }
            return decoded != "id_token_hint"
        }
        return String(base) + (kept.isEmpty ? "" : "?" + kept.joined(separator: "&")) + fragment
    }

    /// `xdg-open` or `open`; calls `failed` where there is neither, it cannot start, or it exits with an error
    /// (`xdg-open` on a machine with no desktop does), and for any URL but an `http` or `https` one (an opener
    /// would also start a `file:` or custom-scheme URL's handler, or read one starting with `-` as an option).
    public static func openInSystemBrowser(_ url: URL, failed: @escaping @Sendable () -> Void = {}) {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host != nil else {
            return failed()
        }
        #if os(macOS) || os(Linux)
            #if os(macOS)
                let opener = "/usr/bin/open"
            #else
                let opener = "/usr/bin/xdg-open"
            #endif
            guard FileManager.default.isExecutableFile(atPath: opener) else { return failed() }
            let process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: opener)
            process.arguments = [url.absoluteString]
            process.standardInput = .null  // a browser it starts may live on: not on this terminal's input
            process.standardOutput = .null
            process.standardError = .null
            process.terminationHandler = { finished in
                if finished.terminationStatus != 0 { failed() }
            }
            do { try process.run() } catch { failed() }
        #else
            failed()
        #endif
    }
}
