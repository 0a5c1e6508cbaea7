import Foundation
import Sesame
import SesameJOSE

/// Exit codes, as DESIGN.md §4 fixes them for scripts that call `sesame`.
enum ExitStatus: Int32 {
    case success = 0
    case failure = 1
    case usage = 2
    case notSignedIn = 3
    case transient = 4
}

/// A failure the CLI reports as `error: <code>: <message>` on stderr with an exit status.
struct CLIError: Error {
    let status: ExitStatus
    let code: String
    let message: String

    static func usage(_ message: String) -> CLIError { CLIError(status: .usage, code: "usage", message: message) }
}

enum CLI {
    static let usage = """
        sesame: the Sesame authentication toolkit

        USAGE: sesame <command> [options]

        COMMANDS:
          demo                      a narrated run of what Sesame does, on an embedded dev server (loopback only)
          serve [options]           the local development identity server (sesame serve --help)
          register --rest BASE_URL --email EMAIL   create an account and sign in (password on stdin or prompted)
          login --rest BASE_URL --email EMAIL      sign in (password on stdin or prompted, never in arguments)
          token [--force-refresh] [--json]         a valid access token on stdout, refreshed if needed
          status [--json]                          who, which provider, expiry, scopes — never a token
          request [-X METHOD] [-H 'Name: value']... [-d DATA] URL   an authorized request; the body to stdout
          logout [--no-revoke]                     sign out (revokes the session on the server unless --no-revoke)
            (session commands take --profile NAME and --store keyring|file|memory, default keyring when one
             answers, else 0600 files in $SESAME_HOME)
          jwt decode [TOKEN|-]      print a JWT's header and claims as JSON, without verifying it
          jwt verify --jwks FILE|URL [--iss ISS] [--aud AUD] [--nonce N] [--leeway S] [--now UNIX]
                     [--alg ALG]... [--typ TYP]... [TOKEN|-]
                                    verify signature and claims; print the claims as JSON
          jwt sign --key FILE [--alg ALG] [--typ TYP] [CLAIMS_JSON|-]
                                    sign a claim set with a private JWK; print the token
          jwk generate [--alg ES256] [--kid KID] [--public]
                                    generate a key; print it as a JWK (private unless --public)
          jwk public [FILE|-]       print the public half of a JWK as a one-key JWK Set
          help                      this text

        A TOKEN of '-' or no TOKEN reads it from standard input.
        Exit status: 0 success, 1 failure, 2 usage error, 3 not signed in, 4 transient (network).
        Errors are printed to stderr as 'error: <code>: <message>'.
        """

    static func run(_ arguments: [String]) async -> ExitStatus {
        do {
            try await dispatch(arguments)
            return .success
        } catch let error as CLIError {
            printError(code: error.code, message: error.message)
            if error.status == .usage { FileHandle.standardError.write(Data("run 'sesame help' for usage\n".utf8)) }
            return error.status
        } catch let error as JOSEError {
            printError(code: error.code.rawValue, message: error.message)
            return .failure
        } catch let error as AuthError {
            printError(code: error.serverResponse?.error ?? error.code.rawValue, message: Self.message(error))
            if error.requiresReauthentication { return .notSignedIn }
            return error.isTransient ? .transient : .failure
        } catch {
            printError(code: "failure", message: "\(error)")
            return .failure
        }
    }

    /// The error's message, then the server's own explanation when it gave one.
    static func message(_ error: AuthError) -> String {
        guard let detail = error.serverResponse?.errorDescription, !detail.isEmpty else { return error.message }
        return "\(error.message): \(detail)"
    }

    static func printError(code: String, message: String) {
        FileHandle.standardError.write(Data("error: \(code): \(message)\n".utf8))
    }

