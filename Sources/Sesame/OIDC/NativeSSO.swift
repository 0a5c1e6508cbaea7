import Foundation
import SesameJOSE

/// A sign-in that a vendor's apps share on one device (OpenID Connect Native SSO for Mobile Apps 1.0): the ID token
/// and the device secret that one app received, for another app of the vendor to sign in with, without a browser.
///
/// Its `description` and `dump()` show the issuer and the user, never the ID token or the secret.
public struct SharedSignIn: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// The issuer of the ID token (read from it; the provider verifies its signature when it is used).
    public let issuer: String
    /// The user (`sub`).
    public let subject: String
    /// The ID token that names the device session (`sid`) and binds the secret (`ds_hash`).
    public let idToken: String
    /// The device secret (`device_secret`).
    public let deviceSecret: String

    /// A shared sign-in from an ID token and its device secret.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/invalidResponse`` when the ID token is not a JWT naming
    ///   `iss`, `sub`, `sid` and `ds_hash`, or the secret is not token text.
    public init(idToken: String, deviceSecret: String) throws {
        guard let claims = try? JWT.unverifiedClaims(of: idToken), let issuer = claims.issuer,
            let subject = claims.subject, claims["sid"]?.stringValue != nil, claims["ds_hash"]?.stringValue != nil,
            RESTAuthProvider.isTokenText(deviceSecret)
        else {
            throw AuthError(
                .invalidResponse,
                "a shared sign-in needs an ID token with iss, sub, sid and ds_hash, and a device secret")
        }
        self.issuer = issuer
        self.subject = subject
        self.idToken = idToken
        self.deviceSecret = deviceSecret
    }

    /// The issuer and the user; never a token.
    public var description: String {
        "SharedSignIn(issuer: \(PrintableText.sanitized(issuer, limit: 200)), user: \(PrintableText.sanitized(subject, limit: 200)))"
    }

    /// A mirror without the ID token or the secret.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: ["issuer": issuer, "subject": subject, "idToken": "<redacted>", "deviceSecret": "<redacted>"],
            displayStyle: .struct)
    }
}

/// Where a vendor's apps keep the sign-in they share (``SharedSignIn``): one profile of a ``TokenStore`` that all of
/// them reach, and nothing else reaches — on Apple platforms a ``KeychainTokenStore`` in the vendor's Keychain access
/// group (`SesameApple`'s `KeychainTokenStore.keychain(service:accessGroup:appGroup:)`, with the app group for the
/// cross-process lock); elsewhere a ``FileTokenStore`` in a folder the apps share, or the keyring.
///
/// The device secret is kept only here (catalog NSSO-04): never in an app's own session store, and sent only to the
/// provider's token and revocation endpoints.
///
/// ```swift
/// import SesameApple
///
/// let shared = NativeSSOStore(
///     store: KeychainTokenStore.keychain(
///         service: "com.example.sso", accessGroup: "TEAMID.com.example.shared", appGroup: "group.com.example"))
/// ```
public struct NativeSSOStore: Sendable {
    /// The store the apps share.
    public let store: any TokenStore
    /// The profile the shared sign-in is kept under.
    public let profile: String

    /// The shared sign-in kept in `store` under `profile`.
    public init(store: any TokenStore, profile: String = "native-sso") {
        self.store = store
        self.profile = profile
    }

    /// The shared sign-in, or nil when no app has shared one.
    ///
    /// - Throws: the store's ``AuthError``s (``AuthError/Code/storeUnavailable``: try later), and
    ///   ``AuthError/Code/storeCorrupt`` for an entry that is not a shared sign-in (kept, not deleted).
    public func sharedSignIn() async throws -> SharedSignIn? {
        guard let entry = try await store.load(profile: profile) else { return nil }
        guard let idToken = entry.idToken, let secret = entry.deviceSecret,
            let shared = try? SharedSignIn(idToken: idToken, deviceSecret: secret)
        else { throw AuthError(.storeCorrupt, "the shared sign-in entry \(profile) is not a Native SSO sign-in") }
        return shared
    }

    /// Keeps `shared` for the vendor's other apps, replacing what was there.
    ///
    /// The entry is a ``TokenSet`` with the ID token and the device secret and no access token.
    ///
    /// - Throws: the store's ``AuthError``s.
    public func save(_ shared: SharedSignIn) async throws {
        let (store, profile) = (self.store, self.profile)
        let entry = TokenSet(
            accessToken: "", tokenType: "N_A", idToken: shared.idToken, user: TokenSet.User(id: shared.subject),
            deviceSecret: shared.deviceSecret)
        try await store.withExclusiveAccess(profile: profile) { try await store.save(entry, profile: profile) }
    }

