public import Foundation
import SesameJOSE
import SesameLoopback

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Sesame's local development identity server: the proprietary REST contract of DESIGN.md §4 (and, in a later
/// part, an OpenID Connect provider), persisted in SQLite, with fault injection and counters for tests.
///
/// > Important: This is a development and test tool. It binds to loopback by default, stores its signing keys in
/// > its database, and exposes `/_dev/` endpoints (counters, fault switches, a stand-in Sign in with Apple issuer)
/// > unless ``Configuration/devEndpoints`` is off. Do not run it as a production identity provider.
public final class DevServer: Sendable {
    let configuration: Configuration
    let store: DevStore
    let state = LockedValue(MutableState())
    private let http = LockedValue<HTTPServer?>(nil)
    /// The dice of probabilistic faults (seeded by ``Configuration/faultSeed``).
    let dice: FaultDice

    struct MutableState {
        var issuer = ""
        var counters = Counters()
        var faults = FaultPlan()
        var accessVerifier: JWTVerifier?
        var accessKey: JWK?
        var accessKeyCreatedAt: Int64 = 0
        var appleKey: JWK?
        var rpTest: RPTestMode?
        /// ID tokens issued since the RP test mode was set (the key-rotation modes act on the first).
        var rpTestIDTokens = 0
        /// Wrong user codes typed on the device page, per account: 5 a minute.
        var deviceCodeFailures = FailureWindow(limit: 5, window: 60)
        /// Password checks per account (``PasswordBackOff``).
        var passwordBackOff = PasswordBackOff()
        /// What `/protected` requires (RFC 9470).
        var protectedRoute = ProtectedRoute()
        /// Wrong one-time codes of the second step, per account, across its tickets: 10 in 5 minutes.
        var secondStepFailures = FailureWindow(limit: 10, window: 300)
    }

    /// When this process started serving (server clock): proofs made before it may have been used already.
    let startedAt: Int64
    /// Keys the HMAC of sign-in forms' CSRF tokens; new for every run.
    let formSecret = JOSECrypto.randomBytes(32)
    /// `sesame-cli`, the configured clients and those registered since (RFC 7591), by ID.
    let registeredClients: LockedValue<ClientRegistry>
    /// The registered clients by ID (a copy: every OIDC request reads it).
    var clients: ClientRegistry { registeredClients.withLock { $0 } }
    /// The configured users' claims, by normalised email.
    let profiles: [String: JOSEObject]
    /// Where this issuer's paths start: empty, or `/NAME` for an issuer of ``Configuration/issuers``.
    let pathPrefix: String
    /// The further issuers, by name.
    let children: [String: DevServer]
    /// The most recent tokens issued, decoded, for the debugger page (newest last).
    let issuedTokens = LockedValue<[IssuedToken]>([])
    /// Second steps in progress, by ticket (``SecondStep``).
    let secondSteps = LockedValue<[String: SecondStep]>([:])
    /// Serialises key rotations.
    let rotationLock = NSLock()
    /// DPoP proofs seen recently (thumbprint and `jti`), with when they may be forgotten.
    let dpopProofs = LockedValue(DPoPReplayCache())
    /// OIDC access tokens whose signature and claims were verified, by their exact text, with their expiry.
    let verifiedAccessTokens = LockedValue<[String: (claims: JWTClaims, expiresAt: Date)]>([:])
    /// Access tokens revoked one by one (`jti` → `exp`), until they expire; kept in memory (a restart forgets them,
    /// as it does the DPoP replay cache).
    let revokedAccessTokens = LockedValue<[String: Int64]>([:])

    /// Opens the database and prepares keys and seeded users; ``start()`` begins serving.
    ///
    /// - Throws: ``DevServerError`` when the database cannot be opened or a seeded user is invalid.
    public convenience init(configuration: Configuration = Configuration()) throws {
        try self.init(configuration: configuration, pathPrefix: "")
    }

