import Foundation
import SesameTesting
import Testing

@testable import Sesame

/// Biometric and presence policies for stored credentials (issue 23), on the emulated Keychain: how often the user
/// is asked, a cancelled prompt that signs nobody out, and a refresh that needed the prompt.
@Suite struct KeychainPresenceTests {
    final class Clock: @unchecked Sendable {
        private let lock = NSLock()
        private var current = Date(timeIntervalSince1970: 1_800_000_000)
        var now: Date { lock.withLock { current } }
        func advance(_ seconds: TimeInterval) { lock.withLock { current += seconds } }
    }

    static let tokens = TokenSet(
        accessToken: "a", refreshToken: "r", expiresAt: Date(timeIntervalSince1970: 1_800_003_600))

    static func store(_ keychain: InMemoryKeychain, _ policy: KeychainPresence.Policy, clock: Clock)
        -> KeychainTokenStore
    {
        KeychainTokenStore(
            service: "com.example.app",
            presence: KeychainPresence(.biometryCurrentSet, policy: policy, prompt: "Unlock your account"),
            backend: keychain, now: { clock.now })
    }

    @Test("always: every read asks; oncePerLaunch: once per store; every(N): again after N seconds; writes never ask")
    func policies() async throws {
        let clock = Clock()
        for (policy, expected) in [
            (KeychainPresence.Policy.always, 3), (.oncePerLaunch, 1), (.every(300), 1),
        ] {
            let keychain = InMemoryKeychain()
            let store = Self.store(keychain, policy, clock: clock)
            try await store.save(Self.tokens, profile: "default")
            #expect(keychain.prompts.count == 0, "a write prompted")
            #expect(keychain.item(store.query(profile: "default"))?.presence == .biometryCurrentSet)
            for _ in 0..<3 { _ = try await store.load(profile: "default") }
            #expect(keychain.prompts.count == expected, "\(policy)")
            #expect(keychain.prompts.reasons.allSatisfy { $0 == "Unlock your account" })
        }
        // every(300): again after the period, not before.
        let keychain = InMemoryKeychain()
        let store = Self.store(keychain, .every(300), clock: clock)
        try await store.save(Self.tokens, profile: "default")
        _ = try await store.load(profile: "default")
        clock.advance(299)
        _ = try await store.load(profile: "default")
        #expect(keychain.prompts.count == 1)
        clock.advance(2)
        _ = try await store.load(profile: "default")
        #expect(keychain.prompts.count == 2)
        // A new launch (a new store) asks again under oncePerLaunch.
        let relaunched = InMemoryKeychain()
        try await Self.store(relaunched, .oncePerLaunch, clock: clock).save(Self.tokens, profile: "default")
        _ = try await Self.store(relaunched, .oncePerLaunch, clock: clock).load(profile: "default")
        _ = try await Self.store(relaunched, .oncePerLaunch, clock: clock).load(profile: "default")
        #expect(relaunched.prompts.count == 2)
    }

    @Test("a cancelled prompt is cancelled, never signed out: the item stays, the next approval reads it")
    func cancelled() async throws {
        let keychain = InMemoryKeychain()
        let store = Self.store(keychain, .always, clock: Clock())
        try await store.save(Self.tokens, profile: "default")
        keychain.setPresenceAnswer(.cancel)
        do {
            _ = try await store.load(profile: "default")
            Issue.record("a cancelled prompt read the item")
        } catch let error as AuthError {
            #expect(error.code == .cancelled && !error.requiresReauthentication)
        }
        keychain.setPresenceAnswer(.fail)
        do {
            _ = try await store.load(profile: "default")
        } catch let error as AuthError {
            #expect(error.code == .storeUnavailable)
        }
        #expect(keychain.item(store.query(profile: "default")) != nil)
        keychain.setPresenceAnswer(.approve)
        #expect(try await store.load(profile: "default")?.accessToken == "a")
    }

    @Test("a prompt cancelled during a refresh: the refresh fails as cancelled, the session and its item are kept")
    func cancelledDuringRefresh() async throws {
        let keychain = InMemoryKeychain()
        let clock = Clock()
        let store = Self.store(keychain, .always, clock: clock)
        let provider = ScriptedProvider()
        let session = AuthSession(provider: provider, store: store)
        let expiring = TokenSet(accessToken: "old", refreshToken: "r", expiresAt: Date().addingTimeInterval(-5))
        try await session.signIn(with: expiring)
        keychain.setPresenceAnswer(.cancel)
        do {
            _ = try await session.validTokens()
            Issue.record("a refresh read the store through a cancelled prompt")
        } catch let error as AuthError {
            #expect(error.code == .cancelled, "\(error)")
        }
        #expect(await provider.refreshes == 0)
        let status = await session.status
        #expect(status == .signedIn, "\(status)")
        #expect(keychain.item(store.query(profile: "default")) != nil)
        keychain.setPresenceAnswer(.approve)
        await provider.enqueue(.tokens(TokenSet(accessToken: "new", refreshToken: "r2")))
        #expect(try await session.validTokens().accessToken == "new")
    }
}