    private static func dispatch(_ arguments: [String]) async throws {
        guard let command = arguments.first else { throw CLIError.usage("no command given") }
        let rest = Array(arguments.dropFirst())
        switch command {
        case "help", "--help", "-h": print(usage)
        case "demo": try await DemoCommand.run(try ParsedArguments(rest, options: [], flags: []))
        case "serve":
            try await ServeCommand.run(
                try ParsedArguments(rest, options: ServeCommand.options, flags: ["--no-dev-endpoints", "--help"]))
        case "jwt":
            guard let sub = rest.first else { throw CLIError.usage("jwt needs decode, verify or sign") }
            let subArguments = Array(rest.dropFirst())
            switch sub {
            case "decode": try JWTCommands.decode(try ParsedArguments(subArguments, options: [], flags: []))
            case "verify":
                try await JWTCommands.verify(
                    try ParsedArguments(
                        subArguments,
                        options: ["--jwks", "--iss", "--aud", "--nonce", "--leeway", "--now", "--alg", "--typ"],
                        flags: []))
            case "sign":
                try JWTCommands.sign(
                    try ParsedArguments(subArguments, options: ["--key", "--alg", "--typ"], flags: []))
            default: throw CLIError.usage("unknown jwt command '\(sub)'")
            }
        case "register", "login":
            try await SessionCommands.signIn(
                try ParsedArguments(
                    rest, options: SessionCommands.globalOptions.union(["--rest", "--email"]), flags: []),
                registering: command == "register")
        case "token":
            try await SessionCommands.token(
                try ParsedArguments(rest, options: SessionCommands.globalOptions, flags: ["--force-refresh", "--json"]))
        case "status":
            try await SessionCommands.status(
                try ParsedArguments(rest, options: SessionCommands.globalOptions, flags: ["--json"]))
        case "request":
            try await SessionCommands.request(
                try ParsedArguments(rest, options: SessionCommands.globalOptions.union(["-X", "-H", "-d"]), flags: []))
        case "logout":
            try await SessionCommands.logout(
                try ParsedArguments(rest, options: SessionCommands.globalOptions, flags: ["--no-revoke"]))
        case "jwk":
            let subArguments = Array(rest.dropFirst())
            switch rest.first {
            case "generate":
                try JWKCommands.generate(
                    try ParsedArguments(subArguments, options: ["--alg", "--kid"], flags: ["--public"]))
            case "public": try JWKCommands.publicSet(try ParsedArguments(subArguments, options: [], flags: []))
            default: throw CLIError.usage("jwk needs generate or public")
            }
        default:
            throw CLIError.usage("unknown command '\(command)'")
        }
    }
}

/// Options, flags and positionals of one command, checked against what the command accepts.
struct ParsedArguments {
    private(set) var options: [String: [String]] = [:]
    private(set) var flags: Set<String> = []
    private(set) var positionals: [String] = []

    init(_ arguments: [String], options allowedOptions: Set<String>, flags allowedFlags: Set<String>) throws {
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if argument == "-" || !argument.hasPrefix("-") {
                positionals.append(argument)
                continue
            }
            var name = argument
            var inlineValue: String?
            if let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                inlineValue = String(argument[argument.index(after: equals)...])
            }
            if allowedFlags.contains(name), inlineValue == nil {
                flags.insert(name)
            } else if allowedOptions.contains(name) {
                if let inlineValue {
                    options[name, default: []].append(inlineValue)
                } else {
                    guard index < arguments.count else { throw CLIError.usage("\(name) needs a value") }
                    options[name, default: []].append(arguments[index])
                    index += 1
                }
            } else {
                throw CLIError.usage("unknown option '\(name)'")
            }
        }
    }

    func value(_ name: String) throws -> String? {
        guard let values = options[name] else { return nil }
        guard values.count == 1 else { throw CLIError.usage("\(name) given more than once") }
        return values[0]
    }

    func values(_ name: String) -> [String] { options[name] ?? [] }

    func atMostOnePositional(_ what: String) throws -> String? {
        guard positionals.count <= 1 else { throw CLIError.usage("expected at most one \(what)") }
        return positionals.first
    }
}

/// Reads an argument that may be `-` (or absent) for standard input, trimmed of surrounding white space.
func argumentOrStandardInput(_ argument: String?) -> String {
    if let argument, argument != "-" { return argument }
    let data = FileHandle.standardInput.readDataToEndOfFile()
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}
