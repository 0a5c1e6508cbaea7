import Foundation
import SesameJOSE

/// The OpenID Connect provider's persistence: grants (refresh families with client, scope and `auth_time`),
/// authorization codes, pushed requests, device codes and browser sessions. Every secret is stored as a SHA-256
/// hash; the codes and tokens themselves exist only in the responses.
extension DevStore {
    /// What one grant (one sign-in of one user at one client) carries into every token it issues.
    struct Grant: Sendable {
        let id: String
        let user: User
        let clientID: String
        let scope: [String]
        let authTime: Int64
        /// Extra ID-token claims chosen in the dev panel, as JSON, or nil.
        let claims: String?
        /// The authorization request's `claims` parameter (``ClaimsRequest/jsonText``), or nil.
        var requestClaims: String? = nil
        /// How the user authenticated (`acr`); nil for grants made before schema 5 (a password).
        var acr: String? = nil
        /// The device session (Native SSO `sid`) this grant belongs to, if any.
        var deviceSession: String? = nil
    }

    static func newSecret() -> String { Base64URL.encode(JOSECrypto.randomBytes(32)) }

    // MARK: Grants

    func createGrant(
        userID: String, clientID: String, scope: [String], authTime: Int64, claims: String?, now: Int64,
        requestClaims: String? = nil, acr: String? = nil, deviceSession: String? = nil
    ) throws -> String {
        let id = UUID().uuidString.lowercased()
        try database.query(
            "INSERT INTO refresh_families (id, user_id, created_at, client_id, scope, auth_time, claims, request_claims, acr, device_session) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                .text(id), .text(userID), .integer(now), .text(clientID), .text(scope.joined(separator: " ")),
                .integer(authTime), claims.map(SQLiteValue.text) ?? .null, requestClaims.map(SQLiteValue.text) ?? .null,
                acr.map(SQLiteValue.text) ?? .null, deviceSession.map(SQLiteValue.text) ?? .null,
            ])
        return id
    }

    /// The grant `id` while it is not revoked.
    func activeGrant(id: String) throws -> Grant? {
        guard
            let row = try database.query(
                "SELECT f.id, f.user_id, u.email, f.client_id, f.scope, f.auth_time, f.claims, f.request_claims, f.acr, f.device_session FROM refresh_families f JOIN users u ON u.id = f.user_id WHERE f.id = ? AND f.revoked = 0",
                [.text(id)]
            ).first
        else { return nil }
        return Self.grant(row, requestClaimsAt: 7)
    }

    /// A grant from a row that starts `id, user_id, email, client_id, scope, auth_time, claims`.
    private static func grant(_ row: [SQLiteValue], requestClaimsAt index: Int) -> Grant? {
        guard let id = row[0].text, let userID = row[1].text, let clientID = row[3].text else { return nil }
        return Grant(
            id: id, user: User(id: userID, email: row[2].text), clientID: clientID,
            scope: (row[4].text ?? "").split(separator: " ").map(String.init), authTime: row[5].integer ?? 0,
            claims: row[6].text, requestClaims: row[index].text, acr: row[index + 1].text,
            deviceSession: row[index + 2].text)
    }

    /// The DPoP key thumbprint grant `id` is bound to, if any.
    func grantKey(id: String) throws -> String? {
        try database.query("SELECT dpop_jkt FROM refresh_families WHERE id = ?", [.text(id)]).first?.first?.text
    }

    /// Binds grant `id` to a DPoP key.
    func bind(grantID: String, toKey thumbprint: String) throws {
        try database.query(
            "UPDATE refresh_families SET dpop_jkt = ? WHERE id = ? AND dpop_jkt IS NULL",
            [.text(thumbprint), .text(grantID)])
    }

    func revokeGrant(id: String) throws {
        try database.query("UPDATE refresh_families SET revoked = 1 WHERE id = ?", [.text(id)])
    }

    /// Adds a refresh token to a grant.
    func addRefreshToken(grantID: String, ttl: Int64, now: Int64) throws -> String {
        let token = Self.newRefreshToken()
        try database.query(
            "INSERT INTO refresh_tokens (hash, family_id, expires_at) VALUES (?, ?, ?)",
            [.blob(Self.hash(token)), .text(grantID), .integer(now + ttl)])
        return token
    }

    enum GrantRefresh: Sendable {
        case rotated(Grant, newToken: String)
        /// Presented again within the reuse grace: a further token of the same grant, nothing revoked.
        case withinGrace(Grant, newToken: String)
        case unknown
        case expired
        case revoked
        /// Another client's token.
        case wrongClient
        /// A spent token came back after the grace: the grant is revoked.
        case reused
    }

    /// Rotates an OIDC refresh token of `clientID` (RFC 9700 §4.14.2), with an optional reuse grace in seconds.
    func rotate(_ token: String, clientID: String, ttl: Int64, grace: Int64, now: Int64) throws -> GrantRefresh {
        try database.transaction {
            let hash = Self.hash(token)
            guard
                let row = try database.query(
                    """
                    SELECT f.id, f.user_id, u.email, f.client_id, f.scope, f.auth_time, f.claims,
                        t.expires_at, t.used, t.used_at, f.revoked, f.request_claims, f.acr, f.device_session
                    FROM refresh_tokens t JOIN refresh_families f ON f.id = t.family_id JOIN users u ON u.id = f.user_id
                    WHERE t.hash = ? AND f.client_id IS NOT NULL
                    """, [.blob(hash)]
                ).first, let grant = Self.grant(row, requestClaimsAt: 11)
            else { return .unknown }
            guard grant.clientID.utf8.elementsEqual(clientID.utf8) else { return .wrongClient }
            if row[10].integer != 0 { return .revoked }
            if let used = row[8].integer, used != 0 {
                // Within the grace a spent token may come back while no later token of the grant was presented (a
                // client that lost the response, once or several times running), never after one was; a successor
                // spent unseen by such a re-issue (used = 2) never comes back.
                if grace > 0, used == 1, let usedAt = row[9].integer, now - usedAt < grace, (row[7].integer ?? 0) > now,
                    try !laterTokenPresented(family: grant.id, after: token)
                {
                    // One chain only: the successors never presented are spent now (they come back as reuse,
                    // revoking the grant), and the new one takes their place.
                    try database.query(
                        "UPDATE refresh_tokens SET used = 2, used_at = ? WHERE family_id = ? AND used = 0",
                        [.integer(now), .text(grant.id)])
                    return .withinGrace(grant, newToken: try addRefreshToken(grantID: grant.id, ttl: ttl, now: now))
                }
                try revokeGrant(id: grant.id)
                return .reused
            }
            if (row[7].integer ?? 0) <= now { return .expired }
            try database.query(
                "UPDATE refresh_tokens SET used = 1, used_at = ? WHERE hash = ?", [.integer(now), .blob(hash)])
            return .rotated(grant, newToken: try addRefreshToken(grantID: grant.id, ttl: ttl, now: now))
        }
    }

    /// Whether `token` was spent and may not come back (outside the reuse grace, spent unseen by a re-issue, or a
    /// later token of its grant was presented).
    func isSpentBeyondGrace(_ token: String, grace: Int64, now: Int64) throws -> Bool {
        guard
            let row = try database.query(
                "SELECT used, used_at, family_id FROM refresh_tokens WHERE hash = ?", [.blob(Self.hash(token))]
            ).first, let used = row[0].integer, used != 0
        else { return false }
        guard used == 1, grace > 0, let usedAt = row[1].integer, let family = row[2].text else { return true }
        return try now - usedAt >= grace || laterTokenPresented(family: family, after: token)
    }

    /// Whether `token` was used at all (rotated once, within the grace or not).
    func isUsed(_ token: String) throws -> Bool {
        let row = try database.query("SELECT used FROM refresh_tokens WHERE hash = ?", [.blob(Self.hash(token))]).first
        return (row?[0].integer ?? 0) != 0
    }

    /// The grant a refresh token belongs to (any state), for revocation.
    func grantID(ofRefreshToken token: String) throws -> (grantID: String, clientID: String?)? {
        guard
            let row = try database.query(
                "SELECT f.id, f.client_id FROM refresh_tokens t JOIN refresh_families f ON f.id = t.family_id WHERE t.hash = ?",
                [.blob(Self.hash(token))]
            ).first, let id = row[0].text
        else { return nil }
        return (id, row[1].text)
    }

    // MARK: Authorization codes

    struct CodeRecord: Sendable {
        let request: AuthorizationRequest
        let user: User
        let authTime: Int64
        let claims: String?
        var acr: String? = nil
    }

    func storeCode(
        _ request: AuthorizationRequest, userID: String, authTime: Int64, claims: String?, ttl: Int64,
        now: Int64, acr: String? = nil
    ) throws -> String {
        let code = Self.newSecret()
        try database.transaction {
            try database.query("DELETE FROM oidc_codes WHERE expires_at < ?", [.integer(now - 3600)])
            try database.query(
                "INSERT INTO oidc_codes (hash, request, user_id, auth_time, claims, expires_at, acr) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    .blob(Self.hash(code)), .text(request.encoded), .text(userID), .integer(authTime),
                    claims.map(SQLiteValue.text) ?? .null, .integer(now + ttl), acr.map(SQLiteValue.text) ?? .null,
                ])
        }
        return code
    }

    enum CodeExchange: Sendable {
        /// The code was good: a new grant was created for it.
        case granted(CodeRecord, grantID: String)
        /// The code was spent on a request that failed `check` (wrong client, redirect URI or verifier).
        case refused(String)
        case unknown
        case expired
        /// Used before: what its first use issued is now revoked.
        case reused
    }

    /// Spends a code and, when `check` finds nothing wrong, creates its grant — in one transaction, so a replay
    /// racing the first use always finds the grant to revoke.
    ///
    /// A code can be presented once, whatever the outcome.
    func exchangeCode(_ code: String, now: Int64, check: (CodeRecord) -> String?) throws -> CodeExchange {
        try database.transaction {
            let hash = Self.hash(code)
            guard
                let row = try database.query(
                    "SELECT c.request, c.user_id, u.email, c.auth_time, c.claims, c.expires_at, c.used, c.family_id, c.acr FROM oidc_codes c JOIN users u ON u.id = c.user_id WHERE c.hash = ?",
                    [.blob(hash)]
                ).first, let text = row[0].text, let userID = row[1].text
            else { return .unknown }
            if row[6].integer != 0 {
                if let family = row[7].text { try revokeGrant(id: family) }
                return .reused
            }
            try database.query("UPDATE oidc_codes SET used = 1 WHERE hash = ?", [.blob(hash)])
            if (row[5].integer ?? 0) <= now { return .expired }
            guard let request = AuthorizationRequest.stored(text) else { return .unknown }
            let record = CodeRecord(
                request: request, user: User(id: userID, email: row[2].text), authTime: row[3].integer ?? 0,
                claims: row[4].text, acr: row[8].text)
            if let problem = check(record) { return .refused(problem) }
            let grantID = try createGrant(
                userID: userID, clientID: request.clientID, scope: request.scope, authTime: record.authTime,
                claims: record.claims, now: now, requestClaims: request.claims, acr: record.acr)
            try database.query("UPDATE oidc_codes SET family_id = ? WHERE hash = ?", [.text(grantID), .blob(hash)])
            return .granted(record, grantID: grantID)
        }
    }

    // MARK: Pushed authorization requests (RFC 9126)

    static let requestURIPrefix = "urn:ietf:params:oauth:request_uri:"

    func storePushed(_ request: AuthorizationRequest, ttl: Int64, now: Int64) throws -> String {
        let reference = Self.newSecret()
        try database.transaction {
            try database.query("DELETE FROM oidc_pushed WHERE expires_at < ?", [.integer(now)])
            try database.query(
                "INSERT INTO oidc_pushed (hash, client_id, request, expires_at) VALUES (?, ?, ?, ?)",
                [.blob(Self.hash(reference)), .text(request.clientID), .text(request.encoded), .integer(now + ttl)])
        }
        return Self.requestURIPrefix + reference
    }

    /// The pushed request `requestURI` of `clientID`, spent by this call; nil when unknown, expired, used or
    /// pushed by another client.
    func takePushed(_ requestURI: String, clientID: String, now: Int64) throws -> String? {
        guard requestURI.hasPrefix(Self.requestURIPrefix) else { return nil }
        let hash = Self.hash(String(requestURI.dropFirst(Self.requestURIPrefix.count)))
        return try database.transaction {
            guard
                let row = try database.query(
                    "SELECT client_id, request, expires_at, used FROM oidc_pushed WHERE hash = ?", [.blob(hash)]
                ).first, row[3].integer == 0, (row[2].integer ?? 0) > now,
                row[0].text.map({ $0.utf8.elementsEqual(clientID.utf8) }) == true
            else { return nil }
            try database.query("UPDATE oidc_pushed SET used = 1 WHERE hash = ?", [.blob(hash)])
            return row[1].text
        }
    }

    // MARK: Browser sessions

    func createSession(userID: String, authTime: Int64, ttl: Int64, now: Int64) throws -> String {
        let token = Self.newSecret()
        try database.transaction {
            try database.query("DELETE FROM oidc_sessions WHERE expires_at < ?", [.integer(now)])
            try database.query(
                "INSERT INTO oidc_sessions (hash, user_id, auth_time, expires_at) VALUES (?, ?, ?, ?)",
                [.blob(Self.hash(token)), .text(userID), .integer(authTime), .integer(now + ttl)])
        }
        return token
    }

    func session(_ token: String, now: Int64) throws -> (user: User, authTime: Int64)? {
        guard
            let row = try database.query(
                "SELECT s.user_id, u.email, s.auth_time FROM oidc_sessions s JOIN users u ON u.id = s.user_id WHERE s.hash = ? AND s.expires_at > ?",
                [.blob(Self.hash(token)), .integer(now)]
            ).first, let id = row[0].text
        else { return nil }
        return (User(id: id, email: row[1].text), row[2].integer ?? 0)
    }

    func deleteSession(_ token: String) throws {
        try database.query("DELETE FROM oidc_sessions WHERE hash = ?", [.blob(Self.hash(token))])
    }

    /// Users for the dev panel, oldest first.
    func users(limit: Int) throws -> [User] {
        try database.query("SELECT id, email FROM users ORDER BY created_at, id LIMIT ?", [.integer(Int64(limit))])
            .compactMap { row in row[0].text.map { User(id: $0, email: row[1].text) } }
    }

    // MARK: Device authorization (RFC 8628)

    enum DevicePoll: Sendable {
        case pending
        case slowDown
        case expired
        case denied
        case approved(user: User, scope: [String], authTime: Int64)
        case unknown
    }

    /// The user-code alphabet of RFC 8628 §6.1: consonants only, no look-alikes.
    static let userCodeAlphabet = Array("BCDFGHJKLMNPQRSTVWXZ")

    static func newUserCode() -> String {
        let letters = JOSECrypto.randomBytes(8).map { userCodeAlphabet[Int($0) % userCodeAlphabet.count] }
        return String(letters[0..<4]) + "-" + String(letters[4...])
    }

    /// The canonical form of a user code as typed: upper case, dashes and spaces dropped (RFC 8628 §6.1).
    static func canonicalUserCode(_ typed: String) -> String {
        let letters = typed.uppercased().filter { $0 != "-" && $0 != " " }
        guard letters.count == 8 else { return letters }
        return String(letters.prefix(4)) + "-" + String(letters.suffix(4))
    }

    func storeDevice(clientID: String, scope: [String], ttl: Int64, interval: Int64, now: Int64) throws
        -> (deviceCode: String, userCode: String)
    {
        let deviceCode = Self.newSecret()
        return try database.transaction {
            try database.query("DELETE FROM oidc_devices WHERE expires_at < ?", [.integer(now - 3600)])
            var userCode = Self.newUserCode()
            while try !database.query("SELECT 1 FROM oidc_devices WHERE user_code = ?", [.text(userCode)]).isEmpty {
                userCode = Self.newUserCode()
            }
            try database.query(
                "INSERT INTO oidc_devices (hash, user_code, client_id, scope, expires_at, interval, status) VALUES (?, ?, ?, ?, ?, ?, 'pending')",
                [
                    .blob(Self.hash(deviceCode)), .text(userCode), .text(clientID),
                    .text(scope.joined(separator: " ")), .integer(now + ttl), .integer(interval),
                ])
            return (deviceCode, userCode)
        }
    }

    /// The client and scope of a pending, unexpired user code.
    func pendingDevice(userCode: String, now: Int64) throws -> (clientID: String, scope: [String])? {
        guard
            let row = try database.query(
                "SELECT client_id, scope FROM oidc_devices WHERE user_code = ? AND status = 'pending' AND expires_at > ?",
                [.text(Self.canonicalUserCode(userCode)), .integer(now)]
            ).first, let client = row[0].text
        else { return nil }
        return (client, (row[1].text ?? "").split(separator: " ").map(String.init))
    }

    /// Approves (with the user) or denies a pending user code; false when it is not pending any more.
    func decideDevice(userCode: String, userID: String?, authTime: Int64, now: Int64) throws -> Bool {
        try database.transaction {
            try database.query(
                "UPDATE oidc_devices SET status = ?, user_id = ?, auth_time = ? WHERE user_code = ? AND status = 'pending' AND expires_at > ?",
                [
                    .text(userID == nil ? "denied" : "approved"), userID.map(SQLiteValue.text) ?? .null,
                    .integer(authTime), .text(Self.canonicalUserCode(userCode)), .integer(now),
                ])
            return database.changes == 1
        }
    }

    /// One poll of the token endpoint: polling faster than the interval slows it by 5 s (RFC 8628 §3.5);
    /// an approved code is handed out once.
    func pollDevice(_ deviceCode: String, clientID: String, now: Int64) throws -> DevicePoll {
        try database.transaction {
            let hash = Self.hash(deviceCode)
            guard
                let row = try database.query(
                    "SELECT d.client_id, d.scope, d.expires_at, d.interval, d.last_poll, d.status, d.user_id, u.email, d.auth_time FROM oidc_devices d LEFT JOIN users u ON u.id = d.user_id WHERE d.hash = ?",
                    [.blob(hash)]
                ).first, row[0].text.map({ $0.utf8.elementsEqual(clientID.utf8) }) == true,
                let status = row[5].text
            else { return .unknown }
            let interval = row[3].integer ?? 5
            try database.query("UPDATE oidc_devices SET last_poll = ? WHERE hash = ?", [.integer(now), .blob(hash)])
            if (row[2].integer ?? 0) <= now, status != "approved" { return .expired }
            switch status {
            case "denied": return .denied
            case "approved":
                guard let userID = row[6].text else { return .unknown }
                try database.query("UPDATE oidc_devices SET status = 'consumed' WHERE hash = ?", [.blob(hash)])
                return .approved(
                    user: User(id: userID, email: row[7].text),
                    scope: (row[1].text ?? "").split(separator: " ").map(String.init), authTime: row[8].integer ?? 0)
            case "pending":
                if let last = row[4].integer, now - last < interval {
                    try database.query(
                        "UPDATE oidc_devices SET interval = ? WHERE hash = ?", [.integer(interval + 5), .blob(hash)])
                    return .slowDown
                }
                return .pending
            default: return .unknown
            }
        }
    }
}
