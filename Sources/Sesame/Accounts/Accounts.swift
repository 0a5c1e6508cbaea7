import Foundation
import SesameJOSE

/// Several signed-in accounts — a personal and a work account, several tenants, several providers — in one token
/// store: each account (issuer + client + subject) its own profile, so its own refresh single flight and
/// cross-process lock, and signing one out never touches another.
///
/// ```swift
/// let accounts = OIDCAccounts(
///     providers: [workProvider, personalProvider], tokens: KeychainTokenStore.keychain(service: "com.example.app"),
///     index: FileAccountIndexStore(url: supportFolder.appendingPathComponent("accounts.json")))
/// let work = try await accounts.add(signingInWith: agent, at: workProvider)   // becomes the current account
/// let personal = try await accounts.add(signingInWith: agent, at: personalProvider)
/// let api = AuthorizedClient(session: try await accounts.session(for: work), baseURL: apiBase)
/// try await accounts.switchTo(work)
/// ```
///
/// A session of an account is an ``AuthSession``: for UserInfo, step-up or RP-initiated logout of one account,
/// make an ``OIDCAuth`` over the same store and profile (`OIDCAuth(provider:store:profile:)`).
public actor OIDCAccounts {
    /// The providers accounts sign in with (an issuer and a client each); the first is the default.
    public nonisolated let providers: [OIDCAuthProvider]
    /// Where the accounts' credentials are kept (one profile each).
    public nonisolated let tokens: any TokenStore
    /// Where the list of accounts is kept.
    public nonisolated let index: any AccountIndexStore
    private var sessions: [String: AuthSession] = [:]

    /// Accounts of the clients of `providers`, their credentials in `tokens` and their list in `index`.
    ///
    /// - Precondition: `providers` is not empty.
    public init(providers: [OIDCAuthProvider], tokens: any TokenStore, index: any AccountIndexStore) {
        precondition(!providers.isEmpty, "OIDCAccounts needs at least one provider")
        self.providers = providers
        self.tokens = tokens
        self.index = index
    }

    /// Accounts of `provider`'s client, their credentials in `tokens` and their list in `index`.
    public init(provider: OIDCAuthProvider, tokens: any TokenStore, index: any AccountIndexStore) {
        self.init(providers: [provider], tokens: tokens, index: index)
    }

    /// The provider of `account`: the one whose issuer and client are the account's, byte for byte.
    ///
    /// - Throws: ``AuthError/Code/configuration`` when none is.
    public nonisolated func provider(for account: Account) throws -> OIDCAuthProvider {
        guard
            let found = providers.first(where: { provider in
                provider.metadata.issuer.map { ByteExact.equals($0, account.issuer) } == true
                    && ByteExact.equals(provider.configuration.clientID, account.clientID)
            })
        else {
            throw AuthError(.configuration, "no provider was given for the issuer and client of \(account)")
        }
        return found
    }

    /// The accounts, in the order they were added.
    ///
    /// - Throws: the index store's ``AuthError``s.
    public func list() async throws -> [Account] { try await index.load()?.accounts ?? [] }

    /// The current account, if any.
    ///
    /// - Throws: the index store's ``AuthError``s.
    public func current() async throws -> Account? {
        guard let stored = try await index.load(), let profile = stored.current else { return nil }
        return stored.accounts.first { $0.profile == profile }
    }

    /// The session of `account` (one per account, made on first use and kept), with its own provider.
    ///
    /// - Throws: ``AuthError/Code/configuration`` when no provider has the account's issuer and client.
    public func session(for account: Account) throws -> AuthSession {
        if let existing = sessions[account.profile] { return existing }
        let provider = try provider(for: account)
        let session = AuthSession(
            provider: provider, store: tokens, profile: account.profile, timeSource: provider.timeSource)
        sessions[account.profile] = session
        return session
    }

    /// Signs in through `agent` at `provider` (default: the first) and adds the account it signed in — or, when it
    /// is one already listed (the same issuer, client and subject), signs that one in again; either way it becomes
    /// the current account.
    ///
    /// The index is changed first, then the credentials saved; when saving them fails, an account this call added
    /// is taken out of the index again.
    ///
    /// - Returns: the account.
    /// - Throws: ``AuthError/Code/configuration`` for a provider that is not one of ``providers`` (before anyone is
    ///   asked to sign in); the sign-in's ``AuthError``s; ``AuthError/Code/invalidResponse`` when the provider gave
    ///   no ID token (an account is known by its `sub`); the stores' errors.
    @discardableResult
    public func add(
        signingInWith agent: some AuthorizationUserAgent, at provider: OIDCAuthProvider? = nil,
        options: AuthorizationOptions = AuthorizationOptions()
    )
        async throws -> Account
    {
        // Its accounts' sessions must find it again: the sign-in uses the very provider they will (the first of
        // `providers` with its issuer and client), so the credentials fit it (its DPoP key, its endpoints).
        let given = provider ?? providers[0]
        guard
            let provider = providers.first(where: { known in
                known.metadata.issuer.map { issuer in
                    given.metadata.issuer.map { ByteExact.equals($0, issuer) } == true
                } == true && ByteExact.equals(known.configuration.clientID, given.configuration.clientID)
            })
        else {
            throw AuthError(
                .configuration, "add(signingInWith:at:) was given a provider that is not one of OIDCAccounts' providers"
            )
        }
        let pending = try await provider.authorizationRequest(options)
        let redirect = try await agent.authorize(
            url: pending.url, redirectURI: pending.redirectURI, state: pending.state)
        let tokens = try await provider.completeAuthorization(redirect: redirect, pending: pending)
        guard let issuer = provider.metadata.issuer, let subject = tokens.user?.id, !subject.isEmpty else {
            throw AuthError(.invalidResponse, "an account needs an OpenID Connect sign-in (an ID token with sub)")
        }
        var account = Account(
            issuer: issuer, clientID: provider.configuration.clientID, subject: subject,
            label: tokens.user?.email ?? tokens.user?.claims?["name"]?.stringValue)
        let added = account
        let (listed, wasNew) = try await updatingIndex { stored in
            var account = added
            if let position = stored.accounts.firstIndex(where: { $0.isSame(as: account) }) {
                account.label = account.label ?? stored.accounts[position].label
                stored.accounts[position] = account
                stored.current = account.profile
                return (account, false)
            }
            stored.accounts.append(account)
            stored.current = account.profile
            return (account, true)
        }
        account = listed
        do {
            try await session(for: account).signIn(with: tokens)
        } catch {
            // Nothing would list credentials saved under no account, nor should the list show one never saved.
            if wasNew {
                let failed = account
                _ = try? await updatingIndex { stored in
                    stored.accounts.removeAll { $0.isSame(as: failed) }
                    if stored.current == failed.profile { stored.current = stored.accounts.first?.profile }
                }
            }
            throw error
        }
        SesameLog.log(.info, .session, "account \(public: account.profile) added; it is the current one")
        return account
    }

    /// Makes `account` the current one.
    ///
    /// - Throws: ``AuthError/Code/notSignedIn`` for an account that is not listed; the index store's errors.
    public func switchTo(_ account: Account) async throws {
        try await updatingIndex { stored in
            guard stored.accounts.contains(where: { $0.isSame(as: account) }) else {
                throw AuthError(.notSignedIn, "\(account) is not one of the signed-in accounts")
            }
            stored.current = account.profile
        }
    }

    /// Reads, changes and saves the index holding the store's cross-process lock for it, so that two processes
    /// changing the accounts at once do not lose one's change.
    private func updatingIndex<Result: Sendable>(
        _ change: @Sendable @escaping (inout AccountIndex) throws -> Result
    ) async throws -> Result {
        let index = self.index
        return try await tokens.withExclusiveAccess(profile: "sesame-account-index") {
            var stored = try await index.load() ?? AccountIndex()
            let result = try change(&stored)
            try await index.save(stored)
            return result
        }
    }

    /// Signs `account` out (revoking at its provider) and removes it; the other accounts are untouched.
    ///
    /// When it was current, the first remaining account becomes current. An account whose provider is no longer
    /// among ``providers`` (an app update dropped it) has its credentials deleted without revocation. When the
    /// credentials could not be deleted (``AuthSession/SignOutResult/credentialsRemoved`` false), the account stays
    /// listed, so that removing it again finishes the job.
    ///
    /// - Returns: what the sign-out managed.
    /// - Throws: ``AuthError/Code/notSignedIn`` for an account that is not listed; the index store's errors.
    @discardableResult
    public func remove(_ account: Account) async throws -> AuthSession.SignOutResult {
        guard try await list().contains(where: { $0.isSame(as: account) }) else {
            throw AuthError(.notSignedIn, "\(account) is not one of the signed-in accounts")
        }
        let result: AuthSession.SignOutResult
        if let session = try? session(for: account) {
            result = await session.signOut(revoke: true)
        } else {
            let tokens = self.tokens
            let deleted =
                (try? await tokens.withExclusiveAccess(profile: account.profile) {
                    try await tokens.delete(profile: account.profile)
                }) != nil
            result = AuthSession.SignOutResult(
                revocation: .notAttempted, credentialsRemoved: deleted, wasSignedIn: true)
        }
        guard result.credentialsRemoved else { return result }
        sessions[account.profile] = nil
        try await updatingIndex { stored in
            stored.accounts.removeAll { $0.isSame(as: account) }
            if stored.current == account.profile { stored.current = stored.accounts.first?.profile }
        }
        return result
    }

    /// Makes the credentials a single-account sign-in kept under `profile` (``OIDCAuth``'s `"default"`, say) an
    /// account signed in at `provider`: moved to the account's own profile and listed — the way from one account to
    /// several without signing anyone out.
    ///
    /// - Returns: the account, or nil when `profile` holds no credentials.
    /// - Throws: ``AuthError/Code/configuration`` for a provider that is not one of ``providers``;
    ///   ``AuthError/Code/invalidResponse`` when the credentials name no user (`sub`); the stores' errors.
    @discardableResult
    public func adopt(profile: String, at provider: OIDCAuthProvider) async throws -> Account? {
        guard let issuer = provider.metadata.issuer else {
            throw AuthError(.configuration, "adopt(profile:at:) needs a provider with an issuer")
        }
        let probe = Account(issuer: issuer, clientID: provider.configuration.clientID, subject: "")
        _ = try self.provider(for: probe)
        let tokens = self.tokens
        let clientID = provider.configuration.clientID
        // All under the old profile's lock, so no refresh there can rotate what is being moved. Copied first, then
        // listed, then the old profile deleted: a crash in between leaves a copy, never none.
        let account = try await tokens.withExclusiveAccess(profile: profile) { () async throws -> Account? in
            guard let stored = try await tokens.load(profile: profile) else { return nil }
            guard let subject = stored.user?.id, !subject.isEmpty else {
                throw AuthError(.invalidResponse, "the credentials of profile \(profile) name no user")
            }
            let account = Account(issuer: issuer, clientID: clientID, subject: subject, label: stored.user?.email)
            try await tokens.withExclusiveAccess(profile: account.profile) {
                try await tokens.save(stored, profile: account.profile)
            }
            return account
        }
        guard let account else { return nil }
        _ = try await updatingIndex { index in
            if !index.accounts.contains(where: { $0.isSame(as: account) }) { index.accounts.append(account) }
            index.current = index.current ?? account.profile
        }
        try await tokens.withExclusiveAccess(profile: profile) { try await tokens.delete(profile: profile) }
        return account
    }
}
