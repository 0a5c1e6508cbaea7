/// Every command of `sesame`, declared once: parsing, `--help`, `sesame help`, suggestions and
/// `sesame completion` are generated from this table.
enum CommandTable {
    static let all: [CommandSpec] = [
        demo, serve, register, login, token, userinfo, status, request, logout, completion,
        jwkGenerate, jwkPublic, jwtDecode, jwtVerify, jwtSign,
    ]

    /// The command named by the first one or two of `words`, and how many words it took.
    static func lookup(_ words: [String]) -> (CommandSpec, Int)? {
        if words.count >= 2, let two = all.first(where: { $0.words == Array(words.prefix(2)) }) { return (two, 2) }
        if let one = words.first, let command = all.first(where: { $0.words == [one] }) { return (command, 1) }
        return nil
    }

    /// Groups of subcommands (`jwt`, `jwk`).
    static var groups: [String: [CommandSpec]] {
        Dictionary(grouping: all.filter { $0.words.count == 2 }, by: { $0.words[0] })
    }

    static let demo = CommandSpec(
        words: ["demo"], summary: "a narrated run of what Sesame does, on an embedded dev server (loopback only)",
        arguments: nil,
        discussion: """
            Signs and verifies tokens, shows forged ones rejected, then runs the REST contract against a dev server
            embedded on an ephemeral loopback port. Exits 1 if any check misbehaves.
            """,
        options: [], examples: ["sesame demo"], exitCodes: [],
        run: { try await DemoCommand.run($0) })

    static let serve = CommandSpec(
        words: ["serve"], summary: "the local development identity server", arguments: nil,
        discussion: ServeCommand.discussion, options: ServeCommand.options,
        examples: [
            "sesame serve --port 8080 --db dev.sqlite --user alice@example.com:correct-horse",
            "sesame serve --port 0 --access-token-ttl 2 --faults '/refresh-token:status=503@0.3'",
        ],
        exitCodes: [], run: { try await ServeCommand.run($0) })

    static let register = CommandSpec(
        words: ["register"], summary: "create an account on a REST backend and sign in", arguments: nil,
        discussion: """
            The password is read from standard input when it is not a terminal, else prompted for without echo;
            never from arguments. The store is checked before anything is sent, and the profile remembers the
            server, the store and the origins its credentials may go to.
            """,
        options: [SessionOptions.rest, SessionOptions.email] + GlobalOptions.session,
        examples: ["echo \"$PASSWORD\" | sesame register --rest http://127.0.0.1:8080 --email alice@example.com"],
        exitCodes: [], run: { try await SessionCommands.signIn($0, registering: true) })

    static let login = CommandSpec(
        words: ["login"], summary: "sign in to a REST backend or an OpenID Connect provider", arguments: nil,
        discussion: """
            With --rest: signs in with email and password (read from standard input when it is not a terminal,
            else prompted for without echo; never from arguments).
            With --issuer: discovers the provider, opens its sign-in page in the browser (authorization code with
            PKCE S256) and receives the answer on a loopback redirect URI (RFC 8252); the URL is also printed on
            its own line to stderr, which is all --no-browser does. --device uses the device flow instead: it
            prints where to go and the code to enter. The ID token is verified against the provider's keys.
            Either way the credentials are kept in the profile's store.
            """,
        options: [
            SessionOptions.rest, SessionOptions.loginEmail,
            OptionSpec("--issuer", value: "URL", "the OpenID Connect issuer (https, or http on loopback)"),
            OptionSpec("--client-id", value: "ID", "the registered public client (the dev server's: sesame-cli)"),
            OptionSpec(
                "--scope", value: "SCOPES", "space-separated scopes", default: "openid profile email offline_access"),
            OptionSpec(
                "--redirect-uri", value: "URI", "the loopback redirect (port 0: a free one)",
                default: "http://127.0.0.1:0/callback"),
            OptionSpec("--resource", value: "URL", "an API origin that may receive the tokens", repeatable: true),
            OptionSpec("--no-browser", "print the URL, do not open a browser"),
            OptionSpec("--device", "the device flow: a code to enter on another device"),
            OptionSpec(
                "--dpop",
                "bind the tokens to this profile's key (DPoP, RFC 9449): made on first use, kept 0600 beside the credentials and reused by later sign-ins"
            ),
            OptionSpec(
                "--dpop-alg", value: "ALG",
                "a new key's algorithm: ES256, EdDSA or RS256 (implies --dpop; default ES256 if the provider lists it, else the first of these it lists); another algorithm than the profile's key has replaces that key"
            ),
        ] + GlobalOptions.session,
        examples: [
            "sesame login --rest http://127.0.0.1:8080 --email alice@example.com",
            "echo \"$PASSWORD\" | sesame login --rest http://127.0.0.1:8080 --email alice@example.com --profile work",
            "sesame login --issuer http://127.0.0.1:8080 --client-id sesame-cli --no-browser",
            "sesame login --issuer https://id.example.com --client-id my-cli --device --resource https://api.example.com",
        ],
        exitCodes: [(1, "failure, e.g. invalid_credentials, or --store keyring with no keyring")],
        run: { try await SessionCommands.signIn($0, registering: false) })

