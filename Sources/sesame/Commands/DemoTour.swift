import Foundation
import Sesame
import SesameDevServer
import SesameJOSE
import SesameLoopback
import SesameTesting

/// The steps of `sesame demo`, against one embedded dev server whose clock is the demo's (so "the token expires"
/// is a clock moved, not a wait) and through the SDK's own public API — what an app does.
struct DemoTour {
    let narrator: DemoNarrator
    static let clientID = "sesame-cli"
    static let redirectURI = "http://127.0.0.1:5555/callback"
    static let email = "alice@example.com"
    static let password = "correct-horse-battery"

    func run() async throws {
        let clock = ManualTimeSource(Date())
        var configuration = DevServer.Configuration()
        configuration.passwordIterations = 10_000
        configuration.users = [(Self.email, Self.password)]
        configuration.accessTokenTTL = 60
        configuration.dpopNonce = true
        configuration.clock = { clock.now }
        let server = try DevServer(configuration: configuration)
        let issuer = try server.start()
        defer { server.stop() }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-demo-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: scratch, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: scratch) }
        let wire = DemoWire()
        let user = DevServerUser(email: Self.email, password: Self.password, transport: wire)
        let store = try FileTokenStore(directory: scratch.appendingPathComponent("credentials"))

        if !narrator.json {
            print("Sesame demo: the product on a development identity server at \(issuer.absoluteString)")
            print(
                "(SQLite in memory, 60-second access tokens, DPoP nonces on; secrets are shown as a prefix and a length)"
            )
        }
        let quiet = SesameHTTP.platformTransport  // the demo's own bookkeeping, not shown on the wire
        func counter(_ name: String) async -> Int64 {
            let response = try? await quiet.send(
                .init(method: "GET", url: issuer.appendingPathComponent("_dev/counters")))
            guard let body = response?.body, case .integer(let value)? = try? JOSEValue.parse(body)[name] else {
                return -1
            }
            return value
        }

        var auth: OIDCAuth?
        let signedIn = await narrator.step(
            "Sign in with OpenID Connect: authorization code + PKCE, the real sign-in form", wire: wire
        ) { log in
            let made = try await OIDCAuth.configure(
                issuer: issuer, clientID: Self.clientID, redirectURI: Self.redirectURI, store: store, transport: wire,
                timeSource: clock)
            let tokens = try await made.signIn(with: user)
            auth = made
            log.note(
                "the demo plays the user: it fills in the sign-in page as a browser would (SesameTesting.DevServerUser)"
            )
            log.check(
                "signed in", tokens.user?.email == Self.email,
                "\(tokens.user?.email ?? "?"), sub \(tokens.user?.id.prefix(12) ?? "?")…")
            log.check("a refresh token to stay signed in", tokens.refreshToken != nil)
        }
        guard signedIn, let auth else { return }

        await narrator.step("The ID token, verified against the provider's JWKS", wire: wire) { log in
            let idToken = try await auth.session.validTokens().idToken ?? ""
            let jwks = try await wire.send(.init(method: "GET", url: auth.provider.metadata.jwksURI ?? issuer))
            let keys = try JWKSet(json: Array(jwks.body))
            var policy = ClaimValidationPolicy(issuer: issuer.absoluteString, audience: Self.clientID)
            policy.leeway = 0
            let verified = try JWTVerifier(keys: keys, policy: policy).verify(idToken, now: clock.now)
            log.note("the SDK checked it at sign-in (signature, iss, aud, nonce, exp, iat); here it is checked again")
            log.check(
                "signature and claims hold", verified.claims.subject != nil,
                "\(verified.header.algorithm?.name ?? "?") with kid \(verified.header.keyID?.prefix(12) ?? "?")…, iss and aud match"
            )
        }

        let api = auth.client(for: issuer)
        await narrator.step("An API call with the access token", wire: wire) { log in
            let response = try await api.send(.get("/userinfo"))
            log.check("GET /userinfo answered", response.status == 200, "\(response.status)")
        }

        await narrator.step("The access token expires under 50 concurrent calls: exactly one refresh", wire: wire) {
            log in
            let before = await counter("refreshes")
            clock.advance(by: 61)
            log.note("the clock moves 61 s: every caller finds the token expired at once")
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<50 { group.addTask { try await api.send(.get("/userinfo")).status } }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            let refreshes = await counter("refreshes") - before
            log.check("50 calls answered 200", statuses.count == 50 && statuses.allSatisfy { $0 == 200 })
            log.check("one refresh for all of them", refreshes == 1, "the server counted \(refreshes)")
        }

        await narrator.step("Two processes share one store: still one refresh, no reuse", wire: wire) { log in
            let (refreshes, reuses) = (await counter("refreshes"), await counter("reuseDetections"))
            clock.advance(by: 61)
            let settings: JOSEValue = [
                "issuer": .string(issuer.absoluteString), "now": .number(clock.now.timeIntervalSince1970),
            ]
            try Data(settings.jsonBytes).write(to: scratch.appendingPathComponent("demo.json"))
            let prints = try await Self.runSecondProcesses(2, folder: scratch)
            let refreshed = await counter("refreshes") - refreshes
            let reused = await counter("reuseDetections") - reuses
            log.note("two `sesame demo --second-process` processes, the token expired for both, one FileTokenStore")
            log.check("both got a token", prints.count == 2, prints.joined(separator: ", "))
            log.check("the same one", Set(prints).count == 1)
            log.check(
                "one refresh between them (the cross-process lock)", refreshed == 1, "the server counted \(refreshed)")
            log.check("no refresh token presented twice", reused == 0)
            let status = try await api.send(.get("/userinfo")).status
            let after = await counter("refreshes") - refreshes
            log.check("this process adopts their refresh instead of refreshing again", status == 200 && after == 1)
        }

        await narrator.step("The network fails during a refresh: the session is kept", wire: wire) { log in
            clock.advance(by: 61)
            wire.cutTokenEndpoint(true)
            do {
                _ = try await auth.accessToken()
                log.check("the refresh failed", false)
            } catch let error as AuthError {
                log.check("the refresh failed as transient", error.isTransient, error.code.rawValue)
            }
            let kept = try await store.load(profile: "default")
            let signedIn = try await auth.session.isSignedIn
            log.check("still signed in, credentials kept", signedIn && kept?.refreshToken != nil)
            wire.cutTokenEndpoint(false)
            let token = try await auth.accessToken()
            log.check("when the network is back, the next call refreshes", !token.isEmpty)
        }

        let dpopKeys = InMemoryDPoPKeyStore()
        var bound: OIDCAuth?
        await narrator.step("DPoP: a sender-constrained sign-in and call, with the server's nonce", wire: wire) { log in
            let made = try await OIDCAuth.configure(
                issuer: issuer, clientID: Self.clientID, redirectURI: Self.redirectURI, store: InMemoryTokenStore(),
                dpopKeys: dpopKeys, transport: wire, timeSource: clock)
            user.clearCookies()
            let demandsBefore = wire.dpopNonceDemands
            let tokens = try await made.signIn(with: user)
            bound = made
            log.check(
                "the tokens are DPoP-bound", tokens.tokenType == "DPoP" && tokens.dpopKeyThumbprint != nil,
                "key \(tokens.dpopKeyThumbprint?.prefix(12) ?? "?")…")
            let response = try await made.client(for: issuer).send(.get("/userinfo"))
            log.check("a DPoP-bound call", response.status == 200)
            let demands = wire.dpopNonceDemands - demandsBefore
            log.check(
                "the server demanded a nonce (use_dpop_nonce) and the SDK retried with it", demands > 0,
                "\(demands) demand\(demands == 1 ? "" : "s"), each answered by one retry")
            log.note("each request carries a fresh proof signed by the key")
        }

        await narrator.step("A stolen refresh token replayed: reuse detected, the family revoked", wire: wire) { log in
            let victim = try await OIDCAuth.configure(
                issuer: issuer, clientID: Self.clientID, redirectURI: Self.redirectURI, store: InMemoryTokenStore(),
                transport: wire, timeSource: clock)
            user.clearCookies()
            let stolen = try await victim.signIn(with: user).refreshToken ?? ""
            let reuses = await counter("reuseDetections")
            log.note("an attacker copies the refresh token \(DemoWire.peek(stolen)); the app then refreshes (rotation)")
            _ = try await victim.accessToken(forceRefresh: true)
            let replay = try await wire.send(
                .init(
                    method: "POST", url: auth.provider.metadata.tokenEndpoint,
                    headers: ["Content-Type": "application/x-www-form-urlencoded"],
                    body: Data("grant_type=refresh_token&client_id=\(Self.clientID)&refresh_token=\(stolen)".utf8)))
            let error = try? JOSEValue.parse(replay.body)["error"]?.stringValue
            log.check(
                "the replay is refused", replay.status == 400 && error == "invalid_grant",
                "\(replay.status) \(error ?? "")")
            let seen = await counter("reuseDetections") - reuses
            log.check("the server saw the reuse", seen == 1)
            do {
                _ = try await victim.accessToken(forceRefresh: true)
                log.check("the whole family is revoked", false)
            } catch let error as AuthError {
                log.check(
                    "the whole family is revoked: the app must sign in again", error.code == .sessionExpired,
                    error.code.rawValue)
            }
        }

        await narrator.step("Sign-out with revocation", wire: wire) { log in
            let refresh = try await store.load(profile: "default")?.refreshToken ?? ""
            let result = await auth.signOut()
            if case .confirmed = result.revocation {
                log.check("the server confirmed the revocation", true)
            } else {
                log.check("the server confirmed the revocation", false)
            }
            let left = try await store.load(profile: "default")
            log.check("the credentials are deleted", result.credentialsRemoved && left == nil)
            let replay = try await wire.send(
                .init(
                    method: "POST", url: auth.provider.metadata.tokenEndpoint,
                    headers: ["Content-Type": "application/x-www-form-urlencoded"],
                    body: Data("grant_type=refresh_token&client_id=\(Self.clientID)&refresh_token=\(refresh)".utf8)))
            log.check("the revoked refresh token is dead", replay.status == 400)
            if let bound {
                let signedOut = await bound.signOut()
                log.check("the DPoP session signs out too", signedOut.credentialsRemoved)
            }
        }

        await narrator.step("Forged ID tokens are rejected", wire: wire) { log in try DemoJOSE.attacks(log) }
        await narrator.step("The REST contract: /register, /login, /refresh-token rotation, /logout (204)", wire: wire)
        { log in
            try await DemoREST.contract(base: server.localURL ?? issuer, wire: wire, log: log)
        }
    }

    /// Whether `path` is a real folder (not a link) of this user that nobody else may enter.
    static func isPrivateFolder(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR && info.st_uid == geteuid()
            && info.st_mode & 0o077 == 0
    }

    /// Starts `count` copies of this executable as `demo --second-process FOLDER` at once; their token prints.
    static func runSecondProcesses(_ count: Int, folder: URL) async throws -> [String] {
        let executable = Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0])
        var processes: [(ChildProcess, Pipe)] = []
        for _ in 0..<count {
            let process = ChildProcess()
            process.executableURL = executable
            process.arguments = ["demo", "--second-process", folder.path]
            let pipe = Pipe()
            process.standardOutput = .pipe(pipe)
            process.standardError = .null
            try process.run()
            processes.append((process, pipe))
        }
        var prints: [String] = []
        for (process, pipe) in processes {
            let output = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            if process.terminationStatus == 0, let value = try? JOSEValue.parse(output)["token"]?.stringValue {
                prints.append(value)
            }
        }
        return prints
    }

    /// One of the demo's other processes: restores the session from the shared store at the demo's time and asks
    /// for a valid token; prints a fingerprint of it (never the token).
    static func secondProcess(folder: URL) async throws {
        // Only the demo's own scratch folder: this user's, 0700, not a link, named by the demo; its credentials folder
        // not a link either; and only a loopback issuer — so it can never be pointed at a real profile's tokens.
        let refused = CLIError(status: .usage, code: "usage", message: "--second-process is the demo's own")
        guard folder.lastPathComponent.hasPrefix("sesame-demo-"),
            Self.isPrivateFolder(folder.path), Self.isPrivateFolder(folder.appendingPathComponent("credentials").path)
        else { throw refused }
        let settings = try JOSEValue.parse(Data(contentsOf: folder.appendingPathComponent("demo.json")))
        guard let issuer = settings["issuer"]?.stringValue.flatMap(URL.init(string:)), issuer.scheme == "http",
            issuer.host == "127.0.0.1", let now = settings["now"]?.doubleValue
        else { throw refused }
        let auth = try await OIDCAuth.configure(
            issuer: issuer, clientID: clientID, redirectURI: redirectURI,
            store: try FileTokenStore(directory: folder.appendingPathComponent("credentials")),
            timeSource: ManualTimeSource(Date(timeIntervalSince1970: now)))
        let token = try await auth.accessToken()
        let fingerprint = JOSECrypto.sha256(Array(token.utf8)).prefix(6).map { String(format: "%02x", $0) }.joined()
        print(JOSEValue.object(["token": .string("sha256:" + fingerprint)]).jsonString)
    }
}
