import Foundation
import Sesame
import SesameJOSE
import Testing

@Suite struct FileTokenStoreTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-store-\(UUID().uuidString)")
    let tokens = TokenSet(
        accessToken: "access-\(UUID().uuidString)", refreshToken: "refresh-\(UUID().uuidString)",
        expiresAt: Date(timeIntervalSince1970: 1_900_000_000), user: .init(id: "u1", email: "a@example.com"))

    func mode(_ path: String) throws -> Int {
        try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
    }

    @Test("Round trip; the file is 0600 in a 0700 directory; delete is idempotent; another profile is separate")
    func roundTrip() async throws {
        let store = try FileTokenStore(directory: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(try await store.load(profile: "default") == nil)
        try await store.save(tokens, profile: "default")
        #expect(try await store.load(profile: "default") == tokens)
        #expect(try await store.load(profile: "work") == nil)
        #expect(try mode(directory.path) == 0o700)
        #expect(try mode(directory.appendingPathComponent("default.json").path) == 0o600)
        try await store.delete(profile: "default")
        try await store.delete(profile: "default")
        #expect(try await store.load(profile: "default") == nil)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
            $0.contains("tmp")
        }
        #expect(leftovers.isEmpty)
    }

    @Test("A corrupt file is a typed error and is kept aside, never deleted")
    func corruptFile() async throws {
        let store = try FileTokenStore(directory: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data("{not json".utf8).write(to: directory.appendingPathComponent("default.json"))
        do {
            _ = try await store.load(profile: "default")
            Issue.record("expected storeCorrupt")
        } catch let error as AuthError {
            #expect(error.code == .storeCorrupt)
        }
        let kept = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains("corrupt") }
        #expect(kept.count == 1)
        #expect(try String(contentsOf: directory.appendingPathComponent(kept[0]), encoding: .utf8) == "{not json")
    }

    @Test(
        "Profile names cannot escape the directory",
        arguments: ["../evil", "", ".hidden", "a/b", String(repeating: "x", count: 65)])
    func profileNames(profile: String) async throws {
        let store = try FileTokenStore(directory: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        await #expect(throws: AuthError.self) { try await store.save(tokens, profile: profile) }
    }

    @Test("A folder writable by others or owned by someone else is refused, and so is a symlinked credentials file")
    func hostileFilesystem() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try FileTokenStore(directory: directory)
        try await store.save(tokens, profile: "default")

        // Another user could swap the file under us: refused, with the path and the fix in the message.
        chmod(directory.path, 0o777)
        do {
            _ = try FileTokenStore(directory: directory)
            Issue.record("a world-writable folder must be refused")
        } catch let error as AuthError {
            #expect(error.code == .configuration && error.message.contains(directory.path))
        }
        await #expect(throws: AuthError.self) { try await store.load(profile: "default") }
        chmod(directory.path, 0o770)
        await #expect(throws: AuthError.self) { try await store.save(tokens, profile: "default") }
        chmod(directory.path, 0o700)
        #expect(try await store.load(profile: "default") == tokens)

        // A symbolic link in place of the credentials file is never followed.
        let elsewhere = directory.deletingLastPathComponent().appendingPathComponent("planted-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        let planted = TokenSet(accessToken: "planted", refreshToken: "planted-refresh")
        try JSONEncoder().encode(planted).write(to: elsewhere)
        let file = directory.appendingPathComponent("default.json")
        try FileManager.default.removeItem(at: file)
        try FileManager.default.createSymbolicLink(at: file, withDestinationURL: elsewhere)
        do {
            _ = try await store.load(profile: "default")
            Issue.record("a symlinked credentials file must be refused")
        } catch let error as AuthError {
            #expect(error.code == .storeUnavailable && error.message.contains("symbolic link"))
        }
        // Saving replaces the link itself; the planted target is untouched.
        try await store.save(tokens, profile: "default")
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: file.path)) == nil)
        #expect(try await store.load(profile: "default") == tokens)
        #expect(try JSONDecoder().decode(TokenSet.self, from: Data(contentsOf: elsewhere)) == planted)

        // A folder owned by another user (root can hand it to nobody) is refused.
        if geteuid() == 0 {
            chown(directory.path, 65534, 65534)
            defer { chown(directory.path, 0, 0) }
            await #expect(throws: AuthError.self) { try await store.load(profile: "default") }
        }
    }

    @Test("withExclusiveAccess excludes: two holders never overlap, even through two store instances")
    func exclusiveAccess() async throws {
        // A long timeout: on two cores, other suites' blocking work can keep the holders from resuming for a while,
        // and this test is about exclusion, not about how long a waiter waits.
        let first = try FileTokenStore(directory: directory, lockTimeout: .seconds(600))
        let second = try FileTokenStore(directory: directory, lockTimeout: .seconds(600))
        defer { try? FileManager.default.removeItem(at: directory) }
        let overlap = Overlap()
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<8 {
                let store = index % 2 == 0 ? first : second
                group.addTask {
                    _ = try? await store.withExclusiveAccess(profile: "default") {
                        overlap.enter()
                        try await Task.sleep(for: .milliseconds(10))
                        overlap.leave()
                    }
                }
            }
        }
        #expect(overlap.maximum == 1 && overlap.total == 8)
    }
}

