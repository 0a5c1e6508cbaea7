import Foundation
import Testing

@testable import Sesame

/// Every transition of the session's state machine, without I/O: what it moves to, what it bumps, what it says,
/// and what a stale epoch ticket may no longer do.
@Suite struct SessionMachineTests {
    static let now = Date(timeIntervalSince1970: 1_700_000_000)
    static let a = TokenSet(
        accessToken: "a-1", refreshToken: "r-1", expiresAt: now.addingTimeInterval(3600), receivedAt: now,
        user: .init(id: "alice", email: nil))
    static let b = TokenSet(
        accessToken: "a-2", refreshToken: "r-2", expiresAt: now.addingTimeInterval(3600), receivedAt: now)
    static let expiring = TokenSet(
        accessToken: "a-0", refreshToken: "r-0", expiresAt: now.addingTimeInterval(30),
        receivedAt: now.addingTimeInterval(-3570))
    static let otherUser = TokenSet(accessToken: "x", refreshToken: "y", user: .init(id: "mallory", email: nil))

    func machine(_ phase: SessionMachine.Phase) -> SessionMachine {
        var machine = SessionMachine(budget: .init(maxRefreshes: 2, window: .seconds(30)))
        switch phase {
        case .loading: break
        case .signedOut: _ = machine.loaded(nil, machine.ticket)
        case .active(let tokens): _ = machine.loaded(tokens, machine.ticket)
        case .refreshing(let tokens):
            _ = machine.loaded(tokens, machine.ticket)
            _ = machine.startRefresh()
        }
        return machine
    }

    @Test(
        "loaded: loading → active (generation + 1) or signedOut(nil); in any other phase, or a stale epoch, nothing",
        arguments: [
            (
                SessionMachine.Phase.loading, a as TokenSet?, SessionMachine.Phase.active(a), 1,
                [AuthEvent.loaded(signedIn: true)]
            ),
            (.loading, nil, .signedOut(nil), 0, [.loaded(signedIn: false)]),
            (.active(b), a, .active(b), 1, []),
            (.signedOut(nil), a, .signedOut(nil), 0, []),
        ])
    func loaded(
        from: SessionMachine.Phase, stored: TokenSet?, to: SessionMachine.Phase, generation: Int, events: [AuthEvent]
    ) {
        var machine = machine(from)
        #expect(machine.loaded(stored, machine.ticket) == events)
        #expect(machine.phase == to && machine.generation == generation)
        var stale = self.machine(.loading)
        let ticket = stale.ticket
        _ = stale.beginSignIn()
        #expect(stale.loaded(Self.a, ticket).isEmpty && stale.phase == .loading, "a read from an earlier epoch")
    }

