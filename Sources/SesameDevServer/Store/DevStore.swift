import Foundation
import SesameJOSE

/// The dev server's persistence: users, refresh-token families and signing keys in SQLite.
///
/// Refresh tokens are stored only as SHA-256 hashes; passwords as PBKDF2-HMAC-SHA256 with a per-user salt.
final class DevStore: Sendable {
    static let schemaVersion: Int64 = 6

    let database: SQLiteDatabase
    /// Public keys already read, by `kid`.
    private let parsedKeys = LockedValue<[String: JWK]>([:])

    init(path: String) throws {
        database = try SQLiteDatabase(path: path)
        try migrate()
        // Identity tokens already exchanged, kept until they expire (replay protection). Additive, so databases
        // of schema 1 gain it without a version change.
        try database.execute(
            "CREATE TABLE IF NOT EXISTS used_tokens (hash BLOB PRIMARY KEY, expires_at INTEGER NOT NULL);")
    }

    /// Records an identity token as used; false when it was used before (a replay).
    func markUsed(token: String, expiresAt: Int64, now: Int64) throws -> Bool {
        try database.transaction {
            try database.query("DELETE FROM used_tokens WHERE expires_at < ?", [.integer(now)])
            let hash = Self.hash(token)
            guard try database.query("SELECT 1 FROM used_tokens WHERE hash = ?", [.blob(hash)]).isEmpty else {
                return false
            }
            try database.query(
                "INSERT INTO used_tokens (hash, expires_at) VALUES (?, ?)", [.blob(hash), .integer(expiresAt)])
            return true
        }
    }

    // MARK: Users

    struct User: Sendable {
        let id: String
        let email: String?
    }

    struct PasswordRecord: Sendable {
        let user: User
        let hash: [UInt8]
        let salt: [UInt8]
        let iterations: Int
    }