    static let token = CommandSpec(
        words: ["token"], summary: "a valid access token on stdout, refreshed if needed", arguments: nil,
        discussion: """
            Prints the profile's access token, refreshing it first when it expires within a minute (or half its
            lifetime). Several processes at once refresh once between them. A DPoP profile's token (login --dpop)
            works only with a proof of the profile's key: use 'sesame request', which sends both, not curl.
            """,
        options: [OptionSpec("--force-refresh", "refresh now, whatever the expiry"), GlobalOptions.json]
            + GlobalOptions.session,
        examples: [
            "curl -H \"Authorization: Bearer $(sesame token)\" http://127.0.0.1:8080/me", "sesame token --json",
        ],
        exitCodes: [], run: { try await SessionCommands.token($0) })

    static let userinfo = CommandSpec(
        words: ["userinfo"], summary: "the provider's UserInfo claims for the signed-in user", arguments: nil,
        discussion: """
            OpenID Connect profiles: asks the provider's UserInfo endpoint with the profile's credentials (a DPoP
            proof for a DPoP profile), refreshing once if the access token is rejected. The answer's sub must be
            the ID token's (OIDC Core 5.3.2): another subject is refused with userinfo_rejected.
            """,
        options: [GlobalOptions.json] + GlobalOptions.session,
        examples: ["sesame userinfo", "sesame userinfo --json --profile work"],
        exitCodes: [(1, "the provider refused, or described another subject (userinfo_rejected)")],
        run: { try await SessionCommands.userInfo($0) })

    static let status = CommandSpec(
        words: ["status"], summary: "who, which provider, store, expiry, scopes — never a token", arguments: nil,
        discussion: "Reads the profile without refreshing anything.",
        options: [GlobalOptions.json] + GlobalOptions.session,
        examples: ["sesame status", "sesame status --json --profile work"],
        exitCodes: [], run: { try await SessionCommands.status($0) })

    static let request = CommandSpec(
        words: ["request"], summary: "an authorized request; the body to stdout", arguments: "PATH|URL",
        discussion: """
            A PATH is resolved against the profile's server. Credentials go only to the profile's origins; a URL
            on any other origin is refused (exit 2), and a redirect to another origin is followed without them.
            A 401 refreshes the session once and retries once. A DPoP profile sends Authorization: DPoP with a
            fresh proof of its key per request (and the server's nonce, retried once when it asks).
            """,
        options: [
            OptionSpec("--method", short: "-X", value: "METHOD", "the HTTP method", default: "GET, or POST with -d"),
            OptionSpec("--header", short: "-H", value: "'Name: value'", "an extra header", repeatable: true),
            OptionSpec(
                "--data", short: "-d", value: "DATA",
                "the request body (Content-Type application/json unless -H says otherwise)"),
            OptionSpec("--include", short: "-i", "print the status line and headers before the body"),
        ] + GlobalOptions.session,
        examples: ["sesame request /me", "sesame request -X POST -d '{\"a\":1}' /items", "sesame request -i /me"],
        exitCodes: [
            (1, "the server answered 4xx"), (2, "usage error, or a URL outside the profile's origins"),
            (4, "transient: network, 5xx, 429"),
        ],
        run: { try await SessionCommands.request($0) })

    static let logout = CommandSpec(
        words: ["logout"], summary: "end the session on the server and delete local credentials", arguments: nil,
        discussion: """
            Tells the server (even when the access token has expired: the refresh token is revoked), then deletes
            the local credentials and the profile whatever the server said; a warning says when the server did not
            confirm. Signing out when nobody is signed in succeeds (exit 0). A profile whose files are corrupt is
            cleared too.
            """,
        options: [
            OptionSpec("--no-revoke", "only delete the local credentials"),
            OptionSpec("--end-session", "OpenID Connect: also print (and open) the provider's logout URL"),
        ] + GlobalOptions.session,
        examples: ["sesame logout", "sesame logout --profile work --no-revoke"],
        exitCodes: [], run: { try await SessionCommands.logout($0) })

