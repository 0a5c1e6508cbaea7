import Foundation
import Sesame
import SesameJOSE

/// `sesame credential-helper get|store|erase`: git's credential-helper protocol, answering with the profile's
/// access token for the hosts the profile may send credentials to (its origins), and nothing for any other.
struct CredentialHelperCommand: SesameCommand {
    static let username = OptionSpec(
        "--username", value: "NAME", "the username git sends with the token (GitLab: oauth2; GitHub: x-access-token)",
        default: "oauth2")
    static let spec = CommandSpec(
        words: ["credential-helper"], summary: "the git credential helper: this profile's token for its hosts",
        arguments: "get|store|erase",
        discussion: """
            Speaks git's credential-helper protocol (git help credential). 'get' reads protocol and host from
            standard input and, when that origin is one the profile may send credentials to (its server, and the
            --resource origins given at login), answers with --username and the profile's access token as the
            password, refreshed first when needed, with password_expiry_utc; for any other host it answers
            nothing, so git asks its other helpers or the user. 'erase' (git found the token refused) refreshes it,
            so the next 'get' has a new one; 'store' does nothing (the profile keeps its own credentials). A
            DPoP-bound profile answers nothing: git cannot make DPoP proofs. Configure it for one host:
              git config --global credential.https://git.example.com.helper '!sesame credential-helper --profile work'
            """,
        options: [username] + GlobalOptions.session,
        examples: [
            "git config --global credential.https://git.example.com.helper '!sesame credential-helper --profile work'",
            "printf 'protocol=https\\nhost=git.example.com\\n\\n' | sesame credential-helper get --profile work",
        ],
        exitCodes: [], command: Self.self)

    enum Operation: String, Sendable {
        case get, store, erase
    }

    let selection: SessionSelection
    let operation: Operation
    let user: String

    init(_ arguments: ParsedArguments) throws {
        selection = try SessionSelection(arguments)
        guard let word = try arguments.atMostOnePositional("operation"), let operation = Operation(rawValue: word)
        else { throw arguments.usage("credential-helper takes get, store or erase (git gives it)") }
        self.operation = operation
        let user = arguments.value(Self.username) ?? "oauth2"
        guard !user.isEmpty, user.utf8.count <= 256, PrintableText.isClean(user), !user.contains("\n") else {
            throw arguments.usage("--username takes a printable name")
        }
        self.user = user
    }

    /// The `key=value` lines git sends, up to a blank line or the end; nothing at all when the input is larger
    /// than 64 KiB (it was cut, and a cut line could name another host).
    static func readAttributes() -> [String: String] {
        attributes(from: FileHandle.standardInput.readData(ofLength: attributeLimit + 1))
    }

    static let attributeLimit = 64 * 1024

    /// The attributes in what git sent (see ``readAttributes()``).
    static func attributes(from data: Data) -> [String: String] {
        guard data.count <= attributeLimit else { return [:] }
        var attributes: [String: String] = [:]
        // Cut on the bytes: in Swift "\r\n" is one Character, which a split on "\n" does not see.
        let lines = Array(data).split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        // Only complete lines: the last piece, after the final newline, is either empty or unfinished.
        for line in lines.dropLast() {
            let text = line.last == UInt8(ascii: "\r") ? line.dropLast() : line
            if text.isEmpty { break }
            guard let equals = text.firstIndex(of: UInt8(ascii: "=")) else { continue }
            attributes[String(decoding: text[..<equals], as: UTF8.self)] = String(
                decoding: text[(equals + 1)...], as: UTF8.self)
        }
        return attributes
    }

    func run() async throws {
        let attributes = Self.readAttributes()
        guard operation != .store, let url = Self.origin(attributes) else { return }
        let context: SessionContext
        do {
            context = try await SessionContext(selection).withUsableKey()
        } catch let error as CLIError where error.status == .notSignedIn {
            note("profile \(selection.profile.name) is not signed in; git will ask elsewhere")
            return
        }
        guard context.client.mayReceiveCredentials(url) else { return }
        switch operation {
        case .store: return
        case .erase:
            // git reports the password refused: the next get must not hand out the same token.
            guard let refused = attributes["password"], let current = try await context.session.currentTokens,
                refused == current.accessToken
            else { return }
            _ = try await context.tokens(forceRefresh: true)
        case .get:
            let tokens = try await context.tokens()
            guard !tokens.isDPoPBound else {
                note("profile \(selection.profile.name)'s token is DPoP-bound, which git cannot prove; not given")
                return
            }
            var answer = "username=\(user)\npassword=\(tokens.accessToken)\n"
            if let expiresAt = tokens.expiresAt.flatMap(unixSeconds) { answer += "password_expiry_utc=\(expiresAt)\n" }
            FileHandle.standardOutput.write(Data(answer.utf8))
        }
    }

    /// The origin git asks about, exactly as a URL of that protocol and host (a port included), or nil.
    ///
    /// A host is a name or address and an optional port: nothing that could move the origin (`user@`, a path).
    static func origin(_ attributes: [String: String]) -> URL? {
        guard let scheme = attributes["protocol"], ["http", "https"].contains(scheme), let host = attributes["host"],
            !host.isEmpty, host.utf8.count <= 260,
            host.unicodeScalars.allSatisfy({
                $0.value > 0x20 && $0.value < 0x7F && !"@/?#\\%".unicodeScalars.contains($0)
            }),
            let url = URL(string: "\(scheme)://\(host)/"), url.host != nil, url.user == nil
        else { return nil }
        return url
    }

    private func note(_ text: String) {
        FileHandle.standardError.write(Data("sesame credential-helper: \(text)\n".utf8))
    }
}
