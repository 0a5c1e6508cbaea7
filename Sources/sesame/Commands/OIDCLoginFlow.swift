import Foundation
import Sesame
import SesameJOSE
import SesameLoopback

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `sesame login --issuer URL --client-id ID`: OpenID Connect sign-in through the SDK's facade — `OIDCAuth` with a
/// `LoopbackUserAgent` (authorization code with PKCE in the system browser, RFC 8252) or the device flow (RFC 8628),
/// DPoP keys in a `FileDPoPKeyStore` — every option checked before any network call.
struct OIDCLoginFlow: Sendable {
    static let defaultScope = "openid profile email offline_access"

    static let issuer = OptionSpec("--issuer", value: "URL", "the OpenID Connect issuer (https, or http on loopback)")
    static let clientID = OptionSpec(
        "--client-id", value: "ID",
        "the registered client (the dev server's public one: sesame-cli; a confidential one with --client-credentials)"
    )
    static let scope = OptionSpec(
        "--scope", value: "SCOPES",
        "space-separated scopes (default: \(defaultScope); with --client-credentials: the client's registered ones)")
    static let redirectURI = OptionSpec(
        "--redirect-uri", value: "URI", "the loopback redirect (port 0: a free one)",
        default: "http://127.0.0.1:0/callback")
    static let resource = OptionSpec(
        "--resource", value: "URL", "an API origin that may receive the tokens", repeatable: true)
    static let noBrowser = OptionSpec("--no-browser", "print the URL, do not open a browser")
    static let device = OptionSpec("--device", "the device flow: a code to enter on another device")
    static let dpop = OptionSpec(
        "--dpop",
        "bind the tokens to this profile's key (DPoP, RFC 9449): made on first use, kept 0600 beside the credentials and reused by later sign-ins until logout"
    )
    static let dpopAlgorithm = OptionSpec(
        "--dpop-alg", value: "ALG",
        "a new key's algorithm: ES256, EdDSA or RS256 (implies --dpop; default ES256 if the provider lists it, else the first of these it lists); a profile that has a key of another algorithm must log out first"
    )
    static let acrValues = OptionSpec(
        "--acr-values", value: "'ACR ...'",
        "ask for these authentication context classes (a step-up, RFC 9470); the new ID token's acr must be one of them"
    )
    static let maxAge = OptionSpec(
        "--max-age", value: "S", "ask for a sign-in at most S seconds old (the ID token's auth_time is checked)")
    static let nativeSSO = OptionSpec(
        "--native-sso", value: "NAME",
        "share the sign-in with other profiles' clients of the same vendor through the shared entry NAME (OpenID Connect Native SSO: adds the device_sso scope); when NAME holds a sign-in of this issuer, sign in from it with no browser"
    )
    static let options = [
        issuer, clientID, scope, redirectURI, resource, noBrowser, device, dpop, dpopAlgorithm, acrValues, maxAge,
        nativeSSO,
    ]

    /// The DPoP key algorithms `login --dpop-alg` offers, in the order chosen when the provider lists several.
    static let dpopChoices: [JWSAlgorithm] = [.es256, .eddsa, .rs256]

    let selection: SessionSelection
    let issuerURL: URL
    let client: String
    let scopes: [String]
    /// The API origins that may receive the tokens.
    let resources: [String]
    /// The loopback redirect's host, port and path; nil for the device flow.
    let redirect: (host: String, port: Int, path: String)?
    let opensBrowser: Bool
    /// Whether the tokens are DPoP-bound, and the algorithm asked for.
    let usesDPoP: Bool
    let requestedAlgorithm: JWSAlgorithm?
    /// `acr_values` and `max_age` for the authorization request (a step-up).
    let authorizationOptions: AuthorizationOptions
    /// The shared entry for Native SSO, if any.
    let nativeSSOEntry: String?

