public import Foundation
public import SesameJOSE
public import SesameLoopback

extension DevServer {
    /// Everything `sesame serve` can set.
    public struct Configuration: Sendable {
        /// The host to bind.
        ///
        /// Default 127.0.0.1.
        public var host = "127.0.0.1"
        /// The port; 0 picks a free one.
        public var port = 0
        /// The SQLite database file (created if missing), or `:memory:`.
        public var databasePath = ":memory:"
        /// The issuer URL; by default `http://HOST:PORT` once the port is known.
        public var issuer: URL?
        /// Access-token lifetime in seconds (as short as 1 for tests).
        ///
        /// Default 900.
        public var accessTokenTTL: Int64 = 900
        /// Refresh-token lifetime in seconds.
        ///
        /// Default 30 days.
        public var refreshTokenTTL: Int64 = 30 * 86400
        /// The access-token signing algorithm: ES256 (default), RS256 or EdDSA.
        public var signingAlgorithm: JWSAlgorithm = .es256
        /// Users created at start (skipped when the email exists).
        public var users: [(email: String, password: String)] = []
        /// The fault plan.
        public var faults = FaultPlan()
        /// Whether the `/_dev/` endpoints answer.
        ///
        /// Default on.
        public var devEndpoints = true
        /// PBKDF2 iterations for new passwords.
        ///
        /// Default 600,000 (OWASP 2023 for PBKDF2-HMAC-SHA256); tests may use far fewer.
        public var passwordIterations = 600_000
        /// Where the server's time comes from (token issue and expiry, refresh-token lifetimes).
        ///
        /// Inject a clock in tests instead of sleeping. Default: the system clock.
        public var clock: @Sendable () -> Date = { Date() }
        /// Seeds the dice of probabilistic faults (`@0.3`), for reproducible runs.
        ///
        /// Nil draws from the system generator.
        public var faultSeed: UInt64?
        /// The audience of Sign in with Apple identity tokens: the app's bundle ID.
        public var appleBundleID = "dev.sesame.demo"
        /// The JWKS that signs Apple identity tokens; nil uses the built-in stand-in issuer's key.
        public var appleKeys: JWKSet?
        /// Receives one line per request (method, path, status, duration) and never a secret; nil is silent.
        public var log: (@Sendable (String) -> Void)?
        /// Limits for the HTTP layer.
        public var http = HTTPServer.Configuration()
        /// OpenID Connect clients besides the built-in public `sesame-cli` (``RegisteredClient/sesameCLI``).
        public var clients: [RegisteredClient] = []
        /// ID-token lifetime in seconds.
        ///
        /// Default 3600.
        public var idTokenTTL: Int64 = 3600
        /// Seconds during which a rotated refresh token (REST and OpenID Connect) may be presented again without
        /// revoking its grant, while no later token of the grant was presented (a client that lost the response,
        /// once or more); 0, the default, revokes on the first reuse.
        ///
        /// A trade: within the grace a thief's use of a spent token is not detected until the victim presents its
        /// own, later token (which then revokes the grant; there is never a second live chain).
        public var refreshReuseGrace: Int64 = 0
        /// Rotate the signing key when it is this many seconds old (checked as tokens are issued); nil never.
        ///
        /// A retired key stays in `/jwks` until every token it signed has expired.
        public var keyRotationInterval: Int64?
        /// The RP test mode the provider starts in (``RPTestMode``); nil behaves correctly.
        public var rpTest: RPTestMode?
        /// Demand DPoP nonces (RFC 9449 §8): a proof without the current `DPoP-Nonce` is answered `use_dpop_nonce`.
        public var dpopNonce = false
        /// Whether a browser that signed in once skips the sign-in form afterwards ("sign in once, then silent").
        ///
        /// Off by default, because on `http://127.0.0.1` nothing in a cookie is private to this server: cookies
        /// ignore ports, so any process listening on another loopback port that gets the browser to open one of its
        /// URLs receives the session cookie (and can then sign in as that user here), and any page on another
        /// loopback port can plant its own session cookie in the browser (later sign-ins become the planter's). With
        /// it off, no session cookie is set or read: every sign-in asks for the password. With it on, a code still
        /// never goes to a loopback redirect without a consent page naming the client, the user and the port
        /// (`prompt=none` then fails with `consent_required`).
        public var rememberBrowser = false
        /// Browser-session lifetime in seconds (with ``rememberBrowser``).
        ///
        /// Default 12 hours.
        public var browserSessionTTL: Int64 = 12 * 3600

        /// The audiences (or resources) the built-in `sesame-cli` may exchange its access tokens for (RFC 8693);
        /// other clients name theirs in ``RegisteredClient/exchangeAudiences``.
        public var exchangeAudiences: [String] = []
        /// What the protected test route `/protected` requires (RFC 9470 step-up): by default the second step
        /// (`urn:sesame:acr:mfa`), at any age.
        public var protectedRoute = ProtectedRoute()
        /// Users created at start with a chosen `sub` and claims of their own (a configuration file's `users`).
        ///
        /// A user whose email is in the database keeps its password; its claims are always the configured ones.
        public var seededUsers: [SeededUser] = []
        /// Claims added to every ID token and UserInfo answer of this issuer, as templates (``ClaimTemplate``).
        ///
        /// The protocol's own claims (`iss`, `sub`, `aud`, `exp`, `nonce`, …) cannot be set this way.
        public var claims: [String: JOSEValue] = [:]
        /// Whether clients may register themselves (RFC 7591) at `POST /connect/register`.
        ///
        /// Off by default: anyone who reaches the server could then add a client. Registered clients are public
        /// (`token_endpoint_auth_method: none`), use PKCE, and last until the server stops.
        public var dynamicRegistration = false
        /// Further issuers on the same port, each under `/NAME/` with its own keys, clients, users and database.
        ///
        /// Issuer `NAME` is `ISSUER/NAME` (discovery at `ISSUER/NAME/.well-known/openid-configuration`, and at
        /// `ISSUER/.well-known/oauth-authorization-server/NAME` as RFC 8414 §3.1 says). Its configuration's
        /// host, port, issuer, HTTP limits, log and clock are this server's; a `:memory:` database stays in memory,
        /// any other path is its own file. Names are 1 to 64 of `a-z 0-9 - _` and cannot be one of the server's
        /// own first path segments (`authorize`, `token`, `_dev`, …).
        public var issuers: [String: Configuration] = [:]

        /// The defaults.
        public init() {}
    }

    /// A user the server creates at start, with a fixed subject and claims.
    public struct SeededUser: Sendable {
        /// The sign-in email (normalised and case-folded like every email here).
        public var email: String
        /// The password (at least 8 characters).
        public var password: String
        /// The user's `sub`; nil makes a random one (the same on later starts with the same database).
        public var subject: String?
        /// The user's claims: standard ones (`name`, `given_name`, `address`, `phone_number`, …), answered by scope
        /// or by the `claims` request parameter, and any others, answered when asked for by name.
        public var claims: [String: JOSEValue]

        /// A user to create at start.
        public init(email: String, password: String, subject: String? = nil, claims: [String: JOSEValue] = [:]) {
            self.email = email
            self.password = password
            self.subject = subject
            self.claims = claims
        }
    }
}
