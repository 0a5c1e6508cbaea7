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
