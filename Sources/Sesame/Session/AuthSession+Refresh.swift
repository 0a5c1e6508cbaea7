import Foundation

// The refresh and the store reads, as the session's rules (SessionMachine) decide them: single flight, the
// cross-process lock around read-refresh-persist, and nothing from an earlier epoch landing afterwards.
extension AuthSession {
    // MARK: The refresh

    /// Joins the in-flight refresh or starts one.
    ///
    /// A joined refresh that did not serve this intent (it only retried a save, or its result still expires too
    /// soon) is followed by one more.
    func refresh(_ intent: SessionMachine.Intent) async throws -> (tokens: TokenSet, generation: Int) {
        let ticket = machine.ticket
        for attempt in 0..<2 {
            let task: Task<TokenSet, any Error>
            let joined: Bool
            if case .refreshing = machine.phase, let running = refreshTask {
                task = running
                joined = true
                SesameLog.log(.debug, .session, "profile \(public: profile): joined the refresh in flight")
            } else if machine.startRefresh() != nil {
                task = Task { try await self.runRefresh(intent, ticket) }
                refreshTask = task
                joined = false
                SesameLog.log(
                    .info, .session, "profile \(public: profile): refresh started (\(public: Self.why(intent)))")
            } else {
                throw AuthError(.notSignedIn, "no one is signed in")
            }
            let before = machine.generation
            let result = await task.result
            try machine.check(ticket)
            let tokens = try result.get()
            if !joined || attempt == 1 || machine.served(intent, tokens, since: before, now: timeSource.now) {
                return (tokens, machine.generation)
            }
        }
        throw SessionMachine.ended  // not reached: the second attempt always returns
    }

    /// The refresh task's body: every exit leaves `refreshing` (in its own epoch only).
    private func runRefresh(_ intent: SessionMachine.Intent, _ ticket: SessionMachine.Ticket) async throws
        -> TokenSet
    {
        let store = self.store
        let profile = self.profile
        do {
            let tokens = try await store.withExclusiveAccess(profile: profile) {
                try await self.refreshHoldingLock(intent, ticket)
            }
            // Every path above ends in finish or endSession; this only guards the invariant.
            if machine.isCurrent(ticket), case .refreshing = machine.phase { send(try machine.finish(tokens, ticket)) }
            return tokens
        } catch {
            let failure = Self.normalized(error, .transport, "the provider failed")
            send(machine.refreshFailed((failure as? AuthError)?.code, ticket))
            throw failure
        }
    }

    /// Under the cross-process lock: re-read, adopt, refresh only if still needed, persist, then use.
    private func refreshHoldingLock(_ intent: SessionMachine.Intent, _ ticket: SessionMachine.Ticket) async throws
        -> TokenSet
    {
        try machine.check(ticket)
        guard case .refreshing(let memory) = machine.phase else { throw SessionMachine.ended }
        let stored: TokenSet?
        do {
            stored = try await store.load(profile: profile)
        } catch let error as AuthError where error.code == .storeCorrupt {
            // The store kept the unreadable data aside; the credentials in memory are the newest known.
            try machine.check(ticket)
            try await persist(memory, replacing: memory, ticket)
            stored = memory
        } catch {
            throw Self.normalized(error, .storeUnavailable, "cannot read the credentials before refreshing")
        }
        try machine.check(ticket)
        var candidate = memory
        switch machine.reconcile(memory: memory, stored: stored) {
        case .writePendingSave(let pending):
            machine.pendingSaveWritten((try? await store.save(pending, profile: profile)) != nil)
            try machine.check(ticket)
        case .proceed(let tokens):
            candidate = tokens
            // Another process's newer sign-in that this provider cannot use (bound to a key it does not hold): not
            // ours to refresh, revoke or delete — the next run, with that key, uses it.
            if !SessionMachine.same(tokens, memory) {
                do {
                    try provider.checkStoredCredentials(tokens)
                } catch let error as AuthError where error.code == .dpopKeyMismatch {
                    throw AuthError(
                        .storeUnavailable,
                        "profile \(profile) was signed in again by another process with another DPoP key; try again")
                }
            }
        case .endedElsewhere:
            return try await endSession(.signedOutElsewhere, deleting: nil, ticket)
        }
        switch machine.plan(intent, memory: memory, candidate: candidate, now: timeSource.now) {
        case .finish(let tokens):
            SesameLog.log(
                .info, .session, "profile \(public: profile): adopted credentials another process refreshed or saved")
            send(try machine.finish(tokens, ticket))
            return tokens
        case .refresh(let candidate):
            return try await refreshWithProvider(candidate, ticket)
        }
    }

    /// The provider's refresh, then persist before use; a definitive rejection or a lost key ends the session.
    private func refreshWithProvider(_ candidate: TokenSet, _ ticket: SessionMachine.Ticket) async throws -> TokenSet {
        try machine.charge(now: ContinuousClock.now)
        let refreshed: TokenSet
        do {
            refreshed = try await refreshRetrying(candidate, ticket)
        } catch let error as AuthError where error.code == .dpopKeyMismatch {
            try machine.check(ticket)
            return try await endSession(.dpopKeyLost, deleting: candidate, ticket, cause: error)
        } catch let error as AuthError where error.code == .refreshRejected {
            try machine.check(ticket)
            // A process that does not take the lock may have rotated the token meanwhile: adopt its newer one.
            let stored = try? await store.load(profile: profile)
            try machine.check(ticket)
            if let rotated = SessionMachine.rotatedMeanwhile(stored: stored, candidate: candidate) {
                send(try machine.finish(rotated, ticket))
                return rotated
            }
            return try await endSession(.sessionExpired, deleting: candidate, ticket, cause: error)
        }
        guard machine.isCurrent(ticket) else {
            machine.discard(refreshed)
            throw SessionMachine.ended
        }
        try await persist(refreshed, replacing: candidate, ticket)
        send(try machine.finish(refreshed, ticket))
        return refreshed
    }