    /// Inserts a user; nil when the email is taken.
    ///
    /// `id` is the user's `sub`: a new UUID unless given (a configured user); nil also when that ID is taken.
    func createUser(
        email: String, passwordHash: [UInt8], salt: [UInt8], iterations: Int, now: Int64, id given: String? = nil
    ) throws -> User? {
        let id = given ?? UUID().uuidString.lowercased()
        return try database.transaction {
            let taken = try database.query("SELECT 1 FROM users WHERE email = ? OR id = ?", [.text(email), .text(id)])
            guard taken.isEmpty else { return nil }
            try database.query(
                "INSERT INTO users (id, email, password_hash, password_salt, password_iterations, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                [.text(id), .text(email), .blob(passwordHash), .blob(salt), .integer(Int64(iterations)), .integer(now)])
            return User(id: id, email: email)
        }
    }

    func passwordRecord(email: String) throws -> PasswordRecord? {
        let rows = try database.query(
            "SELECT id, email, password_hash, password_salt, password_iterations FROM users WHERE email = ?",
            [.text(email)])
        guard let row = rows.first, let id = row[0].text, let hash = row[2].blob, let salt = row[3].blob,
            let iterations = row[4].integer
        else { return nil }
        return PasswordRecord(
            user: User(id: id, email: row[1].text), hash: hash, salt: salt, iterations: Int(iterations))
    }

    func user(id: String) throws -> User? {
        guard let row = try database.query("SELECT id, email FROM users WHERE id = ?", [.text(id)]).first,
            let id = row[0].text
        else { return nil }
        return User(id: id, email: row[1].text)
    }

    /// The user for a Sign in with Apple subject, created on first sign-in.
    ///
    /// Accounts are linked by the Apple `sub`. An Apple sign-in links to an existing account by email only when
    /// Apple says the email is verified — and then the account's password, which nobody ever verified, is removed:
    /// whoever registered that email first must not keep a way into the real owner's account. An unverified email
    /// is not claimed at all.
    /// `linksExisting` is false for tokens of the stand-in issuer, which anyone who reaches `/_dev/` can mint: they
    /// may claim an unused address for a new account, never an existing account's.
    func appleUser(subject: String, email: String?, emailVerified: Bool, linksExisting: Bool = true, now: Int64) throws
        -> User
    {
        try database.transaction {
            if let row = try database.query("SELECT id, email FROM users WHERE apple_subject = ?", [.text(subject)])
                .first,
                let id = row[0].text
            {
                return User(id: id, email: row[1].text)
            }
            let claimed = emailVerified ? email : nil
            if let claimed, linksExisting,
                let row = try database.query(
                    "SELECT id FROM users WHERE email = ? AND apple_subject IS NULL", [.text(claimed)]
                ).first,
                let id = row[0].text
            {
                // Whoever registered the address first also loses every session they opened with the password.
                try database.query("UPDATE refresh_families SET revoked = 1 WHERE user_id = ?", [.text(id)])
                try database.query(
                    """
                    UPDATE users SET apple_subject = ?, password_hash = NULL, password_salt = NULL,
                        password_iterations = NULL
                    WHERE id = ?
                    """, [.text(subject), .text(id)])
                return User(id: id, email: claimed)
            }
            // An address already linked to another Apple subject is not claimed a second time.
            let taken =
                try claimed.map {
                    try !database.query("SELECT 1 FROM users WHERE email = ?", [.text($0)]).isEmpty
                } ?? false
            let email = taken ? nil : claimed
            let id = UUID().uuidString.lowercased()
            try database.query(
                "INSERT INTO users (id, email, apple_subject, created_at) VALUES (?, ?, ?, ?)",
                [.text(id), email.map(SQLiteValue.text) ?? .null, .text(subject), .integer(now)])
            return User(id: id, email: email)
        }
    }

    // MARK: Refresh tokens

    enum RefreshOutcome: Sendable {
        case rotated(User, newToken: String)
        /// A spent token presented again within the reuse grace: a replacement, the first successor spent.
        case withinGrace(User, newToken: String)
        case unknown
        case expired
        case revoked
        /// A rotated token came back: its whole family is now revoked.
        case reused
    }

    static func hash(_ token: String) -> [UInt8] { JOSECrypto.sha256(Array(token.utf8)) }

    static func newRefreshToken() -> String { Base64URL.encode(JOSECrypto.randomBytes(32)) }

    /// Starts a new family for a fresh sign-in and returns its first refresh token.
    func issueRefreshToken(userID: String, ttl: Int64, now: Int64) throws -> String {
        let family = UUID().uuidString.lowercased()
        let token = Self.newRefreshToken()
        try database.transaction {
            try database.query(
                "INSERT INTO refresh_families (id, user_id, created_at) VALUES (?, ?, ?)",
                [.text(family), .text(userID), .integer(now)])
            try database.query(
                "INSERT INTO refresh_tokens (hash, family_id, expires_at) VALUES (?, ?, ?)",
                [.blob(Self.hash(token)), .text(family), .integer(now + ttl)])
        }
        return token
    }

    /// Rotates a refresh token: the presented one is spent, a new one in the same family is returned.
    ///
    /// A spent token presented again revokes the family (RFC 9700 §4.14.2) — unless `grace` seconds have not passed
    /// since it was spent and no later token of its family has been presented since (a client that lost the answer,
    /// once or several times running): then it gets a replacement, and the successors never presented are spent for
    /// good — shown later, they revoke the family (one chain only, as for OpenID Connect).
    func rotate(_ token: String, ttl: Int64, grace: Int64 = 0, now: Int64) throws -> RefreshOutcome {
        try database.transaction {
            let rows = try database.query(
                """
                SELECT t.family_id, t.expires_at, t.used, f.revoked, f.user_id, t.used_at
                FROM refresh_tokens t JOIN refresh_families f ON f.id = t.family_id
                WHERE t.hash = ? AND f.client_id IS NULL
                """, [.blob(Self.hash(token))])
            guard let row = rows.first, let family = row[0].text, let expiresAt = row[1].integer,
                let used = row[2].integer, let revoked = row[3].integer, let userID = row[4].text
            else { return .unknown }
            if revoked != 0 { return .revoked }
            if used != 0 {
                if grace > 0, used == 1, let usedAt = row[5].integer, now - usedAt < grace, expiresAt > now,
                    try !laterTokenPresented(family: family, after: token),
                    let user = try user(id: userID)
                {
                    try database.query(
                        "UPDATE refresh_tokens SET used = 2, used_at = ? WHERE family_id = ? AND used = 0",
                        [.integer(now), .text(family)])
                    let next = Self.newRefreshToken()
                    try database.query(
                        "INSERT INTO refresh_tokens (hash, family_id, expires_at) VALUES (?, ?, ?)",
                        [.blob(Self.hash(next)), .text(family), .integer(now + ttl)])
                    return .withinGrace(user, newToken: next)
                }
                try database.query("UPDATE refresh_families SET revoked = 1 WHERE id = ?", [.text(family)])
                return .reused
            }
            if expiresAt <= now { return .expired }
            guard let user = try user(id: userID) else { return .unknown }
            try database.query(
                "UPDATE refresh_tokens SET used = 1, used_at = ? WHERE hash = ?",
                [.integer(now), .blob(Self.hash(token))])
            let next = Self.newRefreshToken()
            try database.query(
                "INSERT INTO refresh_tokens (hash, family_id, expires_at) VALUES (?, ?, ?)",
                [.blob(Self.hash(next)), .text(family), .integer(now + ttl)])
            return .rotated(user, newToken: next)
        }
    }

    /// Whether a token of `family` issued after `token` (a successor, by insertion order) was presented.
    ///
    /// Presented means rotated (`used = 1`). Seconds are too coarse for this: two rotations often fall in one.
    func laterTokenPresented(family: String, after token: String) throws -> Bool {
        try database.query(
            """
            SELECT 1 FROM refresh_tokens
            WHERE family_id = ? AND used = 1 AND rowid > (SELECT rowid FROM refresh_tokens WHERE hash = ?) LIMIT 1
            """, [.text(family), .blob(Self.hash(token))]
        ).first != nil
    }

    /// Ends the session (family) of `token`, whoever presents it.
    ///
    /// A refresh token is a credential of its own.
    func revokeFamily(of token: String) throws {
        try database.query(
            """
            UPDATE refresh_families SET revoked = 1
            WHERE id = (SELECT family_id FROM refresh_tokens WHERE hash = ?)
            """, [.blob(Self.hash(token))])
    }

    // MARK: Signing keys

    /// The active key for `purpose`, generated (and stored) when there is none of `algorithm`.
    func signingKey(purpose: String, algorithm: JWSAlgorithm, now: Int64) throws -> JWK {
        try database.transaction {
            let rows = try database.query(
                "SELECT jwk FROM signing_keys WHERE purpose = ? AND alg = ? AND active = 1",
                [.text(purpose), .text(algorithm.name)])
            if let json = rows.first?.first?.text {
                return try JWK(json: json, allowSymmetric: false)
            }
            return try insertKey(purpose: purpose, algorithm: algorithm, now: now)
        }
    }

    /// Retires the active key for `purpose` and makes a new one of `algorithm` active.
    ///
    /// The retired key stays published
    /// (see ``publicKeys(purpose:now:retention:)``) so that tokens it signed still verify.
    func rotateSigningKey(purpose: String, algorithm: JWSAlgorithm, now: Int64) throws -> JWK {
        try database.transaction { try insertKey(purpose: purpose, algorithm: algorithm, now: now) }
    }

    /// Remembers that key `kid` signed a token alive until `expiry` (longer than the usual TTLs: `/_dev/token`),
    /// so the key stays published that long after it is retired.
    func extendKeyLife(kid: String, until expiry: Int64) throws {
        try database.query(
            "UPDATE signing_keys SET longest_exp = MAX(COALESCE(longest_exp, 0), ?) WHERE kid = ?",
            [.integer(expiry), .text(kid)])
    }

    /// When the active key for `purpose` was made, or nil when there is none.
    func activeKeyCreation(purpose: String) throws -> Int64? {
        try database.query(
            "SELECT created_at FROM signing_keys WHERE purpose = ? AND active = 1", [.text(purpose)]
        ).first?.first?.integer
    }

    private func insertKey(purpose: String, algorithm: JWSAlgorithm, now: Int64) throws -> JWK {
        let key = try JWK.generate(for: algorithm)
        try database.query(
            "UPDATE signing_keys SET active = 0, retired_at = ? WHERE purpose = ? AND active = 1",
            [.integer(now), .text(purpose)])
        try database.query(
            "INSERT INTO signing_keys (kid, purpose, alg, jwk, created_at, active) VALUES (?, ?, ?, ?, ?, 1)",
            [
                .text(key.keyID ?? key.thumbprint), .text(purpose), .text(algorithm.name),
                .text(key.jsonValue(includingPrivate: true).jsonString), .integer(now),
            ])
        return key
    }

    /// The public halves of the keys for `purpose` that verify tokens still alive, newest first.
    ///
    /// That is the active key, and every key retired less than `retention` seconds ago (all retired keys when
    /// `retention` is nil).
    ///
    /// At most ``publishedKeyLimit`` keys: a server that rotates every second must not publish (and parse) thousands.
    /// Keys are parsed once and kept by `kid` (an RSA private key takes milliseconds to read).
    func publicKeys(purpose: String, now: Int64 = 0, retention: Int64? = nil) throws -> [JWK] {
        let rows: [[SQLiteValue]]
        if let retention {
            rows = try database.query(
                """
                SELECT kid, jwk FROM signing_keys
                WHERE purpose = ? AND (active = 1 OR retired_at IS NULL OR retired_at + ? > ? OR longest_exp > ?)
                ORDER BY active DESC, created_at DESC LIMIT ?
                """,
                [.text(purpose), .integer(retention), .integer(now), .integer(now), .integer(Self.publishedKeyLimit)])
        } else {
            rows = try database.query(
                "SELECT kid, jwk FROM signing_keys WHERE purpose = ? ORDER BY active DESC, created_at DESC LIMIT ?",
                [.text(purpose), .integer(Self.publishedKeyLimit)])
        }
        return try rows.compactMap { row -> JWK? in
            guard let kid = row[0].text, let json = row[1].text else { return nil }
            if let cached = parsedKeys.withLock({ $0[kid] }) { return cached }
            let key = try JWK(json: json).publicKey()
            parsedKeys.withLock { cache in
                if cache.count >= 1000 { cache.removeAll() }
                cache[kid] = key
            }
            return key
        }
    }

    /// The most keys of one purpose published at once (the active one and the newest retired ones).
    static let publishedKeyLimit: Int64 = 20
}
