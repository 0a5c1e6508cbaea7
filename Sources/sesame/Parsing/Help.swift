import Foundation
import Sesame

/// Help text, generated from the command table.
enum Help {
    static let exitCodes: [(Int32, String)] = [
        (0, "success"), (1, "failure (the message says what failed)"), (2, "usage error"),
        (3, "not signed in, or the session expired: sign in again"),
        (4, "transient: network, 5xx, 429, or the credential store is unavailable; try again"),
    ]

    /// `sesame help`: every command with its summary, aligned.
    static func general(_ table: [CommandSpec]) -> String {
        let width = max("help [COMMAND]".count, table.map { $0.name.count }.max() ?? 0) + 2
        var lines = [
            "sesame \(SesameVersion.current): the Sesame authentication toolkit", "",
            "USAGE: sesame <command> [options]", "", "COMMANDS:",
        ]
        for command in table {
            lines.append("  " + command.name.padding(toLength: width, withPad: " ", startingAt: 0) + command.summary)
        }
        lines += [
            "  " + "help [COMMAND]".padding(toLength: width, withPad: " ", startingAt: 0) + "this text, or a command's",
            "",
            "Every command answers --help (-h). 'sesame --version' prints the version.",
            "Files live in $SESAME_HOME (default $XDG_CONFIG_HOME/sesame or ~/.config/sesame), 0600 in 0700 folders.",
            "Errors go to stderr as 'error: <code>: <message>'. Output is plain text (demo: colour on a terminal).", "",
            "EXIT STATUS:",
        ]
        lines += exitCodes.map { "  \($0.0)  \($0.1)" }
        return lines.joined(separator: "\n")
    }

    /// `sesame jwt --help`: a group's subcommands with their summaries.
    static func group(_ name: String, _ commands: [CommandSpec]) -> String {
        let sorted = commands.sorted { $0.name < $1.name }
        let width = (sorted.map { $0.words[1].count }.max() ?? 0) + 2
        var lines = ["USAGE: sesame \(name) <subcommand> [options]", "", "SUBCOMMANDS:"]
        lines += sorted.map { "  " + $0.words[1].padding(toLength: width, withPad: " ", startingAt: 0) + $0.summary }
        lines += ["", "Run 'sesame \(name) <subcommand> --help' for a subcommand's options.", "", "EXIT STATUS:"]
        lines += exitCodes.map { "  \($0.0)  \($0.1)" }
        return lines.joined(separator: "\n")
    }

    /// `text` broken into lines of at most `width` characters at spaces.
    static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var current = ""
        for word in text.split(separator: " ") {
            if !current.isEmpty, current.count + 1 + word.count > width {
                lines.append(current)
                current = ""
            }
            current += current.isEmpty ? String(word) : " " + word
        }
        lines.append(current)
        return lines
    }

    /// `sesame COMMAND --help`: synopsis, discussion, every option with its default, examples, exit codes.
    static func command(_ command: CommandSpec) -> String {
        var lines = ["USAGE: \(command.usage)", "", command.summary]
        if !command.discussion.isEmpty { lines += ["", command.discussion] }
        do {
            lines += ["", "OPTIONS:"]
            let width = min(34, max(10, command.options.map { $0.label.count }.max() ?? 0) + 2)
            for option in command.options {
                var text = option.help
                if !option.choices.isEmpty { text += " (one of: \(option.choices.joined(separator: ", ")))" }
                if let defaultValue = option.defaultValue { text += " (default: \(defaultValue))" }
                let label = option.label
                let wrapped = wrap(text, width: 116 - width)
                let indent = "  " + String(repeating: " ", count: width)
                if label.count + 2 > width {
                    lines.append("  \(label)")
                    lines += wrapped.map { indent + $0 }
                } else {
                    lines.append("  " + label.padding(toLength: width, withPad: " ", startingAt: 0) + wrapped[0])
                    lines += wrapped.dropFirst().map { indent + $0 }
                }
            }
            lines.append("  " + "-h, --help".padding(toLength: width, withPad: " ", startingAt: 0) + "this help")
        }
        if !command.examples.isEmpty {
            lines += ["", "EXAMPLES:"]
            lines += command.examples.map { "  \($0)" }
        }
        lines += ["", "EXIT STATUS:"]
        let codes = exitCodes.filter { code in !command.exitCodes.contains { $0.0 == code.0 } } + command.exitCodes
        lines += codes.sorted { $0.0 < $1.0 }.map { "  \($0.0)  \($0.1)" }
        return lines.joined(separator: "\n")
    }
}