    /// The provider's refresh, tried again by ``retry`` while the failure says the server did not use the token.
    ///
    /// That is 408, 429 or 503, or no connection made. Each attempt is charged to the refresh budget; a sign-out
    /// during a wait ends it.
    private func refreshRetrying(_ candidate: TokenSet, _ ticket: SessionMachine.Ticket) async throws -> TokenSet {
        var attempt = 1
        while true {
            do {
                return try await provider.refresh(candidate)
            } catch let error as AuthError where attempt < retry.maximumAttempts && Self.unused(error) {
                let after = error.retryAfter
                guard let wait = retry.delay(beforeRetry: attempt, retryAfter: after) else { throw error }
                SesameLog.log(
                    .warning, .session,
                    "profile \(public: profile): refresh failed with \(error), which left the token unused; retry \(attempt) in \(seconds: wait)"
                )
                try await retry.sleep(wait)
                try machine.check(ticket)
                try machine.charge(now: ContinuousClock.now)
                attempt += 1
            }
        }
    }

    /// Whether a failed refresh certainly left the refresh token unused: the server said "not now" (408, 429,
    /// 503), or no connection was made.
    static func unused(_ error: AuthError) -> Bool {
        if let status = error.statusCode { return RetryPolicy.unprocessedStatuses.contains(status) }
        return error.code == .transport && error.reason == "cannot_connect"
    }

    /// Saves before use, retrying twice; if the store still refuses, the credentials serve from memory and the
    /// save stays pending (written later only while the store still holds `replaced`).
    private func persist(_ tokens: TokenSet, replacing replaced: TokenSet, _ ticket: SessionMachine.Ticket)
        async throws
    {
        for attempt in 0..<3 {
            if attempt > 0 { try? await Task.sleep(for: .milliseconds(20 * attempt)) }
            if (try? await store.save(tokens, profile: profile)) != nil {
                send(machine.persisted(true, tokens, replacing: replaced))
                return
            }
            try machine.check(ticket)
        }
        send(machine.persisted(false, tokens, replacing: replaced))
    }

    /// `refreshing → signedOut(reason)`, holding the cross-process lock.
    ///
    /// When the server ended the session the stored credentials are deleted first (or the deletion is kept
    /// pending). The state stays `refreshing` until then, so a sign-in meanwhile waits for this task and its delete
    /// cannot hit the new session's credentials.
    private func endSession(
        _ reason: AuthEvent.SignOutReason, deleting ended: TokenSet?, _ ticket: SessionMachine.Ticket,
        cause: AuthError? = nil
    ) async throws -> TokenSet {
        let deleted = ended == nil ? true : (try? await store.delete(profile: profile)) != nil
        send(try machine.endSession(reason, ended: ended, deleted: deleted, ticket))
        throw SessionMachine.endError(reason, cause: cause)
    }

    /// Waits for the in-flight refresh — for `grace`, then cancels it — so nothing it does can land later.
    func endRefresh(grace: Duration) async {
        // While the phase is `refreshing`, `refreshTask` is the task that started it.
        guard case .refreshing = machine.phase, let task = refreshTask else { return }
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
        if refreshTask == task { machine.refreshAbandoned() }
    }

    // MARK: Loading and pending writes

    func ensureLoaded() async throws {
        if machine.pendingDelete != nil { await retryPendingDelete() }
        guard case .loading = machine.phase else { return }
        let ticket = machine.ticket
        let stored: TokenSet?
        do {
            stored = try await store.load(profile: profile)
        } catch {
            send(machine.loadFailed())
            throw Self.normalized(error, .storeUnavailable, "cannot read the credentials")
        }
        guard machine.isCurrent(ticket), case .loading = machine.phase else { return }
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
                await endUnusable(stored, ticket)
                throw error
            }
        }
        send(machine.loaded(stored, ticket))
    }

    /// Ends a session whose stored credentials this provider cannot use (a lost DPoP key): revokes them first,
    /// best effort (revocation needs no proof, and the grant must not outlive the key it was bound to, which may
    /// have leaked), then deletes them under the cross-process lock unless another sign-in replaced them meanwhile
    /// — then the next call reads that one.
    private func endUnusable(_ stored: TokenSet, _ ticket: SessionMachine.Ticket) async {
        try? await provider.signOut(stored)
        let store = self.store
        let profile = self.profile
        let outcome = try? await store.withExclusiveAccess(profile: profile) { () async throws -> Bool in
            guard let current = try await store.load(profile: profile) else { return true }
            guard SessionMachine.same(current, stored) else { return false }  // a newer sign-in: not ours
            try await store.delete(profile: profile)
            return true
        }
        send(machine.endedUnusable(stored, outcome: outcome, ticket))
    }

    /// A deletion that failed at sign-out (or at a definitive rejection) is retried — serialised with sign-in,
    /// under the cross-process lock, and only while the store still holds exactly the credentials this session
    /// ended, so that it can never delete a newer session's.
    private func retryPendingDelete() async {
        await beginOperation()
        defer { endOperation() }
        guard let ended = machine.pendingDeleteTarget else { return }
        let store = self.store
        let profile = self.profile
        let done = try? await store.withExclusiveAccess(profile: profile) { () async throws -> Bool in
            guard let stored = try await store.load(profile: profile) else { return true }
            guard SessionMachine.same(stored, ended) else { return true }  // someone signed in since: not ours
            try await store.delete(profile: profile)
            return true
        }
        if done == true { machine.pendingDeleteDone() }
    }
}
