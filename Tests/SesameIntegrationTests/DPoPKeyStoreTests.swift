import Foundation
import Sesame
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

/// `KeychainDPoPKeyStore`'s logic (what `SesameApple` runs over `SecItem` and the Secure Enclave) on the
/// in-memory Keychain and an emulated enclave, and `OIDCAuth.configure(dpopKeys:)` end to end.
@Suite struct DPoPKeyStoreTests {
    static let now = Date()

    /// Reading the key and making one if needed both fail with store_unavailable (try later), never "no key".
    static func expectUnavailable(_ store: KeychainDPoPKeyStore, _ what: String) async {
        for attempt in 0..<2 {
            do {
                _ =
                    attempt == 0
                    ? try await store.key(profile: "default") : try await store.keyCreatingIfNeeded(profile: "default")
                Issue.record("\(what) answered")
            } catch let error as AuthError {
                #expect(error.code == .storeUnavailable && error.isTransient && !error.requiresReauthentication)
            } catch {
                Issue.record("\(what): \(error)")
            }
        }
    }

    /// A proof from `signer`, checked as a server checks it.
    static func proves(_ signer: DPoPSigner) throws -> String {
        let url = try #require(URL(string: "https://as.example/token"))
        let proof = try signer.proof(method: "POST", url: url, issuedAt: now)
        return try DPoPProofVerifier().verify(proof, method: "POST", url: url, now: now).thumbprint
    }

    @Test(
        "in the Secure Enclave when there is one (the item holds only its handle), else in software; found again by profile"
    )
    func whereKeysLive() async throws {
        let keychain = InMemoryKeychain()
        let enclave = EmulatedSecureEnclave()
        let store = KeychainDPoPKeyStore(service: "app", backend: keychain, hardware: enclave)
        let hardwareKey = try await store.keyCreatingIfNeeded(profile: "default")
        #expect(enclave.keyCount == 1)
        #expect(try Self.proves(hardwareKey) == hardwareKey.thumbprint)
        let item = try #require(keychain.item(KeychainQuery(service: "app.dpop", account: "default")))
        #expect(item.accessibility == .afterFirstUnlockThisDeviceOnly)
        let text = String(decoding: item.data, as: UTF8.self)
        #expect(text.contains("secure-enclave") && !text.contains("\"d\""), "no key material in the item: \(text)")
        #expect(try await store.keyCreatingIfNeeded(profile: "default").thumbprint == hardwareKey.thumbprint)
        // EdDSA (the enclave has P-256 only) and a device without an enclave: software keys in the item.
        let edwards = try await store.createKey(profile: "work", algorithm: .eddsa)
        #expect(edwards.algorithm == .eddsa && enclave.keyCount == 1)
        let plain = KeychainDPoPKeyStore(
            service: "app", backend: keychain, hardware: EmulatedSecureEnclave(available: false))
        let software = try await plain.createKey(profile: "other", algorithm: .es256)
        #expect(try await plain.key(profile: "other")?.thumbprint == software.thumbprint)
        #expect(try Self.proves(try #require(await plain.key(profile: "other"))) == software.thumbprint)
        await #expect(throws: AuthError.self) { _ = try await plain.createKey(profile: "x", algorithm: .hs256) }
        try await store.deleteKey(profile: "default")
        #expect(try await store.key(profile: "default") == nil)
        try await store.deleteKey(profile: "default")  // nothing to delete is fine
    }

    @Test(
        "a locked device at launch is store_unavailable — never 'no key', never a new key; the key is there after unlock"
    )
    func lockedAtLaunch() async throws {
        let keychain = InMemoryKeychain()
        let store = KeychainDPoPKeyStore(service: "app", backend: keychain, hardware: EmulatedSecureEnclave())
        let original = try await store.keyCreatingIfNeeded(profile: "default")
        keychain.setLocked(true)
        await Self.expectUnavailable(store, "a locked Keychain")
        keychain.setLocked(false)
        #expect(try await store.key(profile: "default")?.thumbprint == original.thumbprint)
    }

    @Test(
        "an unreadable item is store_corrupt and left in place; another device's enclave handle is no key (sign in again)"
    )
    func damagedItems() async throws {
        let keychain = InMemoryKeychain()
        let query = KeychainQuery(service: "app.dpop", account: "default")
        let store = KeychainDPoPKeyStore(service: "app", backend: keychain, hardware: EmulatedSecureEnclave())
        for garbage in [
            "not json", #"{"version":1,"kind":"jwk","jwk":"{\"kty\":\"EC\"}"}"#, #"{"version":1,"kind":"rot13"}"#,
        ] {
            try await store.deleteKey(profile: "default")
            var add = query
            add.data = Data(garbage.utf8)
            #expect(keychain.add(add) == .success)
            await #expect(throws: AuthError.self) { _ = try await store.key(profile: "default") }
            #expect(keychain.item(query)?.data == Data(garbage.utf8), "left in place")
        }
        try await store.deleteKey(profile: "default")
        _ = try await store.keyCreatingIfNeeded(profile: "default")
        // The same Keychain item restored on a device whose enclave never made that key.
        let elsewhere = KeychainDPoPKeyStore(service: "app", backend: keychain, hardware: EmulatedSecureEnclave())
        #expect(try await elsewhere.key(profile: "default") == nil)
        let noEnclave = KeychainDPoPKeyStore(service: "app", backend: keychain)
        #expect(try await noEnclave.key(profile: "default") == nil)
    }

