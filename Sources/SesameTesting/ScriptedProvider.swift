import Foundation
public import Sesame

/// An ``AuthProvider`` for your tests: each refresh answers from a script — or, with none left, rotates to fresh
/// credentials of the same user (`USER-a1`/`USER-r1`, `USER-a2`/`USER-r2`, …) — and every call is recorded.
///
/// ```swift
/// let provider = ScriptedProvider(user: "alice")
/// await provider.enqueue(.failure(AuthError(.refreshRejected, "dead")))
/// let session = AuthSession(provider: provider, store: InMemoryTokenStore())
/// // … the next refresh ends the session: session.status == .signedOut(reason: .sessionExpired)
/// #expect(await provider.refreshes == 1)
/// ```
public actor ScriptedProvider: AuthProvider {
    /// What one refresh does.
    public enum Outcome: Sendable {
        /// Returns these credentials.
        case tokens(TokenSet)
        /// Throws this error (``AuthError/Code/refreshRejected`` ends the session; a transient one keeps it).
        case failure(AuthError)
    }

    /// The user the rotated credentials belong to.
    public let user: String
    /// How many refreshes were asked for.
    public private(set) var refreshes = 0
    /// The credentials each refresh was given, in order.
    public private(set) var refreshed: [TokenSet] = []
    /// The credentials each sign-out was given, in order.
    public private(set) var signedOut: [TokenSet] = []
    private var script: [Outcome] = []
    private var signOutFailure: AuthError?

    /// A provider whose rotated credentials belong to `user`.
    public init(user: String = "user") { self.user = user }

    /// Appends outcomes for the next refreshes.
    public func enqueue(_ outcomes: Outcome...) { script.append(contentsOf: outcomes) }

    /// Makes every sign-out throw `error` (nil: confirm them again).
    public func failSignOut(with error: AuthError?) { signOutFailure = error }

    /// The next scripted outcome, or rotated credentials.
    ///
    /// - Throws: a scripted ``AuthError``.
    public func refresh(_ tokens: TokenSet) async throws -> TokenSet {
        refreshes += 1
        refreshed.append(tokens)
        guard !script.isEmpty else {
            return TokenSet(
                accessToken: "\(user)-a\(refreshes)", refreshToken: "\(user)-r\(refreshes)", expiresAt: .distantFuture,
                user: .init(id: user))
        }
        switch script.removeFirst() {
        case .tokens(let next): return next
        case .failure(let error): throw error
        }
    }

    /// Records the sign-out.
    ///
    /// - Throws: the error given to ``failSignOut(with:)``.
    public func signOut(_ tokens: TokenSet) async throws {
        signedOut.append(tokens)
        if let signOutFailure { throw signOutFailure }
    }
}
