import Foundation
import Sesame
import SesameJOSE

/// `sesame login --client-credentials`: a service account through the SDK's `ServiceAccount`.
///
/// `--issuer URL --client-id ID` and `--key FILE` or `--client-secret-stdin`: the client credentials grant
/// (RFC 6749 §4.4) with `private_key_jwt` (RFC 7523) or a client secret; no user, no browser. Later commands get
/// new tokens the same way.
struct ServiceAccountLogin: Sendable {
    static let clientCredentials = OptionSpec(
        "--client-credentials",
        "a service account: the client credentials grant, no user and no browser (needs --key or --client-secret-stdin)"
    )
    static let key = OptionSpec(
        "--key", value: "FILE",
        "with --client-credentials: the client's private JWK (a file only you can read), to sign private_key_jwt assertions"
    )
    static let secretStdin = OptionSpec(
        "--client-secret-stdin",
        "with --client-credentials: read the client secret from standard input (kept 0600 beside the credentials)")
    static let clientAuth = OptionSpec(
        "--client-auth", value: "METHOD", "how the secret is sent: basic or post", default: "basic")
    static let assertionAudience = OptionSpec(
        "--assertion-audience", value: "WHAT",
        "what a key's assertions name as aud: issuer or token-endpoint (some providers want the endpoint)",
        default: "issuer")
    static let options = [clientCredentials, key, secretStdin, clientAuth, assertionAudience]

    /// What a service profile remembers; never a secret (the key stays in its file, a secret in
    /// `credentials/NAME.client-secret`).
    struct Settings: Codable, Equatable {
        /// `private_key_jwt`, `client_secret_basic` or `client_secret_post`.
        var method: String
        /// The private JWK's path, for `private_key_jwt`.
        var keyFile: String?
        /// `issuer` or `token-endpoint`, for `private_key_jwt`.
        var assertionAudience: String?
    }

    let selection: SessionSelection
    let issuerURL: URL
    let client: String
    let scopes: [String]
    let resources: [String]
    let settings: Settings
    /// The secret read from standard input.
    let secret: String?

    /// Reads and checks every option (exit 2 before any network call).
    ///
    /// - Throws: ``CLIError`` (usage).
    init(_ arguments: ParsedArguments, selection: SessionSelection) throws {
        self.selection = selection
        let browserOptions = [
            OIDCLoginFlow.noBrowser, OIDCLoginFlow.device, OIDCLoginFlow.dpop, OIDCLoginFlow.acrValues,
            OIDCLoginFlow.maxAge, OIDCLoginFlow.nativeSSO, OIDCLoginFlow.redirectURI, OIDCLoginFlow.dpopAlgorithm,
            SignInOptions.email, SignInOptions.rest,
        ]
        if let used = browserOptions.first(where: { arguments.flag($0) || arguments.value($0) != nil }) {
            throw arguments.usage("\(used.name) is not for a service account: drop it")
        }
        guard let issuerText = arguments.value(OIDCLoginFlow.issuer), let issuer = URL(string: issuerText),
            ["http", "https"].contains(issuer.scheme?.lowercased() ?? ""), issuer.host?.isEmpty == false
        else { throw arguments.usage("--client-credentials needs --issuer URL (the provider's issuer)") }
        guard let clientID = arguments.value(OIDCLoginFlow.clientID), !clientID.isEmpty else {
            throw arguments.usage("--client-credentials needs --client-id ID (the registered confidential client)")
        }
        let keyPath = arguments.value(Self.key)
        let readsSecret = arguments.flag(Self.secretStdin)
        guard (keyPath != nil) != readsSecret else {
            throw arguments.usage("--client-credentials needs exactly one of --key FILE and --client-secret-stdin")
        }
        let resources = try OIDCLoginFlow.resources(arguments)
        if let keyPath {
            if arguments.value(Self.clientAuth) != nil { throw arguments.usage("--client-auth is for a secret") }
            let audience = arguments.value(Self.assertionAudience) ?? "issuer"
            guard ["issuer", "token-endpoint"].contains(audience) else {
                throw arguments.usage("--assertion-audience takes issuer or token-endpoint")
            }
            let absolute = URL(fileURLWithPath: keyPath).standardizedFileURL.path
            settings = Settings(method: "private_key_jwt", keyFile: absolute, assertionAudience: audience)
            secret = nil
        } else {
            if arguments.value(Self.assertionAudience) != nil {
                throw arguments.usage("--assertion-audience is for --key")
            }
            let method = arguments.value(Self.clientAuth) ?? "basic"
            guard ["basic", "post"].contains(method) else { throw arguments.usage("--client-auth takes basic or post") }
            settings = Settings(method: "client_secret_\(method)", keyFile: nil, assertionAudience: nil)
            secret = try RESTSignIn.readPassword(command: arguments.command)
        }
        issuerURL = issuer
        client = clientID
        scopes = (arguments.value(OIDCLoginFlow.scope) ?? "").split(separator: " ").map(String.init)
        self.resources = resources
        // Checked now: a key file that is unusable fails before anything is sent.
        _ = try Self.authentication(settings, secret: secret, profile: selection.profile)
    }

