import Dispatch
import Foundation
import SesameDevServer
import SesameJOSE

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `sesame serve`: the local development identity server, its configuration read and checked when the command is
/// built (the keys of `--apple-jwks` are loaded when it runs).
struct ServeCommand: SesameCommand {
    static let discussion = """
        A development identity server on this machine: the REST contract (POST /register, /login,
        /refresh-token, /logout, /auth/apple; GET /me) and a strict OpenID Connect provider (discovery,
        /authorize with a sign-in page, /token (PKCE S256 only for codes), /userinfo, /revoke, /end-session,
        /device_authorization + /device, /par, /jwks). NOT a production identity provider.
        It prints its issuer URL on stdout when ready; Ctrl-C stops it cleanly.

        STEP-UP (RFC 9470): GET /protected answers 401 insufficient_user_authentication with acr_values/max_age
        until the token's acr and auth_time satisfy it; acr_values=urn:sesame:acr:mfa adds a second step to the
        sign-in: a one-time code this server writes to stderr (a development stand-in for MFA).

        OPENID CONNECT: the public client sesame-cli accepts any loopback redirect URI (http://127.0.0.1:PORT/...,
        http://[::1]:PORT/...) and the device grant; --client adds clients with registered redirect URIs (which are
        also their post-logout URIs; a loopback one matches on any port). A refresh token is issued only with the
        offline_access scope, rotated on every use; a reused one revokes its grant. A --config file adds
        confidential clients (private_key_jwt with a jwks, or a client_secret) for the client_credentials grant,
        and Native SSO groups (native_sso_group: clients that share a sign-in through device_sso).

        Every request's Host must name the issuer's host or a loopback name (else 421), so DNS rebinding reaches
        nothing; POSTs to the development endpoints take application/json only (else 415).

        DEVELOPMENT ENDPOINTS (off with --no-dev-endpoints):
          GET  /_dev/counters                requests per route, refreshes, reuse detections, …
          POST /_dev/counters/reset
          POST /_dev/faults                  {"spec": SPEC} (replaces the current plan; "" clears it)
          POST /_dev/apple/identity-token    {"sub","email","nonce"[,"email_verified","aud","iss","expiresIn"]} -> a
                                             stand-in Apple identity token (nonce = SHA-256 hex of the raw one)
          GET  /_dev/apple/jwks              the stand-in Apple issuer's keys
          POST /_dev/token                   {"sub"[,"claims","aud","expiresIn","clientId","scope"]} -> an access
                                             token and an ID token signed by the issuer's key
          POST /_dev/rotate-keys             a new signing key now (the old one stays in /jwks until its tokens expire)
          GET  /_dev/rp-tests                the RP test modes, with what a conforming client must do
          POST /_dev/rp-test                 {"test": NAME|null} (as --rp-test)
          GET  /_dev/debugger                a page with the last tokens issued, decoded, and the RP test modes
          GET|POST /_dev/protected           what GET /protected requires: {"acrValues": [...], "maxAge": N} (the
                                             whole requirement; default: the second step, urn:sesame:acr:mfa)
          The sign-in page also shows a "sign in as…" panel listing users, with extra ID-token claims.

        CONFIGURATION FILE (--config): {"users": [{"email","password","sub"?,"claims"?}],
          "clients": [{"client_id","redirect_uris","post_logout_redirect_uris"?,"id_token_signed_response_alg"?,
          "grant_types"?,"exchange_audiences"?,"native_sso_group"?,"token_endpoint_auth_method"?,"jwks"?,
          "client_secret"?,"scope"?,"claims"?}], "claims": {…},
          "dynamic_registration": BOOL,
          "issuers": {"NAME": {same, no issuers}}}.
          Standard user claims (given_name, address, phone_number, …) answer the profile, email, address and
          phone scopes and the claims parameter; other claims go in every ID token and UserInfo answer. Client
          and top-level claims are templates: ${sub}, ${email}, ${email_local} and ${client_id} are filled in.
          Issuer NAME is served under /NAME/ on the same port, with its own keys, users and clients.

        FAULT SPEC:
          SPEC   := RULE (';' RULE)*
          RULE   := ROUTE ':' ACTION ('@' PROBABILITY)?
          ROUTE  := '*' | PATH | 'METHOD PATH'
          ACTION := latency=200ms | latency=1.5s | status=503 | drop | unauthorized
          e.g.   --faults '/refresh-token:status=503@0.3;*:latency=50ms@0.1;/me:unauthorized@0.2'
        """