    /// Reads and checks every option (exit 2 before any network call).
    ///
    /// - Throws: ``CLIError`` (usage).
    init(_ arguments: ParsedArguments, selection: SessionSelection) throws {
        self.selection = selection
        guard let issuerText = arguments.value(Self.issuer), let issuer = URL(string: issuerText),
            ["http", "https"].contains(issuer.scheme?.lowercased() ?? ""), issuer.host?.isEmpty == false
        else { throw arguments.usage("--issuer takes the provider's issuer URL, e.g. https://id.example.com") }
        guard let clientID = arguments.value(Self.clientID), !clientID.isEmpty else {
            throw arguments.usage("--issuer needs --client-id ID (the dev server's public client is sesame-cli)")
        }
        if arguments.value(SignInOptions.email) != nil || arguments.value(SignInOptions.rest) != nil {
            throw arguments.usage("--issuer signs in through the provider's page: drop --email and --rest")
        }
        let device = arguments.flag(Self.device)
        if device, arguments.value(Self.redirectURI) != nil || arguments.flag(Self.noBrowser) {
            throw arguments.usage("--device needs no browser and no redirect URI: drop --redirect-uri/--no-browser")
        }
        let resources = try Self.resources(arguments)
        nativeSSOEntry = arguments.value(Self.nativeSSO)
        if let entry = nativeSSOEntry {
            guard ProfileName.isValid(entry) else {
                throw arguments.usage("--native-sso takes a name of 1-64 of A-Z a-z 0-9 . _ -, not starting with '.'")
            }
            if device { throw arguments.usage("--native-sso needs the browser sign-in: drop --device") }
        }
        issuerURL = issuer
        client = clientID
        var scopes = (arguments.value(Self.scope) ?? Self.defaultScope).split(separator: " ").map(String.init)
        if nativeSSOEntry != nil, !scopes.contains("device_sso") { scopes.append("device_sso") }
        self.scopes = scopes
        self.resources = resources
        redirect = device ? nil : try Self.redirectParts(arguments.value(Self.redirectURI), command: arguments.command)
        opensBrowser = !arguments.flag(Self.noBrowser)
        requestedAlgorithm = try Self.dpopAlgorithm(arguments.value(Self.dpopAlgorithm), command: arguments.command)
        usesDPoP = arguments.flag(Self.dpop) || requestedAlgorithm != nil
        var options = AuthorizationOptions()
        if let text = arguments.value(Self.acrValues) {
            let values = text.split(separator: " ").map(String.init)
            guard !values.isEmpty, values.count <= 10, values.allSatisfy({ PrintableText.isClean($0) }) else {
                throw arguments.usage("--acr-values takes 1 to 10 space-separated class names")
            }
            options.acrValues = values
        }
        if let text = arguments.value(Self.maxAge) {
            guard let seconds = Int(text), (0...10 * 365 * 86400).contains(seconds) else {
                throw arguments.usage("--max-age takes whole seconds (0 or more)")
            }
            options.maxAge = TimeInterval(seconds)
        }
        if device, options.acrValues != nil || options.maxAge != nil {
            throw arguments.usage("--acr-values and --max-age need the browser sign-in: drop --device")
        }
        authorizationOptions = options
    }

    /// The origins of `--resource` (the APIs that may receive the tokens), or a usage error.
    static func resources(_ arguments: ParsedArguments) throws -> [String] {
        try arguments.values(resource).map { text in
            guard let url = URL(string: text), let origin = SesameHTTP.Origin(url) else {
                throw arguments.usage("--resource takes an http(s) URL (got '\(printable(text))')")
            }
            return origin.description
        }
    }

    /// `--dpop-alg`'s value (case-insensitive).
    static func dpopAlgorithm(_ text: String?, command: CommandSpec) throws -> JWSAlgorithm? {
        guard let text else { return nil }
        guard let algorithm = dpopChoices.first(where: { $0.name.lowercased() == text.lowercased() }) else {
            throw CLIError.usage("--dpop-alg takes ES256, EdDSA or RS256 (got '\(printable(text))')", command: command)
        }
        return algorithm
    }

    /// The profile's DPoP keys: `NAME.dpop.jwk` beside its credentials, 0600.
    static func dpopKeys(_ profile: Profile) throws -> FileDPoPKeyStore {
        do {
            return try FileDPoPKeyStore(directory: profile.credentialsDirectory)
        } catch let error as AuthError {
            throw CLIError(status: .failure, code: error.code.rawValue, message: error.message)
        }
    }

