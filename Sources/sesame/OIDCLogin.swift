import Foundation
import Sesame
import SesameJOSE
import SesameLoopback

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `sesame login --issuer URL --client-id ID`: OpenID Connect sign-in with PKCE through the system browser and a
/// loopback redirect (RFC 8252), or the device flow (RFC 8628).
enum OIDCLogin {
    static let defaultScope = "openid profile email offline_access"

    static func provider(_ settings: Profile.OIDCSettings, dpopKey: JWK? = nil) -> OIDCAuthProvider {
        var configuration = OIDCAuthProvider.Configuration(
            clientID: settings.clientID, redirectURI: settings.redirectURI, scopes: settings.scopes)
        configuration.pushedRequests = .whenRequired
        configuration.dpopKey = dpopKey
        return OIDCAuthProvider(metadata: settings.metadata, configuration: configuration)
    }

    /// The DPoP key algorithms `login --dpop-alg` offers, in the order chosen when the provider lists several.
    static let dpopChoices: [JWSAlgorithm] = [.es256, .eddsa, .rs256]

    /// `--dpop-alg`'s value, checked before any network call (case-insensitive).
    static func dpopAlgorithm(_ text: String?, command: CommandSpec) throws -> JWSAlgorithm? {
        guard let text else { return nil }
        guard let algorithm = dpopChoices.first(where: { $0.name.lowercased() == text.lowercased() }) else {
            throw CLIError.usage("--dpop-alg takes ES256, EdDSA or RS256 (got '\(printable(text))')", command: command)
        }
        return algorithm
    }

    /// A new DPoP key: `requested`, else the first of ``dpopChoices`` (DPOP-08) — either way one the provider
    /// lists, when it lists any.
    ///
    /// - Throws: ``CLIError`` `dpop_unsupported` when the provider lists none of them.
    static func newDPoPKey(requested: JWSAlgorithm?, listed: [String]) throws -> JWK {
        if listed.isEmpty {
            FileHandle.standardError.write(
                Data("warning: the provider does not list DPoP algorithms; trying anyway\n".utf8))
        }
        let candidates = requested.map { [$0] } ?? dpopChoices
        guard let algorithm = candidates.first(where: { listed.isEmpty || listed.contains($0.name) }) else {
            throw CLIError(
                status: .failure, code: "dpop_unsupported",
                message:
                    "the provider accepts no DPoP algorithm of \(candidates.map(\.name).joined(separator: ", ")) (it lists \(listed.map(printable).joined(separator: ", ")))"
            )
        }
        return try JWK.generate(for: algorithm)
    }

