import Foundation
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import Testing

/// `sesame login --issuer` end to end against `sesame serve`: the printed URL completed by a user agent, then
/// token, request, status and logout on the OIDC profile; and the device flow approved on the device page.
@Suite struct OIDCLoginCommandTests {
    /// A `sesame login …` running in the background, whose stderr is read line by line.
    final class BackgroundLogin {
        let process = ChildProcess()
        let errors = Pipe()

        init(_ arguments: [String], environment: [String: String]) throws {
            process.executableURL = CLIRunner.binary
            process.arguments = arguments
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
            process.standardError = .pipe(errors)
            process.standardOutput = .null
            process.standardInput = .null
            try process.run()
        }

        /// Reads stderr until a line satisfies `match`; returns it (nil at end of file).
        func line(where match: (String) -> Bool) -> String? {
            var line = ""
            while true {
                let byte = errors.fileHandleForReading.readData(ofLength: 1)
                if byte.isEmpty { return nil }
                if byte == Data("\n".utf8) {
                    if match(line) { return line }
                    line = ""
                } else {
                    line += String(decoding: byte, as: UTF8.self)
                }
            }
        }

        func finish() -> (Int32, String) {
            let rest = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return (process.terminationStatus, rest)
        }
    }

    /// Approves `code` on the dev server's device page as alice would: the code and her password, then the
    /// confirmation.
    static func approveDevice(_ code: String, at base: URL) throws {
        let browser = TestBrowser(port: base.port ?? 0)
        let page = try browser.get("/device")
        let confirmation = try browser.post(
            "/device",
            form: page.hiddenFields() + [
                ("user_code", code), ("email", "alice@example.com"), ("password", "correct-horse"),
                ("action", "approve"),
            ])
        _ = try browser.post("/device", form: confirmation.hiddenFields() + [("action", "approve")])
    }

    /// `sesame serve` with alice, and an empty SESAME_HOME with the file store; ``stop()`` removes both.
    final class Workspace {
        let server: ServeProcess
        let folder: URL
        let environment: [String: String]

        /// The server's stderr, when started with `logging`.
        var log: URL { folder.appendingPathComponent("serve.log") }

        init(serving extra: [String] = [], logging: Bool = false) throws {
            folder = try CLIRunner.temporaryDirectory()
            server = try ServeProcess(
                ["--user", "alice@example.com:correct-horse"] + extra,
                log: logging ? folder.appendingPathComponent("serve.log") : nil)
            environment = ["SESAME_HOME": folder.path, "SESAME_STORE": "file"]
        }

        func stop() {
            server.interrupt()
            try? FileManager.default.removeItem(at: folder)
        }

        /// `sesame login --issuer … --client-id sesame-cli` plus `options`, in the background, and the
        /// authorization URL it printed.
        func startLogin(_ options: [String]) throws -> (BackgroundLogin, String) {
            let login = try BackgroundLogin(
                ["login", "--issuer", server.base.absoluteString, "--client-id", "sesame-cli"] + options,
                environment: environment)
            return (login, try #require(login.line { $0.hasPrefix("http://") }))
        }

        /// Signs alice in on the provider's form at `url`; the redirect to the CLI's listener, not yet followed.
        func signInOnForm(_ url: String) throws -> URLComponents {
            let components = try #require(URLComponents(string: url))
            let browser = TestBrowser(port: server.base.port ?? 0)
            let page = try browser.get(components.path + "?" + (components.percentEncodedQuery ?? ""))
            let signedIn = try browser.post(
                "/authorize",
                form: page.hiddenFields() + [("email", "alice@example.com"), ("password", "correct-horse")])
            return try #require(signedIn.location.flatMap { URLComponents(string: $0) })
        }

        /// `login --issuer --no-browser` plus `options`, completed through the form.
        func signIn(_ options: [String]) throws {
            let (login, url) = try startLogin(["--no-browser"] + options)
            let callback = try signInOnForm(url)
            _ = try TestBrowser(port: callback.port ?? 0).get(
                callback.path + "?" + (callback.percentEncodedQuery ?? ""))
            let (status, rest) = login.finish()
            #expect(status == 0, "\(rest)")
        }
    }

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static let chromium =
        FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium")
        && FileManager.default.isExecutableFile(atPath: "/usr/bin/chromedriver")
        || ProcessInfo.processInfo.environment["SESAME_REQUIRE_INTEROP"] == "1"

