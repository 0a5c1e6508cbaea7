import Foundation
import SesameJOSE
import SesameLoopback
import Testing

/// `sesame jwt …`, `sesame jwk generate` and `sesame demo`, run as a user would run them.
@Suite final class JWTCommandTests {
    let directory: URL
    let keyPath: String
    let jwksPath: String

    deinit { try? FileManager.default.removeItem(at: directory) }

    init() throws {
        directory = try CLIRunner.temporaryDirectory()
        let privateKey = try CLIRunner.run(["jwk", "generate", "--alg", "ES256", "--kid", "cli-key"])
        keyPath = directory.appendingPathComponent("key.json").path
        try privateKey.stdout.write(toFile: keyPath, atomically: false, encoding: .utf8)
        let publicKey = try CLIRunner.run(["jwk", "generate", "--alg", "ES256", "--kid", "unused", "--public"])
        #expect(!publicKey.stdout.contains("\"d\""))
        // The JWKS holds the public half of key.json.
        let pub = try JSONSerialization.jsonObject(with: Data(privateKey.stdout.utf8)) as? [String: Any] ?? [:]
        let publicMembers = pub.filter { $0.key != "d" }
        let jwks = try JSONSerialization.data(withJSONObject: ["keys": [publicMembers]])
        jwksPath = directory.appendingPathComponent("jwks.json").path
        try jwks.write(to: URL(fileURLWithPath: jwksPath))
    }

