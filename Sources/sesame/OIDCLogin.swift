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
                dpopKeys: settings.dpop == true ? try dpopKeys(profile) : nil)
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
        // Checked before any network call: a usage error is exit 2 whatever the provider would say.
        let redirect = device ? nil : try redirectParts(arguments.value("--redirect-uri"), command: command)
        let requestedAlgorithm = try dpopAlgorithm(arguments.value("--dpop-alg"), command: command)
        let dpop = arguments.flag("--dpop") || requestedAlgorithm != nil
        let keys = dpop ? try dpopKeys(profile) : nil
        // The profile's key is kept across sign-ins; asking for another algorithm than its own makes a new one.
        if let keys, let requestedAlgorithm, let existing = try? await keys.key(profile: profile.name),
            existing.algorithm != requestedAlgorithm
        {
            try await keys.deleteKey(profile: profile.name)
        }
        // The loopback listener binds first: the redirect URI carries the port it got (RFC 8252 §7.3).
        let agent = try redirect.map { parts in
            try LoopbackUserAgent(
                host: parts.host, port: parts.port, path: parts.path,
                open: .custom { url in Self.show(url, openBrowser: !arguments.flag("--no-browser")) })
        }
        let redirectURI = agent?.redirectURI ?? "http://127.0.0.1/callback"
        let auth: OIDCAuth
        do {
            auth = try await OIDCAuth.configure(
                issuer: issuer, clientID: clientID, redirectURI: redirectURI, scopes: scopes, store: store,
                profile: profile.name, dpopKeys: keys, dpopAlgorithms: requestedAlgorithm.map { [$0] } ?? dpopChoices)
        } catch let error as AuthError where error.code == .configuration && error.message.contains("DPoP algorithm") {
            throw CLIError(status: .failure, code: "dpop_unsupported", message: error.message)
        }
        if keys != nil, auth.provider.metadata.dpopSigningAlgorithms.isEmpty {
            FileHandle.standardError.write(
                Data("warning: the provider does not list DPoP algorithms; trying anyway\n".utf8))
        }
        let previous = (try? profile.settings()).flatMap { $0 }
        let tokens: TokenSet
        if let agent {
            tokens = try await auth.signIn(with: agent)
        } else {
            tokens = try await auth.signInOnAnotherDevice { authorization, progress in
                if progress == nil { Self.show(authorization) }
            }
        }
        if !dpop { try? await dpopKeys(profile).deleteKey(profile: profile.name) }
        let settings = Profile.OIDCSettings(
            clientID: clientID, redirectURI: redirectURI, scopes: scopes, metadata: auth.provider.metadata, dpop: dpop)
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