    /// `sesame userinfo` and `--json` show alice, with her `sub`.
    static func expectUserInfo(_ environment: [String: String]) throws {
        let userinfo = try CLIRunner.run(["userinfo"], environment: environment)
        #expect(userinfo.status == 0 && userinfo.stdout.contains("email:"), "\(userinfo.stderr)")
        #expect(userinfo.stdout.contains("alice@example.com") && userinfo.stdout.contains("sub:"))
        let json = try CLIRunner.run(["userinfo", "--json"], environment: environment)
        let claims = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        #expect(claims?["email"] as? String == "alice@example.com" && claims?["sub"] is String)
    }

    /// The session commands on the profile after a sign-in, then logout.
    static func useAndSignOut(_ environment: [String: String]) throws {
        let token = try CLIRunner.run(["token"], environment: environment)
        #expect(token.status == 0 && token.stdout.split(separator: ".").count == 3)
        let info = try CLIRunner.run(["request", "/userinfo"], environment: environment)
        #expect(info.status == 0 && info.stdout.contains("alice@example.com"), "\(info.stderr)")
        try Self.expectUserInfo(environment)
        let status = try CLIRunner.run(["status", "--json"], environment: environment)
        #expect(status.stdout.contains("\"kind\":\"oidc\"") && !status.stdout.contains("eyJ"))
        let refreshed = try CLIRunner.run(["token", "--force-refresh"], environment: environment)
        #expect(refreshed.status == 0 && refreshed.stdout != token.stdout)
        let foreign = try CLIRunner.run(["request", "http://127.0.0.2:9/x"], environment: environment)
        #expect(foreign.status == 2)
        let logout = try CLIRunner.run(["logout", "--end-session", "--no-browser"], environment: environment)
        #expect(
            logout.status == 0 && logout.stdout.contains("/end-session?") && logout.stdout.contains("client_id="))
        #expect(!logout.stdout.contains("id_token_hint=") && !logout.stdout.contains("eyJ"), "no ID token printed")
        #expect(!logout.stderr.contains("warning"), "\(logout.stderr)")
        #expect(try CLIRunner.run(["token"], environment: environment).status == 3)
    }

    @Test("login --issuer --no-browser: the printed URL, signed in by a user agent posting the real form")
    func noBrowserLogin() throws {
        let workspace = try Workspace()
        defer { workspace.stop() }
        let (login, url) = try workspace.startLogin(["--no-browser"])
        let callback = try workspace.signInOnForm(url)
        // A request that is no authorization response is refused by the CLI's listener, and it keeps waiting.
        let stray = try TestBrowser(port: callback.port ?? 0).get(callback.path + "?hello=1")
        #expect(stray.status == 400)
        let landing = try TestBrowser(port: callback.port ?? 0).get(
            callback.path + "?" + (callback.percentEncodedQuery ?? ""))
        #expect(landing.status == 200 && landing.body.contains("close this tab"))
        let (status, rest) = login.finish()
        #expect(status == 0, "\(rest)")
        #expect(rest.contains("signed in as alice@example.com"))
        try Self.useAndSignOut(workspace.environment)
    }

    @Test(
        "login --issuer with 200 half-open connections on its listener (issue 20 #5): the real redirect still completes the login"
    )
    func floodedListener() throws {
        let workspace = try Workspace()
        defer { workspace.stop() }
        let (login, url) = try workspace.startLogin(["--no-browser"])
        let callback = try workspace.signInOnForm(url)
        let port = callback.port ?? 0
        let squatters = try (0..<200).map { _ -> RawClient in
            let client = try RawClient(port: port)
            client.send("GET /callback?state=x HTTP/1.1\r\n")
            return client
        }
        let landing = try TestBrowser(port: port).get(callback.path + "?" + (callback.percentEncodedQuery ?? ""))
        #expect(landing.status == 200 && landing.body.contains("close this tab"))
        let (status, rest) = login.finish()
        #expect(status == 0 && rest.contains("signed in as alice@example.com"), "\(rest)")
        withExtendedLifetime(squatters) {}
    }

