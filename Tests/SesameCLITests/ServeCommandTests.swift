import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `sesame serve`, run as a user runs it: the issuer URL on stdout, requests served, Ctrl-C stops it cleanly.
@Suite struct ServeCommandTests {
    @Test("serve prints its URL, serves the REST contract, logs without secrets, and stops on SIGINT with exit 0")
    func serveLifecycle() async throws {
        let process = Process()
        process.executableURL = CLIRunner.binary
        process.arguments = [
            "serve", "--port", "0", "--user", "ann@example.com:Secret-Horse-42", "--password-iterations", "1000",
        ]
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        var line = ""
        while !line.hasSuffix("\n") {
            let byte = output.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty { break }
            line += String(decoding: byte, as: UTF8.self)
        }
        let base = try #require(URL(string: line.trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(base.absoluteString.hasPrefix("http://127.0.0.1:"))

        var login = URLRequest(url: base.appendingPathComponent("login"))
        login.httpMethod = "POST"
        login.setValue("application/json", forHTTPHeaderField: "Content-Type")
        login.httpBody = Data(#"{"email":"ann@example.com","password":"Secret-Horse-42"}"#.utf8)
        let (body, response) = try await URLSession.shared.data(for: login)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        let token = try #require(
            (try JSONSerialization.jsonObject(with: body) as? [String: Any])?["accessToken"] as? String)

        process.interrupt()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let log = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
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