    init(configuration: Configuration, pathPrefix: String) throws {
        if let clash = configuration.clients.first(where: { $0.id == RegisteredClient.sesameCLI.id }) {
            throw DevServerError("the client ID \(clash.id) is built in; register yours under another ID")
        }
        guard configuration.protectedRoute.acrValues.allSatisfy(Self.isACRName),
            configuration.protectedRoute.acrValues.count <= 10
        else { throw DevServerError("protectedRoute: up to 10 acr values of visible ASCII, no quote or backslash") }
        let ids = configuration.clients.map(\.id)
        guard Set(ids).count == ids.count else { throw DevServerError("a client ID is registered twice") }
        self.configuration = configuration
        self.pathPrefix = pathPrefix
        registeredClients = LockedValue(
            Self.registry(configuration.clients, cliExchangeAudiences: configuration.exchangeAudiences))
        children = try Self.children(of: configuration)
        var profiles: [String: JOSEObject] = [:]
        for user in configuration.seededUsers { profiles[Self.normalize(email: user.email)] = JOSEObject(user.claims) }
        self.profiles = profiles
        dice = FaultDice(seed: configuration.faultSeed)
        store = try DevStore(path: configuration.databasePath)
        let now = Int64(configuration.clock().timeIntervalSince1970.rounded(.down))
        startedAt = now
        let key = try store.signingKey(purpose: "access", algorithm: configuration.signingAlgorithm, now: now)
        let keys = try JWKSet(keys: try store.publicKeys(purpose: "access"))
        let created = try store.activeKeyCreation(purpose: "access") ?? now
        state.withLock {
            $0.accessKey = key
            $0.accessKeyCreatedAt = created
            $0.faults = configuration.faults
            $0.accessVerifier = JWTVerifier(keys: keys)
            $0.rpTest = configuration.rpTest
            $0.protectedRoute = configuration.protectedRoute
        }
        let seeded =
            configuration.users.map { SeededUser(email: $0.email, password: $0.password) } + configuration.seededUsers
        for user in seeded {
            let email = Self.normalize(email: user.email)
            guard Self.isPlausible(email: email), user.password.count >= 8 else {
                throw DevServerError("seeded user \(email): needs an email and a password of 8 characters or more")
            }
            if let subject = user.subject {
                guard !subject.isEmpty, subject.utf8.count <= 255,
                    !subject.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
                else { throw DevServerError("seeded user \(email): sub is 1 to 255 bytes without control characters") }
            }
            if let existing = try store.passwordRecord(email: email) {
                if let subject = user.subject, !ByteExact.equals(subject, existing.user.id) {
                    throw DevServerError(
                        "seeded user \(email) exists in the database with another sub; use a new database")
                }
                configuration.log?("seeded user \(email) exists in the database; its password is unchanged")
            } else {
                let salt = JOSECrypto.randomBytes(16)
                let hash = hashPassword(user.password, salt: salt, iterations: configuration.passwordIterations)
                guard
                    try store.createUser(
                        email: email, passwordHash: hash, salt: salt, iterations: configuration.passwordIterations,
                        now: now, id: user.subject) != nil
                else { throw DevServerError("seeded user \(email): the sub \(user.subject ?? "") is taken") }
            }
        }
    }

    /// Binds and starts serving.
    ///
    /// - Returns: the issuer URL (`http://127.0.0.1:PORT` unless configured).
    /// - Throws: ``DevServerError`` or `LoopbackError` when the address cannot be bound.
    @discardableResult
    public func start() throws -> URL {
        let router = makeRouter()
        let childRoutes = children.mapValues { ($0, $0.makeRouter()) }
        var observer: (@Sendable (HTTPServer.Completion) -> Void)?
        if let log = configuration.log {
            observer = { completion in
                let milliseconds = String(format: "%.1f", completion.duration * 1000)
                log("\(completion.method) \(completion.path) \(completion.status) \(milliseconds)ms")
            }
        }
        let server = HTTPServer(
            configuration: configuration.http.with(host: configuration.host, port: configuration.port),
            observer: observer,
            handler: { [self] request in
                if !childRoutes.isEmpty, let (child, childRouter, inner) = Self.child(of: request, in: childRoutes) {
                    return child.handle(inner, router: childRouter)
                }
                return handle(request, router: router)
            }
        )
        let port = try server.start()
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        let issuer = configuration.issuer?.absoluteString ?? "http://\(host):\(port)"
        state.withLock { $0.issuer = issuer }
        try reloadVerifier()
        for (name, child) in children {
            child.state.withLock { $0.issuer = issuer + "/" + name }
            try child.reloadVerifier()
        }
        http.withLock { $0 = server }
        guard let url = URL(string: issuer) else { throw DevServerError("invalid issuer \(issuer)") }
        return url
    }

