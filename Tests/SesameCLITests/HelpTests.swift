import Foundation
import SesameLoopback
import Testing

/// Help everywhere, generated from one table: `--help`, `-h` and `help CMD` for every command, compared with the
/// snapshots in `Snapshots/` (regenerate with `SESAME_UPDATE_SNAPSHOTS=1`); suggestions; version; completion.
@Suite struct HelpTests {
    static let commands: [[String]] = [
        ["demo"], ["serve"], ["register"], ["login"], ["token"], ["userinfo"], ["status"], ["request"], ["logout"],
        ["credential-helper"], ["completion"],
        ["jwk", "generate"], ["jwk", "public"], ["jwt", "decode"], ["jwt", "verify"], ["jwt", "sign"],
    ]

    static let snapshots = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
        "Snapshots")

    func compare(_ text: String, snapshot name: String) throws {
        let file = Self.snapshots.appendingPathComponent(name + ".txt")
        if ProcessInfo.processInfo.environment["SESAME_UPDATE_SNAPSHOTS"] == "1" {
            try text.write(to: file, atomically: false, encoding: .utf8)
            return
        }
        let stored = try String(contentsOf: file, encoding: .utf8)
        #expect(text == stored, "help for \(name) changed; rerun with SESAME_UPDATE_SNAPSHOTS=1 if intended")
    }

    @Test(
        "Every command answers --help, -h and 'help CMD' on stdout with exit 0, as its snapshot says",
        arguments: commands)
    func commandHelp(words: [String]) throws {
        let long = try CLIRunner.run(words + ["--help"])
        #expect(long.status == 0 && long.stderr.isEmpty)
        #expect(long.stdout.hasPrefix("USAGE: sesame \(words.joined(separator: " "))"))
        #expect(long.stdout.contains("EXIT STATUS:") && long.stdout.contains("-h, --help"))
        #expect(try CLIRunner.run(words + ["-h"]).stdout == long.stdout)
        #expect(try CLIRunner.run(["help"] + words).stdout == long.stdout)
        // --help wins wherever it stands, even after other options.
        #expect(try CLIRunner.run(words + ["--no-such-option", "x", "--help"]).stdout == long.stdout)
        try compare(long.stdout, snapshot: words.joined(separator: "-"))
    }

    @Test(
        "A command group answers --help, -h and 'help GROUP' with its subcommands, exit 0", arguments: ["jwt", "jwk"])
    func groupHelp(group: String) throws {
        let long = try CLIRunner.run([group, "--help"])
        #expect(long.status == 0 && long.stderr.isEmpty, "\(long.stderr)")
        #expect(long.stdout.hasPrefix("USAGE: sesame \(group) <subcommand>"))
        for words in Self.commands where words.first == group && words.count == 2 {
            #expect(long.stdout.contains("  \(words[1]) "), "\(words[1]) is listed")
        }
        #expect(try CLIRunner.run([group, "-h"]).stdout == long.stdout)
        #expect(try CLIRunner.run(["help", group]).stdout == long.stdout)
        try compare(long.stdout, snapshot: group)
        #expect(try CLIRunner.run([group]).status == 2, "a group without a subcommand is still a usage error")
    }

    @Test("The general help lists every command, aligned; --version prints one version")
    func generalHelp() throws {
        let help = try CLIRunner.run(["help"])
        #expect(help.status == 0)
        for words in Self.commands { #expect(help.stdout.contains("  \(words.joined(separator: " ")) ")) }
        let rows = help.stdout.split(separator: "\n").filter { $0.hasPrefix("  ") && !$0.hasPrefix("   ") }
            .prefix(Self.commands.count)
        let columns = Set(
            rows.map { row in row.dropFirst(2).firstIndex(of: " ").map { _ in descriptionColumn(String(row)) } ?? 0 })
        #expect(columns.count == 1, "summaries start in one column")
        #expect(try CLIRunner.run(["--help"]).stdout == help.stdout && CLIRunner.run(["-h"]).stdout == help.stdout)
        try compare(help.stdout, snapshot: "general")
        let version = try CLIRunner.run(["--version"])
        #expect(
            version.status == 0
                && version.stdout.range(of: #"^sesame \d+\.\d+\.\d+(-dev)?\n$"#, options: .regularExpression) != nil)
    }

    private func descriptionColumn(_ row: String) -> Int {
        // The first run of two or more spaces after the name ends the name column.
        let characters = Array(row)
        var index = 2
        while index + 1 < characters.count, !(characters[index] == " " && characters[index + 1] == " ") { index += 1 }
        while index < characters.count, characters[index] == " " { index += 1 }
        return index
    }

    @Test("Misspelt commands and options get a suggestion and exit 2")
    func suggestions() throws {
        let cases: [([String], String)] = [
            (["logn"], "did you mean 'login'?"), (["tokn"], "did you mean 'token'?"),
            (["jwt", "verfy"], "did you mean 'sesame jwt verify'?"), (["token", "--jsn"], "did you mean '--json'?"),
            (["login", "--emial", "x"], "did you mean '--email'?"), (["jwt"], "needs one of: decode, verify, sign"),
            (["help", "logn"], "did you mean 'login'?"),
        ]
        for (arguments, expected) in cases {
            let result = try CLIRunner.run(arguments)
            #expect(result.status == 2 && result.stderr.contains(expected), "\(arguments): \(result.stderr)")
            #expect(result.stdout.isEmpty)
        }
    }

    @Test("completion bash|zsh|fish: scripts that parse and name every command and option")
    func completion() throws {
        for shell in ["bash", "zsh", "fish"] {
            let script = try CLIRunner.run(["completion", shell])
            #expect(script.status == 0, "\(shell): \(script.stderr)")
            for words in Self.commands { #expect(script.stdout.contains(words.last ?? "")) }
            #expect(script.stdout.contains("force-refresh") && script.stdout.contains("profile"))
            let interpreter = "/usr/bin/\(shell)"
            guard FileManager.default.isExecutableFile(atPath: interpreter) else {
                print("◇ NOTICE: \(shell) is not installed; its completion script was not syntax-checked.")
                continue
            }
            let file = FileManager.default.temporaryDirectory.appendingPathComponent(
                "sesame-\(UUID().uuidString).\(shell)")
            defer { try? FileManager.default.removeItem(at: file) }
            try script.stdout.write(to: file, atomically: false, encoding: .utf8)
            let check = ChildProcess()
            check.executableURL = URL(fileURLWithPath: interpreter)
            check.arguments = ["-n", file.path]
            try check.run()
            check.waitUntilExit()
            #expect(check.terminationStatus == 0, "\(shell) -n rejects the script")
            if shell == "fish" {
                let offered = ChildProcess()
                offered.executableURL = URL(fileURLWithPath: interpreter)
                offered.arguments = [
                    "--no-config", "-c",
                    "source \(file.path); complete -C 'sesame tok'; complete -C 'sesame token --f'",
                ]
                let output = Pipe()
                offered.standardOutput = .pipe(output)
                try offered.run()
                let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                offered.waitUntilExit()
                #expect(text.contains("token") && text.contains("--force-refresh"), "\(text)")
            }
        }
        if FileManager.default.isExecutableFile(atPath: "/bin/bash") {
            // Drive the bash function as bash would, and read what it offers.
            let script = try CLIRunner.run(["completion", "bash"]).stdout
            let probe = """
                \(script)
                COMP_WORDS=(sesame tok); COMP_CWORD=1; _sesame; echo "${COMPREPLY[@]}"
                COMP_WORDS=(sesame token --f); COMP_CWORD=2; _sesame; echo "${COMPREPLY[@]}"
                COMP_WORDS=(sesame jwt v); COMP_CWORD=2; _sesame; echo "${COMPREPLY[@]}"
                COMP_WORDS=(sesame login --store ""); COMP_CWORD=3; _sesame; echo "${COMPREPLY[@]}"
                """
            let process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: "/bin/bash")
            process.arguments = ["-c", probe]
            let output = Pipe()
            process.standardOutput = .pipe(output)
            try process.run()
            let lines = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                .split(separator: "\n", omittingEmptySubsequences: false)
            process.waitUntilExit()
            #expect(lines.count >= 4)
            if lines.count >= 4 {
                #expect(lines[0] == "token" && lines[1] == "--force-refresh" && lines[2] == "verify")
                #expect(lines[3] == "keyring file")
            }
        }
    }
}