    static func run(_ arguments: ParsedArguments) async throws {
        let command = arguments.command
        let profile = try Profile(arguments)
        try arguments.noPositionals()
        guard let issuerText = arguments.value("--issuer"), let issuer = URL(string: issuerText),
            ["http", "https"].contains(issuer.scheme?.lowercased() ?? ""), issuer.host?.isEmpty == false
        else {
            throw CLIError.usage(
                "--issuer takes the provider's issuer URL, e.g. https://id.example.com", command: command)
        }
        guard let clientID = arguments.value("--client-id"), !clientID.isEmpty else {
            throw CLIError.usage(
                "--issuer needs --client-id ID (the dev server's public client is sesame-cli)", command: command)
        }
        if arguments.value("--email") != nil || arguments.value("--rest") != nil {
            throw CLIError.usage(
                "--issuer signs in through the provider's page: drop --email and --rest", command: command)
        }
        let device = arguments.flag("--device")
        if device, arguments.value("--redirect-uri") != nil || arguments.flag("--no-browser") {
            throw CLIError.usage(
                "--device needs no browser and no redirect URI: drop --redirect-uri/--no-browser", command: command)
        }
        let scopes = (arguments.value("--scope") ?? defaultScope).split(separator: " ").map(String.init)
        var resources: [String] = []
        for text in arguments.values("--resource") {
            guard let url = URL(string: text), let origin = SesameHTTP.Origin(url) else {
                throw CLIError.usage("--resource takes an http(s) URL (got '\(printable(text))')", command: command)
            }
            resources.append(origin.description)
        }
        let kind = Profile.storeKind(for: arguments)
        let store = try await profile.storeForSignIn(kind, command: command)
        if !device {
            // Checked before any network call: a usage error is exit 2 whatever the provider would say.
            _ = try redirectParts(arguments.value("--redirect-uri") ?? "http://127.0.0.1:0/callback", command: command)
        }
        let requestedAlgorithm = try dpopAlgorithm(arguments.value("--dpop-alg"), command: command)
        let metadata = try await OIDCProviderMetadata.discover(issuer: issuer)
        // --dpop: a new key for this profile; the tokens will be bound to it (RFC 9449).
        let dpopKey =
            arguments.flag("--dpop") || requestedAlgorithm != nil
            ? try newDPoPKey(requested: requestedAlgorithm, listed: metadata.dpopSigningAlgorithms) : nil
        let tokens: TokenSet
        var redirectURI = arguments.value("--redirect-uri") ?? "http://127.0.0.1:0/callback"
        if device {
            var configuration = OIDCAuthProvider.Configuration(
                clientID: clientID, redirectURI: redirectURI, scopes: scopes)
            configuration.dpopKey = dpopKey
            let provider = OIDCAuthProvider(metadata: metadata, configuration: configuration)
            tokens = try await deviceFlow(provider)
        } else {
            let (receiver, actual) = try startReceiver(redirectURI, command: command)
            defer { receiver.stop() }
            redirectURI = actual.absoluteString
            var configuration = OIDCAuthProvider.Configuration(
                clientID: clientID, redirectURI: redirectURI, scopes: scopes)
            configuration.pushedRequests = .whenRequired
            configuration.dpopKey = dpopKey
            let provider = OIDCAuthProvider(metadata: metadata, configuration: configuration)
            let pending = try await provider.authorizationRequest()
            receiver.expect(state: pending.state)
            // The URL on its own line, so a script (or a person) can take it (DESIGN §4).
            FileHandle.standardError.write(Data("Open this URL to sign in:\n\(pending.url.absoluteString)\n".utf8))
            if !arguments.flag("--no-browser") { openInBrowser(pending.url, quiet: false) }
            FileHandle.standardError.write(
                Data(
                    "Waiting for the sign-in (up to 5 minutes; Ctrl-C stops). If the browser shows an error instead, stop and check --client-id.\n"
                        .utf8))
            let callback: URL
            do {
                callback = try await receiver.waitForRedirect(state: pending.state, timeout: 300)
            } catch LoopbackRedirectReceiver.Failure.timedOut {
                throw CLIError(status: .failure, code: "timeout", message: "no sign-in arrived within 5 minutes")
            } catch LoopbackRedirectReceiver.Failure.stateMismatch {
                throw CLIError(
                    status: .failure, code: "invalid_authorization_response",
                    message:
                        "the redirect's state does not match this sign-in (another sign-in's, or sent by someone else); "
                        + "nothing was stored: run login again")
            }
            tokens = try await provider.completeAuthorization(redirect: callback, pending: pending)
        }
        let previous = (try? profile.settings()).flatMap { $0 }
        // The new key is staged beside the old one and takes its place only once the new tokens are stored: a
        // sign-in that fails (a locked store) leaves the working session and its key as they were.
        let staged = URL(fileURLWithPath: profile.dpopKeyURL.path + ".new")
        if let dpopKey {
            try SecureFile.write(Data(dpopKey.jsonValue(includingPrivate: true).jsonBytes), to: staged)
        }
        let settings = Profile.OIDCSettings(
            clientID: clientID, redirectURI: redirectURI, scopes: scopes, metadata: metadata, dpop: dpopKey != nil)
        do {
            try await AuthSession(provider: provider(settings, dpopKey: dpopKey), store: store, profile: profile.name)
                .signIn(with: tokens)
        } catch {
            unlink(staged.path)
            throw error
        }
        if dpopKey != nil {
            guard rename(staged.path, profile.dpopKeyURL.path) == 0 else {
                unlink(staged.path)
                throw CLIError(status: .failure, code: "io", message: "cannot write \(profile.dpopKeyURL.path)")
            }
        } else {
            unlink(profile.dpopKeyURL.path)
        }
        try profile.save(
            Profile.Settings(
                kind: "oidc", baseURL: issuer.absoluteString, store: kind, origins: resources,
                email: tokens.user?.email, oidc: settings))
        await profile.forgetCredentials(in: previous, nowIn: kind, command: command)
        let who = tokens.user?.email ?? tokens.user?.id ?? "unknown"
        FileHandle.standardError.write(
            Data(
                "signed in as \(PrintableText.sanitized(who, limit: 200)) (profile \(profile.name), \(kind) store)\n"
                    .utf8))
    }