    /// Forgets the shared sign-in.
    ///
    /// - Throws: the store's ``AuthError``s.
    public func forget() async throws {
        let (store, profile) = (self.store, self.profile)
        try await store.withExclusiveAccess(profile: profile) { try await store.delete(profile: profile) }
    }
}

extension OIDCAuthProvider {
    static let idTokenType = "urn:ietf:params:oauth:token-type:id_token"
    /// Native SSO's device secret token type (the current draft's name).
    public static let deviceSecretTokenType = "urn:openid:params:token-type:device-secret"

    /// Tokens for this client from a sign-in another app of the vendor shared (Native SSO §4): a token exchange
    /// with the shared ID token as subject and the device secret as actor, the provider's issuer as audience.
    ///
    /// The answer's ID token is validated as any (signature, `iss`, `aud` this client, `exp`, `iat`) and must name
    /// the shared user (NSSO-02); no nonce (nothing was sent to the browser).
    ///
    /// - Parameters:
    ///   - shared: the shared sign-in.
    ///   - scope: the scope to ask for; the configured scopes by default.
    /// - Returns: this client's tokens (with DPoP, bound to its key).
    /// - Throws: ``AuthError`` — ``AuthError/Code/issuerMismatch`` (the shared sign-in is another provider's),
    ///   ``AuthError/Code/nativeSSORejected`` (an OAuth error: `invalid_grant`, `unauthorized_client`, …),
    ///   ``AuthError/Code/idTokenRejected`` (`subject_mismatch` and the usual rules),
    ///   ``AuthError/Code/invalidResponse``, ``AuthError/Code/configuration`` (not an OpenID Connect provider),
    ///   transport.
    public func nativeSSOTokens(from shared: SharedSignIn, scope: [String]? = nil) async throws -> TokenSet {
        guard metadata.isOpenIDConnect, let issuer = metadata.issuer else {
            throw AuthError(.configuration, "Native SSO needs an OpenID Connect provider (an issuer and a JWKS)")
        }
        guard ByteExact.equals(shared.issuer, issuer) else {
            throw AuthError(.issuerMismatch, "the shared sign-in is another provider's (\(shared))")
        }
        let pairs: [(String, String)] = [
            ("grant_type", Self.tokenExchangeGrant), ("client_id", configuration.clientID), ("audience", issuer),
            ("subject_token", shared.idToken), ("subject_token_type", Self.idTokenType),
            ("actor_token", shared.deviceSecret), ("actor_token_type", Self.deviceSecretTokenType),
            ("requested_token_type", Self.accessTokenType),
            ("scope", (scope ?? configuration.scopes).joined(separator: " ")),
        ]
        let response = try await postWithProof(metadata.tokenEndpoint, pairs)
        guard response.status == 200 else {
            if [400, 401].contains(response.status), let body = ServerErrorResponse(response) {
                throw AuthError(.nativeSSORejected, "the provider refused the shared sign-in", serverResponse: body)
            }
            throw Self.failure(response, "the Native SSO exchange was refused")
        }
        // RFC 8693 §2.2.1: what was issued; an access token was asked for.
        guard let json = try? JOSEValue.parse(response.body), let issued = json["issued_token_type"]?.stringValue,
            ByteExact.equals(issued, Self.accessTokenType)
        else {
            throw AuthError(
                .invalidResponse, "the Native SSO answer does not say it issued an access token (issued_token_type)",
                statusCode: 200)
        }
        // A new device secret, if any, comes with a new ID token and replaces the shared one (the caller keeps it).
        return try await self.tokens(
            from: response, expecting: IDTokenValidator.Expectations(subject: shared.subject), previous: nil)
    }

    /// Revokes a device secret (RFC 7009, `token_type_hint=device_secret`): at a provider that supports it, the
    /// device session ends for every app (catalog NSSO-04).
    ///
    /// - Throws: ``AuthError`` when the provider has no revocation endpoint or did not confirm.
    public func revokeDeviceSecret(_ secret: String) async throws {
        guard let endpoint = metadata.revocationEndpoint else {
            throw AuthError(.configuration, "the provider has no revocation endpoint")
        }
        let response = try await postForm(
            endpoint, [("token", secret), ("token_type_hint", "device_secret"), ("client_id", configuration.clientID)])
        guard response.status == 200 || ServerErrorResponse(response)?.error == "unsupported_token_type" else {
            throw Self.failure(response, "the device secret's revocation was refused")
        }
    }
}