    /// The SDK's facade for a signed-in OpenID Connect profile, without the network: the provider metadata kept
    /// at login, the profile's store, and for a DPoP profile its key file.
    static func restore(_ settings: Profile.OIDCSettings, profile: Profile, store: any TokenStore) async throws
        -> OIDCAuth
    {
        do {
            return try await OIDCAuth.restore(
                metadata: settings.metadata, clientID: settings.clientID, redirectURI: settings.redirectURI,
                scopes: settings.scopes, store: store, profile: profile.name,
                dpopKeys: settings.dpop == true ? try dpopKeys(profile) : nil,
                nativeSSO: try settings.nativeSSO.map(profile.nativeSSOStore), retry: .standard)
        } catch let error as AuthError where error.code == .insecureEndpoint {
            throw CLIError(
                status: .failure, code: "profile_corrupt",
                message: "the profile file \(profile.settingsURL.path) names an insecure endpoint; log in again")
        } catch let error as AuthError where error.code == .storeCorrupt {
            throw CLIError(
                status: .failure, code: "dpop_key_unreadable",
                message: "the DPoP key of profile \(profile.name) is not a private key file only you can read "
                    + "(mode 0600, a regular file): \(error.message); fix it, or log in again")
        }
    }

    func run() async throws {
        let profile = selection.profile
        let kind = try selection.storeForNewSession()
        let store = try await profile.storeForSignIn(kind)
        let keys = usesDPoP ? try Self.dpopKeys(profile) : nil
        // The profile's key is kept across sign-ins. Another algorithm would need a new key, and replacing the key
        // before the new sign-in has succeeded would end the working session if it failed: log out first.
        if let keys, let requestedAlgorithm, let existing = try? await keys.key(profile: profile.name),
            existing.algorithm != requestedAlgorithm
        {
            throw CLIError.usage(
                "profile \(profile.name)'s DPoP key is \(existing.algorithm.name); to sign in with an "
                    + "\(requestedAlgorithm.name) key, log out first (sesame logout --profile \(profile.name))",
                command: selection.command)
        }
        // The loopback listener binds first: the redirect URI carries the port it got (RFC 8252 §7.3).
        let opensBrowser = self.opensBrowser
        let agent = try redirect.map { parts in
            try LoopbackUserAgent(
                host: parts.host, port: parts.port, path: parts.path,
                open: .custom { url in Self.show(url, openBrowser: opensBrowser) })
        }
        let redirectURI = agent?.redirectURI ?? "http://127.0.0.1/callback"
        let auth: OIDCAuth
        do {
            auth = try await OIDCAuth.configure(
                issuer: issuerURL, clientID: client, redirectURI: redirectURI, scopes: scopes, store: store,
                profile: profile.name, dpopKeys: keys,
                dpopAlgorithms: requestedAlgorithm.map { [$0] } ?? Self.dpopChoices,
                nativeSSO: try nativeSSOEntry.map(profile.nativeSSOStore))
        } catch let error as AuthError where error.code == .configuration && error.message.contains("DPoP algorithm") {
            throw CLIError(status: .failure, code: "dpop_unsupported", message: error.message)
        }
        if keys != nil, auth.provider.metadata.dpopSigningAlgorithms.isEmpty {
            FileHandle.standardError.write(
                Data("warning: the provider does not list DPoP algorithms; trying anyway\n".utf8))
        }
        let previous = (try? profile.settings()).flatMap { $0 }
        var tokens: TokenSet?
        var how = ""
        if nativeSSOEntry != nil, authorizationOptions.acrValues == nil, authorizationOptions.maxAge == nil {
            // A sibling's shared sign-in first, with no browser; anything that makes it unusable means the browser.
            do {
                tokens = try await auth.signInWithNativeSSO()
                how = ", from the shared sign-in"
            } catch let error as AuthError
                where error.code == .nativeSSORejected && error.serverResponse?.error == "unauthorized_client"
            {
                // Not the shared sign-in's fault: this client may not use one (a browser sign-in with device_sso
                // would be refused too).
                throw CLIError(
                    status: .failure, code: error.code.rawValue,
                    message:
                        "the provider does not let \(client) sign in from a shared sign-in (\(CLI.describe(error))); "
                        + "on the dev server, give it a \"native_sso_group\" in --config")
            } catch let error as AuthError
                where [.notSignedIn, .nativeSSORejected, .issuerMismatch, .storeCorrupt].contains(error.code)
            {
                FileHandle.standardError.write(
                    Data(
                        "\(Self.noSharedSignIn(error, entry: nativeSSOEntry ?? "", profile: profile)); signing in with the browser\n"
                            .utf8))
            }
        }
        if let done = tokens {
            tokens = done
        } else if let agent {
            tokens = try await auth.signIn(with: agent, options: authorizationOptions)
        } else {
            tokens = try await auth.signInOnAnotherDevice { authorization, progress in
                if progress == nil { Self.show(authorization) }
            }
        }
        guard let tokens else { throw CLIError(status: .failure, code: "invalid_response", message: "no tokens") }
        if !usesDPoP { try? await Self.dpopKeys(profile).deleteKey(profile: profile.name) }
        let settings = Profile.OIDCSettings(
            clientID: client, redirectURI: redirectURI, scopes: scopes, metadata: auth.provider.metadata,
            dpop: usesDPoP, nativeSSO: nativeSSOEntry)
        try profile.save(
            Profile.Settings(
                kind: .oidc, baseURL: issuerURL.absoluteString, store: kind, origins: resources,
                email: tokens.user?.email, oidc: settings))
        await profile.forgetCredentials(in: previous, nowIn: kind)
        try? PrivateFile.delete(ServiceAccountLogin.secretURL(profile))  // a service account's, if it was one
        let who = tokens.user?.email ?? tokens.user?.id ?? "unknown"
        FileHandle.standardError.write(
            Data(
                ("signed in as \(PrintableText.sanitized(who, limit: 200)) (profile \(profile.name), "
                    + "\(kind.rawValue) store\(how))\n").utf8))
    }