    static let completion = CommandSpec(
        words: ["completion"], summary: "print a shell completion script (bash, zsh or fish)", arguments: "SHELL",
        discussion: "Generated from the same table as the help.",
        options: [],
        examples: [
            "source <(sesame completion bash)", "sesame completion zsh > \"${fpath[1]}/_sesame\"",
            "sesame completion fish > ~/.config/fish/completions/sesame.fish",
        ],
        exitCodes: [], run: { try Completion.run($0) })

    static let jwkGenerate = CommandSpec(
        words: ["jwk", "generate"], summary: "generate a key; print it as a JWK (private unless --public)",
        arguments: nil,
        discussion: "With --output the private key is written to FILE with mode 0600 (never through a symlink).",
        options: [
            OptionSpec(
                "--alg", value: "ALG", "the algorithm", default: "ES256",
                choices: ["ES256", "ES384", "ES512", "RS256", "PS256", "EdDSA", "HS256"]),
            OptionSpec("--kid", value: "KID", "the key ID", default: "the RFC 7638 thumbprint"),
            OptionSpec("--output", value: "FILE", "write the key to FILE (mode 0600) instead of stdout"),
            OptionSpec("--public", "print only the public half"),
        ],
        examples: ["sesame jwk generate --alg ES256 --kid k1 --output key.json"],
        exitCodes: [], run: { try JWKCommands.generate($0) })

    static let jwkPublic = CommandSpec(
        words: ["jwk", "public"], summary: "print the public half of a JWK as a one-key JWK Set",
        arguments: "[FILE|-]", discussion: "Reads the key from FILE, or standard input for '-' or no FILE.",
        options: [], examples: ["sesame jwk public key.json > jwks.json"], exitCodes: [],
        run: { try JWKCommands.publicSet($0) })

    static let jwtDecode = CommandSpec(
        words: ["jwt", "decode"], summary: "print a JWT's header and claims as JSON, without verifying it",
        arguments: "[TOKEN|-]",
        discussion: "For display only: nothing is verified. A TOKEN of '-' or no TOKEN reads it from standard input.",
        options: [], examples: ["sesame jwt decode - < token.txt"], exitCodes: [],
        run: { try JWTCommands.decode($0) })

    static let jwtVerify = CommandSpec(
        words: ["jwt", "verify"], summary: "verify signature and claims; print the claims as JSON",
        arguments: "[TOKEN|-]",
        discussion: """
            The key decides the algorithm. exp is required; iss, aud and nonce are checked when given; typ must be
            JWT unless --typ says otherwise (access tokens are at+jwt).
            """,
        options: [
            OptionSpec("--jwks", value: "FILE|URL", "the keys: a JWK Set or a single JWK (required)"),
            OptionSpec("--iss", value: "ISS", "the required issuer"),
            OptionSpec("--aud", value: "AUD", "an audience the token must have"),
            OptionSpec("--nonce", value: "N", "the required nonce"),
            OptionSpec("--leeway", value: "S", "clock-skew allowance in seconds (0-3600)", default: "60"),
            OptionSpec("--now", value: "UNIX", "verify as of this Unix time", default: "now"),
            OptionSpec(
                "--alg", value: "ALG", "an allowed algorithm", default: "every asymmetric one", repeatable: true),
            OptionSpec("--typ", value: "TYP", "an accepted typ header", default: "JWT", repeatable: true),
        ],
        examples: [
            "sesame jwt verify --jwks jwks.json --aud app - < token.txt",
            "sesame jwt verify --jwks http://127.0.0.1:8080/jwks --typ at+jwt \"$(sesame token)\"",
        ],
        exitCodes: [(1, "the token is rejected (the code names the check)")],
        run: { try await JWTCommands.verify($0) })

    static let jwtSign = CommandSpec(
        words: ["jwt", "sign"], summary: "sign a claim set with a private JWK; print the token",
        arguments: "[CLAIMS_JSON|-]", discussion: "Reads the claims from the argument, or standard input.",
        options: [
            OptionSpec("--key", value: "FILE", "the private JWK (required)"),
            OptionSpec("--alg", value: "ALG", "the algorithm", default: "the key's alg"),
            OptionSpec("--typ", value: "TYP", "the typ header", default: "JWT"),
        ],
        examples: ["echo '{\"sub\":\"alice\",\"aud\":\"app\",\"exp\":4102444800}' | sesame jwt sign --key key.json"],
        exitCodes: [], run: { try JWTCommands.sign($0) })
}

/// Options of the sign-in commands.
enum SessionOptions {
    static let rest = OptionSpec(
        "--rest", value: "BASE_URL", "the REST backend's base URL, e.g. http://127.0.0.1:8080")
    static let email = OptionSpec("--email", value: "EMAIL", "the account's email (required)")
    /// `login`'s: needed with --rest only.
    static let loginEmail = OptionSpec("--email", value: "EMAIL", "with --rest: the account's email (required there)")
}
