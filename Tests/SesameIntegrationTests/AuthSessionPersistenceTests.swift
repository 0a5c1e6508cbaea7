import Foundation
import Sesame
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import SesameTesting
import Testing

/// AuthSession's pending writes and unreadable stores: what an earlier security review found, over a real file
/// store shared by two sessions (two processes).
@Suite struct AuthSessionPersistenceTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-audit-\(UUID().uuidString)")

    @Test("A pending save never overwrites another process's sign-out and sign-in (another user's session)")
    func pendingSaveRespectsNewerSession() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try FileTokenStore(directory: directory)
        let flaky = FailingTokenStore(wrapping: file)
        let old = AuthSession(provider: ScriptedProvider(user: "Y"), store: flaky, profile: "p")
        try await old.signIn(with: TokenSet.of("Y", "0"))
        await flaky.fail([.save])
        _ = try await old.forceRefresh()  // rotated; the save fails: pending
        await flaky.heal()
        let other = AuthSession(provider: ScriptedProvider(user: "X"), store: file, profile: "p")
        await other.signOut(revoke: false)
        try await other.signIn(with: TokenSet.of("X", "0"))
        await #expect(throws: AuthError.self) { try await old.validTokens() }  // ended: another user's profile now
        #expect(try await file.load(profile: "p")?.accessToken == "X-a0")
        #expect(await old.status == .signedOut(reason: .signedOutElsewhere))
        #expect(try await other.forceRefresh().accessToken == "X-a1")
    }

    @Test("A pending delete never deletes a newer session's credentials")
    func pendingDeleteRespectsNewerSession() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try FileTokenStore(directory: directory)
        let flaky = FailingTokenStore(wrapping: file)
        let old = AuthSession(provider: ScriptedProvider(user: "old"), store: flaky, profile: "p")
        try await old.signIn(with: TokenSet.of("old", "0"))
        await flaky.fail([.delete])
        #expect(await old.signOut(revoke: false).credentialsRemoved == false)
        await flaky.heal()
        let fresh = AuthSession(provider: ScriptedProvider(user: "new"), store: file, profile: "p")
        try await fresh.signIn(with: TokenSet.of("new", "0"))
        _ = try await old.isSignedIn  // retries its pending delete
        #expect(try await file.load(profile: "p")?.accessToken == "new-a0")
        #expect(try await fresh.forceRefresh().accessToken == "new-a1")
        // Without a newer session the pending delete does its job.
        let lone = AuthSession(provider: ScriptedProvider(user: "lone"), store: flaky, profile: "q")
        try await lone.signIn(with: TokenSet.of("lone", "0"))
        await flaky.fail([.delete])
        await lone.signOut(revoke: false)
        await flaky.heal()
        _ = try await lone.isSignedIn
        #expect(try await file.load(profile: "q") == nil)
    }

    @Test("A corrupt credentials file during an active session: kept aside, the session kept and re-saved")
    func corruptFileKeepsSession() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try FileTokenStore(directory: directory)
        let session = AuthSession(provider: ScriptedProvider(user: "u"), store: file, profile: "p")
        try await session.signIn(with: TokenSet.of("u", "0"))
        try Data("{not json".utf8).write(to: directory.appendingPathComponent("p.json"))
        #expect(try await session.forceRefresh().accessToken == "u-a1")
        #expect(await session.status == .signedIn)
        #expect(try await file.load(profile: "p")?.accessToken == "u-a1")
        let kept = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains("corrupt") }
        #expect(kept.count == 1)
    }
}