    @Test("a hardware key answering DER, or failing, is refused when the signer is made, not by a server later")
    func hardwareFaults() async throws {
        let enclave = EmulatedSecureEnclave()
        enclave.setDERSignatures(true)
        let (key, _) = try enclave.createP256Key()
        #expect(throws: JOSEError.self) { _ = try DPoPSigner(signingKey: key) }
        enclave.setDERSignatures(false)
        let signer = try DPoPSigner(signingKey: key)
        enclave.setFailing(true)
        #expect(throws: (any Error).self) {
            _ = try signer.proof(method: "GET", url: URL(fileURLWithPath: "/"), issuedAt: Self.now)
        }
        let store = KeychainDPoPKeyStore(service: "app", backend: InMemoryKeychain(), hardware: enclave)
        do {
            _ = try await store.keyCreatingIfNeeded(profile: "default")
            Issue.record("a failing enclave made a key")
        } catch let error as AuthError {
            #expect(error.code == .storeUnavailable)
        }
        // A key that exists but cannot be opened right now (a busy enclave, a cancelled prompt) is not "no key":
        // replacing it would end the session for nothing.
        enclave.setFailing(false)
        let original = try await store.keyCreatingIfNeeded(profile: "default")
        enclave.setFailing(true)
        await Self.expectUnavailable(store, "a failing enclave")
        enclave.setFailing(false)
        #expect(try await store.key(profile: "default")?.thumbprint == original.thumbprint)
    }

    @Test(
        "OIDCAuth.configure(dpopKeys:): DPoP tokens bound to the enclave key, the same key after a relaunch; a lost key means signing in again"
    )
    func endToEnd() async throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let keychain = InMemoryKeychain()
        let enclave = EmulatedSecureEnclave()
        let tokens = InMemoryTokenStore()
        func launch(_ enclave: EmulatedSecureEnclave) async throws -> OIDCAuth {
            try await OIDCAuth.configure(
                issuer: oidc.issuer, clientID: "sesame-cli", redirectURI: "http://127.0.0.1:5555/callback",
                scopes: ["openid", "email", "offline_access"], store: tokens,
                dpopKeys: KeychainDPoPKeyStore(service: "app", backend: keychain, hardware: enclave),
                timeSource: oidc.clock)
        }
        let first = try await launch(enclave)
        let signedIn = try await first.signIn(with: FormUserAgent(harness: oidc))
        #expect(signedIn.tokenType == "DPoP" && signedIn.dpopKeyThumbprint == first.provider.dpopSigner?.thumbprint)
        #expect(try await first.client(for: oidc.issuer).send(.get("/userinfo")).status == 200)
        let relaunched = try await launch(enclave)
        #expect(try await relaunched.client(for: oidc.issuer).send(.get("/userinfo")).status == 200)
        #expect(try await relaunched.session.forceRefresh().tokenType == "DPoP")
        // Restored onto another device: the enclave key is gone; a new key is made, and the old tokens are
        // refused locally — the session ends, sign in again.
        let restored = try await launch(EmulatedSecureEnclave())
        do {
            _ = try await restored.client(for: oidc.issuer).send(.get("/userinfo"))
            Issue.record("tokens bound to a lost key were sent")
        } catch let error as AuthError {
            #expect(error.code == .dpopKeyMismatch && error.requiresReauthentication)
        }
        #expect(try await tokens.load(profile: "default") == nil)
        try await restored.signIn(with: FormUserAgent(harness: oidc))
        #expect(try await restored.client(for: oidc.issuer).send(.get("/userinfo")).status == 200)
    }
}

@Suite struct StoredCredentialCheckTests {
    /// A provider whose load-time check answers what the test says.
    final class CheckingProvider: AuthProvider, @unchecked Sendable {
        // Guarded by `lock`.
        private let lock = NSLock()
        private var answer: AuthError?
        private(set) var revoked = 0

        func set(_ error: AuthError?) { lock.withLock { answer = error } }
        func refresh(_ tokens: TokenSet) async throws -> TokenSet { tokens }
        func signOut(_ tokens: TokenSet) async throws { lock.withLock { revoked += 1 } }
        func checkStoredCredentials(_ tokens: TokenSet) throws {
            if let error = lock.withLock({ answer }) { throw error }
        }
    }

    @Test(
        "only dpop_key_mismatch ends a session at load (revoked, deleted); any other check failure keeps it for the next call"
    )
    func onlyMismatchEnds() async throws {
        let store = InMemoryTokenStore()
        let tokens = TokenSet(accessToken: "a", tokenType: "DPoP", refreshToken: "r", dpopKeyThumbprint: "k")
        try await store.save(tokens, profile: "default")
        let provider = CheckingProvider()
        provider.set(AuthError(.storeUnavailable, "signed in again meanwhile; run again"))
        let session = AuthSession(provider: provider, store: store)
        await #expect(throws: AuthError.self) { _ = try await session.validTokens() }
        #expect(try await store.load(profile: "default") == tokens && provider.revoked == 0)
        provider.set(nil)
        #expect(try await session.validTokens().accessToken == "a", "the next call reads them again")

        let ending = CheckingProvider()
        ending.set(AuthError(.dpopKeyMismatch, "lost"))
        let second = AuthSession(provider: ending, store: store)
        await #expect(throws: AuthError.self) { _ = try await second.validTokens() }
        #expect(try await store.load(profile: "default") == nil && ending.revoked == 1)
    }
}
