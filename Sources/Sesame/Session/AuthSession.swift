public import Foundation
internal import SesameJOSE

/// One signed-in identity: owns its ``TokenSet``, persists it through a ``TokenStore``, and refreshes it once for
/// every concurrent caller — in this process and in every other process that shares the store.
///
/// - **State machine:** the session is `loading` (the store has not been read, or could not be), `signedOut`,
///   `active`, or `refreshing`; every transition is written down in this file, and ``status`` shows it.
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

    /// Where the session stands.
    public enum Status: Sendable, Equatable {
        /// The store has not been read yet, or could not be read (the next call tries again).
        case loading
        /// No credentials; `reason` says why when this session ended them.
        case signedOut(reason: AuthEvent.SignOutReason?)
        /// Credentials are in hand.
        case active
        /// Credentials are in hand and a refresh is running.
        case refreshing
    }

    /// What ``signOut(revoke:)`` managed to do.
    public struct SignOutResult: Sendable {
        /// Whether the server confirmed the end of the session.
        public enum Revocation: Sendable {
            /// The server confirmed.
            case confirmed
            /// Not attempted: nobody was signed in, or revocation was not asked for.
            case notAttempted
            /// The server did not confirm (the error says why); local credentials are deleted all the same.
            case failed(AuthError)
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
    private let timeSource: any TimeSource
    private let leeway: TimeInterval
    private let budget: RefreshBudget
    private let broadcaster = EventBroadcaster()

    // The state machine. Transitions (and nothing else changes `state`):
    //   loading     → active | signedOut(nil)                          ensureLoaded() read the store
    //   loading     → loading                                          the read failed (thrown, retried next call)
    //   any         → active(new)                                      signIn(with:) saved the new credentials
    //   any         → signedOut(.userInitiated)                        signOut(revoke:)
    //   active      → refreshing(tokens, task)                         startRefresh(_:)
    //   refreshing  → active(newer)                                    the task refreshed, or adopted a newer store
    //   refreshing  → active(same)                                     the task failed transiently
    //   refreshing  → signedOut(.sessionExpired | .signedOutElsewhere) definitive rejection / store emptied elsewhere
    // Every transition out of `refreshing` is made by the refresh task itself and only in the epoch it started in.
    private enum State {
        case loading
        case signedOut(AuthEvent.SignOutReason?)
        case active(TokenSet)
        case refreshing(TokenSet, Task<TokenSet, any Error>)

        var tokens: TokenSet? {
            switch self {
            case .active(let tokens), .refreshing(let tokens, _): tokens
            case .loading, .signedOut: nil
            }
        }
    }

    /// Why a refresh runs.
    private enum Intent {
        /// The access token expires within this leeway.
        case expiring(TimeInterval)
        /// The credentials of this generation were rejected.
        case rejected
        /// The caller asked for a refresh.
        case forced
        /// Only retry a save that failed.
        case persist
    }

    private var state = State.loading
    /// Bumped on every change of credentials.
    package private(set) var generation = 0
    /// Bumped on every sign-in and sign-out.
    private var epoch = 0
    /// Credentials in memory that the store does not have yet (their save failed), and the stored credentials
    /// they replace: the save is retried only while the store still holds those.
    private var pendingSave: (tokens: TokenSet, replacing: TokenSet)?
    /// Credentials this session ended whose delete failed: deleted later only if the store still holds them.
    private var pendingDelete: TokenSet?
    /// Credentials a refresh obtained after its epoch ended: revoked by the sign-out that ended it.
    private var discarded: TokenSet?
    private var refreshTimes: [ContinuousClock.Instant] = []
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
    ///     the token's lifetime).
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
        switch state {
        case .loading: .loading
        case .signedOut(let reason): .signedOut(reason: reason)
        case .active: .active
        case .refreshing: .refreshing
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
            return state.tokens != nil
        }
    }

    /// The current credentials without refreshing, or nil.
    ///
    /// - Throws: as ``load()``.
    public var currentTokens: TokenSet? {
        get async throws {
            try await ensureLoaded()
            return state.tokens
        }
    }

    // MARK: Signing in and out

    /// Starts a session with fresh credentials: persisted first, then used.
    ///
    /// Any refresh of an earlier session is cancelled first and can never store anything afterwards.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/storeUnavailable`` when they cannot be saved (the session
    ///   does not start: a sign-in that would be forgotten at the next launch is reported, not hidden).
    public func signIn(with tokens: TokenSet) async throws {
        await beginOperation()
        defer { endOperation() }
        epoch += 1
        await endRefresh(grace: .zero)
        let store = self.store
        let profile = self.profile
        do {
            try await store.withExclusiveAccess(profile: profile) { try await store.save(tokens, profile: profile) }
        } catch {
            throw Self.normalized(error, .storeUnavailable, "cannot save the credentials")
        }
        pendingDelete = nil
        pendingSave = nil
        discarded = nil
        generation += 1
        state = .active(tokens)
        broadcaster.yield(.signedIn)
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
        var newest = state.tokens
        epoch += 1
        await endRefresh(grace: .seconds(5))
        if let discarded { newest = discarded }
        discarded = nil
        pendingSave = nil
        generation += 1
        state = .signedOut(.userInitiated)
        let store = self.store
        let profile = self.profile
        var removed = true
        do {
            let stored = try await store.withExclusiveAccess(profile: profile) { () async throws -> TokenSet? in
                let stored = try? await store.load(profile: profile)
                try await store.delete(profile: profile)
                return stored
            }
            if let stored { newest = stored }
            pendingDelete = nil
        } catch {
            // Retried later, and only while the store still holds what this session ended.
            pendingDelete = newest
            removed = false
            broadcaster.yield(.persistenceFailed)
        }
        broadcaster.yield(.signedOut(.userInitiated))
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
        if let current = state.tokens, !ConstantTime.equals(current.accessToken, rejectedAccessToken) {
            return current
        }
        return try await refresh(.rejected).tokens
    }

    /// Credentials and their generation, refreshed if they expire within the leeway.
    package func credentials(minimumValidity: TimeInterval? = nil) async throws -> (tokens: TokenSet, generation: Int) {
        try await ensureLoaded()
        switch state {
        case .loading, .signedOut: throw AuthError(.notSignedIn, "no one is signed in")
        case .refreshing: return try await refresh(.expiring(minimumValidity ?? leeway))
        case .active(let tokens):
            let wanted = minimumValidity ?? leeway
            let now = timeSource.now
            // Without a refresh token an early refresh is impossible: a token still valid is used until it expires.
            let stillValid = tokens.expiresAt.map { $0 > now } ?? true
            if tokens.needsRefresh(at: now, leeway: wanted), tokens.refreshToken != nil || !stillValid {
                return try await refresh(.expiring(wanted))
            }
            if pendingSave != nil { return try await refresh(.persist) }
            return (tokens, generation)
        }
    }

    /// Credentials newer than `rejectedGeneration`: the current ones if they are, else one refresh.
    package func credentials(after rejectedGeneration: Int) async throws -> (tokens: TokenSet, generation: Int) {
        try await ensureLoaded()
        if generation > rejectedGeneration, case .active(let tokens) = state { return (tokens, generation) }
        return try await refresh(.rejected)
    }

    // MARK: The refresh

    /// Joins the in-flight refresh or starts one.
    ///
    /// A joined refresh that did not serve this intent (it only
    /// retried a save, or its result still expires too soon) is followed by one more.
    private func refresh(_ intent: Intent) async throws -> (tokens: TokenSet, generation: Int) {
        let startedEpoch = epoch
        for attempt in 0..<2 {
            let task: Task<TokenSet, any Error>
            let joined: Bool
            switch state {
            case .loading, .signedOut: throw AuthError(.notSignedIn, "no one is signed in")
            case .refreshing(_, let running):
                task = running
                joined = true
            case .active(let tokens):
                task = Task { try await self.runRefresh(intent, epoch: startedEpoch) }
                state = .refreshing(tokens, task)
                joined = false
            }
            let before = generation
            let tokens: TokenSet
            do {
                tokens = try await task.value
            } catch {
                guard epoch == startedEpoch else { throw Self.ended }
                throw error
            }
            guard epoch == startedEpoch else { throw Self.ended }
            if !joined || attempt == 1 || served(intent, tokens, since: before) { return (tokens, generation) }
        }
        throw Self.ended  // not reached: the second attempt always returns
    }

    private func served(_ intent: Intent, _ tokens: TokenSet, since generation: Int) -> Bool {
        switch intent {
        case .expiring(let wanted): !tokens.needsRefresh(at: timeSource.now, leeway: wanted)
        case .rejected, .forced: self.generation > generation
        case .persist: true
        }
    }

    private static let ended = AuthError(.notSignedIn, "the session ended while refreshing; the result was discarded")

    /// The refresh task's body: every exit leaves `refreshing` (in its own epoch only).
    private func runRefresh(_ intent: Intent, epoch startedEpoch: Int) async throws -> TokenSet {
        let store = self.store
        let profile = self.profile
        do {
            let tokens = try await store.withExclusiveAccess(profile: profile) {
                try await self.refreshHoldingLock(intent, epoch: startedEpoch)
            }
            // Every path above ends in finish(with:) or endSession; this only guards the invariant.
            if epoch == startedEpoch, case .refreshing = state { return try finish(with: tokens, epoch: startedEpoch) }
            return tokens
        } catch {
            let failure = Self.normalized(error, .transport, "the provider failed")
            guard epoch == startedEpoch else { throw failure }
            if case .refreshing(let tokens, _) = state {
                state = .active(tokens)
                if let code = (failure as? AuthError)?.code { broadcaster.yield(.refreshFailed(code)) }
            }
            throw failure
        }
    }

    /// Under the cross-process lock: re-read, adopt, refresh only if still needed, persist, then use.
    private func refreshHoldingLock(_ intent: Intent, epoch startedEpoch: Int) async throws -> TokenSet {
        guard epoch == startedEpoch, case .refreshing(let memory, _) = state else { throw Self.ended }
        let stored: TokenSet?
        do {
            stored = try await store.load(profile: profile)
        } catch let error as AuthError where error.code == .storeCorrupt {
            // The store kept the unreadable data aside; the credentials in memory are the newest known.
            guard epoch == startedEpoch else { throw Self.ended }
            try await persist(memory, replacing: memory, epoch: startedEpoch)
            stored = memory
        } catch {
            throw Self.normalized(error, .storeUnavailable, "cannot read the credentials before refreshing")
        }
        guard epoch == startedEpoch else { throw Self.ended }
        var candidate = memory
        if let pending = pendingSave {
            // A save that failed earlier: write it only while the store still holds what it replaces.
            if Self.same(stored, pending.replacing) {
                if (try? await store.save(pending.tokens, profile: profile)) != nil { pendingSave = nil }
                guard epoch == startedEpoch else { throw Self.ended }
            } else {
                pendingSave = nil
                if !Self.same(stored, pending.tokens) {
                    candidate = try await adoptOrEnd(stored, memory, epoch: startedEpoch)
                }
            }
            if case .persist = intent, Self.same(candidate, memory) {
                return try finish(with: memory, epoch: startedEpoch)
            }
        } else if !Self.same(stored, memory) {
            candidate = try await adoptOrEnd(stored, memory, epoch: startedEpoch)
        }
        let adopted = !Self.same(candidate, memory)
        switch intent {
        case .expiring(let wanted) where !candidate.needsRefresh(at: timeSource.now, leeway: wanted):
            return try finish(with: candidate, epoch: startedEpoch)
        case .rejected where adopted, .forced where adopted, .persist:
            return try finish(with: candidate, epoch: startedEpoch)
        default:
            break
        }
        try chargeBudget()
        let refreshed: TokenSet
        do {
            refreshed = try await provider.refresh(candidate)
        } catch let error as AuthError where error.code == .dpopKeyMismatch {
            guard epoch == startedEpoch else { throw Self.ended }
            return try await endSession(.dpopKeyLost, deleting: candidate, epoch: startedEpoch, cause: error)
        } catch let error as AuthError where error.code == .refreshRejected {
            guard epoch == startedEpoch else { throw Self.ended }
            // A process that does not take the lock may have rotated the token meanwhile: adopt its newer one.
            if let stored = try? await store.load(profile: profile), stored.refreshToken != candidate.refreshToken,
                Self.sameUser(stored, candidate), epoch == startedEpoch
            {
                return try finish(with: stored, epoch: startedEpoch)
            }
            guard epoch == startedEpoch else { throw Self.ended }
            return try await endSession(
                .sessionExpired, deleting: candidate, epoch: startedEpoch, cause: error)
        }
        guard epoch == startedEpoch else {
            discarded = refreshed
            throw Self.ended
        }
        try await persist(refreshed, replacing: candidate, epoch: startedEpoch)
        return try finish(with: refreshed, epoch: startedEpoch)
    }

    /// What another process left in the store: adopted when it is the same user's session (rotated there), the
    /// end of this session when the store is empty (signed out there) or holds another user's sign-in.
    private func adoptOrEnd(_ stored: TokenSet?, _ memory: TokenSet, epoch startedEpoch: Int) async throws -> TokenSet {
        guard let stored, Self.sameUser(stored, memory) else {
            return try await endSession(.signedOutElsewhere, deleting: nil, epoch: startedEpoch)
        }
        return stored
    }

    /// Whether two token sets are the same credentials: the same access and refresh tokens, byte for byte (other
    /// fields may differ after a trip through a store's encoding).
    private static func same(_ lhs: TokenSet?, _ rhs: TokenSet?) -> Bool {
        guard let lhs, let rhs else { return lhs == nil && rhs == nil }
        return ByteExact.equals(lhs.accessToken, rhs.accessToken)
            && ByteExact.equals(lhs.refreshToken ?? "", rhs.refreshToken ?? "")
            && (lhs.refreshToken == nil) == (rhs.refreshToken == nil)
    }

    /// Whether two token sets belong to one user (unknown users are taken to be the same).
    private static func sameUser(_ lhs: TokenSet, _ rhs: TokenSet) -> Bool {
        guard let left = lhs.user?.id, let right = rhs.user?.id else { return true }
        return ByteExact.equals(left, right)
    }

    /// Saves before use, retrying twice; if the store still refuses, the credentials serve from memory and the
    /// save stays pending (written later only while the store still holds `replaced`).
    private func persist(_ tokens: TokenSet, replacing replaced: TokenSet, epoch startedEpoch: Int) async throws {
        for attempt in 0..<3 {
            if attempt > 0 { try? await Task.sleep(for: .milliseconds(20 * attempt)) }
            if (try? await store.save(tokens, profile: profile)) != nil {
                pendingSave = nil
                return
            }
            guard epoch == startedEpoch else { throw Self.ended }
        }
        pendingSave = (tokens, replaced)
        broadcaster.yield(.persistenceFailed)
    }

    /// Makes the transition `refreshing → active(tokens)`, in the refresh's own epoch only.
    private func finish(with tokens: TokenSet, epoch startedEpoch: Int) throws -> TokenSet {
        guard epoch == startedEpoch else { throw Self.ended }
        let changed = !Self.same(state.tokens, tokens)
        state = .active(tokens)
        if changed {
            generation += 1
            broadcaster.yield(.refreshed(generation: generation))
        }
        return tokens
    }

    /// Makes the transition `refreshing → signedOut(reason)`.
    ///
    /// Called holding the cross-process lock; when the server ended the
    /// session the stored credentials are deleted first (or the deletion is kept pending). The state stays
    /// `refreshing` until then, so a sign-in meanwhile waits for this task and its delete cannot hit the new
    /// session's credentials.
    private func endSession(
        _ reason: AuthEvent.SignOutReason, deleting ended: TokenSet?, epoch startedEpoch: Int, cause: AuthError? = nil
    ) async throws -> TokenSet {
        let deleted = ended == nil ? true : (try? await store.delete(profile: profile)) != nil
        guard epoch == startedEpoch else { throw Self.ended }
        generation += 1
        state = .signedOut(reason)
        pendingSave = nil
        if !deleted {
            pendingDelete = ended
            broadcaster.yield(.persistenceFailed)
        }
        broadcaster.yield(.signedOut(reason))
        switch reason {
        case .signedOutElsewhere:
            throw AuthError(.notSignedIn, "the session was ended by another process sharing the store")
        case .dpopKeyLost:
            throw cause ?? AuthError(.dpopKeyMismatch, "the credentials were bound to a lost DPoP key; sign in again")
        default:
            throw AuthError(
                .sessionExpired, "the session has expired; sign in again", statusCode: cause?.statusCode,
                serverResponse: cause?.serverResponse)
        }
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

    /// Waits for the in-flight refresh — for `grace`, then cancels it — so nothing it does can land later.
    private func endRefresh(grace: Duration) async {
        guard case .refreshing(let tokens, let task) = state else { return }
        if grace > .zero {
            let deadline = Task {
                try? await Task.sleep(for: grace)
                task.cancel()
            }
            _ = await task.result
            deadline.cancel()
        } else {
            task.cancel()
            _ = await task.result
        }
        if case .refreshing(_, let current) = state, current == task { state = .active(tokens) }
    }

    // MARK: Loading and pending writes

    private func ensureLoaded() async throws {
        if pendingDelete != nil { await retryPendingDelete() }
        guard case .loading = state else { return }
        let startedEpoch = epoch
        let stored: TokenSet?
        do {
            stored = try await store.load(profile: profile)
        } catch {
            broadcaster.yield(.storeUnavailable)
            throw Self.normalized(error, .storeUnavailable, "cannot read the credentials")
        }
        guard epoch == startedEpoch, case .loading = state else { return }
        if let stored {
            do {
                try provider.checkStoredCredentials(stored)
            } catch let error as AuthError where error.code == .dpopKeyMismatch {
                // Another process signed in again with a new key after this provider read its own: not lost.
                if await provider.storedCredentialsMayBeUsable(stored) {
                    throw AuthError(
                        .storeUnavailable,
                        "profile \(profile) was signed in again with a new DPoP key while this ran; try again")
                }
                // Unusable by this provider (bound to a key it does not have): the session ends here, before any
                // request that could use them, with the grant revoked and the credentials gone.
                await endUnusable(stored, epoch: startedEpoch)
                throw error
            }
            generation += 1
            state = .active(stored)
        } else {
            state = .signedOut(nil)
        }
        broadcaster.yield(.loaded(signedIn: stored != nil))
    }

    /// Ends a session whose stored credentials this provider cannot use (a lost DPoP key): revokes them first,
    /// best effort (revocation needs no proof, and the grant must not outlive the key it was bound to, which may
    /// have leaked), then deletes them under the cross-process lock unless another sign-in replaced them meanwhile
    /// — then the next call reads that one.
    private func endUnusable(_ stored: TokenSet, epoch startedEpoch: Int) async {
        try? await provider.signOut(stored)
        let store = self.store
        let profile = self.profile
        let outcome = try? await store.withExclusiveAccess(profile: profile) { () async throws -> Bool in
            guard let current = try await store.load(profile: profile) else { return true }
            guard Self.same(current, stored) else { return false }  // a newer sign-in: not ours to delete
            try await store.delete(profile: profile)
            return true
        }
        guard epoch == startedEpoch, case .loading = state else { return }
        if outcome == false { return }  // stay .loading: the next call reads the newer credentials
        generation += 1
        state = .signedOut(.dpopKeyLost)
        if outcome == nil {
            pendingDelete = stored
            broadcaster.yield(.persistenceFailed)
        }
        broadcaster.yield(.signedOut(.dpopKeyLost))
    }

    /// A deletion that failed at sign-out (or at a definitive rejection) is retried — serialised with sign-in,
    /// under the cross-process lock, and only while the store still holds exactly the credentials this session
    /// ended, so that it can never delete a newer session's.
    private func retryPendingDelete() async {
        await beginOperation()
        defer { endOperation() }
        guard let ended = pendingDelete, state.tokens == nil else { return }
        let store = self.store
        let profile = self.profile
        let done = try? await store.withExclusiveAccess(profile: profile) { () async throws -> Bool in
            guard let stored = try await store.load(profile: profile) else { return true }
            guard Self.same(stored, ended) else { return true }  // someone signed in since: not ours to delete
            try await store.delete(profile: profile)
            return true
        }
        if done == true { pendingDelete = nil }
    }

    /// Sign-in, sign-out and pending deletes run one at a time.
    private func beginOperation() async {
        guard operationBusy else {
            operationBusy = true
            return
        }
        await withCheckedContinuation { operationWaiters.append($0) }
    }

    private func endOperation() {
        if operationWaiters.isEmpty {
            operationBusy = false
        } else {
            operationWaiters.removeFirst().resume()
        }
    }

    // MARK: Errors

    /// `error` as this module throws it: an ``AuthError`` or `CancellationError` as it is, anything else (a
    /// custom store's or provider's own error) wrapped with `code`.
    private static func normalized(_ error: any Error, _ code: AuthError.Code, _ message: String) -> any Error {
        if error is CancellationError || error is AuthError { return error }
        return AuthError(code, "\(message): \(type(of: error))")
    }

    /// Why a revocation was not confirmed (a cancellation included: it is reported, not thrown).
    private static func revocationError(_ error: any Error) -> AuthError {
        (normalized(error, .transport, "the provider failed") as? AuthError) ?? AuthError(.transport, "cancelled")
    }
}
