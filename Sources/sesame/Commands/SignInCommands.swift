import Foundation
import Sesame
import SesameJOSE

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The options of the sign-in commands.
enum SignInOptions {
    static let rest = OptionSpec(
        "--rest", value: "BASE_URL", "the REST backend's base URL, e.g. http://127.0.0.1:8080")
    static let email = OptionSpec("--email", value: "EMAIL", "the account's email (required)")
    /// `login`'s: needed with --rest only.
    static let loginEmail = OptionSpec("--email", value: "EMAIL", "with --rest: the account's email (required there)")
}

/// A sign-in to the REST backend, checked before the password is read or anything is sent.
struct RESTSignIn: Sendable {
    let selection: SessionSelection
    let base: URL
    let email: String
    let registering: Bool

    /// - Throws: ``CLIError`` (usage).
    init(_ arguments: ParsedArguments, selection: SessionSelection, registering: Bool) throws {
        self.selection = selection
        guard let text = arguments.value(SignInOptions.rest) else {
            throw arguments.usage(
                "\(arguments.command.name) needs --rest BASE_URL"
                    + (registering ? "" : ", or --issuer URL --client-id ID for an OpenID Connect provider"))
        }
        guard let url = URL(string: text.hasSuffix("/") ? text : text + "/"),
            url.scheme == "http" || url.scheme == "https", url.host?.isEmpty == false
        else {
            throw arguments.usage(
                "--rest takes an http(s) URL such as http://127.0.0.1:8080 (got '\(printable(text))')")
        }
        guard let email = arguments.value(SignInOptions.email) else {
            throw arguments.usage("--email EMAIL is required")
        }
        base = url
        self.email = email
        self.registering = registering
    }

    func run() async throws {
        let profile = selection.profile
        let kind = try selection.storeForNewSession()
        let store = try await profile.storeForSignIn(kind)
        let previous = (try? profile.settings()).flatMap { $0 }
        let password = try Self.readPassword(command: selection.command)
        let provider = RESTAuthProvider(baseURL: base)
        let tokens =
            registering
            ? try await provider.register(email: email, password: password)
            : try await provider.login(email: email, password: password)
        try await AuthSession(provider: provider, store: store, profile: profile.name).signIn(with: tokens)
        try profile.save(
            Profile.Settings(baseURL: base.absoluteString, store: kind, origins: [], email: tokens.user?.email ?? email)
        )
        await profile.forgetCredentials(in: previous, nowIn: kind)
        try? PrivateFile.delete(ServiceAccountLogin.secretURL(profile))  // a service account's, if it was one
        FileHandle.standardError.write(
            Data(
                ("signed in as \(PrintableText.sanitized(tokens.user?.email ?? email, limit: 200)) "
                    + "(profile \(profile.name), \(kind.rawValue) store)\n").utf8))
    }