    /// A loopback receiver for `uri`: `http` to `127.0.0.1` or `[::1]` (an IP literal, RFC 8252 §8.3), port 0 for
    /// a free one.
    static func startReceiver(_ uri: String, command: CommandSpec) throws -> (LoopbackRedirectReceiver, URL) {
        let (host, port, path) = try redirectParts(uri, command: command)
        let receiver = LoopbackRedirectReceiver(host: host, port: port, path: path)
        do {
            return (receiver, try receiver.start())
        } catch {
            throw CLIError(status: .failure, code: "redirect_unavailable", message: "cannot listen on \(uri): \(error)")
        }
    }

    /// The host, port and path of a loopback redirect URI, or a usage error.
    static func redirectParts(_ uri: String, command: CommandSpec) throws -> (String, Int, String) {
        guard let components = URLComponents(string: uri), components.scheme == "http",
            let host = components.host, ["127.0.0.1", "::1", "[::1]"].contains(host), components.query == nil,
            components.fragment == nil, (0...65535).contains(components.port ?? 0)
        else {
            throw CLIError.usage(
                "--redirect-uri must be http://127.0.0.1:PORT/PATH or http://[::1]:PORT/PATH (got '\(printable(uri))')",
                command: command)
        }
        let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        return (bare, components.port ?? 0, components.path.isEmpty ? "/" : components.path)
    }

    /// The device flow: the code and where to enter it on stderr, then polling until the user decides.
    static func deviceFlow(_ provider: OIDCAuthProvider) async throws -> TokenSet {
        let authorization = try await provider.deviceAuthorization()
        var text = "To sign in, open \(authorization.verificationURI.absoluteString) and enter the code:\n"
        text += "\(PrintableText.sanitized(authorization.userCode))\n"
        if let complete = authorization.verificationURIComplete {
            text += "(or open \(complete.absoluteString))\n"
        }
        let minutes = Int((authorization.expiresAt.timeIntervalSinceNow / 60).rounded(.up))
        text += "Waiting for the approval (the code expires in \(minutes) minutes; Ctrl-C stops).\n"
        FileHandle.standardError.write(Data(text.utf8))
        for try await progress in provider.deviceTokens(for: authorization) {
            if case .signedIn(let tokens) = progress { return tokens }
        }
        throw AuthError(.invalidResponse, "the device flow ended without tokens")
    }

    /// Opens `url` with the system's browser (`xdg-open` on Linux, `open` on macOS); quietly does nothing when
    /// there is none (the URL was printed).
    static func openInBrowser(_ url: URL, quiet: Bool) {
        #if os(macOS)
            let opener = "/usr/bin/open"
        #else
            let opener = "/usr/bin/xdg-open"
        #endif
        guard FileManager.default.isExecutableFile(atPath: opener) else {
            if !quiet { FileHandle.standardError.write(Data("(no browser to open: use the URL above)\n".utf8)) }
            return
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: opener)
        process.arguments = [url.absoluteString]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try? process.run()
    }
}
