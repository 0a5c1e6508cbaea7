import Foundation
import SesameLoopback
import SesameTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a new user met, each as a test over the real dev server: safe profiles, honest logout, clear errors,
/// the store remembered, credentials only to the profile's origins.
@Suite struct DailyUseTests {
    let home: URL
    var environment: [String: String] { ["SESAME_HOME": home.path, "SESAME_STORE": "file"] }

    init() throws { home = try CLIRunner.temporaryDirectory() }

    func sesame(_ arguments: [String], stdin: String? = nil, extra: [String: String] = [:]) throws -> CLIResult {
        try CLIRunner.run(arguments, stdin: stdin, environment: environment.merging(extra) { _, new in new })
    }

    func signIn(_ server: ServeProcess, _ email: String = "new@example.com") throws {
        let result = try sesame(
            ["register", "--rest", server.base.absoluteString, "--email", email], stdin: "pw-correct-horse\n")
        #expect(result.status == 0, "\(result.stderr)")
    }

    func mode(_ path: String) -> Int? {
        try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
    }

    @Test(
        "request PATH uses the profile's server; a foreign URL is exit 2 and receives nothing; -i; 5xx and 429 are exit 4"
    )
    func requests() async throws {
        defer { try? FileManager.default.removeItem(at: home) }
        let server = try ServeProcess()
        try signIn(server)
        // A password piped with a Windows line end is the same password ("\r\n" is one Swift Character).
        let crlf = try sesame(
            ["login", "--rest", server.base.absoluteString, "--email", "new@example.com"], stdin: "pw-correct-horse\r\n"
        )
        #expect(crlf.status == 0, "\(crlf.stderr)")
        let me = try sesame(["request", "/me"])
        #expect(me.status == 0 && me.stdout.contains("new@example.com"), "\(me.stderr)")
        #expect(try sesame(["request", "me"]).stdout.contains("new@example.com"))
        let foreign = try RecordingServer { _ in HTTPServerResponse(status: 401) }
        defer { foreign.stop() }
        let refused = try sesame(["request", foreign.base.absoluteString + "/steal"])
        #expect(refused.status == 2 && refused.stderr.contains("refusing to send"), "\(refused.stderr)")
        #expect(foreign.requests.isEmpty)
        let included = try sesame(["request", "-i", "/me"])
        #expect(
            included.stdout.hasPrefix("HTTP 200\n")
                && included.stdout.lowercased().contains("content-type: application/json"))
        _ = try await setFaults(server, "GET /me:status=503")
        #expect(try sesame(["request", "/me"]).status == 4)
        _ = try await setFaults(server, "GET /me:status=429")
        #expect(try sesame(["request", "/me"]).status == 4)
        _ = try await setFaults(server, "")
        #expect(try sesame(["request", "/nowhere"]).status == 1)
    }

    func setFaults(_ server: ServeProcess, _ spec: String) async throws -> Int {
        var request = URLRequest(url: server.base.appendingPathComponent("_dev/faults"))
        request.httpMethod = "POST"
        request.httpBody = try JSONSerialization.data(withJSONObject: ["spec": spec])
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        let (_, response) = try await URLSession(configuration: .ephemeral).data(for: request)
        return (response as? HTTPURLResponse)?.statusCode ?? 0
    }

    @Test("Profile names are checked before anything happens: nothing is written outside SESAME_HOME")
    func profileNames() throws {
        defer { try? FileManager.default.removeItem(at: home) }
        let server = try ServeProcess()
        let outside = home.deletingLastPathComponent().appendingPathComponent("x.json")
        for name in ["../../x", "../x", ".hidden", "a/b", "", String(repeating: "p", count: 65)] {
            for command in [
                ["login", "--rest", server.base.absoluteString, "--email", "a@example.com"], ["logout"], ["status"],
                ["token"],
            ] {
                let result = try sesame(command + ["--profile", name], stdin: "pw-correct-horse\n")
                #expect(result.status == 2 && result.stderr.contains("not a profile name"), "\(command) \(name)")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: outside.path))
        #expect(try FileManager.default.contentsOfDirectory(atPath: home.path).isEmpty, "nothing was written at all")
    }

    @Test("logout with an expired access token still revokes; offline it warns; twice is fine")
    func honestLogout() async throws {
        defer { try? FileManager.default.removeItem(at: home) }
        let server = try ServeProcess(["--access-token-ttl", "1"])
        try signIn(server)
        let stored = try Data(contentsOf: home.appendingPathComponent("credentials/default.json"))
        let refreshToken = try #require(
            (try JSONSerialization.jsonObject(with: stored) as? [String: Any])?["refreshToken"] as? String)
        try await Task.sleep(for: .milliseconds(1500))  // the server's clock is real: the access token expires
        let logout = try sesame(["logout"])
        #expect(logout.status == 0 && !logout.stderr.contains("warning"), "\(logout.stderr)")
        var refresh = URLRequest(url: server.base.appendingPathComponent("refresh-token"))
        refresh.httpMethod = "POST"
        refresh.setValue("application/json", forHTTPHeaderField: "Content-Type")
        refresh.httpBody = Data(#"{"refreshToken":"\#(refreshToken)"}"#.utf8)
        let (_, response) = try await URLSession(configuration: .ephemeral).data(for: refresh)
        #expect((response as? HTTPURLResponse)?.statusCode == 401, "the refresh token must be dead after logout")
        let again = try sesame(["logout"])
        #expect(again.status == 0 && again.stderr.contains("nothing to do"))

        try signIn(server, "off@example.com")
        server.interrupt()
        let offline = try sesame(["logout"])
        #expect(
            offline.status == 0 && offline.stderr.contains("warning: the server did not confirm"), "\(offline.stderr)")
        #expect(!FileManager.default.fileExists(atPath: home.appendingPathComponent("credentials/default.json").path))
        #expect(try sesame(["status"]).status == 3)
    }

    @Test("Corrupt files: the path and where it went, never a DecodingError; logout always clears the profile")
    func corruptFiles() throws {
        defer { try? FileManager.default.removeItem(at: home) }
        let server = try ServeProcess()
        try signIn(server)
        let settings = home.appendingPathComponent("profiles/default.json")
        try Data("{broken".utf8).write(to: settings)
        let status = try sesame(["status"])
        #expect(status.status == 1 && status.stderr.contains(settings.path) && status.stderr.contains("moved to"))
        #expect(!status.stderr.contains("DecodingError") && !status.stderr.contains("dataCorrupted"))
        try Data("{broken".utf8).write(to: settings)
        #expect(try sesame(["logout"]).status == 0)
        #expect(try sesame(["status"]).status == 3)

        try signIn(server, "corrupt@example.com")
        let credentials = home.appendingPathComponent("credentials/default.json")
        try Data("not json".utf8).write(to: credentials)
        let unreadable = try sesame(["token"])
        #expect(
            unreadable.status == 1 && unreadable.stderr.contains(credentials.path)
                && unreadable.stderr.contains("moved to"))
        #expect(try sesame(["logout"]).status == 0)
    }

    @Test("The store is chosen at login and remembered; memory is refused; a missing keyring fails before the server")
    func storeChoice() async throws {
        defer { try? FileManager.default.removeItem(at: home) }
        let server = try ServeProcess()
        try signIn(server)
        #expect(try sesame(["status"], extra: ["SESAME_STORE": "keyring"]).status == 0)  // the profile's store wins
        let conflict = try sesame(["status", "--store", "keyring"])
        #expect(conflict.status == 2 && conflict.stderr.contains("keeps its credentials in the file store"))
        let memory = try sesame(
            ["login", "--rest", server.base.absoluteString, "--email", "m@example.com", "--store", "memory"],
            stdin: "pw\n")
        #expect(memory.status == 2 && memory.stderr.contains("keeps nothing"))
        // Store kinds are checked when the command is built: a bad one is a usage error before the password is read.
        let unknown = try sesame(
            ["login", "--rest", server.base.absoluteString, "--email", "m@example.com"], stdin: "pw\n",
            extra: ["SESAME_STORE": "cloud"])
        #expect(unknown.status == 2 && unknown.stderr.contains("not 'cloud'"), "\(unknown.stderr)")
        #expect(try sesame(["token", "--store", "s3"]).status == 2)
        let noKeyring = try sesame(
            [
                "register", "--rest", server.base.absoluteString, "--email", "k@example.com", "--store", "keyring",
                "--profile", "k",
            ],
            stdin: "pw-correct-horse\n", extra: ["DBUS_SESSION_BUS_ADDRESS": ""])
        #expect(noKeyring.status == 1 && noKeyring.stderr.contains("no keyring answers"), "\(noKeyring.stderr)")
        let counters = try await server.counters()
        #expect(counters["registrations"] as? Int == 1, "the server was never asked")
        let status = try sesame(["status"])
        #expect(status.stdout.contains("store:    file"))
        #expect(mode(home.appendingPathComponent("profiles/default.json").path) == 0o600)
        #expect(mode(home.appendingPathComponent("profiles").path) == 0o700)
    }

    @Test("The server's explanations reach the user; usage errors say what to type; mismatches show both values")
    func helpfulErrors() throws {
        defer { try? FileManager.default.removeItem(at: home) }
        let server = try ServeProcess()
        let short = try sesame(
            ["register", "--rest", server.base.absoluteString, "--email", "s@example.com"], stdin: "short\n")
        #expect(short.status == 1 && short.stderr.contains("at least 8 characters"), "\(short.stderr)")
        let bare = try sesame(["login", "--rest", "127.0.0.1:8080", "--email", "a@example.com"], stdin: "pw\n")
        #expect(bare.status == 2 && bare.stderr.contains("--rest takes an http(s) URL"), "\(bare.stderr)")
        try signIn(server)
        let token = try sesame(["token"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let jwks = server.base.appendingPathComponent("jwks").absoluteString
        let typed = try sesame(["jwt", "verify", "--jwks", jwks, token])
        #expect(typed.status == 1 && typed.stderr.contains("--typ at+jwt"), "\(typed.stderr)")
        let issuer = try sesame([
            "jwt", "verify", "--jwks", jwks, "--typ", "at+jwt", "--iss", "https://other.example", token,
        ])
        #expect(
            issuer.status == 1 && issuer.stderr.contains(server.base.absoluteString)
                && issuer.stderr.contains("https://other.example"), "\(issuer.stderr)")
        #expect(try sesame(["jwt", "verify", "--jwks", jwks, "--typ", "at+jwt", token]).status == 0)
    }

    @Test("--json is one compact object with integer expiresAt; status says the store and when it will refresh")
    func jsonAndStatus() async throws {
        defer { try? FileManager.default.removeItem(at: home) }
        let server = try ServeProcess(["--access-token-ttl", "1"])
        try signIn(server)
        for command in [["status", "--json"], ["token", "--json"]] {
            let output = try sesame(command).stdout
            #expect(output.split(separator: "\n").count == 1, "\(command): one line")
            let json = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
            #expect(json["expiresAt"] is Int, "\(command): expiresAt as integer Unix seconds")
        }
        try await Task.sleep(for: .milliseconds(1200))
        let status = try sesame(["status"])
        #expect(status.stdout.contains("(expired — will refresh)") && status.stdout.contains("store:    file"))
        #expect(!status.stdout.contains("\u{1B}["), "no colour codes when not a terminal")
    }

    @Test("A profile file others can write, or a symlinked one, is refused before any credential goes anywhere")
    func tamperedProfile() throws {
        defer { try? FileManager.default.removeItem(at: home) }
        let server = try ServeProcess()
        try signIn(server)
        let profiles = home.appendingPathComponent("profiles")
        chmod(profiles.path, 0o777)
        let open = try sesame(["request", "/me"])
        #expect(open.status == 1 && open.stderr.contains("insecure_profile"), "\(open.stderr)")
        chmod(profiles.path, 0o700)
        let file = profiles.appendingPathComponent("default.json")
        chmod(file.path, 0o666)
        #expect(try sesame(["token"]).stderr.contains("insecure_profile"))
        chmod(file.path, 0o600)
        #expect(try sesame(["request", "/me"]).status == 0)
    }

    @Test("serve's startup failures say what failed: a port in use, a database that cannot be opened")
    func serveStartupErrors() throws {
        defer { try? FileManager.default.removeItem(at: home) }
        let running = try ServeProcess()
        let port = try #require(running.base.port)
        let taken = try sesame(["serve", "--port", String(port)])
        #expect(taken.status == 1 && taken.stderr.contains("Address already in use") && taken.stderr.contains("--port"))
        let database = try sesame(["serve", "--port", "0", "--db", "/nonexistent/folder/dev.sqlite"])
        #expect(database.status == 1 && database.stderr.contains("/nonexistent/folder/dev.sqlite"))
        #expect(try sesame(["help", "help"]).status == 0)
    }

    @Test("jwk generate --output writes 0600, never through a symlink")
    func privateKeyFile() throws {
        defer { try? FileManager.default.removeItem(at: home) }
        let key = home.appendingPathComponent("key.json")
        let result = try sesame(["jwk", "generate", "--output", key.path])
        #expect(result.status == 0 && result.stdout.isEmpty)
        #expect(mode(key.path) == 0o600)
        #expect(try String(contentsOf: key, encoding: .utf8).contains("\"d\""))
        // `> file` redirection: the shell creates the file 0644; the command makes it 0600 before writing.
        let redirected = home.appendingPathComponent("redirected.json")
        let shell = ChildProcess()
        shell.executableURL = URL(fileURLWithPath: "/bin/sh")
        shell.arguments = ["-c", "umask 022; '\(CLIRunner.binary.path)' jwk generate > '\(redirected.path)'"]
        try shell.run()
        shell.waitUntilExit()
        #expect(shell.terminationStatus == 0 && mode(redirected.path) == 0o600)
        // A symlink planted at the output path is replaced, never written through.
        let target = home.appendingPathComponent("planted.txt")
        try Data("planted".utf8).write(to: target)
        let link = home.appendingPathComponent("linked.json")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: target)
        #expect(try sesame(["jwk", "generate", "--output", link.path]).status == 0)
        #expect(try String(contentsOf: target, encoding: .utf8) == "planted")
        #expect(
            (try? FileManager.default.destinationOfSymbolicLink(atPath: link.path)) == nil && mode(link.path) == 0o600)
    }
}