    static let host = OptionSpec(
        "--host", value: "HOST", "the address to listen on (localhost binds 127.0.0.1 and ::1)", default: "127.0.0.1")
    static let port = OptionSpec("--port", value: "PORT", "the port (0 picks a free one)", default: "8080")
    static let database = OptionSpec(
        "--db", value: "PATH", "SQLite file (created if missing; users, sessions and keys survive restarts)",
        default: ":memory:")
    static let issuer = OptionSpec(
        "--issuer", value: "URL", "the issuer URL, when a proxy serves the server elsewhere",
        default: "http://HOST:PORT")
    static let accessTokenTTL = OptionSpec(
        "--access-token-ttl", value: "S", "access-token lifetime in seconds (1 is fine for tests)", default: "900")
    static let refreshTokenTTL = OptionSpec(
        "--refresh-token-ttl", value: "S", "refresh-token lifetime in seconds", default: "2592000")
    static let signingAlgorithm = OptionSpec(
        "--signing-alg", value: "ALG",
        "the signing algorithm of access tokens, and of ID tokens for clients that name none", default: "ES256",
        choices: ["RS256", "ES256", "EdDSA"])
    static let user = OptionSpec(
        "--user", value: "EMAIL:PASSWORD",
        "seed a user (other local users can read the password in the process list: prefer --users-file)",
        repeatable: true)
    static let usersFile = OptionSpec(
        "--users-file", value: "FILE", "seed users from FILE: one EMAIL:PASSWORD a line ('#' starts a comment)")
    static let faults = OptionSpec("--faults", value: "SPEC", "inject faults (the FAULT SPEC grammar above)")
    static let faultSeed = OptionSpec(
        "--fault-seed", value: "N", "seed the dice of probabilistic faults, for reproducible runs")
    static let noDevEndpoints = OptionSpec("--no-dev-endpoints", "turn /_dev/ off")
    static let passwordIterations = OptionSpec(
        "--password-iterations", value: "N",
        "PBKDF2-HMAC-SHA256 iterations for new passwords (1000 or more; OWASP 2023: 600000)", default: "600000")
    static let client = OptionSpec(
        "--client", value: "ID:URI[,URI...]", "register an OIDC client and its redirect URIs", repeatable: true)
    static let idTokenTTL = OptionSpec("--id-token-ttl", value: "S", "ID-token lifetime in seconds", default: "3600")
    static let refreshReuseGrace = OptionSpec(
        "--refresh-reuse-grace", value: "S", "seconds a rotated refresh token may come back without revoking its grant",
        default: "0")
    static let rotateKeysEvery = OptionSpec(
        "--rotate-keys-every", value: "S", "rotate the signing key when it is S seconds old")
    static let dpopNonce = OptionSpec(
        "--dpop-nonce",
        "demand DPoP nonces (use_dpop_nonce until a proof carries the current one); DPoP proofs are always accepted on /token, /par, /userinfo and /me"
    )
    static let rememberBrowser = OptionSpec(
        "--remember-browser",
        "let a browser that signed in once skip the password later (any local program that can make your browser open a loopback URL can then take that session: see the article Running the dev server)"
    )
    static let rpTest = OptionSpec(
        "--rp-test", value: "NAME", "misbehave as this OpenID conformance RP test does (GET /_dev/rp-tests lists them)")
    static let config = OptionSpec(
        "--config", value: "FILE",
        "users with claims, clients, claim templates and further issuers from a JSON file (see CONFIGURATION FILE)")
    static let exchangeAudience = OptionSpec(
        "--exchange-audience", value: "URI",
        "let sesame-cli exchange its access tokens for this audience or resource (RFC 8693)", repeatable: true)
    static let registration = OptionSpec(
        "--registration", "accept dynamic client registration (RFC 7591) at POST /connect/register (public clients)")
    static let appleBundleID = OptionSpec(
        "--apple-bundle-id", value: "ID", "audience of Sign in with Apple tokens", default: "dev.sesame.demo")
    static let appleJWKS = OptionSpec(
        "--apple-jwks", value: "FILE|URL", "verify Apple identity tokens with these keys instead of the stand-in issuer"
    )

