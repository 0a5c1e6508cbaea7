import Foundation
import SesameDevServer
import SesameJOSE
import SesameTestSupport
import Testing

@Suite struct SchemaMigrationTests {
    /// The schema-1 tables exactly as the previous release created them.
    static let schemaVersion1 = """
        CREATE TABLE users (id TEXT PRIMARY KEY, email TEXT UNIQUE, password_hash BLOB, password_salt BLOB,
            password_iterations INTEGER, apple_subject TEXT UNIQUE, created_at INTEGER NOT NULL);
        CREATE TABLE refresh_families (id TEXT PRIMARY KEY, user_id TEXT NOT NULL REFERENCES users(id),
            created_at INTEGER NOT NULL, revoked INTEGER NOT NULL DEFAULT 0);
        CREATE TABLE refresh_tokens (hash BLOB PRIMARY KEY, family_id TEXT NOT NULL REFERENCES refresh_families(id),
            expires_at INTEGER NOT NULL, used INTEGER NOT NULL DEFAULT 0);
        CREATE INDEX refresh_tokens_family ON refresh_tokens(family_id);
        CREATE TABLE signing_keys (kid TEXT PRIMARY KEY, purpose TEXT NOT NULL, alg TEXT NOT NULL, jwk TEXT NOT NULL,
            created_at INTEGER NOT NULL, active INTEGER NOT NULL);
        PRAGMA user_version = 1;
        """

    @Test("a schema-1 database is migrated in place: its users and refresh tokens still work, and OIDC works on it")
    func migratesVersion1() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sesame-migration-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("v1.sqlite").path
        // Python's sqlite3 writes the old database, so this test does not depend on the code under test.
        let script = """
            import sqlite3, hashlib, sys, time
            db = sqlite3.connect(sys.argv[1])
            db.executescript(sys.argv[2])
            salt = b"0123456789abcdef"
            digest = hashlib.pbkdf2_hmac("sha256", b"correct-horse", salt, 1000, 32)
            now = int(time.time())
            db.execute("INSERT INTO users VALUES ('u-1', 'alice@example.com', ?, ?, 1000, NULL, ?)", (digest, salt, now))
            db.execute("INSERT INTO refresh_families (id, user_id, created_at) VALUES ('f-1', 'u-1', ?)", (now,))
            db.execute("INSERT INTO refresh_tokens (hash, family_id, expires_at) VALUES (?, 'f-1', ?)",
                (hashlib.sha256(b"old-refresh-token").digest(), now + 3600))
            db.commit()
            """
        let run = try InteropTests.runPython(["-c", script, path, Self.schemaVersion1])
        try #require(run.status == 0, "\(run.errors)")

        chmod(path, 0o600)  // Python made it 0644; the server uses only private database files
        let oidc = try OIDCTestServer { $0.databasePath = path }
        defer { oidc.stop() }
        let refreshed = try await oidc.running.refresh("old-refresh-token")
        #expect(refreshed.status == 200 && refreshed.json?["user"]?["id"] == "u-1")
        #expect(try await oidc.running.login(OIDCTestServer.email, OIDCTestServer.password).status == 200)
        let (tokens, _) = try oidc.signedInTokens()
        #expect(try oidc.userInfo(tokens["access_token"].string).json?["sub"] == "u-1")
        #expect(try oidc.refresh(tokens["refresh_token"].string).status == 200)
    }
}

#if canImport(Glibc)
    import Glibc
#endif

/// `--db` holds the signing keys and password hashes: a file, companion or folder someone else owns or can write is
/// refused before SQLite opens anything (issue 20 #12).
@Suite struct DatabaseFileTests {
    func folder(mode: mode_t) throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-db-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
        chmod(folder.path, mode)
        return folder
    }

    func expectRefused(_ path: String, _ what: String) {
        var configuration = DevServer.Configuration()
        configuration.databasePath = path
        configuration.passwordIterations = 1000
        #expect(throws: DevServerError.self, "\(what)") { _ = try DevServer(configuration: configuration) }
    }

    @Test("refused: a folder others can write (even /tmp), a 0666 database, a 0666 -wal made beforehand, a link")
    func hostileFiles() throws {
        let shared = try folder(mode: 0o777)
        defer { try? FileManager.default.removeItem(at: shared) }
        expectRefused(shared.appendingPathComponent("dev.sqlite").path, "a world-writable folder")
        expectRefused(FileManager.default.temporaryDirectory.appendingPathComponent("x-\(UUID()).sqlite").path, "/tmp")
        #expect(!FileManager.default.fileExists(atPath: shared.appendingPathComponent("dev.sqlite").path))
        let own = try folder(mode: 0o700)
        defer { try? FileManager.default.removeItem(at: own) }
        for companion in ["", "-wal", "-shm", "-journal"] {
            let path = own.appendingPathComponent("dev\(companion.isEmpty ? "" : "-x").sqlite").path
            let planted = companion.isEmpty ? path : path + companion
            #expect(
                FileManager.default.createFile(
                    atPath: planted, contents: Data(), attributes: [.posixPermissions: 0o666]))
            chmod(planted, 0o666)
            expectRefused(path, "a planted \(companion.isEmpty ? "database" : companion) (0666)")
            unlink(planted)
        }
        // A folder of one's own inside one that a group can write: the group could swap it under the server.
        let group = try folder(mode: 0o775)
        defer { try? FileManager.default.removeItem(at: group) }
        let inside = group.appendingPathComponent("mine")
        try FileManager.default.createDirectory(at: inside, withIntermediateDirectories: false)
        chmod(inside.path, 0o755)
        expectRefused(inside.appendingPathComponent("dev.sqlite").path, "a folder inside a group-writable one")
        let target = own.appendingPathComponent("real.sqlite").path
        #expect(
            FileManager.default.createFile(atPath: target, contents: Data(), attributes: [.posixPermissions: 0o600]))
        let link = own.appendingPathComponent("link.sqlite").path
        #expect(symlink(target, link) == 0)
        expectRefused(link, "a symbolic link")
    }

    @Test("a new database in a folder of one's own is made 0600 and works")
    func privateDatabase() throws {
        let own = try folder(mode: 0o755)
        defer { try? FileManager.default.removeItem(at: own) }
        var configuration = DevServer.Configuration()
        configuration.databasePath = own.appendingPathComponent("dev.sqlite").path
        configuration.passwordIterations = 1000
        let server = try DevServer(configuration: configuration)
        _ = try server.start()
        server.stop()
        let mode = try FileManager.default.attributesOfItem(atPath: configuration.databasePath)[.posixPermissions]
        #expect(mode as? Int == 0o600)
    }
}
