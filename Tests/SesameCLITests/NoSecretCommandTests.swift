import Foundation
import SesameJOSE
import SesameTestSupport
import Testing

/// Every command, with `--verbose` and with and without `--json`, against `sesame serve` with its request log on:
/// nothing but `sesame token`'s stdout may show a token, a code, a password or a private key.
@Suite struct NoSecretCommandTests {
    /// Everything secret the profile's files hold now: tokens, the device secret, the DPoP private key.
    static func storedSecrets(_ folder: URL) -> [String] {
        var found: [String] = []
        let credentials = folder.appendingPathComponent("credentials")
        for name in (try? FileManager.default.contentsOfDirectory(atPath: credentials.path)) ?? [] {
            guard let data = FileManager.default.contents(atPath: credentials.appendingPathComponent(name).path),
                let object = try? JOSEValue.parse(data).objectValue
            else { continue }
            for key in ["accessToken", "refreshToken", "idToken", "deviceSecret", "d", "p", "q"] {
                if let value = object[key]?.stringValue, value.count >= 8 { found.append(value) }
            }
        }
        return found
    }

    @Test(
        "No token, code, password or private key in any command's output (--verbose, text and --json), the login's messages or the server's log; only sesame token prints a token"
    )
    func everyCommandWithDiagnostics() async throws {
        let workspace = try OIDCLoginCommandTests.Workspace(serving: ["--dpop-nonce"], logging: true)
        defer { workspace.stop() }
        let (server, folder, environment) = (workspace.server, workspace.folder, workspace.environment)
        var outputs: [(String, String)] = []
        var secrets = ["correct-horse", "pw-rest-\(UUID().uuidString.prefix(8))"]
        func run(_ arguments: [String], stdin: String? = nil, tokenOnStdout: Bool = false) throws -> CLIResult {
            let result = try CLIRunner.run(arguments, stdin: stdin, environment: environment)
            if !tokenOnStdout { outputs.append((arguments.joined(separator: " ") + " (stdout)", result.stdout)) }
            outputs.append((arguments.joined(separator: " ") + " (stderr)", result.stderr))
            secrets += Self.storedSecrets(folder)
            return result
        }
        // An OIDC sign-in with DPoP, through the form, its messages kept; the code it was given is a secret.
        let (login, url) = try workspace.startLogin(["--no-browser", "--dpop", "--verbose"])
        let callback = try workspace.signInOnForm(url)
        let code = try #require(callback.queryItems?.first { $0.name == "code" }?.value)
        secrets.append(code)
        _ = try TestBrowser(port: callback.port ?? 0).get(callback.path + "?" + (callback.percentEncodedQuery ?? ""))
        let (status, rest) = login.finish()
        #expect(status == 0, "\(rest)")
        outputs.append(("login --issuer (stderr)", url + "\n" + rest))
        secrets += Self.storedSecrets(folder)
        for command in [
            ["status"], ["status", "--json"], ["userinfo"], ["userinfo", "--json"], ["request", "/userinfo"],
        ] {
            let result = try run(command + ["--verbose"])
            #expect(result.status == 0, "\(command): \(result.stderr)")
        }
        let token = try run(["token", "--force-refresh", "--verbose"], tokenOnStdout: true)
        #expect(token.status == 0 && token.stdout.split(separator: ".").count == 3)
        secrets.append(token.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        _ = try run(["request", "/userinfo", "--verbose"])
        // A refused request, a usage error and a foreign origin: error paths print too.
        _ = try run(["request", "http://127.0.0.2:9/x", "--verbose"])
        _ = try run(["request", "/no-such-path", "--verbose"])
        let logout = try run(["logout", "--end-session", "--no-browser", "--verbose"])
        #expect(logout.status == 0, "\(logout.stderr)")
        // The REST side: register and sign in (passwords on stdin), a wrong password, then out again.
        let base = server.base.absoluteString
        let rest1 = try run(
            ["register", "--rest", base, "--email", "kai@example.com", "--verbose"], stdin: secrets[1] + "\n")
        #expect(rest1.status == 0, "\(rest1.stderr)")
        _ = try run(
            ["login", "--rest", base, "--email", "kai@example.com", "--verbose"], stdin: "wrong-\(secrets[1])\n")
        secrets.append("wrong-\(secrets[1])")
        let rest2 = try run(
            ["login", "--rest", base, "--email", "kai@example.com", "--verbose"], stdin: secrets[1] + "\n")
        #expect(rest2.status == 0, "\(rest2.stderr)")
        _ = try run(["status", "--verbose"])
        _ = try run(["status", "--verbose", "--json"])
        _ = try run(["request", "/me", "--verbose"])
        _ = try run(["token", "--verbose"], tokenOnStdout: true)
        _ = try run(["logout", "--verbose"])
        let log = try String(contentsOf: workspace.log, encoding: .utf8)
        #expect(log.split(separator: "\n").count >= 10, "the server logged its requests")
        outputs.append(("sesame serve's log", log))
        let unique = Set(secrets.filter { $0.count >= 8 })
        #expect(unique.count >= 8, "tokens, a code, passwords and a key were collected: \(unique.count)")
        for (what, text) in outputs {
            for secret in unique {
                #expect(!text.contains(secret), "\(what) shows a secret of \(secret.count) characters")
            }
            // Any JOSE header ({"alg"…, {"typ"… as DPoP proofs begin, {"kid"…), not only {"alg".
            #expect(
                text.range(of: #"eyJ[A-Za-z0-9_-]{12,}"#, options: .regularExpression) == nil,
                "\(what) shows something JWT-like")
        }
    }

    @Test(
        "No token, client secret, private key or client assertion in the device flow's or a service account's output (--verbose, text and --json) or the server's log"
    )
    func deviceAndServiceAccounts() throws {
        let secret = "svc-secret-\(UUID().uuidString)"
        let folder = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (key, keyFile, config) = try ServiceAccountCommandTests.serviceAccounts(
            in: folder, secret: secret, nightlyScope: "reports.read")
        let privateJSON = try JOSEValue.parse(Data(key.jsonValue(includingPrivate: true).jsonBytes)).objectValue
        let workspace = try OIDCLoginCommandTests.Workspace(serving: ["--config", config.path], logging: true)
        defer { workspace.stop() }
        let (server, environment) = (workspace.server, workspace.environment)
        var outputs: [(String, String)] = []
        var secrets = [secret, "correct-horse", privateJSON?["d"]?.stringValue ?? ""]
        func run(_ arguments: [String], stdin: String? = nil, tokenOnStdout: Bool = false) throws -> CLIResult {
            let result = try CLIRunner.run(arguments, stdin: stdin, environment: environment)
            if !tokenOnStdout { outputs.append((arguments.joined(separator: " ") + " (stdout)", result.stdout)) }
            outputs.append((arguments.joined(separator: " ") + " (stderr)", result.stderr))
            secrets += Self.storedSecrets(workspace.folder)
            return result
        }
        // The device flow, approved on the device page; every line it printed is kept.
        let login = try OIDCLoginCommandTests.BackgroundLogin(
            ["login", "--issuer", server.base.absoluteString, "--client-id", "sesame-cli", "--device", "--verbose"],
            environment: environment)
        var shown: [String] = []
        let code = try #require(
            login.line { line in
                shown.append(line)
                return line.count == 9 && line.dropFirst(4).first == "-"
            })
        try OIDCLoginCommandTests.approveDevice(code, at: server.base)
        let (status, rest) = login.finish()
        #expect(status == 0, "\(rest)")
        outputs.append(("login --device (stderr)", shown.joined(separator: "\n") + "\n" + rest))
        secrets += Self.storedSecrets(workspace.folder)
        for command in [["status"], ["status", "--json"], ["userinfo", "--json"]] {
            #expect(try run(command + ["--verbose"]).status == 0, "\(command)")
        }
        let token = try run(["token", "--force-refresh", "--verbose"], tokenOnStdout: true)
        secrets.append(token.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(try run(["logout", "--verbose"]).status == 0)
        // Service accounts: a private key (its assertions are JWTs) and a secret on standard input.
        let issuer = server.base.absoluteString
        let keyLogin = try run(
            ["login", "--client-credentials", "--issuer", issuer, "--client-id", "nightly", "--key", keyFile.path]
                + ["--verbose"])
        #expect(keyLogin.status == 0, "\(keyLogin.stderr)")
        let secretLogin = try run(
            ["login", "--client-credentials", "--issuer", issuer, "--client-id", "legacy", "--client-secret-stdin"]
                + ["--profile", "legacy", "--verbose"], stdin: secret + "\n")
        #expect(secretLogin.status == 0, "\(secretLogin.stderr)")
        _ = try run(
            ["login", "--client-credentials", "--issuer", issuer, "--client-id", "legacy", "--client-secret-stdin"]
                + ["--profile", "wrong", "--verbose"], stdin: "wrong-\(secret)\n")
        secrets.append("wrong-\(secret)")
        for profile in ["default", "legacy"] {
            for command in [["status"], ["status", "--json"], ["token", "--force-refresh"], ["logout"]] {
                let result = try run(
                    command + ["--profile", profile, "--verbose"], tokenOnStdout: command.first == "token")
                #expect(result.status == 0, "\(command) \(profile): \(result.stderr)")
                if command.first == "token" { secrets.append(result.stdout.trimmingCharacters(in: .whitespaces)) }
            }
        }
        let log = try String(contentsOf: workspace.log, encoding: .utf8)
        outputs.append(("sesame serve's log", log))
        let unique = Set(secrets.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.filter { $0.count >= 8 })
        #expect(unique.count >= 7, "tokens, secrets and a key were collected: \(unique.count)")
        for (what, text) in outputs {
            for value in unique {
                #expect(!text.contains(value), "\(what) shows a secret of \(value.count) characters")
            }
            // Any JOSE header ({"alg"…, {"typ"… as DPoP proofs begin, {"kid"…), not only {"alg".
            #expect(
                text.range(of: #"eyJ[A-Za-z0-9_-]{12,}"#, options: .regularExpression) == nil,
                "\(what) shows something JWT-like")
        }
    }
}
