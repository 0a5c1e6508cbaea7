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
                tokens, generation: generation, pendingSave: pendingSave != nil, wanted: wanted, now: now,
                renews: renewsWithoutRefreshToken)
        }
    }

    /// The rule for credentials in hand (``Phase/active``): use them, or refresh first.
    static func decide(
        _ tokens: TokenSet, generation: Int, pendingSave: Bool, wanted: TimeInterval, now: Date, renews: Bool = false
    ) -> Decision {
        // Without a refresh token an early refresh is impossible (unless the provider renews without one, as the
        // client credentials grant does): a token still valid is used until it expires.
        let stillValid = tokens.expiresAt.map { $0 > now } ?? true
        if tokens.needsRefresh(at: now, leeway: wanted), tokens.refreshToken != nil || renews || !stillValid {
            return .refresh(.expiring(wanted))
        }
        if pendingSave { return .refresh(.persist) }
        return .use(tokens, generation: generation)
    }

    /// What a caller may read without the actor for `leeway`: the credentials in hand while no refresh runs and
    /// nothing waits to be saved (nil otherwise).
    func snapshot(leeway: TimeInterval) -> Snapshot? {
        guard case .active(let tokens) = phase, pendingSave == nil else { return nil }
        return Snapshot(tokens: tokens, generation: generation, leeway: leeway, renews: renewsWithoutRefreshToken)
    }

    /// The credentials in hand, with what ``decide(wanted:now:)`` needs worked out once.
    ///
    /// A class: reading it is one retain, not a copy of the credentials. Its description and mirror show no token.
    final class Snapshot: Sendable, CustomStringConvertible, CustomReflectable {
        let tokens: TokenSet
        let generation: Int
        /// `Bearer <access token>`, made once per credentials rather than once per request; nil when the tokens
        /// are DPoP-bound (never sent as Bearer).
        let bearerValue: String?
        /// When the access token expires (nil: never).
        private let expiresAt: Date?
        /// How long before ``expiresAt`` the credentials stop being used: the effective leeway with a refresh
        /// token, 0 without one (then the token is used until it expires).
        private let margin: TimeInterval

        init(tokens: TokenSet, generation: Int, leeway: TimeInterval, renews: Bool = false) {
            self.tokens = tokens
            self.generation = generation
            bearerValue = tokens.isDPoPBound ? nil : "Bearer " + tokens.accessToken
            expiresAt = tokens.expiresAt
            margin = tokens.refreshToken == nil && !renews ? 0 : tokens.effectiveLeeway(leeway)
        }

        /// Whether ``decide(wanted:now:)`` with the snapshot's leeway would use these credentials at `now`: the
        /// same arithmetic (`expiresAt − now` against the margin), so the two agree to the last bit.
        func usable(at now: Date) -> Bool { expiresAt.map { $0.timeIntervalSince(now) > margin } ?? true }

        var description: String { "Snapshot(generation: \(generation), \(tokens))" }

        var customMirror: Mirror {
            Mirror(self, children: ["generation": generation, "tokens": tokens], displayStyle: .class)
        }
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