    func sign(_ claims: String) throws -> String {
        let result = try CLIRunner.run(["jwt", "sign", "--key", keyPath, claims])
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("help and usage errors: exit 0 and exit 2")
    func helpAndUsage() throws {
        let help = try CLIRunner.run(["help"])
        #expect(help.status == 0 && help.stdout.contains("  jwt verify "))
        for arguments in [
            [], ["frobnicate"], ["jwt", "verify"], ["jwt", "decode", "--bogus"], ["jwt", "verify", "--jwks"],
        ] {
            let result = try CLIRunner.run(arguments)
            #expect(result.status == 2, "\(arguments)")
            #expect(result.stderr.hasPrefix("error: usage: "), "\(arguments): \(result.stderr)")
        }
    }

    @Test("sign → decode → verify with --iss, --aud, --nonce and a fixed --now")
    func roundTrip() throws {
        let token = try sign(
            #"{"iss":"https://id.example","sub":"alice","aud":"app","nonce":"n1","iat":1700000000,"exp":1700000600}"#)
        let decoded = try CLIRunner.run(["jwt", "decode", token])
        #expect(
            decoded.status == 0 && decoded.stdout.contains("\"kid\": \"cli-key\"")
                && decoded.stdout.contains("\"sub\": \"alice\""))

        let verified = try CLIRunner.run([
            "jwt", "verify", "--jwks", jwksPath, "--iss", "https://id.example", "--aud", "app", "--nonce", "n1",
            "--now", "1700000100", token,
        ])
        #expect(verified.status == 0, "\(verified.stderr)")
        let claims = try JSONSerialization.jsonObject(with: Data(verified.stdout.utf8)) as? [String: Any]
        #expect(claims?["sub"] as? String == "alice")
        #expect(verified.stderr.isEmpty)
    }

    @Test("Rejections: exit 1 and 'error: <code>: <message>' on stderr, nothing on stdout")
    func rejections() throws {
        let token = try sign(#"{"iss":"https://id.example","sub":"alice","aud":"app","exp":1700000600}"#)
        let cases: [([String], String)] = [
            (["--now", "1800000000"], "error: expired: "),
            (["--now", "1700000000", "--aud", "other"], "error: audience_mismatch: "),
            (["--now", "1700000000", "--iss", "https://evil.example"], "error: issuer_mismatch: "),
            (["--now", "1700000000", "--nonce", "x"], "error: nonce_mismatch: "),
            (["--now", "1700000000", "--alg", "RS256"], "error: algorithm_not_allowed: "),
        ]
        for (extra, prefix) in cases {
            let result = try CLIRunner.run(["jwt", "verify", "--jwks", jwksPath] + extra + [token])
            #expect(result.status == 1, "\(extra)")
            #expect(result.stderr.hasPrefix(prefix), "\(extra): \(result.stderr)")
            #expect(result.stdout.isEmpty)
        }
        let parts = token.split(separator: ".")
        let tampered = "\(parts[0]).\(parts[1])x.\(parts[2])"
        let bad = try CLIRunner.run(["jwt", "verify", "--jwks", jwksPath, "--now", "1700000000", tampered])
        #expect(bad.status == 1 && bad.stderr.hasPrefix("error: "))
        #expect(!bad.stderr.contains(String(parts[2])), "the signature must not be echoed")
    }

    @Test("jwk public turns the private key file into a JWKS that verifies its tokens")
    func publicSet() throws {
        let result = try CLIRunner.run(["jwk", "public", keyPath])
        #expect(result.status == 0 && !result.stdout.contains("\"d\"") && result.stdout.contains("cli-key"))
        let path = directory.appendingPathComponent("derived.json").path
        try result.stdout.write(toFile: path, atomically: false, encoding: .utf8)
        let token = try sign(#"{"sub":"dora","exp":1700000600}"#)
        let verified = try CLIRunner.run(["jwt", "verify", "--jwks", path, "--now", "1700000000", token])
        #expect(verified.status == 0 && verified.stdout.contains("dora"), "\(verified.stderr)")
    }

    @Test("The token may come from standard input")
    func standardInput() throws {
        let token = try sign(#"{"sub":"bob","exp":1700000600}"#)
        let result = try CLIRunner.run(
            ["jwt", "verify", "--jwks", jwksPath, "--now", "1700000000", "-"], stdin: token + "\n")
        #expect(result.status == 0 && result.stdout.contains("bob"), "\(result.stderr)")
        let decoded = try CLIRunner.run(["jwt", "decode"], stdin: token)
        #expect(decoded.status == 0 && decoded.stdout.contains("bob"))
    }

    @Test("The JWKS may come from an http URL (a real one-shot server on loopback)")
    func jwksFromURL() throws {
        let token = try sign(#"{"sub":"carol","exp":1700000600}"#)
        let server = ChildProcess()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        server.arguments = [
            "python3", "-c",
            """
            import http.server, socketserver, sys, os
            os.chdir(sys.argv[1])
            class Quiet(http.server.SimpleHTTPRequestHandler):
                def log_message(self, *args): pass
            s = socketserver.TCPServer(("127.0.0.1", 0), Quiet)
            print(s.server_address[1], flush=True)
            s.timeout = 30
            s.handle_request()
            """,
            directory.path,
        ]
        let output = Pipe()
        server.standardOutput = .pipe(output)
        try server.run()
        defer { server.terminate() }
        var portText = ""
        while !portText.hasSuffix("\n") {
            let byte = output.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty { break }
            portText += String(decoding: byte, as: UTF8.self)
        }
        let port = try #require(Int(portText.trimmingCharacters(in: .whitespacesAndNewlines)))
        let result = try CLIRunner.run([
            "jwt", "verify", "--jwks", "http://127.0.0.1:\(port)/jwks.json", "--now", "1700000000", token,
        ])
        #expect(result.status == 0 && result.stdout.contains("carol"), "\(result.stderr)")
        let refused = try CLIRunner.run(["jwt", "verify", "--jwks", "http://127.0.0.1:9/jwks.json", token])
        #expect(refused.status == 4 && refused.stderr.hasPrefix("error: network: "))
    }

    @Test("--jwks over plain http only on loopback: anyone on the path could swap the keys (no request is made)")
    func jwksOverPlainHTTPElsewhereIsRefused() throws {
        let token = try sign(#"{"sub":"carol"}"#)
        for url in [
            "http://keys.example.invalid/jwks.json", "http://127.0.0.1.evil.example/jwks.json",
            "http://localhost.evil.example/jwks.json", "http://10.0.0.1/jwks.json", "ftp://127.0.0.1/jwks.json",
            "http:///jwks.json",
        ] {
            let result = try CLIRunner.run(["jwt", "verify", "--jwks", url, token])
            #expect(result.status == 2 && result.stderr.hasPrefix("error: usage: "), "\(url): \(result.stderr)")
            #expect(!result.stderr.contains("network"), "\(url): nothing was fetched")
        }
    }

    @Test("sesame demo runs every step of the product and exits 0; no colour off a terminal; no whole secret shown")
    func demo() throws {
        let result = try CLIRunner.run(["demo"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("Demo complete"))
        #expect(!result.stdout.contains("✗ ") && !result.stdout.contains("\u{1B}["))
        #expect(result.stdout.contains("✓ the server demanded a nonce (use_dpop_nonce) and the SDK retried with it"))
        for step in ["PKCE", "JWKS", "50 concurrent", "Two processes", "network fails", "DPoP", "stolen", "Sign-out"] {
            #expect(result.stdout.contains(step), "\(step)")
        }
        // Secrets appear as a prefix and a length only: no JWT, no 43-character opaque token.
        #expect(result.stdout.range(of: #"eyJ[A-Za-z0-9_-]{12,}"#, options: .regularExpression) == nil)
        #expect(result.stdout.range(of: #"[A-Za-z0-9_-]{40,}"#, options: .regularExpression) == nil)
    }

    @Test(
        "sesame demo on a terminal (a pty from script(1)) is in colour, and never with NO_COLOR",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script")))
    func demoColour() throws {
        let command = "'\(CLIRunner.binary.path)' demo"
        let script = URL(fileURLWithPath: "/usr/bin/script")
        let coloured = try CLIRunner.run(
            executable: script, ["-qec", command, "/dev/null"], environment: ["NO_COLOR": ""])
        #expect(coloured.status == 0 && coloured.stdout.contains("\u{1B}[32m✓"), "\(coloured.stdout.suffix(300))")
        let plain = try CLIRunner.run(
            executable: script, ["-qec", command, "/dev/null"], environment: ["NO_COLOR": "1"])
        #expect(plain.status == 0 && plain.stdout.contains("Demo complete") && !plain.stdout.contains("\u{1B}["))
    }

    @Test(
        "sesame demo exits 1 naming the first step that failed, marked in the summary and in --json (a real fault: a descriptor limit of 40 leaves its server one connection, so the sign-in gets a 503)",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit")))
    func demoFailedStep() throws {
        let prlimit = URL(fileURLWithPath: "/usr/bin/prlimit")
        let result = try CLIRunner.run(executable: prlimit, ["--nofile=40", CLIRunner.binary.path, "demo"])
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        // Which step meets the limit first depends on timing; the one named is the one the summary marks.
        let named = try #require(result.stderr.firstMatch(of: /demo_failed: step (\d+) \((.+)\) failed: \S/))
        let marked = "✗ \(String(format: "%2d", Int(named.1) ?? 0)). \(named.2)"
        #expect(result.stdout.contains(marked), "\(marked) in \(result.stdout.suffix(400))")
        #expect(!result.stdout.contains("Demo complete") && result.stdout.contains("Summary"))
        let json = try CLIRunner.run(executable: prlimit, ["--nofile=40", CLIRunner.binary.path, "demo", "--json"])
        let objects = try json.stdout.split(separator: "\n").map { try JOSEValue.parse(Array($0.utf8)) }
        let failed = objects.filter { $0["ok"] == .bool(false) }
        #expect(json.status == 1 && !failed.isEmpty && failed.allSatisfy { $0["failure"]?.stringValue != nil })
        #expect(objects.last?["failed"] == .array(failed.compactMap { $0["step"] }), "\(json.stdout.suffix(300))")
    }

    @Test("sesame demo --second-process refuses any folder but the demo's own (a real profile's tokens stay home)")
    func demoSecondProcessRefused() throws {
        let folder = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let result = try CLIRunner.run(["demo", "--second-process", folder.path])
        #expect(result.status == 2, "\(result.stderr)")
        // Named like the demo's, but the credentials folder is a link to somewhere else.
        let lookalike = folder.appendingPathComponent("sesame-demo-x")
        try FileManager.default.createDirectory(at: lookalike, withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: lookalike.path)
        try FileManager.default.createSymbolicLink(
            at: lookalike.appendingPathComponent("credentials"), withDestinationURL: folder)
        #expect(try CLIRunner.run(["demo", "--second-process", lookalike.path]).status == 2)
    }

    @Test("sesame demo --step waits for Enter after each step")
    func demoSteps() throws {
        let result = try CLIRunner.run(["demo", "--step"], stdin: String(repeating: "\n", count: 11))
        #expect(result.status == 0)
        #expect(result.stdout.components(separatedBy: "(Enter for the next step)").count == 12)
    }

    @Test("sesame demo --json: one object per step, each held, with its wire and time, then a summary")
    func demoJSON() throws {
        let result = try CLIRunner.run(["demo", "--json"], environment: ["NO_COLOR": "1"])
        #expect(result.status == 0, "\(result.stderr)")
        let objects = try result.stdout.split(separator: "\n").map { try JOSEValue.parse(Data($0.utf8)) }
        let steps = objects.filter { $0["step"] != nil }
        #expect(steps.count == 11)
        #expect(steps.allSatisfy { $0["ok"] == true && $0["ms"]?.doubleValue != nil && $0["failure"] == .null })
        #expect(steps.map { $0["step"] } == (1...11).map { .integer(Int64($0)) })
        #expect(steps[0]["wire"]?.arrayValue?.contains { $0.stringValue?.contains("POST /token") == true } == true)
        #expect(
            steps[3]["notes"]?.arrayValue?.contains { $0.stringValue?.contains("server counted 1") == true } == true)
        #expect(objects.last?["summary"] == true && objects.last?["passed"] == 11)
        #expect(result.stdout.range(of: #"eyJ[A-Za-z0-9_-]{12,}"#, options: .regularExpression) == nil)
    }
}
