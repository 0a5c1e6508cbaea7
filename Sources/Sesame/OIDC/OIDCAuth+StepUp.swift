import Foundation
internal import SesameJOSE

/// Step-up authentication (RFC 9470) on the facade.
extension OIDCAuth {
    /// Signs in again as a resource's step-up challenge asks (RFC 9470), and replaces the session's credentials.
    ///
    /// The authorization request carries the challenge's `acr_values` and `max_age`. A challenge that names only
    /// `max_age` also asks for the session's current `acr` (so a recent sign-in does not lose a stronger one). The
    /// new ID token must answer them — its `acr` one of the values, its `auth_time` within `max_age` (catalog
    /// STEP-03) — and name the session's user; otherwise nothing is stored and the session keeps its credentials.
    ///
    /// - Callers with the same requirements share one sign-in while it runs — unless all its callers cancelled: a
    ///   new caller then gets its own, after that one ends. A step-up for other requirements waits for the one in
    ///   progress (one sign-in sheet at a time). A caller that arrives just after a step-up for the same
    ///   requirements finished (within 30 seconds, the session unchanged) gets its result without another sign-in,
    ///   when it still meets them.
    /// - A cancelled caller returns at once with `CancellationError`. Its sign-in is cancelled (the agent sees it:
    ///   `ASWebAuthenticationSession` closes its sheet) only when no other caller waits for it; a sheet for another
    ///   step-up stays up.
    /// - Retry the challenged call once afterwards; ``AuthorizedClient`` does so itself when made with
    ///   ``client(for:additionalOrigins:stepUpWith:)`` — the same request, body included: it was refused, not
    ///   performed.
    ///
    /// - Returns: the new credentials.
    /// - Throws: ``AuthError`` — ``AuthError/Code/notSignedIn`` (a step-up needs a session),
    ///   ``AuthError/Code/idTokenRejected`` with reason `acr_not_met`, `auth_time_too_old` or `subject_changed`,
    ///   ``AuthError/Code/cancelled``, the sign-in's other errors; `CancellationError`.
    @discardableResult
    public func stepUp(_ challenge: StepUpChallenge, with agent: some AuthorizationUserAgent) async throws -> TokenSet {
        let requirements = StepUpCoordinator.Requirements(challenge)
        let current = try await session.currentTokens
        guard let current else { throw AuthError(.notSignedIn, "a step-up needs a signed-in session") }
        // Who signed in is checked against the session's ID token: without one, a step-up could store anyone.
        guard current.idToken.flatMap({ try? JWT.unverified($0).claims.subject }) != nil else {
            throw AuthError(
                .configuration, "a step-up needs the session's ID token to check the user (ask for the openid scope)")
        }
        if let recent = stepUps.recentResult(for: requirements, now: provider.timeSource.now), recent == current {
            return recent
        }
        let waiter = UUID()
        let task = stepUps.join(requirements, waiter: waiter) { previous in
            Task {
                // One sign-in at a time: a step-up for other requirements waits for the one in progress, even
                // cancelled (it then ends without a sheet), so that the next one queues behind it as well.
                if let previous { _ = try? await previous.value }
                try Task.checkCancellation()
                return try await self.performStepUp(challenge, with: agent)
            }
        }
        do {
            // A cancelled caller returns at once, though the step-up it waited for (queued behind another sheet,
            // or shared with other callers) ends later.
            let tokens = try await withTaskCancellationHandler {
                try await StepUpCoordinator.value(of: task)
            } onCancel: {
                if stepUps.leave(task, waiter: waiter) { task.cancel() }
            }
            stepUps.finish(
                task, waiter: waiter, requirements: requirements, tokens: tokens, at: provider.timeSource.now)
            return tokens
        } catch {
            stepUps.finish(task, waiter: waiter, requirements: requirements, tokens: nil, at: provider.timeSource.now)
            throw error
        }
    }

    private func performStepUp(_ challenge: StepUpChallenge, with agent: some AuthorizationUserAgent) async throws
        -> TokenSet
    {
        let before = try await session.currentTokens
        let claims = before?.idToken.flatMap { try? JWT.unverified($0).claims }
        var acrValues = challenge.acrValues
        if acrValues.isEmpty, let acr = claims?["acr"]?.stringValue { acrValues = [acr] }
        let options = AuthorizationOptions(maxAge: challenge.maxAge, acrValues: acrValues.isEmpty ? nil : acrValues)
        let pending = try await provider.authorizationRequest(options)
        try Task.checkCancellation()
        let redirect = try await agent.authorize(
            url: pending.url, redirectURI: pending.redirectURI, state: pending.state)
        try Task.checkCancellation()
        let tokens = try await provider.completeAuthorization(
            redirect: redirect, pending: pending, deviceSecret: await sharedDeviceSecret())
        // The step-up is for the signed-in user: an answer for anyone else, or one that does not say who, replaces
        // nothing.
        guard let old = claims?.subject, let new = tokens.idToken.flatMap({ try? JWT.unverified($0).claims.subject }),
            ByteExact.equals(old, new)
        else {
            var error = AuthError(
                .idTokenRejected, "the step-up signed in another user than the session's; the session is unchanged")
            error.reason = "subject_changed"
            throw error
        }
        return try await finishSignIn(tokens)
    }
}

