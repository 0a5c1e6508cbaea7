import Foundation
internal import SesameJOSE

/// ``AuthSession``'s state and every rule that moves it, without I/O.
///
/// Each transition is a mutating method that returns what the actor must do next — the events to send, the store
/// write to make, the provider call, the credentials to hand out — and the actor performs it. Work that started in
/// one epoch carries its ``Ticket``; once sign-in or sign-out has started another epoch, every transition that
/// takes the ticket refuses it (``check(_:)``, the one epoch check).
///
/// Transitions (nothing else changes ``phase``):
///
/// | from | to | by |
/// |---|---|---|
/// | loading | active, signedOut(nil) | ``loaded(_:_:)`` — the store was read |
/// | loading | loading | ``loadFailed()`` — the read failed (thrown, retried next call) |
/// | loading | signedOut(.dpopKeyLost), loading | ``endedUnusable(_:outcome:_:)`` — bound to a key this launch lacks |
/// | any | active(new) | ``signedIn(_:)`` after ``beginSignIn()`` — the new credentials were saved |
/// | any | signedOut(.userInitiated) | ``signedOut(memory:)`` after ``beginSignOut()`` |
/// | active | refreshing | ``startRefresh()`` |
/// | refreshing | active(newer or same) | ``finish(_:_:)`` — refreshed, adopted, or still valid |
/// | refreshing | active(same) | ``refreshFailed(_:_:)`` — a transient failure |
/// | refreshing | signedOut(reason) | ``endSession(_:ended:deleted:_:)`` — rejected, emptied elsewhere, key lost |
/// | refreshing | active(same) | ``refreshAbandoned()`` — sign-in or sign-out cancelled it |
struct SessionMachine {
    /// Where the session stands.
    enum Phase: Equatable {
        case loading
        case signedOut(AuthEvent.SignOutReason?)
        case active(TokenSet)
        case refreshing(TokenSet)

    }

    /// Why a refresh runs.
    enum Intent: Equatable {
        /// The access token expires within this leeway.
        case expiring(TimeInterval)
        /// The credentials of this generation were rejected.
        case rejected
        /// The caller asked for a refresh.
        case forced
        /// Only retry a save that failed.
        case persist
    }

    /// The epoch some work started in.
    struct Ticket: Equatable {
        fileprivate let epoch: Int
    }

    /// What a caller asking for credentials gets.
    enum Decision: Equatable {
        /// No one is signed in.
        case notSignedIn
        /// These, of this generation.
        case use(TokenSet, generation: Int)
        /// A refresh first (joining the running one, if any).
        case refresh(Intent)
    }

    /// What the store holds compared with memory, under the cross-process lock.
    enum Reconciliation: Equatable {
        /// A save that failed earlier can be written now (the store still holds what it replaces).
        case writePendingSave(TokenSet)
        /// Go on with these credentials (memory's, or the store's newer ones).
        case proceed(TokenSet)
        /// The store was emptied, or holds another user's session: signed out elsewhere.
        case endedElsewhere
    }

    /// What to do with the candidate credentials.
    enum Plan: Equatable {
        /// No provider call: they serve.
        case finish(TokenSet)
        /// Ask the provider to refresh them.
        case refresh(TokenSet)
    }

    static let ended = AuthError(.notSignedIn, "the session ended while refreshing; the result was discarded")

    private(set) var phase = Phase.loading
    /// Bumped on every change of credentials.
    private(set) var generation = 0
    /// Bumped on every sign-in and sign-out.
    private var epoch = 0
    /// Credentials in memory that the store does not have yet (their save failed), and the stored credentials
    /// they replace: the save is retried only while the store still holds those.
    private(set) var pendingSave: (tokens: TokenSet, replacing: TokenSet)?
    /// Credentials this session ended whose delete failed: deleted later only if the store still holds them.
    private(set) var pendingDelete: TokenSet?
    /// Credentials a refresh obtained after its epoch ended: revoked by the sign-out that ended it.
    private var discarded: TokenSet?
    private var refreshTimes: [ContinuousClock.Instant] = []
    let budget: AuthSession.RefreshBudget
    /// Whether the provider gets new credentials without a refresh token (``AuthProvider/renewsWithoutRefreshToken``):
    /// then credentials are renewed within the leeway like refreshable ones.
    let renewsWithoutRefreshToken: Bool

    init(budget: AuthSession.RefreshBudget, renewsWithoutRefreshToken: Bool = false) {
        self.budget = budget
        self.renewsWithoutRefreshToken = renewsWithoutRefreshToken
    }

    /// The credentials in hand.
    var tokens: TokenSet? {
        switch phase {
        case .active(let tokens), .refreshing(let tokens): tokens
        case .loading, .signedOut: nil
        }
    }

    /// The current epoch's ticket.
    var ticket: Ticket { Ticket(epoch: epoch) }