    /// Stops serving: requests in flight finish, the port is released.
    public func stop() {
        let server = http.withLock { server -> HTTPServer? in
            defer { server = nil }
            return server
        }
        server?.stop()
    }

    /// The issuer URL (after ``start()``).
    public var issuer: URL? { URL(string: state.withLock { $0.issuer }) }

    /// Where the server can be reached (after ``start()``): `http://HOST:PORT`, whatever the issuer says.
    public var localURL: URL? {
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        return URL(string: "http://\(host):\(port)")
    }

    /// The bound port (after ``start()``).
    public var port: Int { http.withLock { $0?.port ?? 0 } }

    // MARK: Dispatch

    func handle(_ request: HTTPServerRequest, router: HTTPRouter) -> HTTPServerResponse {
        // DNS rebinding: a page on evil.example that resolves to 127.0.0.1 still sends `Host: evil.example`.
        let hosts = request.headers.values("Host")
        guard hosts.count == 1, let host = hosts.first, isAllowed(host: host) else {
            return Self.error(
                request.headers["Host"] == nil ? 400 : 421, "invalid_request",
                "the Host header must name the issuer's host or a loopback name")
        }
        let known = router.hasRoute(request.path)
        let isDev = request.path.hasPrefix("/_dev/")
        // Development endpoints take JSON only: a web page cannot send application/json cross-site without a
        // CORS preflight, which this server never grants.
        if isDev, request.method != "GET", request.method != "HEAD", !request.hasJSONBody {
            return Self.error(415, "invalid_request", "development endpoints take Content-Type: application/json")
        }
        if !isDev {
            // Only a route's own method names a counter: any other word a client sends would be a new key each time.
            let route = router.hasRoute(request.method, request.path) ? "\(request.method) \(request.path)" : "other"
            let faults = state.withLock { state in
                state.counters.requests[route, default: 0] += 1
                return state.faults
            }
            for action in faults.actions(method: request.method, path: request.path, dice: dice) {
                switch action {
                case .latency(let seconds): Thread.sleep(forTimeInterval: seconds)
                case .status(let code): return Self.error(code, "server_error", "injected fault")
                case .drop: return .drop
                case .unauthorized:
                    return request.path == "/refresh-token"
                        ? Self.error(401, "invalid_grant", "injected fault")
                        : Self.invalidToken("injected fault")
                }
            }
        }
        if isDev && !configuration.devEndpoints { return Self.error(404, "not_found", "no such endpoint") }
        // Browser apps (an SPA on another localhost port) may call the provider's API endpoints: CORS for those,
        // never for the sign-in pages or the development endpoints.
        let cors = Self.corsPaths.contains(request.path)
        if cors, request.method == "OPTIONS" {
            var preflight = HTTPServerResponse(status: 204)
            preflight.headers.set("Access-Control-Allow-Origin", "*")
            preflight.headers.set("Access-Control-Allow-Methods", "GET, POST")
            preflight.headers.set("Access-Control-Allow-Headers", "Authorization, Content-Type, DPoP")
            preflight.headers.set("Access-Control-Max-Age", "600")
            return preflight
        }
        if !known, request.path.hasSuffix("/.well-known/openid-configuration") {
            let names = children.keys.sorted().map { "/" + $0 }
            return Self.error(
                404, "not_found",
                "no issuer at \(PrintableTextForPage.short(String(request.path.dropLast(33)))); this server's issuers: "
                    + (["/ (the root)"] + names).joined(separator: ", "))
        }
        var response = router.handle(request)
        if let mode = state.withLock({ $0.rpTest }), response.headers["Content-Type"]?.hasPrefix("text/html") == true {
            response.body = SignInPage.addingBanner(for: mode, to: response.body)
        }
        if cors {
            response.headers.set("Access-Control-Allow-Origin", "*")
            response.headers.set("Access-Control-Expose-Headers", "WWW-Authenticate, DPoP-Nonce")
        }
        // RFC 9110 §6.6.1: an origin server with a clock sends Date — this one's, injected or not (clients use it
        // to correct their own clock).
        response.headers.set("Date", Self.httpDate(currentDate))
        return response
    }

