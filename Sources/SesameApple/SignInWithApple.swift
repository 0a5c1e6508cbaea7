// A thin wrapper over ASAuthorizationController: it asks for an Apple ID credential with the hashed nonce and
// returns the identity token with the raw nonce, ready for RESTAuthProvider.signInWithApple. The nonce logic
// (SignInWithAppleNonce) is portable and tested on Linux.
#if canImport(AuthenticationServices) && !os(watchOS)
    public import AuthenticationServices
    import Foundation
    import Sesame

    /// What Sign in with Apple returns, ready for your backend's exchange.
    public struct AppleIDSignInResult: Sendable, CustomStringConvertible, CustomDebugStringConvertible,
        CustomReflectable
    {
        /// The identity token (a JWT signed by Apple).
        public let identityToken: String
        /// The raw nonce whose SHA-256 the token carries.
        public let rawNonce: String
        /// Apple's stable user identifier.
        public let user: String
        /// The email, on first sign-in only.
        public let email: String?

        /// The user and whether an email came: never the identity token or the nonce.
        public var description: String {
            "AppleIDSignInResult(user: \(user), email: \(email == nil ? "none" : "present"))"
        }

        /// As ``description``.
        public var debugDescription: String { description }

        /// What `dump()` and debuggers show: as ``description``.
        public var customMirror: Mirror {
            Mirror(self, children: ["user": user, "email": email == nil ? "none" : "present"], displayStyle: .struct)
        }
    }

    /// Runs one Sign in with Apple request.
    @MainActor
    public final class AppleIDSignIn: NSObject, ASAuthorizationControllerDelegate,
        ASAuthorizationControllerPresentationContextProviding
    {
        private let anchor: ASPresentationAnchor
        private var continuation: CheckedContinuation<AppleIDSignInResult, any Error>?
        private var nonce = SignInWithAppleNonce()

        /// Presents from `anchor` (a window).
        public init(anchor: ASPresentationAnchor) { self.anchor = anchor }

        /// Asks for the user's Apple ID (with email and name scopes) and returns the identity token.
        ///
        /// - Throws: the AuthenticationServices error (`ASAuthorizationError.canceled` when the user closed it),
        ///   or ``AuthError`` with ``AuthError/Code/invalidResponse`` when no identity token came back.
        public func signIn() async throws -> AppleIDSignInResult {
            nonce = SignInWithAppleNonce()
            let request = ASAuthorizationAppleIDProvider().createRequest()
            request.requestedScopes = [.email, .fullName]
            request.nonce = nonce.hashed
            let controller = ASAuthorizationController(authorizationRequests: [request])
            controller.delegate = self
            controller.presentationContextProvider = self
            return try await withCheckedThrowingContinuation { continuation in
                self.continuation = continuation
                controller.performRequests()
            }
        }

        /// The window to present from.
        public func presentationAnchor(for controller: ASAuthorizationController) -> ASPresentationAnchor { anchor }

        // Recent SDKs declare the delegate main-actor isolated, older ones do not; AuthenticationServices calls it on
        // the main thread either way. Nonisolated callbacks that step onto the main actor (checked at run time)
        // satisfy both declarations.

        /// Delivers the credential.
        public nonisolated func authorizationController(
            controller: ASAuthorizationController, didCompleteWithAuthorization authorization: ASAuthorization
        ) {
            let credential = authorization.credential as? ASAuthorizationAppleIDCredential
            let token = credential?.identityToken.flatMap { String(data: $0, encoding: .utf8) }
            let user = credential?.user
            let email = credential?.email
            MainActor.assumeIsolated {
                guard let token, let user else {
                    continuation?.resume(throwing: AuthError(.invalidResponse, "Apple returned no identity token"))
                    continuation = nil
                    return
                }
                continuation?.resume(
                    returning: AppleIDSignInResult(identityToken: token, rawNonce: nonce.raw, user: user, email: email))
                continuation = nil
            }
        }

        /// Delivers the error.
        public nonisolated func authorizationController(
            controller: ASAuthorizationController, didCompleteWithError error: any Error
        ) {
            MainActor.assumeIsolated {
                continuation?.resume(throwing: error)
                continuation = nil
            }
        }
    }
#endif