    static let options: [OptionSpec] = [
        host, port, database, issuer, accessTokenTTL, refreshTokenTTL, signingAlgorithm, user, faults, faultSeed,
        usersFile, noDevEndpoints, passwordIterations, client, idTokenTTL, refreshReuseGrace, rotateKeysEvery,
        dpopNonce, rememberBrowser, rpTest, config, registration, exchangeAudience,
        appleBundleID, appleJWKS,
    ]

    static let spec = CommandSpec(
        words: ["serve"], summary: "the local development identity server", arguments: nil,
        discussion: discussion, options: options,
        examples: [
            "sesame serve --port 8080 --db dev.sqlite --user alice@example.com:correct-horse",
            "sesame serve --port 0 --access-token-ttl 2 --faults '/refresh-token:status=503@0.3'",
        ],
        exitCodes: [], command: Self.self)

    /// Everything but the Apple keys, which may come from a URL (loaded in ``run()``).
    let configuration: DevServer.Configuration
    let appleKeySource: String?

    init(_ arguments: ParsedArguments) throws {
        try arguments.noPositionals()
        configuration = try Self.configuration(from: arguments)
        appleKeySource = arguments.value(Self.appleJWKS)
    }

    func run() async throws {
        var configuration = self.configuration
        if let appleKeySource {
            configuration.appleKeys = try await KeySource.load(appleKeySource, allowSymmetric: false)
        }
        let server = try DevServer(configuration: configuration)
        let issuer = try server.start()
        let loopback = ["127.0.0.1", "::1", "localhost"].contains(configuration.host.lowercased())
        if !loopback && configuration.devEndpoints {
            FileHandle.standardError.write(
                Data(
                    ("sesame serve: WARNING: listening on \(configuration.host) with the development endpoints on; "
                        + "anyone who can reach it can mint tokens and inject faults (--no-dev-endpoints turns them off)\n")
                        .utf8))
        }
        if configuration.rememberBrowser {
            FileHandle.standardError.write(
                Data(
                    ("sesame serve: --remember-browser: a browser that signed in skips the password for 12 hours; any "
                        + "local program that can make it open a loopback URL can take that session (see the article Running the dev server)\n")
                        .utf8))
        }
        if let mode = configuration.rpTest {
            FileHandle.standardError.write(
                Data(
                    "sesame serve: RP test mode \(mode.rawValue): the provider misbehaves on purpose (\(mode.summary))\n"
                        .utf8))
        }
        FileHandle.standardOutput.write(Data((issuer.absoluteString + "\n").utf8))
        FileHandle.standardError.write(
            Data("sesame serve: listening on \(issuer.absoluteString) (Ctrl-C stops)\n".utf8))
        await Self.waitForTermination()
        server.stop()
        FileHandle.standardError.write(Data("sesame serve: stopped\n".utf8))
    }

