import Foundation

/// Handing out credentials: what a caller gets now, and the snapshot read without the actor.
extension SessionMachine {
    /// What a caller wanting credentials valid for `wanted` seconds at `now` gets.
    func decide(wanted: TimeInterval, now: Date) -> Decision {
        switch phase {
        case .loading, .signedOut: return .notSignedIn
        case .refreshing: return .refresh(.expiring(wanted))
        case .active(let tokens):
            return Self.decide(
                tokens, generation: generation, pendingSave: pendingSave != nil, wanted: wanted, now: now)
        }
    }

    /// The rule for credentials in hand (``Phase/active``): use them, or refresh first.
    static func decide(_ tokens: TokenSet, generation: Int, pendingSave: Bool, wanted: TimeInterval, now: Date)
        -> Decision
    {
        // Without a refresh token an early refresh is impossible: a token still valid is used until it expires.
        let stillValid = tokens.expiresAt.map { $0 > now } ?? true
        if tokens.needsRefresh(at: now, leeway: wanted), tokens.refreshToken != nil || !stillValid {
            return .refresh(.expiring(wanted))
        }
        if pendingSave { return .refresh(.persist) }
        return .use(tokens, generation: generation)
    }

    /// What a caller may read without the actor for `leeway`: the credentials in hand while no refresh runs and
    /// nothing waits to be saved (nil otherwise).
    func snapshot(leeway: TimeInterval) -> Snapshot? {
        guard case .active(let tokens) = phase, pendingSave == nil else { return nil }
        return Snapshot(tokens: tokens, generation: generation, leeway: leeway)
    }

    /// The credentials in hand, with what ``decide(wanted:now:)`` would say about them worked out once: the instant
    /// until which they are used as they are (a class: reading it is one retain, not a copy of the credentials).
    final class Snapshot: Sendable {
        let tokens: TokenSet
        let generation: Int
        /// `Bearer <access token>`, made once per credentials rather than once per request; nil when the tokens
        /// are DPoP-bound (never sent as Bearer).
        let bearerValue: String?
        /// ``decide(wanted:now:)`` with the snapshot's leeway answers `.use` before this instant (nil: always).
        let useUntil: Date?

        init(tokens: TokenSet, generation: Int, leeway: TimeInterval) {
            self.tokens = tokens
            self.generation = generation
            bearerValue =
                SesameHTTP.Headers.same(tokens.tokenType, "dpop") || tokens.dpopKeyThumbprint != nil
                ? nil : "Bearer " + tokens.accessToken
            useUntil = tokens.expiresAt.map { expiresAt in
                // `decide` refreshes once `expiresAt − now ≤ effective leeway`; without a refresh token it uses the
                // token until it expires.
                tokens.refreshToken == nil ? expiresAt : expiresAt.addingTimeInterval(-tokens.effectiveLeeway(leeway))
            }
        }

        /// Whether ``decide(wanted:now:)`` with the snapshot's leeway would use these credentials at `now`.
        func usable(at now: Date) -> Bool { useUntil.map { now < $0 } ?? true }
    }

    /// The credentials in hand when they are newer than the rejected generation.
    func newer(than rejected: Int) -> (tokens: TokenSet, generation: Int)? {
        guard generation > rejected, case .active(let tokens) = phase else { return nil }
        return (tokens, generation)
    }

    /// Whether a refresh this caller joined served its intent (else it runs one more).
    func served(_ intent: Intent, _ tokens: TokenSet, since generation: Int, now: Date) -> Bool {
        switch intent {
        case .expiring(let wanted): !tokens.needsRefresh(at: now, leeway: wanted)
        case .rejected, .forced: self.generation > generation
        case .persist: true
        }
    }
}
