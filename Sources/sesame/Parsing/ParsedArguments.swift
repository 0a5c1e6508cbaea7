import Foundation
import SesameJOSE

/// The options, flags and positionals of one invocation, checked against its ``CommandSpec``.
struct ParsedArguments: Sendable {
    let command: CommandSpec
    private(set) var options: [String: [String]] = [:]
    private(set) var flags: Set<String> = []
    private(set) var positionals: [String] = []
    /// Whether `--help` or `-h` was given (anywhere).
    private(set) var wantsHelp = false

    /// Parses `arguments` for `command`.
    ///
    /// - Throws: ``CLIError`` (usage) for an unknown option — with a suggestion when one is close — a missing
    ///   value, or a repeated option that may be given once.
    init(_ arguments: [String], for command: CommandSpec) throws {
        self.command = command
        var index = 0
        var onlyPositionals = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if onlyPositionals || argument == "-" || !argument.hasPrefix("-") {
                positionals.append(argument)
                continue
            }
            if argument == "--" {
                onlyPositionals = true
                continue
            }
            if argument == "--help" || argument == "-h" {
                wantsHelp = true
                continue
            }
            var name = argument
            var inlineValue: String?
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                inlineValue = String(argument[argument.index(after: equals)...])
            }
            guard let option = command.option(named: name) else {
                var message = "unknown option '\(printable(name))' for 'sesame \(command.name)'"
                if let near = Suggestions.closest(to: name, among: command.options.map(\.name)) {
                    message += "; did you mean '\(near)'?"
                }
                throw CLIError.usage(message, command: command)
            }
            if option.isFlag {
                guard inlineValue == nil else {
                    throw CLIError.usage("\(option.name) takes no value", command: command)
                }
                flags.insert(option.name)
                continue
            }
            let value: String
            if let inlineValue {
                value = inlineValue
            } else {
                guard index < arguments.count else {
                    throw CLIError.usage("\(option.name) needs a value (\(option.value ?? "VALUE"))", command: command)
                }
                value = arguments[index]
                index += 1
            }
            if !option.repeatable, options[option.name] != nil {
                throw CLIError.usage("\(option.name) given more than once", command: command)
            }
            options[option.name, default: []].append(value)
        }
    }

    /// The value of a single-valued option.
    func value(_ option: OptionSpec) -> String? { options[option.name]?.last }

    /// Every value of a repeatable option.
    func values(_ option: OptionSpec) -> [String] { options[option.name] ?? [] }

    /// Whether a flag was given.
    func flag(_ option: OptionSpec) -> Bool { flags.contains(option.name) }

    /// A usage error of this command.
    func usage(_ message: String) -> CLIError { CLIError.usage(message, command: command) }

    /// The one positional argument, or nil.
    ///
    /// - Throws: ``CLIError`` (usage) when there are more.
    func atMostOnePositional(_ what: String) throws -> String? {
        guard positionals.count <= 1 else {
            throw CLIError.usage("expected at most one \(what), got \(positionals.count)", command: command)
        }
        return positionals.first
    }

    /// No positional arguments.
    ///
    /// - Throws: ``CLIError`` (usage) when there are some.
    func noPositionals() throws {
        guard positionals.isEmpty else {
            throw CLIError.usage(
                "'sesame \(command.name)' takes no arguments (got '\(printable(positionals[0]))')",
                command: command)
        }
    }
}

/// Suggestions for misspelt commands and options: the closest name by edit distance, when it is close.
enum Suggestions {
    static func closest(to input: String, among candidates: [String]) -> String? {
        // Only the names close enough in length can be close enough (an edit distance is at least the difference
        // in length, and more than 3 is never suggested): a long mistyped word costs no table per name.
        let length = input.count
        let lowered = input.lowercased()
        let scored = candidates.filter { abs($0.count - length) <= 3 }.map { ($0, distance(lowered, $0.lowercased())) }
        guard let best = scored.min(by: { $0.1 < $1.1 }) else { return nil }
        let allowed = max(1, min(3, best.0.count / 3))
        if best.1 <= allowed { return best.0 }
        return candidates.first { $0.hasPrefix(input) && input.count >= 3 }
    }

    /// Damerau–Levenshtein (optimal string alignment) distance.
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var rows = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { rows[i][0] = i }
        for j in 0...b.count { rows[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                rows[i][j] = min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    rows[i][j] = min(rows[i][j], rows[i - 2][j - 2] + 1)
                }
            }
        }
        return rows[a.count][b.count]
    }
}

/// An argument or server code echoed in a message: control characters replaced, at most 80 characters.
func printable(_ text: String) -> String { PrintableText.sanitized(text, limit: 80) }

/// Whether `text` begins `scheme://` (RFC 3986 §3.1: a letter, then letters, digits, `+`, `-`, `.`), so that
/// `/search?u=http://x` or `keys/http://x` are not taken for URLs.
func startsWithScheme(_ text: String) -> Bool {
    guard let separator = text.range(of: "://") else { return false }
    let scheme = text[..<separator.lowerBound].unicodeScalars
    guard let first = scheme.first, ("a"..."z").contains(first) || ("A"..."Z").contains(first) else { return false }
    return scheme.allSatisfy {
        ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
            || "+-.".unicodeScalars.contains($0)
    }
}
