import Foundation
import Testing

/// Runs the README's CLI walk-through exactly as written, in a fresh folder, so that it cannot rot.
@Suite struct ReadmeCLITests {
    static let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("README.md")

    /// The ```sh block that follows the `cli-walkthrough` marker.
    static func walkthrough() throws -> String {
        let text = try String(contentsOf: readme, encoding: .utf8)
        guard let marker = text.range(of: "<!-- cli-walkthrough"),
            let open = text.range(of: "```sh\n", range: marker.upperBound..<text.endIndex),
            let close = text.range(of: "\n```", range: open.upperBound..<text.endIndex)
        else { throw CocoaError(.fileReadCorruptFile) }
        return String(text[open.upperBound..<close.lowerBound])
    }

    @Test("README: the CLI walk-through runs top to bottom in a fresh folder (the alias as the README defines it)")
    func walkthroughRuns() throws {
        let folder = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        // The README's alias line, with the clone's binary: `alias sesame="$PWD/.build/debug/sesame"`.
        let script = """
            set -e
            alias sesame='\(CLIRunner.binary.path)'
            \(try Self.walkthrough())
            """
        let process = Process()
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
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let stdout = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(stderr)")
        #expect(stdout.contains("alice@example.com") && stdout.contains("\"sub\"") && stdout.contains("\"aud\""))
        #expect(stderr.contains("signed in as alice@example.com") && stderr.contains("signed out"))
        for file in ["dev.sqlite", "serve.log", "key.json", "jwks.json", "token.txt"] {
            #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent(file).path), "\(file)")
        }
        // Everything the walk-through writes is ignored by git in a clone.
        let ignored = try String(
            contentsOf: Self.readme.deletingLastPathComponent().appendingPathComponent(".gitignore"), encoding: .utf8)
        for file in ["/dev.sqlite", "/serve.log", "/key.json", "/jwks.json", "/token.txt"] {
            #expect(ignored.contains(file))
        }
    }
}