    @Test(
        "loadFailed keeps loading and says so; endedUnusable: revoked and deleted, left for a newer sign-in, or pending"
    )
    func loadingFailures() {
        var machine = machine(.loading)
        #expect(machine.loadFailed() == [.storeUnavailable] && machine.phase == .loading)
        #expect(machine.endedUnusable(Self.a, outcome: false, machine.ticket).isEmpty && machine.phase == .loading)
        #expect(machine.endedUnusable(Self.a, outcome: true, machine.ticket) == [.signedOut(.dpopKeyLost)])
        #expect(machine.phase == .signedOut(.dpopKeyLost) && machine.pendingDelete == nil && machine.generation == 1)
        var pending = self.machine(.loading)
        #expect(
            pending.endedUnusable(Self.a, outcome: nil, pending.ticket) == [
                .persistenceFailed, .signedOut(.dpopKeyLost),
            ])
        #expect(pending.pendingDelete == Self.a && pending.pendingDeleteTarget == Self.a)
    }

    @Test(
        "sign-in from every phase: active(new), pendings cleared, a new epoch that refuses the old refresh's work",
        arguments: [SessionMachine.Phase.loading, .signedOut(.sessionExpired), .active(a), .refreshing(a)])
    func signIn(from: SessionMachine.Phase) throws {
        var machine = machine(from)
        let old = machine.ticket
        let generation = machine.generation
        _ = machine.beginSignIn()
        #expect(!machine.isCurrent(old))
        #expect(throws: AuthError.self) { try machine.check(old) }
        machine.refreshAbandoned()
        #expect(machine.signedIn(Self.b) == [.signedIn])
        #expect(machine.phase == .active(Self.b) && machine.generation == generation + 1)
        #expect(throws: AuthError.self) { _ = try machine.finish(Self.a, old) }
        #expect(machine.refreshFailed(.transport, old).isEmpty && machine.phase == .active(Self.b))
        #expect(throws: AuthError.self) {
            _ = try machine.endSession(.sessionExpired, ended: Self.b, deleted: true, old)
        }
        #expect(machine.phase == .active(Self.b), "nothing from the earlier epoch landed")
    }

    @Test(
        "sign-out: the newest known credentials are revoked (a discarded refresh's first); a failed delete stays pending"
    )
    func signOut() {
        var machine = machine(.refreshing(Self.a))
        let memory = machine.beginSignOut()
        #expect(memory == Self.a)
        machine.discard(Self.b)
        machine.refreshAbandoned()
        #expect(machine.signedOut(memory: memory) == Self.b, "the discarded refresh's credentials are the newest")
        #expect(machine.phase == .signedOut(.userInitiated))
        #expect(machine.signOutDeleted(false, newest: Self.b) == [.persistenceFailed, .signedOut(.userInitiated)])
        #expect(machine.pendingDeleteTarget == Self.b)
        machine.pendingDeleteDone()
        #expect(machine.pendingDelete == nil)
        var clean = self.machine(.active(Self.a))
        let newest = clean.signedOut(memory: clean.beginSignOut())
        #expect(
            clean.signOutDeleted(true, newest: newest) == [.signedOut(.userInitiated)] && clean.pendingDelete == nil)
    }

    @Test(
        "decide: not signed in; use; refresh when expiring (only with a refresh token, or once expired); join a running one; retry a pending save",
        arguments: [
            (SessionMachine.Phase.loading, SessionMachine.Decision.notSignedIn),
            (.signedOut(nil), .notSignedIn),
            (.active(a), .use(a, generation: 1)),
            (.active(expiring), .refresh(.expiring(60))),
            (
                .active(
                    TokenSet(
                        accessToken: "no-refresh", expiresAt: now.addingTimeInterval(30),
                        receivedAt: now.addingTimeInterval(-3570))),
                .use(
                    TokenSet(
                        accessToken: "no-refresh", expiresAt: now.addingTimeInterval(30),
                        receivedAt: now.addingTimeInterval(-3570)), generation: 1)
            ),
            (.active(TokenSet(accessToken: "expired", expiresAt: now.addingTimeInterval(-1))), .refresh(.expiring(60))),
            (.refreshing(a), .refresh(.expiring(60))),
        ])
    func decide(phase: SessionMachine.Phase, decision: SessionMachine.Decision) {
        #expect(machine(phase).decide(wanted: 60, now: Self.now) == decision)
    }

    @Test("a provider that renews without a refresh token (client credentials) renews within the leeway, snapshot too")
    func renewsWithoutRefreshToken() {
        let tokens = TokenSet(
            accessToken: "service", expiresAt: Self.now.addingTimeInterval(30),
            receivedAt: Self.now.addingTimeInterval(-270))
        #expect(
            SessionMachine.decide(tokens, generation: 1, pendingSave: false, wanted: 60, now: Self.now, renews: true)
                == .refresh(.expiring(60)))
        #expect(
            SessionMachine.decide(tokens, generation: 1, pendingSave: false, wanted: 60, now: Self.now, renews: false)
                == .use(tokens, generation: 1))
        #expect(!SessionMachine.Snapshot(tokens: tokens, generation: 1, leeway: 60, renews: true).usable(at: Self.now))
        #expect(SessionMachine.Snapshot(tokens: tokens, generation: 1, leeway: 60).usable(at: Self.now))
    }

    @Test(
        "the snapshot read without the actor says 'use' exactly when decide does, on both sides of every boundary",
        arguments: [
            a, expiring, otherUser,
            TokenSet(accessToken: "no-refresh", expiresAt: now.addingTimeInterval(30), receivedAt: now),
            TokenSet(accessToken: "short", refreshToken: "r", expiresAt: now.addingTimeInterval(20), receivedAt: now),
            TokenSet(accessToken: "expired", refreshToken: "r", expiresAt: now.addingTimeInterval(-1)),
        ])
    func snapshotAgreesWithDecide(tokens: TokenSet) throws {
        let machine = machine(.active(tokens))
        let snapshot = try #require(machine.snapshot(leeway: 60))
        let expiresAt = tokens.expiresAt ?? Self.now
        // Each boundary (expiry, expiry − leeway, expiry − half the lifetime), a millisecond either side, and a spread.
        let instants =
            [0, -60, -tokens.effectiveLeeway(60), -10].flatMap { edge in
                [-0.001, 0, 0.001].map { expiresAt.addingTimeInterval(edge + $0) }
            } + stride(from: -4000.0, through: 4000, by: 250).map { Self.now.addingTimeInterval($0) }
        for now in instants {
            let uses = if case .use = machine.decide(wanted: 60, now: now) { true } else { false }
            #expect(snapshot.usable(at: now) == uses, "at \(now.timeIntervalSince(expiresAt)) s from expiry")
        }
    }

    @Test("the snapshot's description and mirror show no token")
    func snapshotRedacted() throws {
        let snapshot = try #require(machine(.active(Self.a)).snapshot(leeway: 60))
        var dumped = ""
        dump(snapshot, to: &dumped)
        for text in [String(describing: snapshot), String(reflecting: snapshot), dumped] {
            #expect(!text.contains("a-1") && !text.contains("r-1"), "\(text)")
        }
    }

    @Test(
        "no snapshot while refreshing, signed out or with a save pending; none carries a Bearer value for DPoP tokens")
    func snapshotWhenNot() {
        #expect(machine(.refreshing(Self.a)).snapshot(leeway: 60) == nil)
        #expect(machine(.signedOut(nil)).snapshot(leeway: 60) == nil)
        var pending = machine(.refreshing(Self.a))
        _ = pending.persisted(false, Self.b, replacing: Self.a)
        _ = try? pending.finish(Self.b, pending.ticket)
        #expect(pending.snapshot(leeway: 60) == nil, "a pending save must reach the actor")
        var bound = Self.a
        bound.tokenType = "DPoP"
        #expect(machine(.active(bound)).snapshot(leeway: 60)?.bearerValue == nil)
        var thumbprinted = Self.a
        thumbprinted.dpopKeyThumbprint = "thumb"
        #expect(machine(.active(thumbprinted)).snapshot(leeway: 60)?.bearerValue == nil)
        #expect(machine(.active(Self.a)).snapshot(leeway: 60)?.bearerValue == "Bearer a-1")
    }

    @Test(
        "a pending save turns 'use' into a refresh that only persists; newer(than:) hands out a newer generation only")
    func pendingSaveAndGenerations() {
        var machine = machine(.refreshing(Self.a))
        #expect(machine.persisted(false, Self.b, replacing: Self.a) == [.persistenceFailed])
        _ = try? machine.finish(Self.b, machine.ticket)
        #expect(machine.decide(wanted: 60, now: Self.now) == .refresh(.persist))
        #expect(machine.newer(than: 1).map { $0.tokens } == Self.b && machine.newer(than: 2) == nil)
        #expect(machine.persisted(true, Self.b, replacing: Self.a).isEmpty && machine.pendingSave == nil)
    }

    @Test(
        "reconcile under the lock: memory's, the store's rotation of the same user, or signed out elsewhere",
        arguments: [
            (a as TokenSet?, SessionMachine.Reconciliation.proceed(a)),
            (b, .proceed(b)),
            (nil, .endedElsewhere),
            (otherUser, .endedElsewhere),
        ])
    func reconcile(stored: TokenSet?, outcome: SessionMachine.Reconciliation) {
        var machine = machine(.refreshing(Self.a))
        #expect(machine.reconcile(memory: Self.a, stored: stored) == outcome)
    }

    @Test("reconcile with a pending save: written while the store holds what it replaces, else dropped")
    func reconcilePendingSave() {
        var machine = machine(.refreshing(Self.b))
        _ = machine.persisted(false, Self.b, replacing: Self.a)
        #expect(machine.reconcile(memory: Self.b, stored: Self.a) == .writePendingSave(Self.b))
        machine.pendingSaveWritten(false)
        #expect(machine.pendingSave != nil, "still pending after another failure")
        #expect(machine.reconcile(memory: Self.b, stored: Self.b) == .proceed(Self.b) && machine.pendingSave == nil)
        _ = machine.persisted(false, Self.b, replacing: Self.a)
        let rotated = TokenSet(accessToken: "a-3", refreshToken: "r-3")
        #expect(machine.reconcile(memory: Self.b, stored: rotated) == .proceed(rotated) && machine.pendingSave == nil)
    }

    @Test(
        "plan: no provider call when still valid, adopted, or only persisting; otherwise refresh",
        arguments: [
            (SessionMachine.Intent.expiring(60), a, SessionMachine.Plan.finish(a)),
            (.expiring(60), expiring, .refresh(expiring)),
            (.rejected, a, .refresh(a)),
            (.rejected, b, .finish(b)),
            (.forced, a, .refresh(a)),
            (.forced, b, .finish(b)),
            (.persist, a, .finish(a)),
        ])
    func plan(intent: SessionMachine.Intent, candidate: TokenSet, plan: SessionMachine.Plan) {
        let memory = candidate == Self.b ? Self.a : candidate
        #expect(machine(.refreshing(memory)).plan(intent, memory: memory, candidate: candidate, now: Self.now) == plan)
    }

    @Test("finish: refreshing → active; a change bumps the generation and says refreshed, the same credentials do not")
    func finish() throws {
        var machine = machine(.refreshing(Self.a))
        #expect(try machine.finish(Self.a, machine.ticket).isEmpty && machine.generation == 1)
        _ = machine.startRefresh()
        #expect(try machine.finish(Self.b, machine.ticket) == [.refreshed(generation: 2)])
        #expect(machine.phase == .active(Self.b))
        #expect(
            machine.served(.rejected, Self.b, since: 1, now: Self.now)
                && !machine.served(.forced, Self.b, since: 2, now: Self.now))
        #expect(!machine.served(.expiring(60), Self.expiring, since: 2, now: Self.now))
    }

    @Test(
        "refreshFailed: refreshing → active(same), the code said; endSession for each reason, with its error",
        arguments: [AuthEvent.SignOutReason.sessionExpired, .signedOutElsewhere, .dpopKeyLost])
    func endings(reason: AuthEvent.SignOutReason) throws {
        var failed = machine(.refreshing(Self.a))
        #expect(failed.refreshFailed(.transport, failed.ticket) == [.refreshFailed(.transport)])
        #expect(failed.phase == .active(Self.a))
        var ended = machine(.refreshing(Self.a))
        #expect(try ended.endSession(reason, ended: Self.a, deleted: true, ended.ticket) == [.signedOut(reason)])
        #expect(ended.phase == .signedOut(reason) && ended.generation == 2)
        var pending = machine(.refreshing(Self.a))
        #expect(
            try pending.endSession(reason, ended: Self.a, deleted: false, pending.ticket) == [
                .persistenceFailed, .signedOut(reason),
            ])
        #expect(pending.pendingDelete == Self.a)
        let code = SessionMachine.endError(reason, cause: nil).code
        #expect(
            code
                == [
                    .sessionExpired: .sessionExpired, .signedOutElsewhere: .notSignedIn, .dpopKeyLost: .dpopKeyMismatch,
                ][reason])
    }

    @Test("the budget: more provider calls than allowed in the window are refused; they come back as the window slides")
    func budget() throws {
        var machine = machine(.active(Self.a))
        let start = ContinuousClock.now
        try machine.charge(now: start)
        try machine.charge(now: start + .seconds(1))
        #expect(throws: AuthError.self) { try machine.charge(now: start + .seconds(2)) }
        try machine.charge(now: start + .seconds(31))
    }

    @Test("a rotation found after a definitive rejection is adopted only for the same user and another refresh token")
    func rotatedMeanwhile() {
        #expect(SessionMachine.rotatedMeanwhile(stored: Self.b, candidate: Self.a) == Self.b)
        #expect(SessionMachine.rotatedMeanwhile(stored: Self.a, candidate: Self.a) == nil)
        #expect(
            SessionMachine.rotatedMeanwhile(
                stored: Self.otherUser,
                candidate: TokenSet(accessToken: "z", refreshToken: "w", user: .init(id: "alice", email: nil))) == nil)
        #expect(SessionMachine.rotatedMeanwhile(stored: nil, candidate: Self.a) == nil)
    }
}