extension OIDCAuth {
    /// Signs in from the sign-in another app of the vendor shared (``nativeSSO``), without a browser: the ID token
    /// and device secret are exchanged for this app's own tokens, which are stored as any sign-in's.
    ///
    /// ```swift
    /// if try await auth.session.currentTokens == nil {  // no session of this app's own yet
    ///     do {
    ///         try await auth.signInWithNativeSSO()
    ///     } catch let error as AuthError
    ///         where [.notSignedIn, .nativeSSORejected, .issuerMismatch].contains(error.code)
    ///     {
    ///         try await auth.signIn(with: agent)  // no usable shared sign-in: the browser
    ///     }
    /// }
    /// ```
    ///
    /// - Parameter scope: the scope to ask for; the configured scopes by default.
    /// - Returns: the tokens.
    /// - Throws: ``AuthError`` — ``AuthError/Code/notSignedIn`` (no shared sign-in), ``AuthError/Code/configuration``
    ///   (no ``nativeSSO`` store),
    ///   ``AuthError/Code/nativeSSORejected`` (with `invalid_grant` the shared entry is forgotten: its device
    ///   session ended), ``AuthError/Code/idTokenRejected``, ``AuthError/Code/issuerMismatch``, the stores' errors.
    @discardableResult
    public func signInWithNativeSSO(scope: [String]? = nil) async throws -> TokenSet {
        guard let nativeSSO else {
            throw AuthError(.configuration, "Native SSO needs a shared store: configure the facade with nativeSSO")
        }
        guard let shared = try await nativeSSO.sharedSignIn() else {
            throw AuthError(.notSignedIn, "no app of this vendor has shared a sign-in on this device")
        }
        let tokens: TokenSet
        do {
            tokens = try await provider.nativeSSOTokens(from: shared, scope: scope)
        } catch let error as AuthError where error.code == .nativeSSORejected {
            // The device session is over (ended, expired, another device's): the entry is of no use to any app.
            if error.serverResponse?.error == "invalid_grant" { try? await nativeSSO.forget() }
            throw error
        }
        SesameLog.log(.info, .oidc, "signed in from the shared sign-in (Native SSO), no browser")
        return try await finishSignIn(tokens)
    }

    /// The device secret of this provider's shared sign-in, to send with a new sign-in's code so that the
    /// provider keeps that device session (one sign-out still ends every app's).
    func sharedDeviceSecret() async -> String? { await sharedSignInOfThisProvider()?.deviceSecret }

    /// The shared sign-in when there is one and it is this provider's (unreadable counts as none).
    private func sharedSignInOfThisProvider() async -> SharedSignIn? {
        guard let nativeSSO, let shared = try? await nativeSSO.sharedSignIn(), let issuer = provider.metadata.issuer,
            ByteExact.equals(shared.issuer, issuer)
        else { return nil }
        return shared
    }

    /// Stores a sign-in's tokens in the session; a device secret that came with them goes to the shared store
    /// (``nativeSSO``) first, or nowhere — never into the session's own store.
    ///
    /// A shared sign-in it replaces (another device session: another user, or a provider that did not keep the
    /// session) is revoked first, so that no app stays signed in from a sign-in no one can end any more.
    func finishSignIn(_ tokens: TokenSet) async throws -> TokenSet {
        var own = tokens
        own.deviceSecret = nil
        if let secret = tokens.deviceSecret, let nativeSSO, let idToken = tokens.idToken {
            let shared = try SharedSignIn(idToken: idToken, deviceSecret: secret)
            if let replaced = await sharedDeviceSecret(),
                !ConstantTime.equals(Array(replaced.utf8), Array(secret.utf8))
            {
                try? await provider.revokeDeviceSecret(replaced)
                SesameLog.log(.info, .oidc, "a replaced shared sign-in was revoked")
            }
            try await nativeSSO.save(shared)
            SesameLog.log(
                .info, .oidc, "sign-in shared with the vendor's other apps (device secret \(redacted: secret))")
        }
        try await session.signIn(with: own)
        return own
    }

    /// At sign-out: the shared sign-in of the same user is revoked at the provider (every app's session from it
    /// ends, NSSO-04) and then forgotten; another user's is left alone, and one the provider did not confirm
    /// revoking is kept (the other apps' sessions from it still run: a later sign-out tries again).
    func endSharedSignIn(for tokens: TokenSet?) async {
        guard let nativeSSO, let shared = await sharedSignInOfThisProvider(), let user = tokens?.user?.id,
            ByteExact.equals(shared.subject, user), (try? await provider.revokeDeviceSecret(shared.deviceSecret)) != nil
        else { return }
        try? await nativeSSO.forget()
    }
}