    @Test(
        "login --issuer: a callback with the wrong state ends the login at once (exit 1), nothing stored",
        .timeLimit(.minutes(1)))
    func wrongStateEndsTheLogin() throws {
        let workspace = try Workspace()
        defer { workspace.stop() }
        let (login, url) = try workspace.startLogin(["--no-browser"])
        let callback = try workspace.signInOnForm(url)
        let forged = try TestBrowser(port: callback.port ?? 0).get(callback.path + "?code=stolen&state=forged")
        #expect(forged.status == 400 && forged.body.contains("state does not match"))
        let (status, rest) = login.finish()
        #expect(status == 1, "\(rest)")
        #expect(rest.contains("error: invalid_authorization_response: ") && rest.contains("state does not match"))
        #expect(!rest.contains("forged") && !rest.contains("stolen"), "nothing from the request is echoed")
        #expect(try CLIRunner.run(["status"], environment: workspace.environment).status == 3, "nothing stored")
    }

    @Test(
        "OIDC-10 RP-20: userinfo refuses a UserInfo answer about another subject (OIDC Core §5.3.2): exit 1, nothing printed"
    )
    func userInfoSubjectIsChecked() throws {
        let workspace = try Workspace(serving: ["--rp-test", "oidcc-client-test-userinfo-invalid-sub"])
        defer { workspace.stop() }
        try workspace.signIn([])
        let result = try CLIRunner.run(["userinfo"], environment: workspace.environment)
        #expect(result.status == 1 && result.stderr.hasPrefix("error: userinfo_rejected: "), "\(result.stderr)")
        #expect(result.stdout.isEmpty)
        let rest = try CLIRunner.run(["userinfo", "--profile", "nobody"], environment: workspace.environment)
        #expect(rest.status == 3, "no such profile: not signed in")
    }