    /// Whether `ticket` is the current epoch's.
    func isCurrent(_ ticket: Ticket) -> Bool { ticket.epoch == epoch }

    /// The one epoch check: throws unless `ticket` is the current epoch's.
    ///
    /// - Throws: ``ended``.
    func check(_ ticket: Ticket) throws {
        guard isCurrent(ticket) else { throw Self.ended }
    }

    // MARK: Loading

    /// The store was read.
    mutating func loaded(_ stored: TokenSet?, _ ticket: Ticket) -> [AuthEvent] {
        guard isCurrent(ticket), phase == .loading else { return [] }
        if let stored {
            generation += 1
            phase = .active(stored)
        } else {
            phase = .signedOut(nil)
        }
        return [.loaded(signedIn: stored != nil)]
    }

    /// The store could not be read: still loading.
    func loadFailed() -> [AuthEvent] { [.storeUnavailable] }

    /// Stored credentials this provider cannot use were revoked and then deleted (`outcome` true), left for a newer
    /// sign-in found meanwhile (false: stay loading, the next call reads it), or could not be deleted (nil).
    mutating func endedUnusable(_ stored: TokenSet, outcome: Bool?, _ ticket: Ticket) -> [AuthEvent] {
        guard isCurrent(ticket), phase == .loading, outcome != false else { return [] }
        generation += 1
        phase = .signedOut(.dpopKeyLost)
        var events: [AuthEvent] = []
        if outcome == nil {
            pendingDelete = stored
            events.append(.persistenceFailed)
        }
        return events + [.signedOut(.dpopKeyLost)]
    }

    // MARK: Signing in and out

    /// A sign-in starts a new epoch: nothing from the earlier one may land afterwards.
    mutating func beginSignIn() -> Ticket {
        epoch += 1
        return ticket
    }

    /// The new credentials were saved.
    mutating func signedIn(_ tokens: TokenSet) -> [AuthEvent] {
        pendingDelete = nil
        pendingSave = nil
        discarded = nil
        generation += 1
        phase = .active(tokens)
        return [.signedIn]
    }

    /// A sign-out starts a new epoch; returns the credentials in memory (the ones to revoke unless newer turn up).
    mutating func beginSignOut() -> TokenSet? {
        let memory = tokens
        epoch += 1
        return memory
    }

    /// Signed out locally (the store delete comes next); returns the newest credentials known, to revoke.
    mutating func signedOut(memory: TokenSet?) -> TokenSet? {
        let newest = discarded ?? memory
        discarded = nil
        pendingSave = nil
        generation += 1
        phase = .signedOut(.userInitiated)
        return newest
    }

    /// The sign-out's delete succeeded, or failed (retried later, only while the store holds `newest`).
    mutating func signOutDeleted(_ ok: Bool, newest: TokenSet?) -> [AuthEvent] {
        pendingDelete = ok ? nil : newest
        return (ok ? [] : [.persistenceFailed]) + [.signedOut(.userInitiated)]
    }

    // MARK: The refresh

    /// `active → refreshing`; the credentials being refreshed, or nil when there are none.
    mutating func startRefresh() -> TokenSet? {
        guard case .active(let tokens) = phase else { return nil }
        phase = .refreshing(tokens)
        return tokens
    }

    /// Under the cross-process lock: what the store holds against memory.
    mutating func reconcile(memory: TokenSet, stored: TokenSet?) -> Reconciliation {
        if let pending = pendingSave {
            if Self.same(stored, pending.replacing) { return .writePendingSave(pending.tokens) }
            pendingSave = nil
            if Self.same(stored, pending.tokens) { return .proceed(memory) }
        } else if Self.same(stored, memory) {
            return .proceed(memory)
        }
        // Another process left something else: its rotation of the same user's session, or the end of ours.
        guard let stored, Self.sameUser(stored, memory) else { return .endedElsewhere }
        return .proceed(stored)
    }

    /// The pending save was written now (or failed again: it stays pending).
    mutating func pendingSaveWritten(_ ok: Bool) {
        if ok { pendingSave = nil }
    }

    /// Whether `candidate` still needs the provider for `intent`.
    func plan(_ intent: Intent, memory: TokenSet, candidate: TokenSet, now: Date) -> Plan {
        let adopted = !Self.same(candidate, memory)
        switch intent {
        case .expiring(let wanted) where !candidate.needsRefresh(at: now, leeway: wanted): return .finish(candidate)
        case .rejected where adopted, .forced where adopted, .persist: return .finish(candidate)
        default: return .refresh(candidate)
        }
    }

    /// Counts a provider call against the budget.
    ///
    /// - Throws: ``AuthError/Code/refreshBudgetExceeded`` when the window is full.
    mutating func charge(now: ContinuousClock.Instant) throws {
        // A local copy: the closure must not read `self` while `refreshTimes` is being modified (on Apple
        // platforms a struct holding Foundation's resilient types is address-only, and the read would overlap).
        let window = budget.window
        refreshTimes.removeAll { now - $0 > window }
        guard refreshTimes.count < budget.maxRefreshes else {
            throw AuthError(
                .refreshBudgetExceeded,
                "more than \(budget.maxRefreshes) refreshes in \(budget.window): stopping a refresh loop")
        }
        refreshTimes.append(now)
    }

