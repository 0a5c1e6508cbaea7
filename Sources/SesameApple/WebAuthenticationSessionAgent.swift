// The Apple user agent for OpenID Connect sign-in: a thin shim over ASWebAuthenticationSession. Everything it
// drives (the request, the redirect checks, the exchange) is the portable OIDCAuthProvider, tested on Linux; this
// file only presents the page and hands back the redirect URL.
#if canImport(AuthenticationServices) && (os(iOS) || os(macOS) || os(visionOS))
    public import AuthenticationServices
    public import Foundation
    public import Sesame

    /// Presents the provider's page in `ASWebAuthenticationSession` and returns the redirect.
    ///
    /// The redirect URI must use a private-use scheme (`com.example.app:/oauth`), whose scheme is the session's
    /// callback scheme. `prefersEphemeralSession` (default true) shares no cookies with Safari, so no "wants to
    /// use … to sign in" prompt and no lingering browser session.
    @MainActor
    public final class WebAuthenticationSessionAgent: NSObject, AuthorizationUserAgent,
        ASWebAuthenticationPresentationContextProviding
    {
        /// Whether the session is ephemeral.
        public let prefersEphemeralSession: Bool
        private let anchor: @MainActor () -> ASPresentationAnchor
        /// The session on screen: kept alive until it completes (a released session closes its sheet).
        private var current: ASWebAuthenticationSession?

        /// An agent presenting from the window `anchor` returns.
        public init(prefersEphemeralSession: Bool = true, anchor: @escaping @MainActor () -> ASPresentationAnchor) {
            self.prefersEphemeralSession = prefersEphemeralSession
            self.anchor = anchor
        }

        /// Presents `url`; returns the callback URL, or throws ``AuthError`` with ``AuthError/Code/cancelled``
        /// when the user closed the sheet.
        public func authorize(url: URL, redirectURI: String, state: String) async throws -> URL {
            guard let scheme = URL(string: redirectURI)?.scheme, scheme != "https", scheme != "http" else {
                throw AuthError(
                    .configuration,
                    "WebAuthenticationSessionAgent needs a private-use redirect scheme (com.example.app:/oauth)")
            }
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    // @Sendable: the system calls this on a queue of its own; a closure inferred main-actor
                    // isolated (it is written in a main-actor method) would trap there at its entry check.
                    let session = ASWebAuthenticationSession(url: url, callbackURLScheme: scheme) {
                        @Sendable callback, error in
                        if let callback {
                            continuation.resume(returning: callback)
                        } else if let error = error as? ASWebAuthenticationSessionError, error.code == .canceledLogin {
                            continuation.resume(throwing: AuthError(.cancelled, "the user cancelled the sign-in"))
                        } else {
                            continuation.resume(
                                throwing: AuthError(
                                    .cancelled, "the sign-in sheet ended: \(error.map { "\($0)" } ?? "no callback")"))
                        }
                        Task { @MainActor [weak self] in self?.current = nil }
                    }
                    session.presentationContextProvider = self
                    session.prefersEphemeralWebBrowserSession = prefersEphemeralSession
                    current = session
                    if !session.start() {
                        current = nil
                        continuation.resume(
                            throwing: AuthError(.configuration, "the sign-in sheet could not be started"))
                    }
                }
            } onCancel: {
                // The calling task was cancelled: close the sheet, which completes with canceledLogin.
                Task { @MainActor [weak self] in self?.current?.cancel() }
            }
        }

        /// The window the sheet is presented from.
        public func presentationAnchor(for session: ASWebAuthenticationSession) -> ASPresentationAnchor { anchor() }
    }
#endif
