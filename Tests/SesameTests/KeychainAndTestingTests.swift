import Foundation
import Sesame
import SesameJOSE
import SesameTesting
import Testing

/// The Keychain store's logic (query building, upsert, status mapping) against an in-memory SecItem emulation.
@Suite struct KeychainTokenStoreTests {
    let tokens = TokenSet(accessToken: "at", refreshToken: "rt", user: .init(id: "u1"))

    @Test("Queries: generic password per profile; add carries data and after-first-unlock-this-device-only")
    func queries() async throws {
        let keychain = InMemoryKeychain()
        let store = KeychainTokenStore(service: "com.example.app", accessGroup: "TEAM.shared", backend: keychain)
        #expect(
            store.query(profile: "work")
                == KeychainQuery(service: "com.example.app", account: "work", accessGroup: "TEAM.shared"))
        try await store.save(tokens, profile: "default")
        let item = try #require(keychain.item(store.query(profile: "default")))
        #expect(item.accessibility == .afterFirstUnlockThisDeviceOnly && !item.usesAccessControl)
        #expect(try JSONDecoder().decode(TokenSet.self, from: item.data) == tokens)
    }

    @Test("Save is an upsert (a duplicate becomes an update); load and delete round-trip; delete is idempotent")
    func upsert() async throws {
        let keychain = InMemoryKeychain()
        let store = KeychainTokenStore(service: "svc", backend: keychain)
        try await store.save(tokens, profile: "default")
        var rotated = tokens
        rotated.refreshToken = "rt-2"
        try await store.save(rotated, profile: "default")
        #expect(try await store.load(profile: "default") == rotated)
        try await store.delete(profile: "default")
        try await store.delete(profile: "default")
        #expect(try await store.load(profile: "default") == nil)
    }

    @Test("A locked device is 'store unavailable, try later', never 'signed out', and loses nothing")
    func lockedDevice() async throws {
        let keychain = InMemoryKeychain()
        let store = KeychainTokenStore(service: "svc", backend: keychain)
        try await store.save(tokens, profile: "default")
        keychain.setLocked(true)
        for operation in ["load", "save", "delete"] {
            do {
                switch operation {
                case "load": _ = try await store.load(profile: "default")
                case "save": try await store.save(tokens, profile: "default")
                default: try await store.delete(profile: "default")
                }
                Issue.record("\(operation) should fail while locked")
            } catch let error as AuthError {
                #expect(error.code == .storeUnavailable && error.isTransient, "\(operation)")
            }
        }
        keychain.setLocked(false)
        #expect(try await store.load(profile: "default") == tokens)
    }

    @Test("OSStatus mapping")
    func statusMapping() {
        #expect(KeychainStatus(osStatus: 0) == .success)
        #expect(KeychainStatus(osStatus: -25300) == .itemNotFound)
        #expect(KeychainStatus(osStatus: -25299) == .duplicateItem)
        #expect(KeychainStatus(osStatus: -25308) == .interactionNotAllowed)
        #expect(KeychainStatus(osStatus: -128) == .userCanceled)
        #expect(KeychainStatus(osStatus: -25293) == .authenticationFailed)
        #expect(KeychainStatus(osStatus: -34018) == .other(-34018))
    }

    @Test(
        "A negative, NaN or infinite refresh leeway never hands out an expired token",
        arguments: [-3600, .nan, .infinity])
    func hostileLeeway(leeway: TimeInterval) async throws {
        let transport = ScriptedTransport()
        let clock = ManualTimeSource()
        let provider = RESTAuthProvider(
            baseURL: try #require(URL(string: "https://api.example")), transport: transport, timeSource: clock)
        let session = AuthSession(
            provider: provider, store: InMemoryTokenStore(), timeSource: clock, refreshLeeway: leeway)
        try await session.signIn(
            with: TokenSet(accessToken: "a1", refreshToken: "r1", expiresAt: clock.now.addingTimeInterval(60)))
        clock.advance(by: 61)
        transport.enqueue(.json(200, #"{"accessToken":"a2","refreshToken":"r2","expiresIn":900,"tokenType":"Bearer"}"#))
        #expect(try await session.validTokens().accessToken == "a2", "the expired a1 must not be handed out")
    }

    @Test("A locked Keychain is 'unavailable', never 'signed out': no refresh from memory, recovery after unlock")
    func sessionSurvivesLockedKeychain() async throws {
        let keychain = InMemoryKeychain()
        let store = KeychainTokenStore(service: "svc", backend: keychain)
        let transport = ScriptedTransport()
        let clock = ManualTimeSource()
        let provider = RESTAuthProvider(
            baseURL: try #require(URL(string: "https://api.example")), transport: transport, timeSource: clock)
        let session = AuthSession(provider: provider, store: store, timeSource: clock, refreshLeeway: 0)
        try await session.signIn(
            with: TokenSet(accessToken: "a1", refreshToken: "r1", expiresAt: clock.now.addingTimeInterval(60)))
        keychain.setLocked(true)
        clock.advance(by: 120)
        // The store cannot be re-read, so the refresh does not run on a refresh token that another process may
        // have rotated: a transient error, the session kept.
        await #expect(throws: AuthError.self) { try await session.validTokens() }
        #expect(transport.requests.isEmpty)
        #expect(await session.status == .signedIn)
        keychain.setLocked(false)
        transport.enqueue(.json(200, #"{"accessToken":"a2","refreshToken":"r2","expiresIn":900,"tokenType":"Bearer"}"#))
        #expect(try await session.validTokens().accessToken == "a2")
        #expect(try await store.load(profile: "default")?.refreshToken == "r2")

        // A fresh session over a locked Keychain (an app prewarmed before first unlock) stays loading.
        keychain.setLocked(true)
        let launched = AuthSession(provider: provider, store: store, timeSource: clock)
        do {
            _ = try await launched.isSignedIn
            Issue.record("a locked Keychain must not read as signed out")
        } catch let error as AuthError {
            #expect(error.code == .storeUnavailable && error.isTransient)
        }
        #expect(await launched.status == .loading)
        keychain.setLocked(false)
        #expect(try await launched.isSignedIn)
    }
}

@Suite struct ScriptedTransportTests {
    @Test("Scripted responses are played in order and requests recorded; refresh bodies are exact")
    func scripted() async throws {
        let transport = ScriptedTransport()
        transport.enqueue(
            .json(200, #"{"accessToken":"a2","refreshToken":"r2","expiresIn":60}"#),
            .json(401, #"{"error":"invalid_grant","error_description":"revoked"}"#))
        let provider = RESTAuthProvider(
            baseURL: try #require(URL(string: "https://api.example/v1/")), transport: transport)
        let first = try await provider.refresh(TokenSet(accessToken: "a1", refreshToken: "r1"))
        #expect(first.refreshToken == "r2")
        do {
            _ = try await provider.refresh(first)
            Issue.record("expected invalid_grant")
        } catch let error as AuthError {
            #expect(error.requiresReauthentication && error.serverResponse?.errorDescription == "revoked")
        }
        let requests = transport.requests
        #expect(requests.count == 2 && requests[0].url.absoluteString == "https://api.example/v1/refresh-token")
        #expect(try JOSEValue.parse(try #require(requests[1].body)) == ["refreshToken": "r2"])
        await #expect(throws: AuthError.self) { try await provider.refresh(first) }  // empty script: transport error
    }

    @Test("Sign in with Apple nonce: fresh, 256 bits, SHA-256 hex, description hides the raw value")
    func appleNonce() {
        let nonce = SignInWithAppleNonce()
        #expect(nonce != SignInWithAppleNonce() && nonce.raw.count == 43)
        #expect(
            SignInWithAppleNonce(raw: "abc").hashed
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(!nonce.description.contains(nonce.raw))
    }
}

@Suite struct TestDoubleTests {
    @Test("ScriptedProvider: scripted outcomes first, then rotation; every call recorded; sign-out can fail")
    func scriptedProvider() async throws {
        let provider = ScriptedProvider(user: "alice")
        let session = AuthSession(provider: provider, store: InMemoryTokenStore())
        try await session.signIn(with: TokenSet(accessToken: "a-0", refreshToken: "r-0"))
        #expect(try await session.forceRefresh().accessToken == "alice-a1")
        await provider.enqueue(.failure(AuthError(.transport, "offline")))
        await #expect(throws: AuthError.self) { _ = try await session.forceRefresh() }
        #expect(await session.status == .signedIn, "a transient failure keeps the session")
        await provider.enqueue(.failure(AuthError(.refreshRejected, "dead")))
        await #expect(throws: AuthError.self) { _ = try await session.forceRefresh() }
        #expect(await session.status == .signedOut(reason: .sessionExpired))
        #expect(await provider.refreshes == 3)
        #expect(await provider.refreshed.map(\.refreshToken) == ["r-0", "alice-r1", "alice-r1"])
        try await session.signIn(with: TokenSet(accessToken: "b", refreshToken: "rb"))
        await provider.failSignOut(with: AuthError(.transport, "offline"))
        let result = await session.signOut()
        guard case .failed = result.revocation else {
            Issue.record("the failed revocation was not reported")
            return
        }
        #expect(await provider.signedOut.map(\.accessToken) == ["b"] && result.credentialsRemoved)
    }

    @Test("FailingTokenStore: a locked store at launch is unavailable, never signed out; healed, the session is there")
    func failingStore() async throws {
        let store = FailingTokenStore()
        try await store.save(TokenSet(accessToken: "a", refreshToken: "r"), profile: "default")
        await store.fail([.load])
        let session = AuthSession(provider: ScriptedProvider(), store: store)
        do {
            _ = try await session.validTokens()
            Issue.record("a locked store answered")
        } catch let error as AuthError {
            #expect(error.code == .storeUnavailable && error.isTransient)
        }
        #expect(await session.status == .loading)
        await store.heal()
        #expect(try await session.validTokens().accessToken == "a")
        #expect(await store.calls == [.save, .load, .load])
        await store.fail([.delete], with: .storeCorrupt)
        #expect(await session.signOut(revoke: false).credentialsRemoved == false)
        #expect(await store.peek()?.accessToken == "a", "nothing lost")
    }
}