final class Overlap: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var current = 0
    private(set) var maximum = 0
    private(set) var total = 0

    func enter() {
        lock.lock()
        current += 1
        total += 1
        maximum = max(maximum, current)
        lock.unlock()
    }

    func leave() {
        lock.lock()
        current -= 1
        lock.unlock()
    }
}

@Suite struct TokenSetTests {
    @Test("description and debugDescription never show a token")
    func redaction() {
        let tokens = TokenSet(
            accessToken: "AT-secret", refreshToken: "RT-secret", idToken: "ID-secret", user: .init(id: "u"))
        for text in ["\(tokens)", String(reflecting: tokens), tokens.debugDescription, "\([tokens])"] {
            #expect(
                !text.contains("AT-secret") && !text.contains("RT-secret") && !text.contains("ID-secret"), "\(text)")
        }
    }

    @Test("Expiry: expires_in at receipt, else the JWT's exp, else unknown (rely on a 401)")
    func expiry() throws {
        let received = Date(timeIntervalSince1970: 1_000_000)
        #expect(
            TokenSet.expiry(expiresIn: 300, accessToken: "opaque", receivedAt: received)
                == received.addingTimeInterval(300))
        let key = try JWK.generate(for: .es256)
        let jwt = try JWT.sign(JWTClaims(["exp": 2_000_000]), key: key, algorithm: .es256)
        #expect(
            TokenSet.expiry(expiresIn: nil, accessToken: jwt, receivedAt: received)
                == Date(timeIntervalSince1970: 2_000_000))
        #expect(TokenSet.expiry(expiresIn: nil, accessToken: "opaque", receivedAt: received) == nil)
        // An exp long past (down to -1e308, a date nothing can format) is "expired at receipt".
        let ancient = try JWT.sign(JWTClaims(["exp": .number(-1e308)]), key: key, algorithm: .es256)
        #expect(TokenSet.expiry(expiresIn: nil, accessToken: ancient, receivedAt: received) == received)
        let unknown = TokenSet(accessToken: "opaque")
        #expect(!unknown.needsRefresh(at: Date.distantFuture))
        let soon = TokenSet(accessToken: "x", expiresAt: received.addingTimeInterval(30))
        #expect(soon.needsRefresh(at: received, leeway: 60) && !soon.needsRefresh(at: received, leeway: 10))
    }

    @Test("AuthError classes: transient vs reauthentication, and no secrets in descriptions")
    func errorClasses() {
        #expect(AuthError(.transport, "x").isTransient)
        #expect(AuthError(.server, "x", statusCode: 503).isTransient)
        #expect(AuthError(.server, "x", statusCode: 429).isTransient)
        #expect(!AuthError(.server, "x", statusCode: 400).isTransient)
        let grant = AuthError(
            .refreshRejected, "x", serverResponse: ServerErrorResponse(statusCode: 401, error: "invalid_grant"))
        #expect(grant.requiresReauthentication && !grant.isTransient && grant.statusCode == 401)
        #expect(!AuthError(.server, "x", statusCode: 401).requiresReauthentication)
        #expect(AuthError(.sessionExpired, "x").requiresReauthentication)
    }

    @Test("A REST contract can map another backend's fields and paths")
    func customContract() throws {
        var contract = RESTAuthProvider.Contract()
        contract.refreshPath = "auth/refresh"
        contract.refreshBody = { ["refreshToken": .string($0), "deviceId": "device-7"] }
        contract.parseTokens = { json, received in
            guard let access = json["access_token"]?.stringValue else { return nil }
            return TokenSet(
                accessToken: access, refreshToken: json["refresh_token"]?.stringValue,
                expiresAt: TokenSet.expiry(
                    expiresIn: json["ttl"]?.doubleValue, accessToken: access, receivedAt: received))
        }
        let body = contract.refreshBody("rt")
        #expect(body["deviceId"] == "device-7" && body["refreshToken"] == "rt")
        let parsed = contract.parseTokens(
            ["access_token": "a", "refresh_token": "r", "ttl": 60], Date(timeIntervalSince1970: 0))
        #expect(parsed?.expiresAt == Date(timeIntervalSince1970: 60) && parsed?.refreshToken == "r")
        let standard = RESTAuthProvider.parseAuthResponse(
            [
                "accessToken": "a", "refreshToken": "r", "expiresIn": 900, "tokenType": "Bearer",
                "user": ["id": "u", "email": "e"],
            ],
            receivedAt: Date(timeIntervalSince1970: 0))
        #expect(standard?.user?.id == "u" && standard?.user?.email == "e")
        #expect(standard?.user?.claims?["email"] == "e" && standard?.expiresAt == Date(timeIntervalSince1970: 900))
        #expect(RESTAuthProvider.parseAuthResponse(["nothing": 1], receivedAt: Date()) == nil)
    }
}
