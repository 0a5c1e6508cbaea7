import Foundation
import Sesame

/// A signed-in profile, its store and a session over it: for an OpenID Connect profile the SDK's facade, restored
/// without the network from what `login` kept.
struct SessionContext {
    let profile: Profile
    let settings: Profile.Settings
    let store: any TokenStore
    let session: AuthSession
    /// The facade, for an OpenID Connect profile: without a key when its DPoP key file could not be read
    /// (``dpopProblem``; then only logout uses it).
    let oidc: OIDCAuth?
    /// The service account, for a profile of the client credentials grant (no user; ``oidc`` is nil).
    let service: ServiceAccount?
    let base: URL
    /// Why the DPoP key could not be read (a command that uses the tokens throws it; logout does not need it).
    var dpopProblem: CLIError?

    /// Loads the profile (exit 3 when it does not exist) and opens the store it remembers.
    ///
    /// - Throws: ``CLIError``: usage for a `--store` other than the profile's; `profile_corrupt`;
    ///   `dpop_key_unreadable` only through ``withUsableKey()``.
    init(_ selection: SessionSelection) async throws {
        profile = selection.profile
        settings = try profile.requireSettings()
        if let explicit = selection.explicitStore, explicit != settings.store {
            throw CLIError.usage(
                "profile \(profile.name) keeps its credentials in the \(settings.store.rawValue) store; "
                    + "drop --store \(explicit.rawValue), or log in again with it",
                command: selection.command)
        }
        store = try profile.store(settings.store, forNewSession: false)
        guard let base = URL(string: settings.baseURL), let host = base.host, !host.isEmpty,
            ["http", "https"].contains(base.scheme?.lowercased() ?? ""), (base.port ?? 443) <= 65535
        else {
            throw CLIError(
                status: .failure, code: "profile_corrupt",
                message: "the profile file \(profile.settingsURL.path) has a bad server URL; log in again")
        }
        self.base = base
        switch settings.kind {
        case .rest:
            oidc = nil
            service = nil
            // A refresh the server answered 408, 429 or 503 (or never received) is tried again; never one it may
            // have used.
            session = AuthSession(
                provider: RESTAuthProvider(baseURL: base), store: store, profile: profile.name, retry: .standard)
        case .oidc:
            guard let settings = settings.oidc else {
                throw CLIError(
                    status: .failure, code: "profile_corrupt",
                    message: "the profile file \(profile.settingsURL.path) has no OpenID Connect settings; log in again"
                )
            }
            if let service = settings.service {
                // A service account: the client credentials grant, no user; a refused or missing token is asked
                // for again (``serviceToken(forceRefresh:)``), never "signed out".
                oidc = nil
                let account = ServiceAccount(
                    provider: try ServiceAccountLogin.provider(settings, service: service, profile: profile),
                    store: store, profile: profile.name, retry: .standard)
                self.service = account
                session = account.session
                return
            }
            service = nil
            do {
                let auth = try await OIDCLoginFlow.restore(settings, profile: profile, store: store)
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
    }

    /// This context, or the DPoP key's problem (every command that uses the tokens needs the key).
    ///
    /// - Throws: the key's ``CLIError``.
    func withUsableKey() throws -> SessionContext {
        if let dpopProblem { throw dpopProblem }
        return self
    }

    /// The credentials to use now: a service account's current token or a new one from the grant; for any other
    /// profile the session's (refreshed when due, or now with `forceRefresh`).
    ///
    /// - Throws: the session's or the grant's ``AuthError``.
    func tokens(forceRefresh: Bool = false, minimumValidity: TimeInterval? = nil) async throws -> TokenSet {
        if let service {
            _ = try await service.accessToken(forceRefresh: forceRefresh)
            guard let tokens = try await session.currentTokens else {
                throw AuthError(.notSignedIn, "the service account has no token")
            }
            if !forceRefresh, Self.renewalKeeps(minimumValidity, of: tokens) {
                _ = try await service.accessToken(forceRefresh: true)
                return try await session.currentTokens ?? tokens
            }
            return tokens
        }
        let tokens =
            try await forceRefresh ? session.forceRefresh() : session.validTokens(minimumValidity: minimumValidity)
        if !forceRefresh, tokens.refreshToken != nil, Self.renewalKeeps(minimumValidity, of: tokens) {
            return try await session.forceRefresh()
        }
        return tokens
    }

    /// Whether `tokens` fall short of a promise of `minimumValidity` seconds (`token --min-validity`) that new
    /// ones would keep, with room to spare: the session refreshes early only within half a token's lifetime, so
    /// the CLI renews itself then — and never when even a fresh token could not keep the promise (that is
    /// `min_validity_unmet` at once, not a refresh per call).
    static func renewalKeeps(_ minimumValidity: TimeInterval?, of tokens: TokenSet) -> Bool {
        guard let minimumValidity, let expiresAt = tokens.expiresAt, let receivedAt = tokens.receivedAt else {
            return false
        }
        return expiresAt.timeIntervalSinceNow < minimumValidity
            && expiresAt.timeIntervalSince(receivedAt) >= minimumValidity + 5
    }

    /// A sentence for commands that need a user or a provider's facade, naming what the profile is instead.
    var kindForRefusal: String {
        service != nil
            ? "is a service account (the client credentials grant, no user)" : "signs in with a REST backend"
    }

    /// The profile's server and resources; the session's provider supplies the scheme (DPoP when bound).
    var client: AuthorizedClient {
        AuthorizedClient(
            session: session, baseURL: base, additionalOrigins: settings.origins.compactMap(URL.init(string:)),
            retry: .standard)
    }
}
