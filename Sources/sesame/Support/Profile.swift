import Foundation
import Sesame
import SesameJOSE

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// How a profile signs in.
enum ProfileKind: String, Codable, Sendable {
    /// The proprietary REST contract (`login --rest`).
    case rest
    /// An OpenID Connect provider (`login --issuer`).
    case oidc
}

/// Where a profile keeps its credentials (`--store`).
enum StoreKind: String, Codable, Sendable, CaseIterable {
    /// The Secret Service (GNOME Keyring, KWallet).
    case keyring
    /// 0600 files in the 0700 credentials folder.
    case file

    /// `--store`'s value: keyring or file (`memory` keeps nothing, which no command here can use).
    ///
    /// - Throws: ``CLIError`` (usage).
    init(argument text: String, command: CommandSpec) throws {
        if text == "memory" {
            throw CLIError.usage("--store memory keeps nothing; use keyring or file", command: command)
        }
        guard let kind = StoreKind(rawValue: text) else {
            throw CLIError.usage("--store takes keyring or file, not '\(printable(text))'", command: command)
        }
        self = kind
    }
}

/// The profile and store a session command names (`--profile`, `--store`), read and checked when it is built.
struct SessionSelection: Sendable {
    let profile: Profile
    /// `--store`, when given.
    let explicitStore: StoreKind?
    let command: CommandSpec

    /// Reads `--profile` (checked before anything else happens, DESIGN §4) and `--store`.
    ///
    /// - Throws: ``CLIError`` (usage).
    init(_ arguments: ParsedArguments) throws {
        profile = try Profile(arguments)
        explicitStore = try arguments.value(GlobalOptions.store).map {
            try StoreKind(argument: $0, command: arguments.command)
        }
        command = arguments.command
        if arguments.flag(GlobalOptions.verbose) {
            // The SDK's own diagnostics, secrets redacted by construction (SesameLog.Message).
            SesameLog.setHandler(level: .debug) { entry in
                FileHandle.standardError.write(Data("sesame: \(entry)\n".utf8))
            }
        }
    }

    /// Where a new sign-in keeps its credentials: `--store`, else `$SESAME_STORE`, else the keyring when one
    /// answers.
    ///
    /// - Throws: ``CLIError`` (usage) for a bad `$SESAME_STORE`.
    func storeForNewSession() throws -> StoreKind {
        if let explicitStore { return explicitStore }
        if let environment = ProcessInfo.processInfo.environment["SESAME_STORE"], !environment.isEmpty {
            return try StoreKind(argument: environment, command: command)
        }
        return SecretServiceTokenStore.isAvailable ? .keyring : .file
    }
}

/// A named profile: its settings file (which server, which store, which origins) next to its credentials.
struct Profile: Sendable {
    /// What the profile remembers; no secrets.
    struct Settings: Codable, Equatable {
        /// How it signs in.
        var kind = ProfileKind.rest
        /// The server's base URL.
        var baseURL: String
        /// Where the credentials are.
        var store: StoreKind
        /// The origins the credentials may be sent to.
        var origins: [String]
        /// The email signed in with, for display.
        var email: String?
        /// For `oidc` profiles: the client and the provider's metadata as discovered at login.
        var oidc: OIDCSettings?
        /// The file's format: absent in files up to 0.2.0 (format 1, read and rewritten in place), then
        /// ``Profile/settingsFormat``; a newer one is refused and left as it is.
        var format: Int? = Profile.settingsFormat
    }

    /// The settings files' format this release writes.
    static let settingsFormat = 2

    /// What an OpenID Connect profile remembers; no secrets.
    struct OIDCSettings: Codable, Equatable {
        var clientID: String
        var redirectURI: String
        var scopes: [String]
        var metadata: OIDCProviderMetadata
        /// Whether the tokens are DPoP-bound to the profile's key (`NAME.dpop.jwk` beside the credentials, kept by
        /// the SDK's `FileDPoPKeyStore`).
        var dpop: Bool?
        /// The shared entry (OpenID Connect Native SSO) this profile's sign-in is shared through, if any.
        var nativeSSO: String?
        /// For a service account (the client credentials grant): how the client authenticates.
        var service: ServiceAccountLogin.Settings?
    }

    let name: String
    let home: URL