    /// Why the shared entry was of no use, naming the entries there are when it is missing (a typo?).
    static func noSharedSignIn(_ error: AuthError, entry: String, profile: Profile) -> String {
        switch error.code {
        case .notSignedIn:
            let folder = profile.home.appendingPathComponent("shared")
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [])
                .filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) }.sorted()
            return "no shared sign-in named \(entry) yet"
                + (names.isEmpty ? "" : " (shared: \(names.joined(separator: ", ")))")
        case .issuerMismatch:
            return "the shared sign-in \(entry) is another provider's; this sign-in replaces it"
        case .nativeSSORejected:
            return "the shared sign-in \(entry) has ended (\(CLI.describe(error)))"
        default:
            return "the shared sign-in \(entry) is unusable (\(CLI.describe(error)))"
        }
    }

    /// The authorization URL on its own line, so a script (or a person) can take it (DESIGN §4), then the browser.
    static func show(_ url: URL, openBrowser: Bool) {
        FileHandle.standardError.write(Data("Open this URL to sign in:\n\(url.absoluteString)\n".utf8))
        if openBrowser { LoopbackUserAgent.openInSystemBrowser(url) }
        FileHandle.standardError.write(
            Data(
                ("Waiting for the sign-in (up to 5 minutes; Ctrl-C stops). If the browser shows an error instead, "
                    + "stop and check --client-id.\n").utf8))
    }

    /// The device flow's code and where to enter it, on stderr.
    static func show(_ authorization: DeviceAuthorization) {
        var text = "To sign in, open \(authorization.verificationURI.absoluteString) and enter the code:\n"
        text += "\(PrintableText.sanitized(authorization.userCode))\n"
        if let complete = authorization.verificationURIComplete {
            text += "(or open \(complete.absoluteString))\n"
        }
        let minutes = Int((authorization.expiresAt.timeIntervalSinceNow / 60).rounded(.up))
        text += "Waiting for the approval (the code expires in \(minutes) minutes; Ctrl-C stops).\n"
        FileHandle.standardError.write(Data(text.utf8))
    }

    /// The host, port and path of a loopback redirect URI (default `http://127.0.0.1:0/callback`), or a usage
    /// error: `http` to `127.0.0.1` or `[::1]`, an IP literal (RFC 8252 §8.3); port 0 takes a free one.
    static func redirectParts(_ text: String?, command: CommandSpec) throws -> (host: String, port: Int, path: String) {
        let uri = text ?? "http://127.0.0.1:0/callback"
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
}
