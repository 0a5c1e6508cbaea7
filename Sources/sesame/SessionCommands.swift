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
    /// A signed-in profile, its store and a session over it: for an OpenID Connect profile the SDK's facade,
    /// restored without the network.
    struct Context {
        let profile: Profile
        let settings: Profile.Settings
        let store: any TokenStore
        let session: AuthSession
        /// The facade, for an OpenID Connect profile: without a key when its DPoP key file could not be read
        /// (``dpopProblem``; then only logout uses it).
        let oidc: OIDCAuth?
        let base: URL
        /// Why the DPoP key could not be read (a command that uses the tokens throws it; logout does not need it).
        var dpopProblem: CLIError?

        /// Loads the profile (exit 3 when it does not exist) and opens the store it remembers.
        init(_ arguments: ParsedArguments) async throws {
            profile = try Profile(arguments)
            settings = try profile.requireSettings()
            if let explicit = arguments.value("--store"), explicit != settings.store {
                throw CLIError.usage(
                    "profile \(profile.name) keeps its credentials in the \(settings.store) store; "
                        + "drop --store \(printable(explicit)), or log in again with it",
                    command: arguments.command)
            }
            guard ["keyring", "file"].contains(settings.store) else {
                throw CLIError(
                    status: .failure, code: "profile_corrupt",
                    message: "the profile file \(profile.settingsURL.path) names no known store; log in again")
            }
            store = try profile.store(settings.store, forNewSession: false, command: arguments.command)
            guard let base = URL(string: settings.baseURL), let host = base.host, !host.isEmpty,
                ["http", "https"].contains(base.scheme?.lowercased() ?? ""), (base.port ?? 443) <= 65535
            else {
                throw CLIError(
                    status: .failure, code: "profile_corrupt",
                    message: "the profile file \(profile.settingsURL.path) has a bad server URL; log in again")
            }
            self.base = base
            guard settings.kind == "oidc" else {
                oidc = nil
                session = AuthSession(provider: RESTAuthProvider(baseURL: base), store: store, profile: profile.name)
                return
            }
            guard let settings = settings.oidc else {
                throw CLIError(
                    status: .failure, code: "profile_corrupt",
                    message: "the profile file \(profile.settingsURL.path) has no OpenID Connect settings; log in again"
                )
            }
            do {
                let auth = try await OIDCLogin.restore(settings, profile: profile, store: store)
                oidc = auth
                session = auth.session
            } catch let error as CLIError where error.code == "dpop_key_unreadable" {
                // The tokens are unusable until the key file is fixed, but revocation needs no proof: logout still
                // works, through a session without a key (it never sends the bound tokens anywhere else).
                dpopProblem = error
                let keyless = try await OIDCAuth.restore(
                    metadata: settings.metadata, clientID: settings.clientID, redirectURI: settings.redirectURI,
                    scopes: settings.scopes, store: store, profile: profile.name)
                oidc = keyless
                session = keyless.session
            }
        }

        /// This context, or the DPoP key's problem (every command that uses the tokens needs the key).
        func withUsableKey() throws -> Context {
            if let dpopProblem { throw dpopProblem }
            return self
        }

        /// The profile's server and resources; the session's provider supplies the scheme (DPoP when bound).
        var client: AuthorizedClient {
            AuthorizedClient(
                session: session, baseURL: base, additionalOrigins: settings.origins.compactMap(URL.init(string:)))
        }
    }

    // MARK: Signing in

    static func signIn(_ arguments: ParsedArguments, registering: Bool) async throws {
        let profile = try Profile(arguments)
        guard arguments.positionals.isEmpty else {
            throw CLIError.usage(
                "passwords are read from standard input or the terminal, never from arguments",
                command: arguments.command)
        }
        if !registering, arguments.value("--issuer") != nil { return try await OIDCLogin.run(arguments) }
        if !registering, arguments.flag("--dpop") || arguments.value("--dpop-alg") != nil {
            throw CLIError.usage(
                "DPoP needs --issuer (an OpenID Connect provider); the REST contract has no DPoP",
                command: arguments.command)
        }
        guard let base = arguments.value("--rest") else {
            throw CLIError.usage(
                "\(arguments.command.name) needs --rest BASE_URL"
                    + (registering ? "" : ", or --issuer URL --client-id ID for an OpenID Connect provider"),
                command: arguments.command)
        }
        guard let url = URL(string: base.hasSuffix("/") ? base : base + "/"),
            url.scheme == "http" || url.scheme == "https",
            url.host?.isEmpty == false
        else {
            throw CLIError.usage(
                "--rest takes an http(s) URL such as http://127.0.0.1:8080 (got '\(printable(base))')",
                command: arguments.command)
        }
        guard let email = arguments.value("--email") else {
            throw CLIError.usage("--email EMAIL is required", command: arguments.command)
        }
        let kind = Profile.storeKind(for: arguments)
        let store = try await profile.storeForSignIn(kind, command: arguments.command)
        let previous = (try? profile.settings()).flatMap { $0 }
        let password = try readPassword(command: arguments.command)
        let provider = RESTAuthProvider(baseURL: url)
        let tokens =
            registering
            ? try await provider.register(email: email, password: password)
            : try await provider.login(email: email, password: password)
        try await AuthSession(provider: provider, store: store, profile: profile.name).signIn(with: tokens)
        try profile.save(
            Profile.Settings(
                baseURL: url.absoluteString, store: kind, origins: [], email: tokens.user?.email ?? email))
        await profile.forgetCredentials(in: previous, nowIn: kind, command: arguments.command)
        FileHandle.standardError.write(
            Data(
                ("signed in as \(PrintableText.sanitized(tokens.user?.email ?? email, limit: 200)) "
                    + "(profile \(profile.name), \(kind) store)\n").utf8))
    }

    // MARK: Using the session

    static func token(_ arguments: ParsedArguments) async throws {
        try arguments.noPositionals()
        let context = try await Context(arguments).withUsableKey()
        let tokens =
            arguments.flag("--force-refresh")
            ? try await context.session.forceRefresh() : try await context.session.validTokens()
        if arguments.flag("--json") {
            var json: JOSEObject = ["accessToken": .string(tokens.accessToken), "tokenType": .string(tokens.tokenType)]
            if let expiresAt = tokens.expiresAt.flatMap(unixSeconds) { json["expiresAt"] = .integer(expiresAt) }
            print(JOSEValue.object(json).jsonString)
        } else {
            print(tokens.accessToken)
        }
    }

    static func status(_ arguments: ParsedArguments) async throws {
        try arguments.noPositionals()
        let context = try await Context(arguments).withUsableKey()
        guard let tokens = try await context.session.currentTokens else {
            throw AuthError(.notSignedIn, "profile \(context.profile.name) is not signed in")
        }
        let expired = tokens.expiresAt.map { $0 <= Date() } ?? false
        if arguments.flag("--json") {
            var status: JOSEObject = [
                "profile": .string(context.profile.name), "provider": .string(context.settings.baseURL),
                "kind": .string(context.settings.kind), "store": .string(context.settings.store),
                "tokenType": .string(tokens.tokenType), "hasRefreshToken": .bool(tokens.refreshToken != nil),
                "expired": .bool(expired), "dpop": .bool(context.oidc?.provider.dpopSigner != nil),
            ]
            if let user = tokens.user {
                status["user"] = ["id": .string(user.id), "email": user.email.map(JOSEValue.string) ?? .null]
            }
            if let expiresAt = tokens.expiresAt.flatMap(unixSeconds) { status["expiresAt"] = .integer(expiresAt) }
            if let scope = tokens.scope { status["scope"] = .string(scope) }
            if let thumbprint = tokens.dpopKeyThumbprint { status["dpopKeyThumbprint"] = .string(thumbprint) }
            print(JOSEValue.object(status).jsonString)
            return
        }
        // What a server or a file said is printed without control characters.
        let safe = { (text: String) in PrintableText.sanitized(text, limit: 200) }
        print("profile:  \(context.profile.name)")
        print("provider: \(safe(context.settings.baseURL)) (\(safe(context.settings.kind)))")
        print("store:    \(safe(context.settings.store))")
        if let key = context.oidc?.provider.dpopSigner {
            print("dpop:     yes (\(key.algorithm.name) key \(key.thumbprint))")
        }
        print("user:     \(safe(tokens.user?.email ?? tokens.user?.id ?? "unknown"))")
        var expiry = tokens.expiresAt.map { ISO8601DateFormatter().string(from: $0) } ?? "unknown"
        if expired { expiry += tokens.refreshToken == nil ? " (expired)" : " (expired — will refresh)" }
        print("expires:  \(expiry)")
        if let scope = tokens.scope { print("scope:    \(safe(scope))") }
    }

    static func userInfo(_ arguments: ParsedArguments) async throws {
        try arguments.noPositionals()
        let context = try await Context(arguments).withUsableKey()
        guard let auth = context.oidc else {
            throw CLIError.usage(
                "profile \(context.profile.name) signs in with a REST backend, which has no UserInfo; "
                    + "try 'sesame request /me'",
                command: arguments.command)
        }
        // Through the SDK: the session's scheme (DPoP when bound), one refresh on a rejection, `sub` checked.
        let claims = try await auth.userInfo()
        if arguments.flag("--json") {
            print(JOSEValue.object(claims).jsonString)
            return
        }
        let width = min(32, (claims.map { $0.name.count }.max() ?? 0) + 2)
        for member in claims.sorted(by: { $0.name < $1.name }) {
            let value = member.value.stringValue ?? member.value.jsonString
            let label = PrintableText.sanitized(member.name + ":", limit: 64)
            print(
                label.padding(toLength: width, withPad: " ", startingAt: 0) + PrintableText.sanitized(value, limit: 400)
            )
        }
    }

    /// Integer Unix seconds, or nil for a date no integer holds.
    static func unixSeconds(_ date: Date) -> Int64? {
        let seconds = date.timeIntervalSince1970.rounded(.down)
        return seconds.isFinite && abs(seconds) < 1e15 ? Int64(seconds) : nil
    }

    static func request(_ arguments: ParsedArguments) async throws {
        guard let target = try arguments.atMostOnePositional("PATH|URL") else {
            throw CLIError.usage(
                "request needs a PATH (resolved against the profile's server) or a URL", command: arguments.command)
        }
        let context = try await Context(arguments).withUsableKey()
        var headers = SesameHTTP.Headers()
        for header in arguments.values("--header") {
            guard let colon = header.firstIndex(of: ":"), colon != header.startIndex,
                header[..<colon].utf8.allSatisfy({ byte in
                    (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                        || "!#$%&'*+-.^_`|~".utf8.contains(byte)
                })
            else {
                throw CLIError.usage("-H takes 'Name: value' with a token as the name", command: arguments.command)
            }
            headers.add(
                String(header[..<colon]),
                header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let body = arguments.value("--data").map { Data($0.utf8) }
        let method = arguments.value("--method") ?? (body == nil ? "GET" : "POST")
        if body != nil, !headers.contains("Content-Type") { headers["Content-Type"] = "application/json" }
        let client = context.client
        // A PATH is whatever starts with `/` (`/search?u=http://x` too); a URL starts with its scheme and `://`.
        let isURL = !target.hasPrefix("/") && startsWithScheme(target)
        if isURL {
            guard let url = URL(string: target), let scheme = url.scheme?.lowercased(),
                scheme == "http" || scheme == "https", url.host != nil
            else {
                throw CLIError.usage("bad URL '\(printable(target))'", command: arguments.command)
            }
            guard client.mayReceiveCredentials(url) else {
                throw CLIError.usage(
                    "refusing to send profile \(context.profile.name)'s credentials to "
                        + "\(SesameHTTP.Origin(url)?.description ?? "that origin"): they belong to "
                        + client.credentialOrigins.map(\.description).sorted().joined(separator: ", ")
                        + "; give a PATH, or log in to that server with another --profile",
                    command: arguments.command)
            }
        }
        let path = isURL || target.hasPrefix("/") ? target : "/" + target
        let response = try await client.send(
            AuthorizedClient.Endpoint(method, path, headers: headers, body: body))
        if arguments.flag("--include") {
            var head = "HTTP \(response.status)\n"
            for field in response.headers {
                head += "\(PrintableText.sanitized(field.name)): \(PrintableText.sanitized(field.value, limit: 4096))\n"
            }
            FileHandle.standardOutput.write(Data((head + "\n").utf8))
        }
        FileHandle.standardOutput.write(response.body)
        guard response.isSuccess else {
            let transient = response.status >= 500 || response.status == 429
            let server = ServerErrorResponse(response)
            var message = "the server answered \(response.status)"
            if let server { message += " \(server.error)" + (server.errorDescription.map { ": \($0)" } ?? "") }
            throw CLIError(status: transient ? .transient : .failure, code: "http_\(response.status)", message: message)
        }
    }

    // MARK: Signing out

    static func logout(_ arguments: ParsedArguments) async throws {
        try arguments.noPositionals()
        let profile = try Profile(arguments)
        let settings: Profile.Settings?
        do {
            settings = try profile.settings()
        } catch let error as CLIError {
            // A corrupt profile is always cleared: it was moved aside; remove any credentials it may have left.
            FileHandle.standardError.write(Data("warning: \(PrintableText.sanitized(error.message))\n".utf8))
            for kind in ["file", "keyring"] {
                if let store = try? profile.store(kind, forNewSession: false, command: arguments.command) {
                    try? await store.delete(profile: profile.name)
                }
            }
            FileHandle.standardError.write(Data("signed out (profile \(profile.name))\n".utf8))
            return
        }
        guard settings != nil else {
            FileHandle.standardError.write(Data("not signed in (profile \(profile.name)); nothing to do\n".utf8))
            return
        }
        let context = try await Context(arguments)
        if arguments.flag("--end-session") {
            guard let auth = context.oidc else {
                throw CLIError.usage("--end-session is for OpenID Connect profiles", command: arguments.command)
            }
            // Without id_token_hint: it would print the ID token (the user's email with it) where any log keeps
            // it; the provider asks the user to confirm instead (RP-Initiated Logout §2).
            if let url = auth.provider.endSessionURL(for: TokenSet(accessToken: "-")) {
                print(url.absoluteString)
                LoopbackUserAgent.openInSystemBrowser(url)
            } else {
                FileHandle.standardError.write(Data("warning: the provider has no end-session endpoint\n".utf8))
            }
        }
        let result = await context.session.signOut(revoke: !arguments.flag("--no-revoke"))
        if case .failed(let error) = result.revocation {
            FileHandle.standardError.write(
                Data(
                    ("warning: the server did not confirm the sign-out (\(CLI.describe(error))); "
                        + "the session may still be valid there until it expires\n").utf8))
        }
        guard result.credentialsRemoved else {
            throw CLIError(
                status: .transient, code: "store_unavailable",
                message: "the local credentials of profile \(profile.name) could not be deleted; run logout again")
        }
        profile.deleteSettings()
        try? await OIDCLogin.dpopKeys(profile).deleteKey(profile: profile.name)
        FileHandle.standardError.write(Data("signed out (profile \(profile.name))\n".utf8))
    }

    // MARK: Passwords

    /// The password from standard input when it is not a terminal, else prompted for without echo.
    static func readPassword(command: CommandSpec) throws -> String {
        if isatty(0) == 0 {
            let data = FileHandle.standardInput.readDataToEndOfFile()
            var text = String(decoding: data, as: UTF8.self)
            while text.hasSuffix("\n") || text.hasSuffix("\r") { text.removeLast() }
            guard !text.isEmpty else { throw CLIError.usage("no password on standard input", command: command) }
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
            throw CLIError.usage("no password given", command: command)
        }
        return line
    }
}