    static func configuration(from arguments: ParsedArguments) throws -> DevServer.Configuration {
        var configuration = DevServer.Configuration()
        configuration.host = arguments.value(host) ?? "127.0.0.1"
        configuration.port = try integer(arguments, port, default: 8080, range: 0...65535)
        configuration.databasePath = arguments.value(database) ?? ":memory:"
        if let issuer = arguments.value(issuer) {
            guard let url = URL(string: issuer), url.scheme == "http" || url.scheme == "https" else {
                throw CLIError.usage("--issuer takes an http(s) URL", command: arguments.command)
            }
            configuration.issuer = url
        }
        configuration.accessTokenTTL = Int64(
            try integer(arguments, accessTokenTTL, default: 900, range: 1...86400 * 365))
        configuration.refreshTokenTTL = Int64(
            try integer(arguments, refreshTokenTTL, default: 30 * 86400, range: 1...86400 * 3650))
        configuration.passwordIterations = try integer(
            arguments, passwordIterations, default: 600_000, range: 1000...10_000_000)
        if let name = arguments.value(signingAlgorithm) {
            guard let algorithm = JWSAlgorithm(name: name), [.rs256, .es256, .eddsa].contains(algorithm) else {
                throw CLIError.usage("--signing-alg takes RS256, ES256 or EdDSA", command: arguments.command)
            }
            configuration.signingAlgorithm = algorithm
        }
        var pairs = arguments.values(user)
        if let file = arguments.value(usersFile) {
            guard let data = FileManager.default.contents(atPath: file), data.count <= 1 << 20 else {
                throw CLIError(status: .failure, code: "io", message: "cannot read \(file) (at most 1 MiB)")
            }
            pairs += String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline)
                .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty && !$0.hasPrefix("#") }
        }
        configuration.users = try pairs.map { pair in
            guard let colon = pair.firstIndex(of: ":") else {
                // Nothing of the entry is echoed: it may be a password.
                throw CLIError.usage("--user and --users-file take EMAIL:PASSWORD", command: arguments.command)
            }
            return (email: String(pair[..<colon]), password: String(pair[pair.index(after: colon)...]))
        }
        if let spec = arguments.value(faults) {
            do {
                configuration.faults = try FaultPlan(spec: spec)
            } catch {
                throw CLIError.usage("--faults: \(error)", command: arguments.command)
            }
        }
        if let seed = arguments.value(faultSeed) {
            guard let value = UInt64(seed) else {
                throw CLIError.usage("--fault-seed takes a whole number", command: arguments.command)
            }
            configuration.faultSeed = value
        }
        configuration.devEndpoints = !arguments.flag(noDevEndpoints)
        do {
            configuration.clients = try arguments.values(client).map(RegisteredClient.init(specification:))
        } catch {
            throw CLIError.usage("\(error)", command: arguments.command)
        }
        configuration.idTokenTTL = Int64(
            try integer(arguments, idTokenTTL, default: 3600, range: 1...86400 * 365))
        configuration.refreshReuseGrace = Int64(
            try integer(arguments, refreshReuseGrace, default: 0, range: 0...3600))
        configuration.dpopNonce = arguments.flag(dpopNonce)
        configuration.rememberBrowser = arguments.flag(rememberBrowser)
        if arguments.value(rotateKeysEvery) != nil {
            configuration.keyRotationInterval = Int64(
                try integer(arguments, rotateKeysEvery, default: 0, range: 1...86400 * 365))
        }
        if let name = arguments.value(rpTest) {
            guard let mode = RPTestMode(rawValue: name) else {
                throw CLIError.usage(
                    "--rp-test: unknown test \(name); one of: "
                        + RPTestMode.allCases.map(\.rawValue).joined(separator: ", "), command: arguments.command)
            }
            configuration.rpTest = mode
        }
        if arguments.flag(registration) { configuration.dynamicRegistration = true }
        configuration.exchangeAudiences = arguments.values(exchangeAudience)
        if let file = arguments.value(config) {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw CLIError(
                    status: .failure, code: "io", message: "cannot read \(file) (no such file, or unreadable)")
            }
            guard data.count <= 4 << 20 else {
                throw CLIError(status: .failure, code: "io", message: "\(file) is over 4 MiB")
            }
            do {
                try configuration.load(json: data)
            } catch {
                throw CLIError.usage("--config \(file): \(error)", command: arguments.command)
            }
        }
        if let bundle = arguments.value(appleBundleID) { configuration.appleBundleID = bundle }
        configuration.log = { line in FileHandle.standardError.write(Data((line + "\n").utf8)) }
        return configuration
    }

    private static func integer(
        _ arguments: ParsedArguments, _ option: OptionSpec, default value: Int, range: ClosedRange<Int>
    )
        throws -> Int
    {
        guard let text = arguments.value(option) else { return value }
        guard let number = Int(text), range.contains(number) else {
            throw CLIError.usage(
                "\(option.name) takes a whole number from \(range.lowerBound) to \(range.upperBound)",
                command: arguments.command)
        }
        return number
    }

    /// Suspends until SIGINT or SIGTERM.
    private static func waitForTermination() async {
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumed = SignalLatch(continuation)
            for number in [SIGINT, SIGTERM] {
                let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                source.setEventHandler { resumed.fire() }
                source.resume()
                resumed.keep(source)
            }
        }
    }
}

/// Resumes a continuation once, from whichever signal arrives first, and keeps the signal sources alive.
private final class SignalLatch: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var continuation: CheckedContinuation<Void, Never>?
    private var sources: [any DispatchSourceSignal] = []

    init(_ continuation: CheckedContinuation<Void, Never>) { self.continuation = continuation }

    func keep(_ source: any DispatchSourceSignal) {
        lock.lock()
        sources.append(source)
        lock.unlock()
    }

    func fire() {
        lock.lock()
        let pending = continuation
        continuation = nil
        lock.unlock()
        pending?.resume()
    }
}
