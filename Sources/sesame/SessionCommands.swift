import Foundation
import Sesame
import SesameJOSE

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `sesame register | login | token | status | request | logout`: a session kept in a token store per profile.
enum SessionCommands {
    static let globalOptions: Set<String> = ["--profile", "--store"]

    /// Where the CLI keeps its files: `$SESAME_HOME`, else `$XDG_CONFIG_HOME/sesame`, else `~/.config/sesame`.
    static var homeDirectory: URL {
        let environment = ProcessInfo.processInfo.environment
        if let home = environment["SESAME_HOME"], !home.isEmpty { return URL(fileURLWithPath: home) }
        if let xdg = environment["XDG_CONFIG_HOME"], !xdg.isEmpty {
            return URL(fileURLWithPath: xdg).appendingPathComponent("sesame")
        }
        return FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".config/sesame")
    }

    /// The profile's non-secret settings (which backend it signs in to), next to the credentials.
    struct ProfileSettings: Codable {
        var kind = "rest"
        var baseURL: String
    }

    struct Context {
        let profile: String
        let store: any TokenStore
        let settingsURL: URL

        init(_ arguments: ParsedArguments) throws {
            profile = try arguments.value("--profile") ?? "default"
            // The keyring when one answers, else 0600 files (DESIGN.md §4).
            let kind =
                try arguments.value("--store") ?? ProcessInfo.processInfo.environment["SESAME_STORE"]
                ?? (SecretServiceTokenStore.isAvailable ? "keyring" : "file")
            let credentials = SessionCommands.homeDirectory.appendingPathComponent("credentials")
            switch kind {
            case "file": store = try FileTokenStore(directory: credentials)
            case "memory": store = InMemoryTokenStore()
            case "keyring": store = SecretServiceTokenStore(service: "dev.sesame.cli")
            default: throw CLIError.usage("--store takes keyring, file or memory")
            }
            settingsURL = SessionCommands.homeDirectory.appendingPathComponent("profiles/\(profile).json")
        }

        func saveSettings(_ settings: ProfileSettings) throws {
            try FileManager.default.createDirectory(
                at: settingsURL.deletingLastPathComponent(), withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
            try JSONEncoder().encode(settings).write(to: settingsURL, options: .atomic)
        }

        func settings() throws -> ProfileSettings {
            guard let data = try? Data(contentsOf: settingsURL) else {
                throw CLIError(
                    status: .notSignedIn, code: "not_signed_in", message: "profile \(profile) is not signed in")
            }
            return try JSONDecoder().decode(ProfileSettings.self, from: data)
        }

        func session() throws -> (AuthSession, RESTAuthProvider) {
            let settings = try settings()
            guard let base = URL(string: settings.baseURL) else { throw CLIError.usage("bad base URL in the profile") }
            let provider = RESTAuthProvider(baseURL: base)
            return (AuthSession(provider: provider, store: store, profile: profile), provider)
        }
    }

    // MARK: Commands

    static func signIn(_ arguments: ParsedArguments, registering: Bool) async throws {
        let context = try Context(arguments)
        guard let base = try arguments.value("--rest"), let url = URL(string: base.hasSuffix("/") ? base : base + "/"),
            url.scheme == "http" || url.scheme == "https"
        else {
            throw CLIError.usage(
                "\(registering ? "register" : "login") needs --rest BASE_URL (OIDC login arrives later)")
        }
        guard let email = try arguments.value("--email") else { throw CLIError.usage("--email EMAIL is required") }
        guard arguments.positionals.isEmpty else {
            throw CLIError.usage("passwords are read from standard input or the terminal, never from arguments")
        }
        let password = try readPassword()
        let provider = RESTAuthProvider(baseURL: url)
        let tokens =
            registering
            ? try await provider.register(email: email, password: password)
            : try await provider.login(email: email, password: password)
        try context.saveSettings(ProfileSettings(baseURL: url.absoluteString))
        try await AuthSession(provider: provider, store: context.store, profile: context.profile).signIn(with: tokens)
        FileHandle.standardError.write(
            Data("signed in as \(tokens.user?.email ?? email) (profile \(context.profile))\n".utf8))
    }

    static func token(_ arguments: ParsedArguments) async throws {
        let context = try Context(arguments)
        let (session, _) = try context.session()
        let tokens =
            arguments.flags.contains("--force-refresh")
            ? try await session.forceRefresh() : try await session.validTokens()
        if arguments.flags.contains("--json") {
            var json: JOSEObject = ["accessToken": .string(tokens.accessToken), "tokenType": .string(tokens.tokenType)]
            if let expiresAt = tokens.expiresAt { json["expiresAt"] = .integer(Int64(expiresAt.timeIntervalSince1970)) }
            print(JOSEValue.object(json).jsonString)
        } else {
            print(tokens.accessToken)
        }
    }

    static func status(_ arguments: ParsedArguments) async throws {
        let context = try Context(arguments)
        let settings = try context.settings()
        let (session, _) = try context.session()
        guard let tokens = try await session.currentTokens else {
            throw AuthError(.notSignedIn, "profile \(context.profile) is not signed in")
        }
        var status: JOSEObject = [
            "profile": .string(context.profile), "provider": .string(settings.baseURL),
            "tokenType": .string(tokens.tokenType),
            "hasRefreshToken": .bool(tokens.refreshToken != nil),
        ]
        if let user = tokens.user {
            status["user"] = ["id": .string(user.id), "email": user.email.map(JOSEValue.string) ?? .null]
        }
        if let expiresAt = tokens.expiresAt {
            status["expiresAt"] = .string(ISO8601DateFormatter().string(from: expiresAt))
        }
        if let scope = tokens.scope { status["scope"] = .string(scope) }
        if arguments.flags.contains("--json") {
            print(JOSEValue.object(status).prettyJSONString)
        } else {
            print("profile:  \(context.profile)")
            print("provider: \(settings.baseURL)")
            print("user:     \(tokens.user?.email ?? tokens.user?.id ?? "unknown")")
            print("expires:  \(tokens.expiresAt.map { ISO8601DateFormatter().string(from: $0) } ?? "unknown")")
            if let scope = tokens.scope { print("scope:    \(scope)") }
        }
    }

    static func request(_ arguments: ParsedArguments) async throws {
        let context = try Context(arguments)
        let settings = try context.settings()
        guard let base = URL(string: settings.baseURL) else { throw CLIError.usage("bad base URL in the profile") }
        guard let target = try arguments.atMostOnePositional("PATH|URL") else {
            throw CLIError.usage("request needs a PATH (resolved against \(settings.baseURL)) or a URL")
        }
        var headers = SesameHTTP.Headers()
        for header in arguments.values("-H") {
            guard let colon = header.firstIndex(of: ":") else { throw CLIError.usage("-H takes 'Name: value'") }
            headers[String(header[..<colon])] = header[header.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        let body = try arguments.value("-d").map { Data($0.utf8) }
        let method = try arguments.value("-X") ?? (body == nil ? "GET" : "POST")
        if body != nil, !headers.contains("Content-Type") { headers["Content-Type"] = "application/json" }
        let (session, _) = try context.session()
        let client = AuthorizedClient(session: session, baseURL: base)
        let isURL = target.hasPrefix("http://") || target.hasPrefix("https://")
        if isURL {
            guard let url = URL(string: target), url.host != nil else { throw CLIError.usage("bad URL \(target)") }
            guard client.mayReceiveCredentials(url) else {
                throw CLIError.usage(
                    "refusing to send the profile's credentials to \(SesameHTTP.Origin(url)?.description ?? target): "
                        + "they belong to \(SesameHTTP.Origin(base)?.description ?? settings.baseURL)")
            }
        }
        let response = try await client.send(
            AuthorizedClient.Endpoint(
                method, isURL || target.hasPrefix("/") ? target : "/" + target, headers: headers, body: body))
        FileHandle.standardOutput.write(response.body)
        guard response.isSuccess else {
            let transient = response.status >= 500 || response.status == 429
            throw CLIError(
                status: transient ? .transient : .failure, code: "http_\(response.status)",
                message: "the server answered \(response.status)")
        }
    }

    static func logout(_ arguments: ParsedArguments) async throws {
        let context = try Context(arguments)
        let (session, provider) = try context.session()
        _ = provider
        let result = await session.signOut(revoke: !arguments.flags.contains("--no-revoke"))
        if case .failed(let error) = result.revocation {
            FileHandle.standardError.write(
                Data(
                    "warning: the server did not confirm the sign-out (\(CLI.message(error))); local credentials were deleted\n"
                        .utf8))
        }
        guard result.credentialsRemoved else {
            throw AuthError(
                .storeUnavailable, "the local credentials of profile \(context.profile) could not be deleted")
        }
        try? FileManager.default.removeItem(at: context.settingsURL)
        FileHandle.standardError.write(Data("signed out (profile \(context.profile))\n".utf8))
    }

    // MARK: Passwords

    /// The password from standard input when it is not a terminal, else prompted for without echo.
    static func readPassword() throws -> String {
        if isatty(0) == 0 {
            let data = FileHandle.standardInput.readDataToEndOfFile()
            var text = String(decoding: data, as: UTF8.self)
            while text.hasSuffix("\n") || text.hasSuffix("\r") { text.removeLast() }
            guard !text.isEmpty else { throw CLIError.usage("no password on standard input") }
            return text
        }
        FileHandle.standardError.write(Data("Password: ".utf8))
        var original = termios()
        tcgetattr(0, &original)
        var silent = original
        silent.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(0, TCSANOW, &silent)
        defer {
            tcsetattr(0, TCSANOW, &original)
            FileHandle.standardError.write(Data("\n".utf8))
        }
        guard let line = readLine(strippingNewline: true), !line.isEmpty else {
            throw CLIError.usage("no password given")
        }
        return line
    }
}
