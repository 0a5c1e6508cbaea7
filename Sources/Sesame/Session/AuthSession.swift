public import Foundation

/// What happened to a session, for observers.
///
/// Events carry no secrets.
public enum AuthEvent: Sendable, Equatable {
    /// Credentials were stored for a new sign-in.
    case signedIn
    /// The access token was refreshed (generation after the refresh).
    case refreshed(generation: Int)
    /// A refresh failed for a transient reason; credentials were kept.
    case refreshFailed(AuthError.Code)
    /// Credentials could not be persisted; they serve from memory and the save is retried.
    case persistenceFailed
    /// The session ended.
    case signedOut(SignOutReason)

    /// Why a session ended.
    public enum SignOutReason: Sendable, Equatable {
        /// The app or user signed out.
        case userInitiated
        /// The server definitively rejected the refresh token.
        case sessionExpired
    }
}

/// One signed-in identity: owns its ``TokenSet``, persists it through a ``TokenStore``, and refreshes it once for
/// every concurrent caller.
///
/// - **Single flight:** when the access token is about to expire (or a request got a 401), exactly one refresh
///   runs; every caller awaits the same task, and one caller's cancellation does not cancel it for the others.
/// - **Generations:** every change of credentials bumps ``generation``. A caller that got a 401 for generation
///   *n* when *n+1* already exists just retries with the new token.
/// - **Persist before use:** a rotated refresh token is saved before anyone receives the new access token. If the
///   save fails, the tokens still serve from memory, ``AuthEvent/persistenceFailed`` is emitted and the save is
///   retried on the next call.
/// - **Failure classes:** a definitive rejection (`invalid_grant`) deletes the credentials and ends the session
///   (after re-reading the store, in case another process rotated the token); a transient failure (network,
///   5xx, 429, store unavailable) keeps everything and throws a retryable error.
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

    /// The backend.
    public nonisolated let provider: any AuthProvider
    /// Where credentials persist.
    public nonisolated let store: any TokenStore
    /// The profile key in the store.
    public nonisolated let profile: String
    private let timeSource: any TimeSource
    private let leeway: TimeInterval
    private let budget: RefreshBudget

    private var tokens: TokenSet?
    private var loaded = false
    private var pendingSave = false
    /// Bumped on every change of credentials.
    public private(set) var generation = 0
    /// Bumped on every sign-in and sign-out: a refresh that started in another epoch is discarded.
    private var epoch = 0
    private var inFlight: Task<TokenSet, any Error>?
    private var refreshTimes: [ContinuousClock.Instant] = []
    private let eventContinuation: AsyncStream<AuthEvent>.Continuation

    /// Session events, in order.
    ///
    /// One consumer; later events wait in a buffer of 64.
    public nonisolated let events: AsyncStream<AuthEvent>

    /// Creates a session; credentials are read from the store on first use.
    ///
    /// - Parameters:
    ///   - provider: the backend that refreshes and signs out.
    ///   - store: where credentials persist.
    ///   - profile: the key in the store (default `default`).
    ///   - timeSource: the clock for expiry decisions.
    ///   - refreshLeeway: refresh this long before the access token expires (default 60 s).
    ///   - refreshBudget: the refresh-loop guard.
    public init(
        provider: any AuthProvider,
        store: any TokenStore,
        profile: String = "default",
        timeSource: any TimeSource = SystemTimeSource(),
        refreshLeeway: TimeInterval = 60,
        refreshBudget: RefreshBudget = RefreshBudget()
    ) {
        self.provider = provider
        self.store = store
        self.profile = profile
        self.timeSource = timeSource
        self.leeway = refreshLeeway
        self.budget = refreshBudget
        (events, eventContinuation) = AsyncStream.makeStream(of: AuthEvent.self, bufferingPolicy: .bufferingNewest(64))
    }

    deinit { eventContinuation.finish() }

    // MARK: Signing in and out

    /// Starts a session with fresh credentials: persisted first, then used.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/storeUnavailable`` when they cannot be saved (the session
    ///   does not start: a sign-in that would be forgotten at the next launch is reported, not hidden).
    public func signIn(with tokens: TokenSet) async throws {
        try await store.save(tokens, profile: profile)
        epoch += 1
        inFlight = nil
        self.tokens = tokens
        loaded = true
        pendingSave = false
        generation += 1
        eventContinuation.yield(.signedIn)
    }

    /// Ends the session: tells the server (best effort) and always deletes local credentials, even offline.
    public func signOut() async {
        await loadIfNeeded()
        let ending = tokens
        epoch += 1
        inFlight = nil
        tokens = nil
        generation += 1
        try? await store.delete(profile: profile)
        eventContinuation.yield(.signedOut(.userInitiated))
        if let ending { try? await provider.signOut(ending) }
    }

    /// Whether credentials exist (read from the store on first call).
    public var isSignedIn: Bool {
        get async {
            await loadIfNeeded()
            return tokens != nil
        }
    }

    /// The current credentials without refreshing, or nil.
    public var currentTokens: TokenSet? {
        get async {
            await loadIfNeeded()
            return tokens
        }
    }

    // MARK: Valid credentials

    /// Credentials whose access token is valid for at least `minimumValidity` (default: the refresh leeway),
    /// refreshed first if needed, and their generation.
    ///
    /// - Throws: ``AuthError``: ``AuthError/Code/notSignedIn``, ``AuthError/Code/sessionExpired`` (the refresh
    ///   was definitively rejected), transient errors (credentials kept), ``AuthError/Code/refreshBudgetExceeded``.
    public func validTokens(minimumValidity: TimeInterval? = nil) async throws -> (tokens: TokenSet, generation: Int) {
        await loadIfNeeded()
        await retryPendingSave()
        guard let current = tokens else { throw AuthError(.notSignedIn, "no one is signed in") }
        if !current.needsRefresh(at: timeSource.now, leeway: minimumValidity ?? leeway) {
            return (current, generation)
        }
        let refreshed = try await refreshSingleFlight(after: generation)
        return (refreshed, generation)
    }

    /// Called after a 401 for a request made with `generation`: retries with newer credentials if they exist,
    /// otherwise refreshes once for every caller.
    ///
    /// - Throws: ``AuthError`` as ``validTokens(minimumValidity:)`` does.
    public func refresh(after generation: Int) async throws -> (tokens: TokenSet, generation: Int) {
        await loadIfNeeded()
        guard let current = tokens else { throw AuthError(.notSignedIn, "no one is signed in") }
        if self.generation > generation { return (current, self.generation) }
        let refreshed = try await refreshSingleFlight(after: generation)
        return (refreshed, self.generation)
    }

    private func refreshSingleFlight(after observed: Int) async throws -> TokenSet {
        if let inFlight { return try await inFlight.value }
        if generation > observed, let tokens { return tokens }
        let startedEpoch = epoch
        let task = Task { try await self.performRefresh(epoch: startedEpoch) }
        inFlight = task
        defer { if epoch == startedEpoch { inFlight = nil } }
        return try await task.value
    }

    private func performRefresh(epoch startedEpoch: Int) async throws -> TokenSet {
        try chargeBudget()
        let store = self.store
        let profile = self.profile
        return try await store.withExclusiveAccess(profile: profile) {
            try await self.refreshHoldingLock(epoch: startedEpoch)
        }
    }

    private func refreshHoldingLock(epoch startedEpoch: Int) async throws -> TokenSet {
        guard let used = tokens else { throw AuthError(.notSignedIn, "no one is signed in") }
        // Another process may have refreshed already: adopt its newer credentials.
        if let stored = try? await store.load(profile: profile), stored.refreshToken != used.refreshToken,
            !stored.needsRefresh(at: timeSource.now, leeway: leeway)
        {
            return adopt(stored, epoch: startedEpoch)
        }
        do {
            let refreshed = try await provider.refresh(used)
            guard epoch == startedEpoch else {
                throw AuthError(.notSignedIn, "the session ended while refreshing; the result was discarded")
            }
            do {
                try await store.save(refreshed, profile: profile)
                pendingSave = false
            } catch {
                pendingSave = true
                eventContinuation.yield(.persistenceFailed)
            }
            return adopt(refreshed, epoch: startedEpoch)
        } catch let error as AuthError where error.requiresReauthentication {
            // Before giving up, re-read the store: another process may have rotated the token we used.
            if let stored = try? await store.load(profile: profile), stored.refreshToken != used.refreshToken {
                return adopt(stored, epoch: startedEpoch)
            }
            guard epoch == startedEpoch else { throw error }
            tokens = nil
            generation += 1
            epoch += 1
            try? await store.delete(profile: profile)
            eventContinuation.yield(.signedOut(.sessionExpired))
            throw AuthError(
                .sessionExpired, "the session has expired; sign in again", statusCode: error.statusCode,
                serverResponse: error.serverResponse)
        } catch let error as AuthError {
            eventContinuation.yield(.refreshFailed(error.code))
            throw error
        }
    }

    private func adopt(_ refreshed: TokenSet, epoch startedEpoch: Int) -> TokenSet {
        guard epoch == startedEpoch else { return refreshed }
        tokens = refreshed
        generation += 1
        eventContinuation.yield(.refreshed(generation: generation))
        return refreshed
    }

    private func chargeBudget() throws {
        let now = ContinuousClock.now
        refreshTimes.removeAll { now - $0 > budget.window }
        guard refreshTimes.count < budget.maxRefreshes else {
            throw AuthError(
                .refreshBudgetExceeded,
                "more than \(budget.maxRefreshes) refreshes in \(budget.window): stopping a refresh loop")
        }
        refreshTimes.append(now)
    }

    private func loadIfNeeded() async {
        guard !loaded else { return }
        let startedEpoch = epoch
        let stored = try? await store.load(profile: profile)
        guard !loaded, epoch == startedEpoch else { return }
        tokens = stored
        loaded = true
        if stored != nil { generation += 1 }
    }

    private func retryPendingSave() async {
        guard pendingSave, let tokens else { return }
        if (try? await store.save(tokens, profile: profile)) != nil { pendingSave = false }
    }
}