    @Test("login --issuer completed in headless Chromium", .enabled(if: chromium), .timeLimit(.minutes(2)))
    func chromiumLogin() throws {
        let workspace = try Workspace()
        defer { workspace.stop() }
        let (login, url) = try workspace.startLogin(["--no-browser"])
        let artifacts = Self.root.appendingPathComponent(".build/test-artifacts")
        try FileManager.default.createDirectory(at: artifacts, withIntermediateDirectories: true)
        let python = ChildProcess()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        python.arguments = [
            "python3", Self.root.appendingPathComponent("Tests/Interop/complete_signin.py").path, url,
            "alice@example.com", "correct-horse", artifacts.appendingPathComponent("cli-callback.png").path,
        ]
        let output = Pipe()
        let errors = Pipe()
        python.standardOutput = .pipe(output)
        python.standardError = .pipe(errors)
        try python.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let problems = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        python.waitUntilExit()
        // (Chromium's own complaints say why when it fails: kept in the message.)
        #expect(
            python.terminationStatus == 0 && text.contains("close this tab"),
            "\(text.suffix(500)) \(problems.suffix(1500))")
        let (status, rest) = login.finish()
        #expect(status == 0, "\(rest)")
        try Self.useAndSignOut(workspace.environment)
    }

    @Test(
        "login --issuer --dpop: tokens bound to the profile's key, used by request; a lost or replaced key means signing in again",
        arguments: [["--dpop"], ["--dpop-alg", "EdDSA"], ["--dpop-alg", "rs256"]])
    func dpopLogin(option: [String]) async throws {
        let workspace = try Workspace(serving: ["--dpop-nonce"])
        defer { workspace.stop() }
        let (server, folder, environment) = (workspace.server, workspace.folder, workspace.environment)
        try workspace.signIn(option)
        let info = try CLIRunner.run(["request", "/userinfo"], environment: environment)
        #expect(info.status == 0 && info.stdout.contains("alice@example.com"), "\(info.stderr)")
        try Self.expectUserInfo(environment)
        let state = try CLIRunner.run(["status", "--json"], environment: environment)
        #expect(state.stdout.contains("\"dpop\":true"))
        let keyFile = folder.appendingPathComponent("credentials/default.dpop.jwk")
        let key = try JWK(json: try Data(contentsOf: keyFile))
        let algorithm = option.count == 2 ? option[1].uppercased() : "ES256"
        #expect(key.algorithm?.name.uppercased() == algorithm)
        #expect(state.stdout.contains("\"dpopKeyThumbprint\":\"\(key.thumbprint)\""), "\(state.stdout)")
        #expect(try CLIRunner.run(["token", "--force-refresh"], environment: environment).status == 0)
        let mode = try FileManager.default.attributesOfItem(atPath: keyFile.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        // Another key in its place: refused before any request (a refresh would revoke the grant), tokens kept.
        let other = try JWK.generate(for: .es256)
        try FileManager.default.removeItem(at: keyFile)
        #expect(
            FileManager.default.createFile(
                atPath: keyFile.path, contents: Data(other.jsonValue(includingPrivate: true).jsonBytes),
                attributes: [.posixPermissions: 0o600]))
        let before = try await server.counters()["refreshes"] as? Int
        let replaced = try CLIRunner.run(["token", "--force-refresh"], environment: environment)
        #expect(replaced.status == 3 && replaced.stderr.contains("dpop_key_mismatch"), "\(replaced.stderr)")
        #expect(replaced.stderr.contains("sesame login --issuer"), "the way back is named")
        #expect(try await server.counters()["refreshes"] as? Int == before, "no refresh was attempted")
        // The session ended there: the unusable credentials are gone, and logout still cleans up.
        let after = try CLIRunner.run(["request", "/userinfo"], environment: environment)
        #expect(after.status == 3 && after.stderr.contains("not_signed_in"), "\(after.stderr)")
        #expect(try CLIRunner.run(["logout"], environment: environment).status == 0)
    }

    @Test(
        "a re-login with --dpop keeps the profile's key; another --dpop-alg needs a logout first; without --dpop it goes"
    )
    func dpopKeyAcrossSignIns() throws {
        let workspace = try Workspace()
        defer { workspace.stop() }
        let keyFile = workspace.folder.appendingPathComponent("credentials/default.dpop.jwk")
        try workspace.signIn(["--dpop"])
        let first = try JWK(json: try Data(contentsOf: keyFile))
        try workspace.signIn(["--dpop"])
        #expect(try JWK(json: try Data(contentsOf: keyFile)).thumbprint == first.thumbprint, "the same key")
        // Another algorithm would replace the key before the sign-in succeeded: refused, the session untouched.
        let other = try CLIRunner.run(
            [
                "login", "--issuer", workspace.server.base.absoluteString, "--client-id", "sesame-cli", "--no-browser",
                "--dpop-alg", "EdDSA",
            ], environment: workspace.environment)
        #expect(other.status == 2 && other.stderr.contains("log out first"), "\(other.stderr)")
        #expect(try JWK(json: try Data(contentsOf: keyFile)).thumbprint == first.thumbprint)
        #expect(try CLIRunner.run(["token"], environment: workspace.environment).status == 0)
        #expect(try CLIRunner.run(["logout"], environment: workspace.environment).status == 0)
        try workspace.signIn(["--dpop-alg", "EdDSA"])
        let second = try JWK(json: try Data(contentsOf: keyFile))
        #expect(second.thumbprint != first.thumbprint && second.algorithm?.name == "EdDSA")
        let status = try CLIRunner.run(["status", "--json"], environment: workspace.environment)
        #expect(status.stdout.contains("\"dpopKeyThumbprint\":\"\(second.thumbprint)\""), "\(status.stdout)")
        try workspace.signIn([])
        #expect(!FileManager.default.fileExists(atPath: keyFile.path), "a Bearer sign-in removes the key")
        let bearer = try CLIRunner.run(["status", "--json"], environment: workspace.environment)
        #expect(bearer.stdout.contains("\"dpop\":false"))
        // A corrupt profile is cleared by logout, its key with it (nothing of the session is left behind).
        try workspace.signIn(["--dpop"])
        #expect(FileManager.default.fileExists(atPath: keyFile.path))
        let settings = workspace.folder.appendingPathComponent("profiles/default.json")
        try Data("{broken".utf8).write(to: settings)
        let logout = try CLIRunner.run(["logout"], environment: workspace.environment)
        #expect(logout.status == 0 && logout.stderr.contains("signed out"), "\(logout.stderr)")
        #expect(!FileManager.default.fileExists(atPath: keyFile.path), "the corrupt profile's DPoP key is deleted")
        #expect(
            !FileManager.default.fileExists(
                atPath: workspace.folder.appendingPathComponent("credentials/default.json").path))
    }

    @Test("a lost DPoP key: status and request say sign in again (exit 3), logout still works")
    func lostDPoPKey() async throws {
        let workspace = try Workspace()
        defer { workspace.stop() }
        let (server, folder, environment) = (workspace.server, workspace.folder, workspace.environment)
        try workspace.signIn(["--dpop"])
        let keyFile = folder.appendingPathComponent("credentials/default.dpop.jwk")
        // A key file others can read is an error to fix, not a lost key: the session is kept.
        chmod(keyFile.path, 0o644)
        let exposed = try CLIRunner.run(["request", "/userinfo"], environment: environment)
        #expect(exposed.status == 1 && exposed.stderr.contains("dpop_key_unreadable"), "\(exposed.stderr)")
        chmod(keyFile.path, 0o600)
        #expect(try CLIRunner.run(["request", "/userinfo"], environment: environment).status == 0)
        try FileManager.default.removeItem(at: keyFile)
        let status = try CLIRunner.run(["status"], environment: environment)
        #expect(status.status == 3 && status.stderr.contains("dpop_key_mismatch"), "\(status.stderr)")
        let logout = try CLIRunner.run(["logout"], environment: environment)
        #expect(logout.status == 0, "\(logout.stderr)")
        #expect(try CLIRunner.run(["status"], environment: environment).status == 3)
        let rest = try CLIRunner.run(
            ["login", "--rest", server.base.absoluteString, "--email", "a@example.com", "--dpop"],
            environment: environment)
        #expect(rest.status == 2 && rest.stderr.contains("DPoP needs --issuer"), "\(rest.stderr)")
    }

    @Test("login --issuer --device: the code on stderr, approved on the device page")
    func deviceLogin() throws {
        let workspace = try Workspace()
        defer { workspace.stop() }
        let (server, environment) = (workspace.server, workspace.environment)
        let login = try BackgroundLogin(
            ["login", "--issuer", server.base.absoluteString, "--client-id", "sesame-cli", "--device"],
            environment: environment)
        let code = try #require(login.line { $0.count == 9 && $0.dropFirst(4).first == "-" })
        try Self.approveDevice(code, at: server.base)
        let (status, rest) = login.finish()
        #expect(status == 0, "\(rest)")
        #expect(try CLIRunner.run(["request", "/userinfo"], environment: environment).stdout.contains("alice"))
    }

    @Test(
        "login --issuer refuses a bad redirect URI, a missing client ID, --device with --no-browser and a --dpop-alg other than ES256, EdDSA or RS256, before any network call"
    )
    func usageErrors() throws {
        let folder = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let environment = ["SESAME_HOME": folder.path, "SESAME_STORE": "file"]
        for arguments in [
            ["login", "--issuer", "http://127.0.0.1:9"],
            ["login", "--issuer", "http://127.0.0.1:9", "--client-id", "x", "--redirect-uri", "http://localhost:9/cb"],
            ["login", "--issuer", "http://127.0.0.1:9", "--client-id", "x", "--device", "--no-browser"],
            ["login", "--issuer", "not a url", "--client-id", "x"],
        ] {
            let result = try CLIRunner.run(arguments, environment: environment)
            #expect(result.status == 2, "\(arguments): \(result.stderr)")
        }
        let algorithm = try CLIRunner.run(
            ["login", "--issuer", "http://127.0.0.1:9", "--client-id", "c", "--dpop-alg", "HS256"],
            environment: environment)
        #expect(algorithm.status == 2 && algorithm.stderr.contains("--dpop-alg takes"), "\(algorithm.stderr)")
    }
}
