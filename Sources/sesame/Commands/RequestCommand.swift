import Foundation
import Sesame
import SesameJOSE

/// `sesame request [-X METHOD] [-H 'Name: value']... [-d DATA] [-i] PATH|URL`: an authorized request.
struct RequestCommand: SesameCommand {
    static let method = OptionSpec(
        "--method", short: "-X", value: "METHOD", "the HTTP method", default: "GET, or POST with -d")
    static let header = OptionSpec("--header", short: "-H", value: "'Name: value'", "an extra header", repeatable: true)
    static let data = OptionSpec(
        "--data", short: "-d", value: "DATA",
        "the request body (Content-Type application/json unless -H says otherwise)")
    static let include = OptionSpec("--include", short: "-i", "print the status line and headers before the body")
    static let spec = CommandSpec(
        words: ["request"], summary: "an authorized request; the body to stdout", arguments: "PATH|URL",
        discussion: """
            A PATH is resolved against the profile's server. Credentials go only to the profile's origins; a URL
            on any other origin is refused (exit 2), and a redirect to another origin is followed without them.
            A 401 refreshes the session once and retries once. A DPoP profile sends Authorization: DPoP with a
            fresh proof of its key per request (and the server's nonce, retried once when it asks).
            """,
        options: [method, header, data, include] + GlobalOptions.session,
        examples: ["sesame request /me", "sesame request -X POST -d '{\"a\":1}' /items", "sesame request -i /me"],
        exitCodes: [
            (1, "the server answered 4xx"), (2, "usage error, or a URL outside the profile's origins"),
            (4, "transient: network, 5xx, 429"),
        ],
        command: Self.self)

    let selection: SessionSelection
    /// The PATH (starting with `/`) or the absolute URL.
    let target: String
    let url: URL?
    let httpMethod: String
    let headers: SesameHTTP.Headers
    let body: Data?
    let includesHead: Bool

    /// A step-up challenge (RFC 9470) as an error that names what the resource wants and the command that gets it.
    static func stepUp(_ challenge: StepUpChallenge, context: SessionContext) -> CLIError {
        // The profile's own options again (a login replaces the profile's settings with what it is given).
        var command = "sesame login"
        if let oidc = context.settings.oidc {
            command += " --issuer \(shellQuoted(context.settings.baseURL)) --client-id \(shellQuoted(oidc.clientID))"
            if oidc.scopes.joined(separator: " ") != OIDCLoginFlow.defaultScope {
                command += " --scope \(shellQuoted(oidc.scopes.joined(separator: " ")))"
            }
            if oidc.dpop == true { command += " --dpop" }
            for origin in context.settings.origins { command += " --resource \(shellQuoted(origin))" }
        }
        if !challenge.acrValues.isEmpty {
            command += " --acr-values \(shellQuoted(challenge.acrValues.joined(separator: " ")))"
        }
        if let maxAge = challenge.maxAge { command += " --max-age \(Int(maxAge))" }
        if context.profile.name != "default" { command += " --profile \(shellQuoted(context.profile.name))" }
        return CLIError(
            status: .failure, code: "step_up_required",
            message: "the resource wants a stronger or more recent sign-in (\(challenge)); sign in that way: \(command)"
        )
    }

    init(_ arguments: ParsedArguments) throws {
        selection = try SessionSelection(arguments)
        guard let target = try arguments.atMostOnePositional("PATH|URL") else {
            throw arguments.usage("request needs a PATH (resolved against the profile's server) or a URL")
        }
        var headers = SesameHTTP.Headers()
        for header in arguments.values(Self.header) {
            guard let colon = header.firstIndex(of: ":"), colon != header.startIndex,
                header[..<colon].utf8.allSatisfy({ byte in
                    (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                        || "!#$%&'*+-.^_`|~".utf8.contains(byte)
                })
            else { throw arguments.usage("-H takes 'Name: value' with a token as the name") }
            headers.add(
                String(header[..<colon]), header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        body = arguments.value(Self.data).map { Data($0.utf8) }
        httpMethod = arguments.value(Self.method) ?? (body == nil ? "GET" : "POST")
        if body != nil, !headers.contains("Content-Type") { headers["Content-Type"] = "application/json" }
        self.headers = headers
        includesHead = arguments.flag(Self.include)
        // A PATH is whatever starts with `/` (`/search?u=http://x` too); a URL starts with its scheme and `://`.
        if !target.hasPrefix("/") && startsWithScheme(target) {
            guard let url = URL(string: target), let scheme = url.scheme?.lowercased(),
                scheme == "http" || scheme == "https", url.host != nil
            else { throw arguments.usage("bad URL '\(printable(target))'") }
            self.url = url
            self.target = target
        } else {
            url = nil
            self.target = target.hasPrefix("/") ? target : "/" + target
        }
    }

    func run() async throws {
        let context = try await SessionContext(selection).withUsableKey()
        let client = context.client
        if let url, !client.mayReceiveCredentials(url) {
            throw CLIError.usage(
                "refusing to send profile \(context.profile.name)'s credentials to "
                    + "\(SesameHTTP.Origin(url)?.description ?? "that origin"): they belong to "
                    + client.credentialOrigins.map(\.description).sorted().joined(separator: ", ")
                    + "; give a PATH, or log in to that server with another --profile",
                command: selection.command)
        }
        // A service account that lost its token (refused renewal) asks the grant again first.
        if context.service != nil { _ = try await context.tokens() }
        let response: SesameHTTP.Response
        do {
            response = try await client.send(
                AuthorizedClient.Endpoint(httpMethod, target, headers: headers, body: body))
        } catch let error as AuthError where error.code == .stepUpRequired {
            throw Self.stepUp(error.stepUpChallenge ?? StepUpChallenge(), context: context)
        }
        if includesHead {
            var head = "HTTP \(response.status)\n"
            for field in response.headers {
                head += "\(PrintableText.sanitized(field.name)): \(PrintableText.sanitized(field.value, limit: 4096))\n"
            }
            FileHandle.standardOutput.write(Data((head + "\n").utf8))
        }
        FileHandle.standardOutput.write(response.body)
        // On a terminal the prompt starts on a line of its own; a pipe gets the body byte for byte.
        if isatty(STDOUT_FILENO) == 1, let last = response.body.last, last != UInt8(ascii: "\n") {
            FileHandle.standardOutput.write(Data("\n".utf8))
        }
        guard response.isSuccess else {
            if let challenge = StepUpChallenge(response) { throw Self.stepUp(challenge, context: context) }
            let transient = response.status >= 500 || response.status == 429
            let server = ServerErrorResponse(response)
            var message = "the server answered \(response.status)"
            if let server { message += " \(server.error)" + (server.errorDescription.map { ": \($0)" } ?? "") }
            throw CLIError(status: transient ? .transient : .failure, code: "http_\(response.status)", message: message)
        }
    }
}

/// `text` as one shell word: as it is when it has only safe characters, else in single quotes.
func shellQuoted(_ text: String) -> String {
    let clean = PrintableText.sanitized(text, limit: 512)
    let safe = clean.unicodeScalars.allSatisfy { scalar in
        scalar.isASCII && (CharacterSet.alphanumerics.contains(scalar) || "_./:@%+=,-".unicodeScalars.contains(scalar))
    }
    return safe && !clean.isEmpty ? clean : "'" + clean.replacingOccurrences(of: "'", with: "'\\''") + "'"
}