    /// An IMF-fixdate, formatted by hand (a `DateFormatter` per response would cost more than the route).
    static func httpDate(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return
            "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(1900 + parts.tm_year) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }

    /// The endpoints a browser app calls directly (no cookies: `Access-Control-Allow-Origin: *` sends none).
    static let corsPaths: Set<String> = [
        "/.well-known/openid-configuration", "/.well-known/oauth-authorization-server", "/jwks", "/token",
        "/userinfo", "/revoke", "/par", "/device_authorization", "/protected",
    ]

    /// Whether `Host` (with an optional port) names the issuer's host or a loopback name.
    func isAllowed(host header: String) -> Bool {
        guard let name = LoopbackHost.name(inHostHeader: header) else { return false }
        if LoopbackHost.isLoopback(name) { return true }
        let issuerHost = URL(string: state.withLock { $0.issuer })?.host?.lowercased()
        let boundHost = configuration.host.lowercased()
        return name == issuerHost || name == boundHost
    }

    // MARK: Shared helpers

    /// NFC, then case-folded, surrounding white space trimmed: one spelling per mailbox (DESIGN §4).
    static func normalize(email: String) -> String {
        email.trimmingCharacters(in: .whitespacesAndNewlines).precomposedStringWithCanonicalMapping
            .folding(options: [.caseInsensitive, .widthInsensitive], locale: Locale(identifier: "en_US_POSIX"))
            .precomposedStringWithCanonicalMapping
    }

    /// An address with one `@`, no white space, and no control or invisible formatting characters (a NUL, a
    /// zero-width space or a bidi override would make look-alike accounts).
    static func isPlausible(email: String) -> Bool {
        // The byte `@`: `@` followed by a combining mark is one Swift Character and would hide a second `@`.
        let parts = email.utf8.split(separator: UInt8(ascii: "@"), omittingEmptySubsequences: false)
        let invisible = email.unicodeScalars.contains { scalar in
            scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.properties.generalCategory == .format
                || scalar.properties.isWhitespace
        }
        return parts.count == 2 && !parts[0].isEmpty && !parts[1].isEmpty && email.utf8.count <= 254 && !invisible
    }

    func hashPassword(_ password: String, salt: [UInt8], iterations: Int) -> [UInt8] {
        JOSECrypto.pbkdf2SHA256(password: Array(password.utf8), salt: salt, iterations: iterations)
    }

    /// `{"error","error_description"}` with a status; every 401 also carries the RFC 6750 challenge
    /// `WWW-Authenticate: Bearer error="invalid_token"` (a 401 must have a challenge, RFC 9110 §15.5.2).
    static func error(_ status: Int, _ code: String, _ description: String) -> HTTPServerResponse {
        var response = HTTPServerResponse.json(
            status, JOSEValue.object(["error": .string(code), "error_description": .string(description)]).jsonData)
        if status == 401 {
            response.headers.set(
                "WWW-Authenticate", "Bearer error=\"invalid_token\", error_description=\"\(description)\"")
        }
        return response
    }

    /// 401 with `WWW-Authenticate: Bearer error="invalid_token"` (RFC 6750 §3).
    static func invalidToken(_ description: String) -> HTTPServerResponse {
        error(401, "invalid_token", description)
    }

    /// Runs `handler` with the request's JSON object body, or answers 415 (not JSON) or 400 (not an object).
    static func withJSONBody(_ request: HTTPServerRequest, _ handler: (JOSEObject) -> HTTPServerResponse)
        -> HTTPServerResponse
    {
        guard request.hasJSONBody else {
            return error(415, "invalid_request", "Content-Type must be application/json")
        }
        guard let value = try? JOSEValue.parse(request.body), let object = value.objectValue else {
            return error(400, "invalid_request", "the body must be a JSON object")
        }
        return handler(object)
    }

    var now: Int64 { Int64(configuration.clock().timeIntervalSince1970.rounded(.down)) }

    /// The server's current time as a `Date`.
    var currentDate: Date { configuration.clock() }
}

extension HTTPServer.Configuration {
    func with(host: String, port: Int) -> HTTPServer.Configuration {
        var copy = self
        copy.host = host
        copy.port = port
        return copy
    }
}
