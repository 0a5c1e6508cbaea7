import Foundation
import SesameJOSE

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `sesame jwk generate`: a new key as a JWK.
struct JWKGenerateCommand: SesameCommand {
    static let algorithm = OptionSpec(
        "--alg", value: "ALG", "the algorithm", default: "ES256",
        choices: ["ES256", "ES384", "ES512", "RS256", "PS256", "EdDSA", "HS256"])
    static let keyID = OptionSpec("--kid", value: "KID", "the key ID", default: "the RFC 7638 thumbprint")
    static let output = OptionSpec("--output", value: "FILE", "write the key to FILE (mode 0600) instead of stdout")
    static let publicOnly = OptionSpec("--public", "print only the public half")
    static let spec = CommandSpec(
        words: ["jwk", "generate"], summary: "generate a key; print it as a JWK (private unless --public)",
        arguments: nil,
        discussion: "With --output the private key is written to FILE with mode 0600 (never through a symlink).",
        options: [algorithm, keyID, output, publicOnly],
        examples: ["sesame jwk generate --alg ES256 --kid k1 --output key.json"], exitCodes: [], command: Self.self)

    let chosen: JWSAlgorithm
    let kid: String?
    let file: String?
    let printsPublicHalf: Bool

    init(_ arguments: ParsedArguments) throws {
        let name = arguments.value(Self.algorithm) ?? "ES256"
        guard let algorithm = JWSAlgorithm(name: name) else {
            throw arguments.usage("unknown algorithm '\(printable(name))'")
        }
        try arguments.noPositionals()
        chosen = algorithm
        kid = arguments.value(Self.keyID)
        file = arguments.value(Self.output)
        printsPublicHalf = arguments.flag(Self.publicOnly)
    }

    func run() async throws {
        let key = try JWK.generate(for: chosen, keyID: kid)
        let text =
            printsPublicHalf
            ? try key.publicKey().jsonValue().prettyJSONString : key.jsonValue(includingPrivate: true).prettyJSONString
        if let file {
            try SecureFile.write(Data((text + "\n").utf8), to: URL(fileURLWithPath: file))
            FileHandle.standardError.write(Data("wrote \(file) (mode 0600)\n".utf8))
        } else {
            if !printsPublicHalf { StandardOutput.restrictIfFile() }
            print(text)
        }
    }
}

/// `sesame jwk public [FILE|-]`: the public half as a one-key JWK Set.
struct JWKPublicCommand: SesameCommand {
    static let spec = CommandSpec(
        words: ["jwk", "public"], summary: "print the public half of a JWK as a one-key JWK Set",
        arguments: "[FILE|-]", discussion: "Reads the key from FILE, or standard input for '-' or no FILE.",
        options: [], examples: ["sesame jwk public key.json > jwks.json"], exitCodes: [], command: Self.self)

    let path: String?

    init(_ arguments: ParsedArguments) throws { path = try arguments.atMostOnePositional("key file") }

    func run() async throws {
        let text = path.flatMap { $0 == "-" ? nil : $0 }.map { try? String(contentsOfFile: $0, encoding: .utf8) }
        guard let json = text ?? argumentOrStandardInput(nil) else {
            throw CLIError(status: .failure, code: "io", message: "cannot read \(path ?? "-")")
        }
        let key = try JWK(json: json)
        print(try JWKSet(keys: [try key.publicKey()]).jsonValue.prettyJSONString)
    }
}

/// Standard output when it holds a secret.
enum StandardOutput {
    /// `sesame jwk generate > key.json` must not leave a private key 0644: when standard output is a regular file
    /// of this user, it is made 0600 before anything is written to it.
    static func restrictIfFile() {
        var info = stat()
        guard fstat(1, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid() else { return }
        fchmod(1, 0o600)
    }
}

/// `sesame completion bash|zsh|fish`.
struct CompletionCommand: SesameCommand {
    static let spec = CommandSpec(
        words: ["completion"], summary: "print a shell completion script (bash, zsh or fish)", arguments: "SHELL",
        discussion: "Generated from the same table as the help.",
        options: [],
        examples: [
            "source <(sesame completion bash)", "sesame completion zsh > \"${fpath[1]}/_sesame\"",
            "sesame completion fish > ~/.config/fish/completions/sesame.fish",
        ],
        exitCodes: [], command: Self.self)

    let script: String

    init(_ arguments: ParsedArguments) throws {
        guard let shell = try arguments.atMostOnePositional("SHELL") else {
            throw arguments.usage("completion needs bash, zsh or fish")
        }
        switch shell {
        case "bash": script = Completion.bash(CommandTable.all)
        case "zsh": script = Completion.zsh(CommandTable.all)
        case "fish": script = Completion.fish(CommandTable.all)
        default: throw arguments.usage("completion takes bash, zsh or fish, not '\(printable(shell))'")
        }
    }

    func run() async throws { print(script) }
}