    /// The profile's client authentication: its key file (mode 0600, read every time: a replaced key takes
    /// effect), or its stored secret.
    ///
    /// - Throws: ``CLIError`` `key_unreadable` or `secret_unreadable`.
    static func authentication(_ settings: Settings, secret given: String? = nil, profile: Profile) throws
        -> ClientAuthentication
    {
        switch settings.method {
        case "private_key_jwt":
            guard let path = settings.keyFile else { throw corrupt(profile) }
            do {
                guard
                    let (data, _) = try PrivateFile.read(
                        path, limit: 64 * 1024, exposure: .refuse, unsafe: .storeCorrupt)
                else { throw AuthError(.storeCorrupt, "\(path) does not exist") }
                let key = try JWK(json: Array(data))
                return try .privateKeyJWT(
                    key: key, audience: settings.assertionAudience == "token-endpoint" ? .tokenEndpoint : .issuer)
            } catch let error as AuthError {
                let hint = error.message.contains("other users") ? "; make it yours alone: chmod 600 \(path)" : ""
                throw CLIError(status: .failure, code: "key_unreadable", message: error.message + hint)
            } catch {
                throw CLIError(
                    status: .failure, code: "key_unreadable",
                    message: "\(path) is not a private JWK (RSA, EC or OKP, with its private part)")
            }
        case "client_secret_basic", "client_secret_post":
            let secret: String
            if let given {
                secret = given
            } else {
                do {
                    guard let (data, _) = try PrivateFile.read(secretURL(profile).path, limit: 4096, exposure: .refuse)
                    else { throw AuthError(.storeCorrupt, "the client secret of profile \(profile.name) is gone") }
                    secret = String(decoding: data, as: UTF8.self)
                } catch let error as AuthError {
                    throw CLIError(status: .failure, code: "secret_unreadable", message: error.message)
                }
            }
            return settings.method == "client_secret_basic" ? .clientSecretBasic(secret) : .clientSecretPost(secret)
        default:
            throw corrupt(profile)
        }
    }

    static func corrupt(_ profile: Profile) -> CLIError {
        CLIError(
            status: .failure, code: "profile_corrupt",
            message: "the profile file \(profile.settingsURL.path) has a bad service account; log in again")
    }

    /// Where a service profile's client secret is kept (0600).
    static func secretURL(_ profile: Profile) -> URL {
        profile.credentialsDirectory.appendingPathComponent("\(profile.name).client-secret")
    }

    /// The SDK's grant for a service profile, without the network.
    static func provider(_ settings: Profile.OIDCSettings, service: Settings, profile: Profile) throws
        -> ClientCredentialsProvider
    {
        var configuration = OIDCAuthProvider.Configuration(
            clientID: settings.clientID, redirectURI: "", scopes: settings.scopes)
        configuration.clientAuthentication = try authentication(service, profile: profile)
        do {
            try settings.metadata.checkEndpoints()
            return try ClientCredentialsProvider(
                provider: OIDCAuthProvider(metadata: settings.metadata, configuration: configuration))
        } catch {
            throw corrupt(profile)
        }
    }

    func run() async throws {
        let profile = selection.profile
        let kind = try selection.storeForNewSession()
        let store = try await profile.storeForSignIn(kind)
        let authentication = try Self.authentication(settings, secret: secret, profile: profile)
        let service = try await ServiceAccount.configure(
            issuer: issuerURL, clientID: client, authentication: authentication, scopes: scopes, store: store,
            profile: profile.name)
        let previous = (try? profile.settings()).flatMap { $0 }
        do {
            _ = try await service.accessToken(forceRefresh: true)
        } catch let error as AuthError where error.code == .notSignedIn {
            _ = try await service.accessToken()
        }
        if let secret {
            do {
                // The folder is the file store's; with the keyring it may be new: made 0700, or refused when
                // someone else owns it or others can write to it.
                try SecureDirectory.prepare(profile.credentialsDirectory)
                try PrivateFile.write(Data(secret.utf8), to: Self.secretURL(profile))
            } catch let error as AuthError {
                throw CLIError(status: .failure, code: error.code.rawValue, message: error.message)
            }
        } else {
            try? PrivateFile.delete(Self.secretURL(profile))
        }
        let settings = Profile.OIDCSettings(
            clientID: client, redirectURI: "", scopes: scopes, metadata: service.provider.provider.metadata,
            dpop: false,
            service: self.settings)
        try profile.save(
            Profile.Settings(
                kind: .oidc, baseURL: issuerURL.absoluteString, store: kind, origins: resources, email: nil,
                oidc: settings))
        await profile.forgetCredentials(in: previous, nowIn: kind)
        FileHandle.standardError.write(
            Data(
                ("signed in as service account \(PrintableText.sanitized(client, limit: 200)) (profile \(profile.name), "
                    + "\(kind.rawValue) store, \(self.settings.method))\n").utf8))
    }
}