    /// The password from standard input when it is not a terminal, else prompted for without echo.
    ///
    /// - Throws: ``CLIError`` (usage) for an empty password.
    static func readPassword(command: CommandSpec) throws -> String {
        if isatty(0) == 0 {
            let data = FileHandle.standardInput.readDataToEndOfFile()
            var text = String(decoding: data, as: UTF8.self)
            // Scalars, not Characters: "\r\n" is one Character, and hasSuffix("\n") is false for it.
            while let last = text.unicodeScalars.last, last == "\n" || last == "\r" { text.unicodeScalars.removeLast() }
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

    /// The profile, then no positionals: checked first by both sign-in commands.
    ///
    /// - Throws: ``CLIError`` (usage).
    static func selection(_ arguments: ParsedArguments) throws -> SessionSelection {
        let selection = try SessionSelection(arguments)
        guard arguments.positionals.isEmpty else {
            throw arguments.usage("passwords are read from standard input or the terminal, never from arguments")
        }
        return selection
    }
}

/// `sesame register --rest URL --email EMAIL`.
struct RegisterCommand: SesameCommand {
    static let spec = CommandSpec(
        words: ["register"], summary: "create an account on a REST backend and sign in", arguments: nil,
        discussion: """
            The password is read from standard input when it is not a terminal, else prompted for without echo;
            never from arguments. The store is checked before anything is sent, and the profile remembers the
            server, the store and the origins its credentials may go to.
            """,
        options: [SignInOptions.rest, SignInOptions.email] + GlobalOptions.session,
        examples: ["echo \"$PASSWORD\" | sesame register --rest http://127.0.0.1:8080 --email alice@example.com"],
        exitCodes: [], command: Self.self)

    let signIn: RESTSignIn

    init(_ arguments: ParsedArguments) throws {
        signIn = try RESTSignIn(arguments, selection: try RESTSignIn.selection(arguments), registering: true)
    }

    func run() async throws { try await signIn.run() }
}

/// `sesame login --rest URL --email EMAIL` or `sesame login --issuer URL --client-id ID`.
struct LoginCommand: SesameCommand {
    static let spec = CommandSpec(
        words: ["login"], summary: "sign in to a REST backend or an OpenID Connect provider", arguments: nil,
        discussion: """
            With --rest: signs in with email and password (read from standard input when it is not a terminal,
            else prompted for without echo; never from arguments).
            With --issuer: discovers the provider, opens its sign-in page in the browser (authorization code with
            PKCE S256) and receives the answer on a loopback redirect URI (RFC 8252); the URL is also printed on
            its own line to stderr, which is all --no-browser does. --device uses the device flow instead: it
            prints where to go and the code to enter. The ID token is verified against the provider's keys.
            Either way the credentials are kept in the profile's store.
            With --client-credentials: a service account (CI jobs, servers) gets its own token with the client
            credentials grant, proving itself with a signed assertion (--key, private_key_jwt) or a secret read
            from standard input; later commands get a new token the same way when it expires.
            """,
        options: [SignInOptions.rest, SignInOptions.loginEmail] + OIDCLoginFlow.options + ServiceAccountLogin.options
            + GlobalOptions.session,
        examples: [
            "sesame login --rest http://127.0.0.1:8080 --email alice@example.com",
            "echo \"$PASSWORD\" | sesame login --rest http://127.0.0.1:8080 --email alice@example.com --profile work",
            "sesame login --issuer http://127.0.0.1:8080 --client-id sesame-cli --no-browser",
            "sesame login --issuer https://id.example.com --client-id my-cli --device --resource https://api.example.com",
            "sesame login --client-credentials --issuer https://id.example.com --client-id nightly --key nightly.jwk --scope reports.read",
            "sesame login --issuer http://127.0.0.1:8080 --client-id calendar --profile calendar --native-sso vendor",
        ],
        exitCodes: [(1, "failure, e.g. invalid_credentials, or --store keyring with no keyring")], command: Self.self)

    /// Which kind of sign-in, each validated.
    enum Flow: Sendable {
        case rest(RESTSignIn)
        case oidc(OIDCLoginFlow)
        case service(ServiceAccountLogin)
    }

    let flow: Flow

    init(_ arguments: ParsedArguments) throws {
        let selection = try RESTSignIn.selection(arguments)
        if arguments.flag(ServiceAccountLogin.clientCredentials) {
            flow = .service(try ServiceAccountLogin(arguments, selection: selection))
            return
        }
        if let used = [
            ServiceAccountLogin.key, ServiceAccountLogin.secretStdin, ServiceAccountLogin.clientAuth,
            ServiceAccountLogin.assertionAudience,
        ].first(where: { arguments.flag($0) || arguments.value($0) != nil }) {
            throw arguments.usage("\(used.name) goes with --client-credentials")
        }
        if arguments.value(OIDCLoginFlow.issuer) != nil {
            flow = .oidc(try OIDCLoginFlow(arguments, selection: selection))
            return
        }
        if arguments.flag(OIDCLoginFlow.dpop) || arguments.value(OIDCLoginFlow.dpopAlgorithm) != nil {
            throw arguments.usage("DPoP needs --issuer (an OpenID Connect provider); the REST contract has no DPoP")
        }
        flow = .rest(try RESTSignIn(arguments, selection: selection, registering: false))
    }

    func run() async throws {
        switch flow {
        case .rest(let signIn): try await signIn.run()
        case .oidc(let signIn): try await signIn.run()
        case .service(let signIn): try await signIn.run()
        }
    }
}
