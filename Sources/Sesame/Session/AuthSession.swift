public import Foundation
internal import SesameJOSE

/// One signed-in identity: owns its ``TokenSet``, persists it through a ``TokenStore``, and refreshes it once for
/// every concurrent caller — in this process and in every other process that shares the store.
///
/// - **State machine:** the session is `loading` (the store has not been read, or could not be), `signedOut`,
///   `active`, or `refreshing`; every transition is a rule of an internal value type (tested without I/O), and
///   ``status`` shows where it stands. The actor performs what the rules decide: store I/O, provider calls, events.
/// - **A store that cannot be read is not "signed out":** the call throws ``AuthError/Code/storeUnavailable``
///   (transient) and the next call reads again.
/// - **Single flight:** when the access token is about to expire (or a request was rejected), exactly one refresh
///   runs; every caller awaits the same task, and one caller's cancellation does not cancel it for the others.
/// - **Across processes:** the refresh holds the store's cross-process lock, re-reads the store, adopts what
///   another process already rotated and refreshes — with the newest stored refresh token — only if that is still
///   needed. The new credentials are persisted before anyone uses them.
/// - **Epochs:** sign-in and sign-out start a new epoch; a refresh from an earlier one never reads, stores or
///   revives anything afterwards. Sign-out cancels and awaits the in-flight refresh before it deletes.
/// - **Failure classes:** a definitive rejection deletes the credentials and ends the session
///   (``AuthEvent/SignOutReason/sessionExpired``); a transient failure (network, 5xx, 429, store) keeps everything
///   and throws a retryable error. A failed save or delete is kept pending and retried on the next call.
/// - **Refresh budget:** more than ``RefreshBudget/maxRefreshes`` refreshes within ``RefreshBudget/window`` throw
///   ``AuthError/Code/refreshBudgetExceeded`` instead of looping.
public actor AuthSession {
    /// The refresh budget: a guard against refresh loops.
    public struct RefreshBudget: Sendable {
        /// Refreshes allowed within ``window``.
        public var maxRefreshes: Int
        /// The window.
        public var window: Duration

        /// Creates a budget (default 5 refreshes per 30 seconds).
        public init(maxRefreshes: Int = 5, window: Duration = .seconds(30)) {
            self.maxRefreshes = maxRefreshes
            self.window = window
        }
    }

    /// Where the session stands (the names ``AuthState/Status`` uses, plus `loading` and `refreshing`).
    public enum Status: Sendable, Equatable {
        /// The store has not been read yet, or could not be read (the next call tries again).
        case loading
        /// No credentials; `reason` says why when this session ended them.
        case signedOut(reason: AuthEvent.SignOutReason?)
        /// Credentials are in hand.
        case signedIn
        /// Credentials are in hand and a refresh is running.
        case refreshing

        /// The earlier name of ``signedIn``.
        @available(*, deprecated, renamed: "signedIn")
        public static var active: Status { .signedIn }
    }

    /// What ``signOut(revoke:)`` managed to do; its ``description`` says it in words.
    public struct SignOutResult: Sendable, CustomStringConvertible {
        /// Whether the server confirmed the end of the session.
        public enum Revocation: Sendable, CustomStringConvertible {
            /// The server confirmed.
            case confirmed
            /// Not attempted: nobody was signed in, or revocation was not asked for.
            case notAttempted
            /// The server did not confirm (the error says why); local credentials are deleted all the same.
            case failed(AuthError)

            /// `confirmed by the server`, `not attempted`, or `not confirmed: ERROR` (the error's description,
            /// which holds no secret).
            public var description: String {
                switch self {
                case .confirmed: "confirmed by the server"
                case .notAttempted: "not attempted"
                case .failed(let error): "not confirmed: \(error)"
                }
            }
        }

        /// For example `signed out; the server confirmed the revocation` or `nobody was signed in`.
        public var description: String {
            guard wasSignedIn else { return "nobody was signed in" }
            let local =
                credentialsRemoved ? "signed out" : "signed out here; deleting the stored credentials is pending"
            switch revocation {
            case .confirmed: return local + "; the server confirmed the revocation"
            case .notAttempted: return local + "; the server was not asked to revoke"
            case .failed(let error): return local + "; the server did not confirm the revocation (\(error))"
            }
        }

        /// The server's side.
        public let revocation: Revocation
        /// Whether local credentials are gone.
        ///
        /// When false the deletion is pending and retried on the next call.
        public let credentialsRemoved: Bool
        /// Whether anyone was signed in.
        public let wasSignedIn: Bool
    }

    /// The backend.
    public nonisolated let provider: any AuthProvider
    /// Where credentials persist.
    public nonisolated let store: any TokenStore
    /// The profile key in the store.
    public nonisolated let profile: String
    let timeSource: any TimeSource
    let leeway: TimeInterval
    /// How a refresh that failed transiently is tried again (``RetryPolicy``: only when the server cannot have used
    /// the refresh token).
    let retry: RetryPolicy
    nonisolated let broadcaster = EventBroadcaster()
    /// The state and its rules; every change is mirrored into ``snapshot``.
    var machine: SessionMachine {
        didSet {
            let current = machine.snapshot(leeway: leeway)
            snapshot.withLock { $0 = current }
        }
    }
    /// The credentials in hand while no refresh runs, readable without the actor: a caller whose credentials need
    /// nothing gets them without a hop onto the actor (the common case of every API call).
    private nonisolated let snapshot = LockedValue<SessionMachine.Snapshot?>(nil)
    /// The running refresh while ``SessionMachine/Phase/refreshing``.
    var refreshTask: Task<TokenSet, any Error>?
    private var operationBusy = false
    private var operationWaiters: [CheckedContinuation<Void, Never>] = []

    /// Creates a session; credentials are read from the store on first use.
    ///
    /// - Parameters:
    ///   - provider: the backend that refreshes and signs out.
    ///   - store: where credentials persist.
    ///   - profile: the key in the store (default `default`).
    ///   - timeSource: the clock for expiry decisions.
    ///   - refreshLeeway: refresh this long before the access token expires (default 60 s; never more than half
    ///     the token's lifetime; a negative value counts as 0, a NaN or infinite one as the default).
    ///   - refreshBudget: the refresh-loop guard.
    ///   - retry: how a refresh that failed transiently is tried again — only when the server answered 408, 429 or
    ///     503, or the connection was never made (a refresh token the server may have spent is never sent twice);
    ///     default ``RetryPolicy/none``.
    public init(
        provider: any AuthProvider,
        store: any TokenStore,
        profile: String = "default",
        timeSource: any TimeSource = SystemTimeSource(),
        refreshLeeway: TimeInterval = 60,
        refreshBudget: RefreshBudget = RefreshBudget(),
        retry: RetryPolicy = .none
    ) {
        self.retry = retry
        self.provider = provider
        self.store = store
        self.profile = profile
        self.timeSource = timeSource
        // A negative or NaN leeway would hand out expired tokens: finite and at least zero.
        self.leeway = refreshLeeway.isFinite ? max(0, refreshLeeway) : 60
        machine = SessionMachine(budget: refreshBudget, renewsWithoutRefreshToken: provider.renewsWithoutRefreshToken)
    }

    deinit { broadcaster.finish() }

    /// A new subscription to the session's events, in order.
    ///
    /// Every call returns its own stream: a view model and a logger can both listen, and one that stops listening
    /// (its task cancelled, its stream released) does not end the others'. Each stream buffers the newest
    /// `limit` events while its consumer is busy.
    public nonisolated func events(bufferingNewest limit: Int = 64) -> AsyncStream<AuthEvent> {
        broadcaster.subscribe(bufferingNewest: limit)
    }

    /// Where the session stands, without reading the store.
    public var status: Status {
        switch machine.phase {
        case .loading: .loading
        case .signedOut(let reason): .signedOut(reason: reason)
        case .active: .signedIn
        case .refreshing: .refreshing
        }
    }

    /// Bumped on every change of credentials.
    package var generation: Int { machine.generation }

    /// Sends what a transition decided.
    func send(_ events: [AuthEvent]) {
        for event in events {
            broadcaster.yield(event)
            Self.log(event, profile: profile)
        }
    }

    // MARK: Reading

    /// Reads the store if that has not happened yet (or failed last time).
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/storeUnavailable`` or ``AuthError/Code/storeCorrupt``; the
    ///   session then stays ``Status/loading``.
    public func load() async throws { try await ensureLoaded() }

    /// Whether credentials exist (the store is read on first call).
    ///
    /// - Throws: as ``load()``: an unreadable store is not "signed out".
    public var isSignedIn: Bool {
        get async throws {
            try await ensureLoaded()
            return machine.tokens != nil
        }
    }

    /// The current credentials without refreshing, or nil.
    ///
    /// - Throws: as ``load()``.
    public var currentTokens: TokenSet? {
        get async throws {
            try await ensureLoaded()
            return machine.tokens
        }
    }

    // MARK: Signing in and out

    /// Starts a session with fresh credentials: persisted first, then used.
    ///
    /// Any refresh of an earlier session is cancelled first and can never store anything afterwards.
    ///
    /// A Native SSO device secret among them is dropped: it belongs in the store the vendor's apps share
    /// (``NativeSSOStore``), never in a session's (catalog NSSO-04).
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/storeUnavailable`` when they cannot be saved (the session
    ///   does not start: a sign-in that would be forgotten at the next launch is reported, not hidden).
    public func signIn(with tokens: TokenSet) async throws {
        let tokens = tokens.withoutDeviceSecret
        await beginOperation()
        defer { endOperation() }
        _ = machine.beginSignIn()
        await endRefresh(grace: .zero)
        let store = self.store
        let profile = self.profile
        do {
            try await store.withExclusiveAccess(profile: profile) { try await store.save(tokens, profile: profile) }
        } catch {
            throw Self.normalized(error, .storeUnavailable, "cannot save the credentials")
        }
        send(machine.signedIn(tokens))
    }

    /// Ends the session: local credentials are always deleted (even offline), and the server is told unless
    /// `revoke` is false.
    ///
    /// The in-flight refresh, if any, is awaited first (for up to 5 s, then cancelled), so nothing it does lands
    /// afterwards and a refresh token the server has just rotated is the one revoked. The newest credentials —
    /// this process's, or those another process stored — are the ones revoked.
    ///
    /// - Parameter revoke: whether to tell the server (default true).
    /// - Returns: what was done; ``SignOutResult/revocation`` says whether the server confirmed.
    @discardableResult
    public func signOut(revoke: Bool = true) async -> SignOutResult {
        await beginOperation()
        defer { endOperation() }
        let memory = machine.beginSignOut()
        await endRefresh(grace: .seconds(5))
        var newest = machine.signedOut(memory: memory)
        let store = self.store
        let profile = self.profile
        var removed = true
        do {
            let stored = try await store.withExclusiveAccess(profile: profile) { () async throws -> TokenSet? in
                let stored: TokenSet?
                do {
                    stored = try await store.load(profile: profile)
                } catch let error as AuthError where error.reason == "newer_format" {
                    throw error  // a newer release's credentials: neither deleted unrevoked nor read
                } catch {
                    stored = nil  // unreadable: deleted all the same (the store kept a corrupt one aside)
                }
                try await store.delete(profile: profile)
                return stored
            }
            if let stored { newest = stored }
        } catch {
            removed = false
        }
        send(machine.signOutDeleted(removed, newest: newest))
        guard let newest else {
            return SignOutResult(revocation: .notAttempted, credentialsRemoved: removed, wasSignedIn: false)
        }
        guard revoke else {
            return SignOutResult(revocation: .notAttempted, credentialsRemoved: removed, wasSignedIn: true)
        }
        do {
            try await provider.signOut(newest)
            return SignOutResult(revocation: .confirmed, credentialsRemoved: removed, wasSignedIn: true)
        } catch {
            return SignOutResult(
                revocation: .failed(Self.revocationError(error)), credentialsRemoved: removed, wasSignedIn: true)
        }
    }

    // MARK: Valid credentials

    /// Credentials whose access token is valid for at least `minimumValidity` (default: the refresh leeway, capped
    /// at half the token's lifetime), refreshed first if needed.
    ///
    /// - Throws: ``AuthError``: ``AuthError/Code/notSignedIn``, ``AuthError/Code/sessionExpired`` (the refresh
    ///   was definitively rejected), transient errors (credentials kept; ``AuthError/Code/storeUnavailable`` for
    ///   a store that cannot be read), ``AuthError/Code/refreshBudgetExceeded``.
    public func validTokens(minimumValidity: TimeInterval? = nil) async throws -> TokenSet {
        try await credentials(minimumValidity: minimumValidity).tokens
    }

    /// Refreshes now, whatever the access token's expiry — unless another process refreshed since this session
    /// last read the store, in which case its credentials are adopted (a refresh just happened).
    ///
    /// - Throws: as ``validTokens(minimumValidity:)``.
    public func forceRefresh() async throws -> TokenSet {
        try await ensureLoaded()
        return try await refresh(.forced).tokens
    }

    /// Newer credentials after `rejected` was refused by a server: the current ones if they differ (someone
    /// refreshed already), otherwise one refresh for every caller.
    ///
    /// This is what an HTTP client's retry path calls (the Alamofire interceptor does).
    ///
    /// - Throws: as ``validTokens(minimumValidity:)``.
    public func refreshTokens(replacing rejected: TokenSet) async throws -> TokenSet {
        try await refreshTokens(rejectedAccessToken: rejected.accessToken)
    }

    /// Newer credentials after the access token `rejectedAccessToken` was refused by a server: the current ones if
    /// they carry another access token, otherwise one refresh for every caller.
    ///
    /// For HTTP stacks that remember which token a request carried rather than the whole ``TokenSet``.
    ///
    /// - Throws: as ``validTokens(minimumValidity:)``.
    public func refreshTokens(rejectedAccessToken: String) async throws -> TokenSet {
        try await ensureLoaded()
        if let current = machine.tokens, !ConstantTime.equals(current.accessToken, rejectedAccessToken) {
            return current
        }
        return try await refresh(.rejected).tokens
    }

    /// Credentials and their generation, refreshed if they expire within the leeway.
    package func credentials(minimumValidity: TimeInterval? = nil) async throws -> (tokens: TokenSet, generation: Int) {
        try await ensureLoaded()
        return try await decidedCredentials(minimumValidity)
    }

    /// Credentials that need nothing now (loaded, not expiring within the leeway, no pending save), read without a
    /// hop onto the actor; nil when anything is needed — then call ``credentials(minimumValidity:)``.
    nonisolated func freshCredentials() -> SessionMachine.Snapshot? {
        guard let current = snapshot.withLock({ $0 }), current.usable(at: timeSource.now) else { return nil }
        return current
    }

    private func decidedCredentials(_ minimumValidity: TimeInterval?) async throws
        -> (tokens: TokenSet, generation: Int)
    {
        switch machine.decide(wanted: minimumValidity ?? leeway, now: timeSource.now) {
        case .notSignedIn: throw AuthError(.notSignedIn, "no one is signed in")
        case .use(let tokens, let generation): return (tokens, generation)
        case .refresh(let intent): return try await refresh(intent)
        }
    }

    /// Credentials newer than `rejectedGeneration`: the current ones if they are, else one refresh.
    package func credentials(after rejectedGeneration: Int) async throws -> (tokens: TokenSet, generation: Int) {
        try await ensureLoaded()
        if let newer = machine.newer(than: rejectedGeneration) { return newer }
        return try await refresh(.rejected)
    }

    // MARK: Operations

    /// Sign-in, sign-out and pending deletes run one at a time.
    func beginOperation() async {
        guard operationBusy else {
            operationBusy = true
            return
        }
        await withCheckedContinuation { operationWaiters.append($0) }
    }

    func endOperation() {
        if operationWaiters.isEmpty {
            operationBusy = false
        } else {
            operationWaiters.removeFirst().resume()
        }
    }

    // MARK: Errors

    /// `error` as this module throws it: an ``AuthError`` or `CancellationError` as it is, anything else (a
    /// custom store's or provider's own error) wrapped with `code`.
    static func normalized(_ error: any Error, _ code: AuthError.Code, _ message: String) -> any Error {
        if error is CancellationError || error is AuthError { return error }
        return AuthError(code, "\(message): \(type(of: error))")
    }

    /// Why a revocation was not confirmed (a cancellation included: it is reported, not thrown).
    private static func revocationError(_ error: any Error) -> AuthError {
        (normalized(error, .transport, "the provider failed") as? AuthError) ?? AuthError(.transport, "cancelled")
    }
}