    /// After a definitive rejection: the store's credentials when another process (one that does not take the
    /// lock) rotated the same user's token meanwhile — adopt them instead of ending.
    static func rotatedMeanwhile(stored: TokenSet?, candidate: TokenSet) -> TokenSet? {
        guard let stored, stored.refreshToken != candidate.refreshToken, sameUser(stored, candidate) else { return nil }
        return stored
    }

    /// The new credentials were saved (`ok`), or the store refused three times: they serve from memory and the
    /// save stays pending.
    mutating func persisted(_ ok: Bool, _ tokens: TokenSet, replacing replaced: TokenSet) -> [AuthEvent] {
        guard !ok else {
            pendingSave = nil
            return []
        }
        pendingSave = (tokens, replaced)
        return [.persistenceFailed]
    }

    /// A refresh finished after its epoch ended: its credentials are the sign-out's to revoke.
    mutating func discard(_ tokens: TokenSet) { discarded = tokens }

    /// `refreshing → active(tokens)`, in the refresh's own epoch only.
    ///
    /// - Throws: ``ended`` for a stale ticket.
    mutating func finish(_ tokens: TokenSet, _ ticket: Ticket) throws -> [AuthEvent] {
        try check(ticket)
        let changed = !Self.same(self.tokens, tokens)
        phase = .active(tokens)
        guard changed else { return [] }
        generation += 1
        return [.refreshed(generation: generation)]
    }

    /// A transient failure: `refreshing → active(same)`, in the refresh's own epoch only.
    mutating func refreshFailed(_ code: AuthError.Code?, _ ticket: Ticket) -> [AuthEvent] {
        guard isCurrent(ticket), case .refreshing(let tokens) = phase else { return [] }
        phase = .active(tokens)
        return code.map { [.refreshFailed($0)] } ?? []
    }

    /// Sign-in or sign-out ended the refresh: `refreshing → active(same)` (the caller's transition follows).
    mutating func refreshAbandoned() {
        if case .refreshing(let tokens) = phase { phase = .active(tokens) }
    }

    /// `refreshing → signedOut(reason)`: `ended` was deleted from the store (`deleted`), or the delete is kept
    /// pending.
    ///
    /// - Throws: ``ended`` for a stale ticket.
    mutating func endSession(_ reason: AuthEvent.SignOutReason, ended: TokenSet?, deleted: Bool, _ ticket: Ticket)
        throws -> [AuthEvent]
    {
        try check(ticket)
        generation += 1
        phase = .signedOut(reason)
        pendingSave = nil
        var events: [AuthEvent] = []
        if !deleted {
            pendingDelete = ended
            events.append(.persistenceFailed)
        }
        return events + [.signedOut(reason)]
    }

    /// The error a session ended by `reason` throws.
    static func endError(_ reason: AuthEvent.SignOutReason, cause: AuthError?) -> AuthError {
        switch reason {
        case .signedOutElsewhere:
            AuthError(.notSignedIn, "the session was ended by another process sharing the store")
        case .dpopKeyLost:
            cause ?? AuthError(.dpopKeyMismatch, "the credentials were bound to a lost DPoP key; sign in again")
        default:
            AuthError(
                .sessionExpired, "the session has expired; sign in again", statusCode: cause?.statusCode,
                serverResponse: cause?.serverResponse)
        }
    }

    // MARK: Pending deletes

    /// The credentials whose delete is pending, while no one is signed in.
    var pendingDeleteTarget: TokenSet? { tokens == nil ? pendingDelete : nil }

    /// The pending delete is done (or moot: the store holds something else).
    mutating func pendingDeleteDone() { pendingDelete = nil }

    // MARK: Comparing credentials

    /// Whether two token sets are the same credentials: the same access and refresh tokens, byte for byte (other
    /// fields may differ after a trip through a store's encoding).
    static func same(_ lhs: TokenSet?, _ rhs: TokenSet?) -> Bool {
        guard let lhs, let rhs else { return lhs == nil && rhs == nil }
        return ByteExact.equals(lhs.accessToken, rhs.accessToken)
            && ByteExact.equals(lhs.refreshToken ?? "", rhs.refreshToken ?? "")
            && (lhs.refreshToken == nil) == (rhs.refreshToken == nil)
    }

    /// Whether two token sets belong to one user (unknown users are taken to be the same).
    static func sameUser(_ lhs: TokenSet, _ rhs: TokenSet) -> Bool {
        guard let left = lhs.user?.id, let right = rhs.user?.id else { return true }
        return ByteExact.equals(left, right)
    }
}