/// The step-ups of one ``OIDCAuth``: the one in progress with its waiters, and the last result.
final class StepUpCoordinator: Sendable {
    /// What a challenge asks for (its description aside: two resources asking the same share one sign-in).
    struct Requirements: Hashable, Sendable {
        let acrValues: [String]
        let maxAge: TimeInterval?

        init(_ challenge: StepUpChallenge) {
            acrValues = challenge.acrValues
            maxAge = challenge.maxAge
        }
    }

    private struct Running {
        let requirements: Requirements
        let task: Task<TokenSet, any Error>
        /// Every caller left, so it is cancelled: a new caller starts another (queued behind it), never joins it.
        var abandoned = false
    }

    private struct State {
        /// The newest step-up, which callers with its requirements join.
        var running: Running?
        /// Callers waiting for each unfinished step-up (an older one may still run while a newer waits for it).
        var waiters: [Task<TokenSet, any Error>: Set<UUID>] = [:]
        var last: (requirements: Requirements, tokens: TokenSet, at: Date)?
    }

    private let state = LockedValue(State())
    /// How long a finished step-up answers callers with the same requirements.
    static let reuseWindow: TimeInterval = 30

    /// The tokens of a step-up for `requirements` that finished within ``reuseWindow`` and still meet them now
    /// (its ID token's `auth_time` within `max_age`).
    func recentResult(for requirements: Requirements, now: Date) -> TokenSet? {
        let last = state.withLock { state in state.last }
        guard let last, last.requirements == requirements, now.timeIntervalSince(last.at) < Self.reuseWindow else {
            return nil
        }
        if let maxAge = requirements.maxAge {
            let authTime = last.tokens.idToken.flatMap { try? JWT.unverified($0).claims["auth_time"]?.doubleValue }
            guard let authTime, now.timeIntervalSince1970 - authTime <= maxAge else { return nil }
        }
        return last.tokens
    }

    /// The running step-up for `requirements` with `waiter` added, or a new one made by `start` (given the running
    /// one it must wait for, if any).
    func join(
        _ requirements: Requirements, waiter: UUID,
        start: (Task<TokenSet, any Error>?) -> Task<TokenSet, any Error>
    ) -> Task<TokenSet, any Error> {
        state.withLock { state in
            if let running = state.running, running.requirements == requirements, !running.abandoned {
                state.waiters[running.task, default: []].insert(waiter)
                return running.task
            }
            let task = start(state.running?.task)
            state.running = Running(requirements: requirements, task: task)
            state.waiters[task] = [waiter]
            // It is the newest until it has ended, whatever its callers do: the next one waits for it.
            Task {
                _ = await task.result
                self.state.withLock { state in
                    if state.running?.task == task { state.running = nil }
                }
            }
            return task
        }
    }

    /// `task`'s value, or `CancellationError` as soon as the current task is cancelled (`task` runs on).
    static func value(of task: Task<TokenSet, any Error>) async throws -> TokenSet {
        let relay = Relay()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                relay.arm(continuation)
                Task { relay.finish(await task.result) }
            }
        } onCancel: {
            relay.finish(.failure(CancellationError()))
        }
    }

    /// The first of two outcomes, handed to a continuation armed before or after it arrives.
    private final class Relay: Sendable {
        private struct Slot {
            var continuation: CheckedContinuation<TokenSet, any Error>?
            var outcome: Result<TokenSet, any Error>?
            var resumed = false
        }
        private let slot = LockedValue(Slot())

        func arm(_ continuation: CheckedContinuation<TokenSet, any Error>) {
            let ready = slot.withLock { slot -> Result<TokenSet, any Error>? in
                guard let outcome = slot.outcome else {
                    slot.continuation = continuation
                    return nil
                }
                slot.resumed = true
                return outcome
            }
            if let ready { continuation.resume(with: ready) }
        }

        func finish(_ outcome: Result<TokenSet, any Error>) {
            let waiting = slot.withLock { slot -> CheckedContinuation<TokenSet, any Error>? in
                guard !slot.resumed, slot.outcome == nil else { return nil }
                guard let continuation = slot.continuation else {
                    slot.outcome = outcome
                    return nil
                }
                slot.resumed = true
                slot.continuation = nil
                return continuation
            }
            waiting?.resume(with: outcome)
        }
    }

    /// `waiter` of `task` gave up (idempotent); true when nobody else waits for it (cancel the task then).
    func leave(_ task: Task<TokenSet, any Error>, waiter: UUID) -> Bool {
        state.withLock { state in
            guard var waiting = state.waiters[task], waiting.remove(waiter) != nil else { return false }
            state.waiters[task] = waiting
            if waiting.isEmpty, state.running?.task == task { state.running?.abandoned = true }
            return waiting.isEmpty
        }
    }

    /// `waiter`'s wait for `task` ended (idempotent), with `tokens` when the step-up succeeded.
    func finish(
        _ task: Task<TokenSet, any Error>, waiter: UUID, requirements: Requirements, tokens: TokenSet?, at time: Date
    ) {
        state.withLock { state in
            if var waiting = state.waiters[task] {
                waiting.remove(waiter)
                state.waiters[task] = waiting.isEmpty ? nil : waiting
            }
            if let tokens { state.last = (requirements, tokens, time) }
        }
    }
}
