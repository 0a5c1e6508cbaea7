/// One option of a command, declared once: parsing, help, suggestions and shell completion all read it.
struct OptionSpec: Sendable {
    /// `--name`.
    let name: String
    /// A one-letter alias (`-X`), if any.
    let short: String?
    /// The value's placeholder (`NAME`), or nil for a flag.
    let value: String?
    /// What it does (one line).
    let help: String
    /// The default, shown in help.
    let defaultValue: String?
    /// Whether it may be given more than once.
    let repeatable: Bool
    /// Values offered by shell completion.
    let choices: [String]

    init(
        _ name: String, short: String? = nil, value: String? = nil, _ help: String, default defaultValue: String? = nil,
        repeatable: Bool = false, choices: [String] = []
    ) {
        self.name = name
        self.short = short
        self.value = value
        self.help = help
        self.defaultValue = defaultValue
        self.repeatable = repeatable
        self.choices = choices
    }

    var isFlag: Bool { value == nil }

    /// `--name VALUE` or `-X, --name VALUE`.
    var label: String {
        var label = short.map { "\($0), " } ?? ""
        label += name
        if let value { label += " \(value)" }
        if repeatable { label += "..." }
        return label
    }
}

/// A command of `sesame`, built from its parsed arguments and then run.
///
/// Every option is read and checked once, in `init`, as swift-argument-parser's `validate()` does; its
/// ``CommandSpec`` (in the type) declares the options that parsing, help, suggestions and completion read.
protocol SesameCommand: Sendable {
    /// The table entry.
    static var spec: CommandSpec { get }
    /// Reads and validates every option and positional.
    ///
    /// - Throws: ``CLIError`` (usage) for anything wrong, before any network or store access.
    init(_ arguments: ParsedArguments) throws
    /// Does the work.
    func run() async throws
}

/// One command, declared once.
struct CommandSpec: Sendable {
    /// The words that name it (`["jwt", "verify"]`).
    let words: [String]
    /// One line for the command list.
    let summary: String
    /// The positional arguments as shown in the usage line (`[TOKEN|-]`), if any.
    let arguments: String?
    /// A paragraph for `--help`.
    let discussion: String
    /// Its options (global ones included where they apply).
    let options: [OptionSpec]
    /// Examples for `--help`, each a runnable command line.
    let examples: [String]
    /// Exit codes beyond the common ones, as `(code, meaning)`.
    let exitCodes: [(Int32, String)]
    /// Builds the command (validating its options) and runs it.
    let run: @Sendable (ParsedArguments) async throws -> Void

    init(
        words: [String], summary: String, arguments: String?, discussion: String, options: [OptionSpec],
        examples: [String], exitCodes: [(Int32, String)], command: any SesameCommand.Type
    ) {
        self.words = words
        self.summary = summary
        self.arguments = arguments
        self.discussion = discussion
        self.options = options
        self.examples = examples
        self.exitCodes = exitCodes
        run = { arguments in try await command.init(arguments).run() }
    }

    var name: String { words.joined(separator: " ") }

    /// `sesame NAME [options] ARGUMENTS`.
    var usage: String {
        var line = "sesame \(name)"
        if !options.isEmpty { line += " [options]" }
        if let arguments { line += " \(arguments)" }
        return line
    }

    func option(named name: String) -> OptionSpec? { options.first { $0.name == name || $0.short == name } }
}

/// Options shared by the session commands (DESIGN §4).
enum GlobalOptions {
    static let profile = OptionSpec(
        "--profile", value: "NAME", "the profile: 1-64 of A-Z a-z 0-9 . _ -, not starting with '.'",
        default: "default")
    static let store = OptionSpec(
        "--store", value: "KIND",
        "where credentials are kept: keyring (Secret Service) or file (0600 files); remembered at login (env SESAME_STORE)",
        default: "keyring when one answers, else file", choices: ["keyring", "file"])
    static let json = OptionSpec("--json", "print one compact JSON object (times as integer Unix seconds)")
    static let verbose = OptionSpec(
        "--verbose",
        "print the SDK's diagnostics to stderr: each refresh, retry, nonce, origin decision (never a secret)")
    static let session = [profile, store, verbose]
}
