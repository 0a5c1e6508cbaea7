import Foundation
import Sesame
import SesameDevServer
import SesameJOSE
import SesameLoopback

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
    /// The command whose usage was wrong, for the "run … --help" hint.
    var command: CommandSpec?

    init(status: ExitStatus, code: String, message: String, command: CommandSpec? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.command = command
    }

    static func usage(_ message: String, command: CommandSpec? = nil) -> CLIError {
        CLIError(status: .usage, code: "usage", message: message, command: command)
    }
}

enum CLI {
    static func run(_ arguments: [String]) async -> ExitStatus {
        do {
            try await dispatch(arguments)
            return .success
        } catch let error as CLIError {
            printError(code: error.code, message: error.message)
            if error.status == .usage {
                let hint = error.command.map { "sesame \($0.name) --help" } ?? "sesame help"
                FileHandle.standardError.write(Data("run '\(hint)' for usage\n".utf8))
            }
            return error.status
        } catch let error as JOSEError {
            printError(code: error.code.rawValue, message: describe(error))
            return .failure
        } catch let error as AuthError {
            printError(code: error.serverResponse?.error ?? error.code.rawValue, message: describe(error))
            if error.code == .dpopKeyMismatch {
                FileHandle.standardError.write(
                    Data("sign in again: sesame login --issuer URL --client-id ID --dpop\n".utf8))
            }
            if error.requiresReauthentication { return .notSignedIn }
            return error.isTransient ? .transient : .failure
        } catch is CancellationError {
            printError(code: "cancelled", message: "cancelled")
            return .failure
        } catch let error as LoopbackError {
            printError(
                code: "listen", message: "\(error.description) — pick another --port (or --port 0 for a free one)")
            return .failure
        } catch let error as DevServerError {
            printError(code: "dev_server", message: error.description)
            return .failure
        } catch {
            printError(code: "failure", message: "an unexpected \(type(of: error)) occurred")
            return .failure
        }
    }

    /// The error's message, then the server's own explanation when it gave one.
    static func describe(_ error: AuthError) -> String {
        guard let detail = error.serverResponse?.errorDescription, !detail.isEmpty else { return error.message }
        return "\(error.message): \(detail)"
    }

    /// A JOSE rejection, with a hint where an option would help.
    static func describe(_ error: JOSEError) -> String {
        if error.code == .invalidHeader, error.parameter == "typ" {
            return error.message + " (an access token is typ at+jwt: pass --typ at+jwt to accept it)"
        }
        return error.message
    }

    static func printError(code: String, message: String) {
        FileHandle.standardError.write(
            Data("error: \(printable(code)): \(PrintableText.sanitized(message, limit: 2000))\n".utf8))
    }

    private static func dispatch(_ arguments: [String]) async throws {
        guard let first = arguments.first else { throw CLIError.usage("no command given") }
        switch first {
        case "--version", "-V", "version":
            print("sesame \(SesameVersion.current)")
            return
        case "help", "--help", "-h":
            let rest = Array(arguments.dropFirst())
            if rest.isEmpty || rest == ["help"] {
                print(Help.general(CommandTable.all))
            } else if let (command, used) = CommandTable.lookup(rest), used == rest.count {
                print(Help.command(command))
            } else if rest.count == 1, let group = CommandTable.groups[rest[0]] {
                print(Help.group(rest[0], group))
            } else {
                throw unknownCommand(rest)
            }
            return
        default:
            break
        }
        // A group (`jwt`, `jwk`) answers help like a command: `sesame jwt --help`, `sesame jwk -h`.
        if let group = CommandTable.groups[first], arguments.count == 2, ["--help", "-h"].contains(arguments[1]) {
            print(Help.group(first, group))
            return
        }
        guard let (command, used) = CommandTable.lookup(arguments) else { throw unknownCommand(arguments) }
        let rest = Array(arguments.dropFirst(used))
        // --help wins wherever it stands (before a `--`), whatever else the line says.
        if rest.prefix(while: { $0 != "--" }).contains(where: { $0 == "--help" || $0 == "-h" }) {
            print(Help.command(command))
            return
        }
        let parsed = try ParsedArguments(rest, for: command)
        if parsed.wantsHelp {
            print(Help.command(command))
            return
        }
        try await command.run(parsed)
    }

    /// A usage error for words that name no command, with the closest command when there is one.
    private static func unknownCommand(_ words: [String]) -> CLIError {
        let first = words.first ?? ""
        if let group = CommandTable.groups[first] {
            let names = group.map { $0.words[1] }
            var message = "'sesame \(first)' needs one of: \(names.joined(separator: ", "))"
            if words.count > 1 {
                message = "unknown command 'sesame \(first) \(printable(words[1]))'; " + message
                if let near = Suggestions.closest(to: words[1], among: names) {
                    message += " — did you mean 'sesame \(first) \(near)'?"
                }
            }
            return CLIError.usage(message)
        }
        var message = "unknown command '\(printable(first))'"
        let names = Set(CommandTable.all.map { $0.words[0] } + ["help"]).sorted()
        if let near = Suggestions.closest(to: first, among: names) { message += "; did you mean '\(near)'?" }
        return CLIError.usage(message)
    }
}

/// Reads an argument that may be `-` (or absent) for standard input, trimmed of surrounding white space.
func argumentOrStandardInput(_ argument: String?) -> String {
    if let argument, argument != "-" { return argument }
    let data = FileHandle.standardInput.readDataToEndOfFile()
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}
