import Foundation
import SesameJOSE
import SesameTesting
import Testing

@testable import Sesame

/// Stored formats carry a version: what an earlier release wrote is rewritten in place, a newer one's is left.
///
/// Issue 23: Okta's users lost their sessions to a format change with no migration. The inputs are the files `sesame` 0.2.0 wrote (`SesameCLITests/Fixtures/release-0.2.0`).
@Suite struct StoredFormatMigrationTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../SesameCLITests/Fixtures/release-0.2.0/credentials").standardizedFileURL

    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-format-\(UUID().uuidString)")

    /// A store in a fresh folder holding 0.2.0's `default.json` (and DPoP key), mode 0600 as that release left it.
    func oldFiles() throws -> FileTokenStore {
        let store = try FileTokenStore(directory: directory)
        for name in ["default.json", "oidc.json", "oidc.dpop.jwk"] {
            let target = directory.appendingPathComponent(name)
            try Data(contentsOf: Self.fixtures.appendingPathComponent(name)).write(to: target)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: target.path)
        }
        return store
    }

    func json(_ name: String) throws -> JOSEValue {
        try JOSEValue.parse(Data(contentsOf: directory.appendingPathComponent(name)))
    }

    @Test("file store: a 0.2.0 file is read, then rewritten as format 2 in place with the same credentials")
    func fileMigrates() async throws {
        let store = try oldFiles()
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(try json("default.json")["format"] == nil)
        let before = try #require(try await store.load(profile: "default"))
        #expect(try json("default.json")["format"] == 2)
        #expect(try await store.load(profile: "default") == before)
        #expect(before.refreshToken != nil && before.user?.email == "alice@example.com")
        let left = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(!left.contains { $0.contains("tmp") || $0.contains("corrupt") })
    }

    @Test(
        "file store: under a held lock (another's, or a refresh's own) the file is read but not rewritten; later it is")
    func fileMigrationWaitsForTheLock() async throws {
        let store = try oldFiles()
        defer { try? FileManager.default.removeItem(at: directory) }
        // A lock held by a detached task on its own open file stands for another process (flock excludes across
        // open files; a detached task inherits nothing of this one).
        let (held, holding) = AsyncStream.makeStream(of: Void.self)
        let (release, releasing) = AsyncStream.makeStream(of: Void.self)
        let directory = self.directory
        let holder = Task.detached {
            try await ProfileLock(directory: directory).withLock(profile: "default") {
                holding.yield()
                for await _ in release { break }
            }
        }
        for await _ in held { break }
        #expect(try await store.load(profile: "default") != nil)
        #expect(try json("default.json")["format"] == nil)
        releasing.yield()
        try await holder.value
        // Inside the store's own exclusive access (as a refresh reads, beside its own writes) nothing is rewritten:
        // the refresh's save writes format 2 anyway.
        _ = try await store.withExclusiveAccess(profile: "default") { try await store.load(profile: "default") }
        #expect(try json("default.json")["format"] == nil)
        _ = try await store.load(profile: "default")
        #expect(try json("default.json")["format"] == 2)
    }

    @Test("file store: a newer release's file is unavailable, never corrupt, and left byte for byte")
    func newerFileIsLeft() async throws {
        let store = try FileTokenStore(directory: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("default.json")
        let newer = Data(#"{"format":3,"accessToken":"a","tokenType":"Bearer","refreshToken":"r","bound":{}}"#.utf8)
        try newer.write(to: url)
        do {
            _ = try await store.load(profile: "default")
            Issue.record("a newer format was read")
        } catch let error as AuthError {
            #expect(error.code == .storeUnavailable && error.message.contains("format 3"))
        }
        #expect(try Data(contentsOf: url) == newer)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == ["default.json"])
        // A format this release cannot tell is left as it is too, never rewritten nor moved.
        for format in [#""two""#, "2.5", "0", "-1", "99999999999999999999", "null"] {
            let odd = Data(#"{"format":\#(format),"accessToken":"a","tokenType":"Bearer"}"#.utf8)
            try odd.write(to: url)
            do {
                _ = try await store.load(profile: "default")
                Issue.record("format \(format) was read")
            } catch let error as AuthError {
                #expect(error.code == .storeUnavailable && error.reason == "newer_format", "\(format)")
            }
            #expect(try Data(contentsOf: url) == odd, "\(format)")
        }
        // A duplicated member is no format at all (Foundation would let the last win): corrupt, kept aside.
        try Data(#"{"format":1,"accessToken":"a","tokenType":"Bearer","format":3}"#.utf8).write(to: url)
        do {
            _ = try await store.load(profile: "default")
            Issue.record("a duplicated format was read")
        } catch let error as AuthError {
            #expect(error.code == .storeCorrupt)
        }
        // (Moving it aside took the profile's lock, whose file stays.)
        let kept = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0 != "default.lock" }
        #expect(kept.count == 1 && kept[0].hasPrefix("default.json.corrupt-"))
    }

    @Test("sign-out over a newer release's credentials deletes nothing it cannot revoke")
    func signOutKeepsNewer() async throws {
        let store = try FileTokenStore(directory: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("default.json")
        let newer = Data(#"{"format":3,"accessToken":"a","tokenType":"Bearer","refreshToken":"r"}"#.utf8)
        try newer.write(to: url)
        let session = AuthSession(provider: ScriptedProvider(), store: store)
        let result = await session.signOut()
        #expect(!result.credentialsRemoved)
        #expect(try Data(contentsOf: url) == newer)
    }

    @Test("what this release writes is format 2, and 0.2.0's reader (TokenSet's own Codable) still reads it")
    func downgradeReads() async throws {
        let store = try FileTokenStore(directory: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        let tokens = TokenSet(accessToken: "a", refreshToken: "r", user: .init(id: "u", email: "u@example.com"))
        try await store.save(tokens, profile: "default")
        let data = try Data(contentsOf: directory.appendingPathComponent("default.json"))
        #expect(try JOSEValue.parse(data)["format"] == 2)
        #expect(try JSONDecoder().decode(TokenSet.self, from: data) == tokens)
    }

    @Test("DPoP key file: 0.2.0's bare JWK is read as it is (never rewritten on read); a new key is format 2")
    func dpopKeyFormats() async throws {
        _ = try oldFiles()
        defer { try? FileManager.default.removeItem(at: directory) }
        let keys = try FileDPoPKeyStore(directory: directory)
        let old = try Data(contentsOf: directory.appendingPathComponent("oidc.dpop.jwk"))
        let first = try #require(try await keys.key(profile: "oidc"))
        #expect(try Data(contentsOf: directory.appendingPathComponent("oidc.dpop.jwk")) == old)
        let stored = try #require(try await FileTokenStore(directory: directory).load(profile: "oidc"))
        #expect(stored.dpopKeyThumbprint == first.thumbprint)
        let created = try await keys.createKey(profile: "next", algorithm: .es256)
        #expect(try json("next.dpop.jwk")["sesame_format"] == 2)
        #expect(try await keys.key(profile: "next")?.thumbprint == created.thumbprint)
        // A newer key file is left alone.
        let url = directory.appendingPathComponent("oidc.dpop.jwk")
        var members = try #require(try json("oidc.dpop.jwk").objectValue)
        members["sesame_format"] = 9
        let newer = Data(JOSEValue.object(members).jsonBytes)
        try newer.write(to: url)
        do {
            _ = try await keys.key(profile: "oidc")
            Issue.record("a newer key file was used")
        } catch let error as AuthError {
            #expect(error.code == .storeUnavailable)
        }
        #expect(try Data(contentsOf: url) == newer)
    }

    @Test("Keychain: an old item is rewritten in place under its lock; without a lock, or guarded, at its next write")
    func keychainMigrates() async throws {
        let old = try Data(contentsOf: Self.fixtures.appendingPathComponent("default.json"))
        let keychain = InMemoryKeychain()
        defer { try? FileManager.default.removeItem(at: directory) }
        // Without a lock directory nothing excludes another process's save: not rewritten on read.
        let unlocked = KeychainTokenStore(service: "com.example.unlocked", backend: keychain)
        #expect(
            keychain.upsert(
                unlocked.query(profile: "default"), data: old, accessibility: .afterFirstUnlockThisDeviceOnly)
                == .success)
        _ = try await unlocked.load(profile: "default")
        #expect(keychain.item(unlocked.query(profile: "default"))?.data == old)
        let store = KeychainTokenStore(service: "com.example.app", lockDirectory: directory, backend: keychain)
        #expect(
            keychain.upsert(store.query(profile: "default"), data: old, accessibility: .afterFirstUnlockThisDeviceOnly)
                == .success)
        let tokens = try #require(try await store.load(profile: "default"))
        let rewritten = try #require(keychain.item(store.query(profile: "default"))?.data)
        #expect(try JOSEValue.parse(rewritten)["format"] == 2)
        #expect(try await store.load(profile: "default") == tokens)

        let guarded = KeychainTokenStore(
            service: "com.example.guarded",
            presence: KeychainPresence(.userPresence, policy: .always, prompt: "Unlock"), backend: keychain)
        #expect(
            keychain.upsert(
                guarded.query(profile: "default"), data: old, accessibility: .afterFirstUnlockThisDeviceOnly)
                == .success)
        let prompts = keychain.prompts.count
        _ = try await guarded.load(profile: "default")
        #expect(keychain.prompts.count == prompts + 1)
        #expect(
            try JOSEValue.parse(try #require(keychain.item(guarded.query(profile: "default"))?.data))["format"] == nil)
        try await guarded.save(tokens, profile: "default")
        #expect(
            try JOSEValue.parse(try #require(keychain.item(guarded.query(profile: "default"))?.data))["format"] == 2)

        // A newer item is left as it is.
        let newer = Data(#"{"format":7,"accessToken":"a","tokenType":"Bearer"}"#.utf8)
        #expect(
            keychain.upsert(store.query(profile: "next"), data: newer, accessibility: .afterFirstUnlockThisDeviceOnly)
                == .success)
        await #expect(throws: AuthError.self) { try await store.load(profile: "next") }
        #expect(keychain.item(store.query(profile: "next"))?.data == newer)
    }

    @Test("account index: a newer version is unavailable and left as it is")
    func newerAccountIndex() async throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("accounts.json")
        let newer = Data(#"{"version":2,"accounts":[],"groups":[]}"#.utf8)
        try newer.write(to: url)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
        do {
            _ = try await FileAccountIndexStore(url: url).load()
            Issue.record("a newer index was read")
        } catch let error as AuthError {
            #expect(error.code == .storeUnavailable)
        }
        #expect(try Data(contentsOf: url) == newer)
    }
}
