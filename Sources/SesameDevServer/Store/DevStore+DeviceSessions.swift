import Foundation
import SesameJOSE

/// Device sessions (OpenID Connect Native SSO for Mobile Apps 1.0): one sign-in that a vendor's apps on one device
/// share through a device secret. The secret is stored as a SHA-256 hash; the session's ID (`sid`) and `ds_hash`
/// go into ID tokens; ending the session revokes every grant made from it, whichever app holds it.
extension DevStore {
    struct DeviceSession: Sendable {
        /// The `sid` of the ID tokens that name this session.
        let id: String
        /// The `ds_hash` of the ID tokens: this server binds a device secret to its ID tokens with the first 16 bytes
        /// of the secret's SHA-256, base64url (the binding is the server's choice, Native SSO §3.2).
        let dsHash: String
        let user: User
        /// The clients that may sign in from this session: those of this group.
        let group: String
        let authTime: Int64
        let acr: String?
        /// What the first sign-in granted: a sibling app gets no more.
        var scope: [String] = []
    }

    /// `ds_hash` for a device secret (see ``DeviceSession/dsHash``).
    static func deviceSecretHash(_ secret: String) -> String {
        Base64URL.encode(Array(JOSECrypto.sha256(Array(secret.utf8)).prefix(16)))
    }

    /// Starts a device session for `userID` and returns it with its secret, which exists only in the response.
    func createDeviceSession(
        userID: String, group: String, authTime: Int64, acr: String?, scope: [String], ttl: Int64, now: Int64
    ) throws -> (session: DeviceSession, secret: String) {
        let secret = Self.newSecret()
        let id = Base64URL.encode(JOSECrypto.randomBytes(16))
        let dsHash = Self.deviceSecretHash(secret)
        try database.transaction {
            try database.query(
                "DELETE FROM device_sessions WHERE expires_at < ? AND ended = 0 AND id NOT IN (SELECT device_session FROM refresh_families WHERE device_session IS NOT NULL AND revoked = 0)",
                [.integer(now)])
            try database.query(
                "INSERT INTO device_sessions (id, secret_hash, ds_hash, user_id, sso_group, auth_time, acr, scope, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    .text(id), .blob(Self.hash(secret)), .text(dsHash), .text(userID), .text(group),
                    .integer(authTime), acr.map(SQLiteValue.text) ?? .null, .text(scope.joined(separator: " ")),
                    .integer(now + ttl),
                ])
        }
        let user = try self.user(id: userID) ?? User(id: userID, email: nil)
        return (
            DeviceSession(
                id: id, dsHash: dsHash, user: user, group: group, authTime: authTime, acr: acr, scope: scope),
            secret
        )
    }

    /// The live (not ended, not expired) device session whose secret is `secret`.
    func deviceSession(secret: String, now: Int64) throws -> DeviceSession? {
        try deviceSession(where: "d.secret_hash = ?", .blob(Self.hash(secret)), now: now)
    }

    /// The device session `id`, live or not (an ended one still names its `ds_hash` in ID tokens).
    func deviceSession(id: String) throws -> DeviceSession? {
        try deviceSession(where: "d.id = ?", .text(id), now: nil)
    }

    private func deviceSession(where condition: String, _ value: SQLiteValue, now: Int64?) throws -> DeviceSession? {
        var sql =
            "SELECT d.id, d.ds_hash, d.user_id, u.email, d.sso_group, d.auth_time, d.acr, d.scope FROM device_sessions d JOIN users u ON u.id = d.user_id WHERE \(condition)"
        var values = [value]
        if let now {
            sql += " AND d.ended = 0 AND d.expires_at > ?"
            values.append(.integer(now))
        }
        guard let row = try database.query(sql, values).first, let id = row[0].text, let dsHash = row[1].text,
            let userID = row[2].text, let group = row[4].text
        else { return nil }
        return DeviceSession(
            id: id, dsHash: dsHash, user: User(id: userID, email: row[3].text), group: group,
            authTime: row[5].integer ?? 0, acr: row[6].text,
            scope: (row[7].text ?? "").split(separator: " ").map(String.init))
    }

    /// A grant made from device session `session` while it lives; nil when the session has ended.
    ///
    /// One transaction with the check: a sign-out that ends the session either comes first (no grant) or revokes
    /// the grant with the session's others.
    func createGrant(
        inDeviceSession session: String, userID: String, clientID: String, scope: [String], authTime: Int64,
        acr: String?, now: Int64
    ) throws -> String? {
        try database.transaction {
            guard
                try !database.query(
                    "SELECT 1 FROM device_sessions WHERE id = ? AND ended = 0 AND expires_at > ?",
                    [.text(session), .integer(now)]
                ).isEmpty
            else { return nil }
            return try createGrant(
                userID: userID, clientID: clientID, scope: scope, authTime: authTime, claims: nil, now: now, acr: acr,
                deviceSession: session)
        }
    }

    /// Links grant `grantID` to device session `session`.
    func attach(grantID: String, toDeviceSession session: String) throws {
        try database.query(
            "UPDATE refresh_families SET device_session = ? WHERE id = ?", [.text(session), .text(grantID)])
    }

    /// Ends device session `id` and revokes every grant made from it (every app's refresh tokens).
    ///
    /// - Returns: how many grants were revoked.
    @discardableResult
    func endDeviceSession(id: String) throws -> Int {
        try database.transaction {
            try database.query("UPDATE device_sessions SET ended = 1 WHERE id = ?", [.text(id)])
            let grants = try database.query(
                "SELECT id FROM refresh_families WHERE device_session = ? AND revoked = 0", [.text(id)])
            try database.query(
                "UPDATE refresh_families SET revoked = 1 WHERE device_session = ?", [.text(id)])
            return grants.count
        }
    }
}
