import Foundation
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `sesame serve`, run as a user runs it: the issuer URL on stdout, requests served, Ctrl-C stops it cleanly.
@Suite struct ServeCommandTests {
    @Test("serve prints its URL, serves the REST contract, logs without secrets, and stops on SIGINT with exit 0")
    func serveLifecycle() async throws {
        let logFile = FileManager.default.temporaryDirectory.appendingPathComponent("serve-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: logFile) }
        let server = try ServeProcess(["--user", "ann@example.com:Secret-Horse-42"], log: logFile)
        let base = server.base
        #expect(base.absoluteString.hasPrefix("http://127.0.0.1:"))

        var login = URLRequest(url: base.appendingPathComponent("login"))
        login.httpMethod = "POST"
        login.setValue("application/json", forHTTPHeaderField: "Content-Type")
        login.httpBody = Data(#"{"email":"ann@example.com","password":"Secret-Horse-42"}"#.utf8)
        let (body, response) = try await URLSession.shared.data(for: login)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        let token = try #require(
            (try JSONSerialization.jsonObject(with: body) as? [String: Any])?["accessToken"] as? String)

        #expect(server.interrupt() == 0)
        let log = try String(contentsOf: logFile, encoding: .utf8)
        #expect(log.contains("POST /login 200 "))
        #expect(log.contains("sesame serve: stopped"))
        #expect(!log.contains("Secret-Horse-42") && !log.contains(token))
    }

    @Test("serve --help documents the dev endpoints and the fault grammar; bad options are usage errors")
    func helpAndUsage() throws {
        let help = try CLIRunner.run(["serve", "--help"])
        #expect(help.status == 0 && help.stdout.contains("/_dev/counters") && help.stdout.contains("FAULT SPEC"))
        for arguments in [
            ["serve", "--faults", "/me:explode"], ["serve", "--signing-alg", "HS256"], ["serve", "--port", "99999"],
        ] {
            let result = try CLIRunner.run(arguments)
            #expect(result.status == 2 && result.stderr.hasPrefix("error: usage: "), "\(arguments)")
        }
    }
}

extension ServeCommandTests {
    @Test("--config: a mistake is a usage error naming the member, never echoing a password; a missing file is io")
    func configFile() throws {
        let folder = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("dev-idp.json")
        try Data(#"{"users": [{"email": "a@example.com", "password": "Secret-Horse-42", "role": "x"}]}"#.utf8)
            .write(to: file)
        let bad = try CLIRunner.run(["serve", "--config", file.path])
        #expect(bad.status == 2 && bad.stderr.contains("users[0].role: unknown member"), "\(bad.stderr)")
        #expect(!bad.stderr.contains("Secret-Horse-42"))
        let missing = try CLIRunner.run(["serve", "--config", folder.appendingPathComponent("none.json").path])
        #expect(missing.status == 1 && missing.stderr.contains("error: io: "), "\(missing.stderr)")
    }

    @Test("--users-file seeds users without passwords in the process list; a bad line echoes nothing of itself")
    func usersFile() async throws {
        let folder = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("users.txt")
        try Data("# dev users\nalice@example.com:correct-horse\n\n".utf8).write(to: file)
        let server = try ServeProcess(["--users-file", file.path])
        let login = try await HTTPTestClient(base: server.base).send(
            "POST", "/login", json: ["email": "alice@example.com", "password": "correct-horse"])
        #expect(login.status == 200)
        #expect(!server.process.arguments.joined(separator: " ").contains("correct-horse"))
        try Data("secret-without-colon\n".utf8).write(to: file)
        let bad = try CLIRunner.run(["serve", "--port", "0", "--users-file", file.path])
        #expect(bad.status == 2 && !bad.stderr.contains("secret-without-colon"), "\(bad.stderr)")
    }
}
