import Foundation

/// The schema and its migrations, in place and in order (`PRAGMA user_version`).
extension DevStore {
    func migrate() throws {
        let version = try database.query("PRAGMA user_version").first?.first?.integer ?? 0
        guard version <= Self.schemaVersion else {
            throw DevServerError(
                "the database schema is version \(version), newer than this server (\(Self.schemaVersion))")
        }
        if version < 1 { try migrateToVersion1() }
        if version < 2 { try migrateToVersion2() }
        if version < 3 {
            // Schema 3: a grant may be bound to a DPoP key (RFC 9449 §5: a public client's refresh token is).
            try database.transaction {
                try database.execute(
                    "ALTER TABLE refresh_families ADD COLUMN dpop_jkt TEXT; PRAGMA user_version = 3;")
            }
        }
        if version < 4 {
            // Schema 4: a grant remembers the claims its authorization request asked for (OIDC Core §5.5), so
            // refreshed ID tokens and UserInfo answer them too.
            try database.transaction {
                try database.execute(
                    "ALTER TABLE refresh_families ADD COLUMN request_claims TEXT; PRAGMA user_version = 4;")
            }
        }
        if version < 5 {
            // Schema 5: how the user authenticated (`acr`, RFC 9470), from the code to its grant and its tokens.
            try database.transaction {
                try database.execute(
                    """
                    ALTER TABLE oidc_codes ADD COLUMN acr TEXT;
                    ALTER TABLE refresh_families ADD COLUMN acr TEXT;
                    PRAGMA user_version = 5;
                    """)
            }
        }
        if version < 6 {
            // Schema 6: device sessions (OpenID Connect Native SSO): one sign-in shared by a vendor's apps on one
            // device, its secret stored as a hash; a grant remembers the device session it belongs to.
            try database.transaction {
                try database.execute(
                    """
                    CREATE TABLE device_sessions (
                        id TEXT PRIMARY KEY,
                        secret_hash BLOB NOT NULL UNIQUE,
                        ds_hash TEXT NOT NULL,
                        user_id TEXT NOT NULL REFERENCES users(id),
                        sso_group TEXT NOT NULL,
                        auth_time INTEGER NOT NULL,
                        acr TEXT,
                        scope TEXT NOT NULL DEFAULT '',
                        expires_at INTEGER NOT NULL,
                        ended INTEGER NOT NULL DEFAULT 0
                    );
                    ALTER TABLE refresh_families ADD COLUMN device_session TEXT;
                    PRAGMA user_version = 6;
                    """)
            }
        }
    }

    private func migrateToVersion1() throws {
        try database.transaction {
            try database.execute(
                """
                CREATE TABLE users (
                    id TEXT PRIMARY KEY,
                    email TEXT UNIQUE,
                    password_hash BLOB,
                    password_salt BLOB,
                    password_iterations INTEGER,
                    apple_subject TEXT UNIQUE,
                    created_at INTEGER NOT NULL
                );
                CREATE TABLE refresh_families (
                    id TEXT PRIMARY KEY,
                    user_id TEXT NOT NULL REFERENCES users(id),
                    created_at INTEGER NOT NULL,
                    revoked INTEGER NOT NULL DEFAULT 0
                );
                CREATE TABLE refresh_tokens (
                    hash BLOB PRIMARY KEY,
                    family_id TEXT NOT NULL REFERENCES refresh_families(id),
                    expires_at INTEGER NOT NULL,
                    used INTEGER NOT NULL DEFAULT 0
                );
                CREATE INDEX refresh_tokens_family ON refresh_tokens(family_id);
                CREATE TABLE signing_keys (
                    kid TEXT PRIMARY KEY,
                    purpose TEXT NOT NULL,
                    alg TEXT NOT NULL,
                    jwk TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    active INTEGER NOT NULL
                );
                PRAGMA user_version = 1;
                """)
        }
    }

    /// Schema 2: the OpenID Connect provider's grants, codes, pushed requests, device codes and browser sessions,
    /// and key retirement times (a retired key stays published until the tokens it signed have expired).
    private func migrateToVersion2() throws {
        try database.transaction {
            try database.execute(
                """
                ALTER TABLE refresh_families ADD COLUMN client_id TEXT;
                ALTER TABLE refresh_families ADD COLUMN scope TEXT;
                ALTER TABLE refresh_families ADD COLUMN auth_time INTEGER;
                ALTER TABLE refresh_families ADD COLUMN claims TEXT;
                ALTER TABLE refresh_tokens ADD COLUMN used_at INTEGER;
                ALTER TABLE signing_keys ADD COLUMN retired_at INTEGER;
                ALTER TABLE signing_keys ADD COLUMN longest_exp INTEGER;
                CREATE TABLE oidc_codes (
                    hash BLOB PRIMARY KEY,
                    request TEXT NOT NULL,
                    user_id TEXT NOT NULL REFERENCES users(id),
                    auth_time INTEGER NOT NULL,
                    claims TEXT,
                    expires_at INTEGER NOT NULL,
                    used INTEGER NOT NULL DEFAULT 0,
                    family_id TEXT
                );
                CREATE TABLE oidc_pushed (
                    hash BLOB PRIMARY KEY,
                    client_id TEXT NOT NULL,
                    request TEXT NOT NULL,
                    expires_at INTEGER NOT NULL,
                    used INTEGER NOT NULL DEFAULT 0
                );
                CREATE TABLE oidc_devices (
                    hash BLOB PRIMARY KEY,
                    user_code TEXT NOT NULL UNIQUE,
                    client_id TEXT NOT NULL,
                    scope TEXT NOT NULL,
                    expires_at INTEGER NOT NULL,
                    interval INTEGER NOT NULL,
                    last_poll INTEGER,
                    status TEXT NOT NULL,
                    user_id TEXT,
                    auth_time INTEGER
                );
                CREATE TABLE oidc_sessions (
                    hash BLOB PRIMARY KEY,
                    user_id TEXT NOT NULL REFERENCES users(id),
                    auth_time INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL
                );
                PRAGMA user_version = 2;
                """)
        }
    }
}
