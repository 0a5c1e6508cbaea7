import Foundation
import SesameLoopback
import Testing

/// Runs the docs' CLI walk-throughs (the articles "Command line and Linux" and "Running the dev server") exactly as
/// written, in a fresh folder, so that they cannot rot.
@Suite struct ReadmeCLITests {
    static let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("README.md")

    /// The ```sh block that follows the `<!-- NAME` marker.
    static func walkthrough(_ name: String = "cli-walkthrough", in file: URL = readme) throws -> String {
        let text = try String(contentsOf: file, encoding: .utf8)
        guard let marker = text.range(of: "<!-- \(name)"),
            let open = text.range(of: "```sh\n", range: marker.upperBound..<text.endIndex),
            let close = text.range(of: "\n```", range: open.upperBound..<text.endIndex)
        else { throw CocoaError(.fileReadCorruptFile) }
        return String(text[open.upperBound..<close.lowerBound])
    }

    /// Runs `block` with bash in a fresh folder, `sesame` aliased to the clone's binary.
    static func run(_ block: String, in folder: URL) throws -> (status: Int32, stdout: String, stderr: String) {
        // The article's alias line, with the clone's binary: `alias sesame="$PWD/.build/debug/sesame"`.
        let script = """
            set -e
            alias sesame='\(CLIRunner.binary.path)'
            \(block)
            """
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        // Aliases work in scripts only with expand_aliases, as they do in the interactive shell a reader uses.
        process.arguments = ["-O", "expand_aliases", "-c", script]
        process.currentDirectoryURL = folder
        var environment = ProcessInfo.processInfo.environment
        environment["SESAME_HOME"] = folder.appendingPathComponent("home").path
        environment["SESAME_STORE"] = "file"
        process.environment = environment
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = .pipe(output)
        process.standardError = .pipe(errors)
        try process.run()
        let stdout = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, stdout, stderr)
    }

    @Test(
        "Command line and Linux: the CLI walk-through runs top to bottom in a fresh folder (the alias as the article defines it)"
    )
    func walkthroughRuns() throws {
        let folder = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (status, stdout, stderr) = try Self.run(try Self.walkthrough(in: Self.commandLineArticle), in: folder)
        #expect(status == 0, "\(stderr)")
        #expect(stdout.contains("alice@example.com") && stdout.contains("\"sub\"") && stdout.contains("\"aud\""))
        #expect(stderr.contains("signed in as alice@example.com") && stderr.contains("signed out"))
        try Self.expectWritten(["dev.sqlite", "serve.log", "key.json", "jwks.json", "token.txt"], in: folder)
    }

    @Test("Running the dev server: the OpenID Connect provider walk-through runs as written")
    func oidcWalkthroughRuns() throws {
        let folder = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (status, stdout, stderr) = try Self.run(
            try Self.walkthrough("oidc-walkthrough", in: Self.devServerArticle), in: folder)
        #expect(status == 0, "\(stderr)")
        #expect(stdout.contains("\"role\": \"admin\"") && stdout.contains("\"user_code\""))
        let discovery = try String(contentsOf: folder.appendingPathComponent("discovery.json"), encoding: .utf8)
        #expect(discovery.contains("\"code_challenge_methods_supported\":[\"S256\"]"))
        let tests = try String(contentsOf: folder.appendingPathComponent("rp-tests.json"), encoding: .utf8)
        #expect(tests.contains("oidcc-client-test-invalid-aud"))
        try Self.expectWritten(
            ["oidc.log", "discovery.json", "minted.json", "access.txt", "rp-tests.json"], in: folder)
    }

    static let devServerArticle = readme.deletingLastPathComponent().appendingPathComponent(
        "Sources/Sesame/Sesame.docc/RunningTheDevServer.md")
    static let commandLineArticle = readme.deletingLastPathComponent().appendingPathComponent(
        "Sources/Sesame/Sesame.docc/CommandLineAndLinux.md")

    @Test("Running the dev server: the configuration-file walk-through runs as written and does what it says")
    func devServerWalkthroughRuns() throws {
        let folder = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let block = try Self.walkthrough("dev-server-walkthrough", in: Self.devServerArticle)
        let (status, _, stderr) = try Self.run(block, in: folder)
        #expect(status == 0, "\(stderr)")
        func json(_ name: String) throws -> [String: Any] {
            let data = try Data(contentsOf: folder.appendingPathComponent(name))
            return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        }
        let issuer = try String(contentsOf: folder.appendingPathComponent("issuer.txt"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let discovery = try json("discovery.json")
        #expect(discovery["registration_endpoint"] as? String == issuer + "/connect/register")
        #expect((discovery["id_token_signing_alg_values_supported"] as? [String])?.contains("RS256") == true)
        #expect(try json("partner.json")["issuer"] as? String == issuer + "/partner")
        let client = try json("client.json")
        #expect(client["id_token_signed_response_alg"] as? String == "EdDSA" && client["client_id"] is String)
        let page = try String(contentsOf: folder.appendingPathComponent("debugger.html"), encoding: .utf8)
        #expect(page.contains("access token (/_dev/token)") && page.contains("&quot;alice&quot;"))
        try Self.expectWritten(
            [
                "dev-idp.json", "issuer.txt", "serve.log", "discovery.json", "partner.json", "client.json",
                "debugger.html",
            ],
            in: folder)
    }

    /// Each file exists, and is ignored by git in a clone.
    static func expectWritten(_ files: [String], in folder: URL) throws {
        let ignored = try String(
            contentsOf: readme.deletingLastPathComponent().appendingPathComponent(".gitignore"), encoding: .utf8)
        for file in files {
            #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent(file).path), "\(file)")
            #expect(ignored.contains("/" + file), "\(file) in .gitignore")
        }
    }
}