    /// Validates the name before anything else happens (DESIGN §4).
    ///
    /// - Throws: ``CLIError`` (usage) for an invalid name.
    init(_ arguments: ParsedArguments) throws {
        let name = arguments.value(GlobalOptions.profile) ?? "default"
        guard ProfileName.isValid(name) else {
            throw CLIError.usage(
                "--profile '\(printable(name))' is not a profile name: use 1-64 of A-Z a-z 0-9 . _ -, "
                    + "not starting with '.'", command: arguments.command)
        }
        self.name = name
        home = Self.homeDirectory
    }

    /// The profile `name` (a valid name, as ``all`` lists them).
    private init(valid name: String) {
        self.name = name
        home = Self.homeDirectory
    }

    /// Every profile that has settings, by name.
    static var all: [Profile] {
        let folder = homeDirectory.appendingPathComponent("profiles")
        let files = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return files.filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) }.filter(ProfileName.isValid)
            .sorted().map { Profile(valid: $0) }
    }

    /// `$SESAME_HOME`, else `$XDG_CONFIG_HOME/sesame`, else `~/.config/sesame`.
    static var homeDirectory: URL {
        let environment = ProcessInfo.processInfo.environment
        if let home = environment["SESAME_HOME"], !home.isEmpty { return URL(fileURLWithPath: home) }
        if let xdg = environment["XDG_CONFIG_HOME"], !xdg.isEmpty {
            return URL(fileURLWithPath: xdg).appendingPathComponent("sesame")
        }
        return FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".config/sesame")
    }

    var settingsURL: URL { home.appendingPathComponent("profiles/\(name).json") }
    var credentialsDirectory: URL { home.appendingPathComponent("credentials") }
    var lockDirectory: URL { home.appendingPathComponent("locks") }

    /// The sign-ins shared between profiles (`login --native-sso NAME`): entry NAME of a file store in `shared/`,
    /// where each device secret is kept (0600) and nowhere else.
    func nativeSSOStore(_ entry: String) throws -> NativeSSOStore {
        do {
            return NativeSSOStore(
                store: try FileTokenStore(directory: home.appendingPathComponent("shared")), profile: entry)
        } catch let error as AuthError {
            throw CLIError(status: .failure, code: error.code.rawValue, message: error.message)
        }
    }
    /// The settings, or nil when the profile does not exist.
    ///
    /// A corrupt file is moved aside and reported.
    ///
    /// - Throws: ``CLIError`` naming the file and where it went.
    func settings() throws -> Settings? {
        let url = settingsURL
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        // The settings decide where credentials go: only a file of this user, in folders nobody else can write,
        // never through a symbolic link.
        do {
            try SecureDirectory.check(home)
            try SecureDirectory.check(url.deletingLastPathComponent())
        } catch let error as AuthError {
            throw CLIError(status: .failure, code: "insecure_profile", message: error.message)
        }
        let fd = open(url.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            throw CLIError(
                status: .failure, code: errno == ELOOP ? "insecure_profile" : "io",
                message: errno == ELOOP
                    ? "\(url.path) is a symbolic link; refusing to follow it" : "cannot read \(url.path)")
        }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid(),
            info.st_mode & 0o022 == 0, info.st_size <= 64 * 1024
        else {
            throw CLIError(
                status: .failure, code: "insecure_profile",
                message: "refusing \(url.path): not a small regular file of this user, or writable by others")
        }
        let data = handle.readDataToEndOfFile()
        // The format first (strictly parsed: a duplicated member is no format): a newer sesame's file, of whatever
        // shape, is left as it is. Format 1 (0.2.0) reads as format 2 and takes it at the next save.
        if let value = try? JOSEValue.parse(data), let format = value["format"] {
            guard case .integer(let number) = format, (1...Int64(Self.settingsFormat)).contains(number) else {
                throw CLIError(
                    status: .failure, code: "profile_newer",
                    message:
                        "\(url.path) was written by a newer sesame (format \(PrintableText.sanitized(String(decoding: format.jsonBytes, as: UTF8.self), limit: 20))); "
                        + "this one reads up to \(Self.settingsFormat)); it is left as it is: update sesame to use it")
            }
        }
        if var settings = try? JSONDecoder().decode(Settings.self, from: data) {
            settings.format = Self.settingsFormat
            return settings
        }
        let aside = PrivateFile.moveAside(url.path, identity: (UInt64(info.st_dev), UInt64(info.st_ino)))
        throw CLIError(
            status: .failure, code: "profile_corrupt",
            message: "the profile file \(url.path) is unreadable"
                + (aside.map { "; it was moved to \($0) — sign in again" } ?? ""))
    }

    /// The settings of a signed-in profile.
    ///
    /// - Throws: ``CLIError`` with exit 3 when the profile does not exist.
    func requireSettings() throws -> Settings {
        guard let settings = try settings() else {
            throw CLIError(
                status: .notSignedIn, code: "not_signed_in",
                message: "profile \(name) is not signed in (sesame login --rest URL --email EMAIL, or --issuer URL "
                    + "--client-id ID, or --client-credentials --issuer URL --client-id ID --key FILE"
                    + (name == "default" ? "" : ", with --profile \(name)") + ")")
        }
        return settings
    }

    /// Writes the settings, 0600 in a 0700 folder, atomically.
    ///
    /// - Throws: ``CLIError`` when the file cannot be written.
    func save(_ settings: Settings) throws {
        var settings = settings
        settings.format = Self.settingsFormat
        let data = try JSONEncoder().encode(settings)
        try SecureFile.write(data, to: settingsURL)
    }

    /// Deletes the settings file (no error when it is absent).
    func deleteSettings() { unlink(settingsURL.path) }

    /// The store of `kind`, checked to be usable now.
    ///
    /// - Throws: ``CLIError``: exit 1 when no keyring answers (a setup problem) and `forNewSession`; exit 4 when an
    ///   existing profile's keyring does not answer.
    func store(_ kind: StoreKind, forNewSession: Bool) throws -> any TokenStore {
        switch kind {
        case .file:
            do {
                return try FileTokenStore(directory: credentialsDirectory)
            } catch let error as AuthError {
                throw CLIError(status: .failure, code: error.code.rawValue, message: error.message)
            }
        case .keyring:
            guard SecretServiceTokenStore.isAvailable else {
                throw CLIError(
                    status: forNewSession ? .failure : .transient, code: "store_unavailable",
                    message: "no keyring answers (a Secret Service such as GNOME Keyring must run on the session bus)"
                        + (forNewSession ? "; use --store file" : "; the credentials of profile \(name) are there"))
            }
            return SecretServiceTokenStore(service: "dev.sesame.cli", lockDirectory: lockDirectory)
        }
    }

    /// The store a sign-in will write, checked before anything is sent.
    ///
    /// A setup problem must not cost a server login; a corrupt entry is only warned about (the sign-in replaces
    /// it).
    ///
    /// - Throws: ``CLIError`` for an unusable store.
    func storeForSignIn(_ kind: StoreKind) async throws -> any TokenStore {
        let store = try self.store(kind, forNewSession: true)
        do {
            _ = try await store.load(profile: name)
        } catch let error as AuthError where error.code == .storeUnavailable {
            throw CLIError(status: .failure, code: error.code.rawValue, message: error.message)
        } catch let error as AuthError where error.code == .storeCorrupt {
            FileHandle.standardError.write(Data("warning: \(PrintableText.sanitized(error.message))\n".utf8))
        }
        return store
    }

    /// After a sign-in into `kind`: the credentials a previous sign-in left in another store are deleted.
    func forgetCredentials(in previous: Settings?, nowIn kind: StoreKind) async {
        guard let previous, previous.store != kind, let old = try? store(previous.store, forNewSession: false)
        else { return }
        let name = self.name
        _ = try? await old.withExclusiveAccess(profile: name) { try await old.delete(profile: name) }
    }
}

/// Files that may hold secrets: written 0600 (never through a symlink), atomically, in 0700 folders.
enum SecureFile {
    /// Writes `data` to `url`.
    ///
    /// - Throws: ``CLIError`` naming the path.
    static func write(_ data: Data, to url: URL) throws {
        let folder = url.deletingLastPathComponent()
        do {
            try FileManager.default.createDirectory(
                at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw CLIError(status: .failure, code: "io", message: "cannot create \(folder.path)")
        }
        let temporary = url.path + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw CLIError(status: .failure, code: "io", message: "cannot write \(url.path)") }
        let written = data.withUnsafeBytes { Foundation.write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == data.count, synced, rename(temporary, url.path) == 0 else {
            unlink(temporary)
            throw CLIError(status: .failure, code: "io", message: "cannot write \(url.path)")
        }
    }
}
