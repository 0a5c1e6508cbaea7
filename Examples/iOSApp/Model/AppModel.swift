import Foundation
import Observation
import Sesame

/// The example app's logic, portable so that it is tested on Linux.
///
/// Two ways in (OpenID Connect through the browser sheet, or a REST backend's email and password), an API call,
/// and sign-out. The SwiftUI views only display it and call it.
@MainActor
@Observable
public final class AppModel {
    /// Where the app signs in and what it calls.
    public struct Settings: Sendable {
        /// The OpenID Connect provider.
        public var issuer: URL
        /// The app's client at the provider.
        public var clientID: String
        /// The redirect URI registered for it (a private-use scheme on iOS).
        public var redirectURI: String
        /// The REST backend (`/login`, `/refresh-token`, `/logout`, `/me`).
        public var restBase: URL

        /// The settings.
        public init(issuer: URL, clientID: String, redirectURI: String, restBase: URL) {
            self.issuer = issuer
            self.clientID = clientID
            self.redirectURI = redirectURI
            self.restBase = restBase
        }
    }

    /// Which sign-in the session in use came from.
    public enum Backend: String, Sendable { case openIDConnect, rest }

    /// The session in use, for the root view to switch on.
    public private(set) var auth: AuthState
    /// Which backend ``auth`` follows.
    public private(set) var backend: Backend
    /// What the API said about the user, after ``loadProfile()``.
    public private(set) var profile: String?
    /// The latest problem, for display (never a secret).
    public private(set) var problem: String?
    /// The REST form's email field.
    public var email = ""
    /// The REST form's password field (cleared by each sign-in attempt).
    public var password = ""

    @ObservationIgnored private let oidc: OIDCAuth
    @ObservationIgnored private let rest: RESTAuthProvider
    @ObservationIgnored private let restSession: AuthSession
    @ObservationIgnored private let settings: Settings

    /// Discovers the provider and reads what `store` holds (the OpenID Connect sign-in first).
    public static func make(settings: Settings, store: any TokenStore) async throws -> AppModel {
        let oidc = try await OIDCAuth.configure(
            issuer: settings.issuer, clientID: settings.clientID, redirectURI: settings.redirectURI, store: store,
            profile: "oidc")
        let rest = RESTAuthProvider(baseURL: settings.restBase)
        let model = AppModel(
            settings: settings, oidc: oidc, rest: rest,
            restSession: AuthSession(provider: rest, store: store, profile: "rest"))
        if try await model.restSession.isSignedIn, !(try await oidc.session.isSignedIn) { model.follow(.rest) }
        return model
    }

    private init(settings: Settings, oidc: OIDCAuth, rest: RESTAuthProvider, restSession: AuthSession) {
        self.settings = settings
        self.oidc = oidc
        self.rest = rest
        self.restSession = restSession
        backend = .openIDConnect
        auth = AuthState(session: oidc.session)
    }

    private func follow(_ backend: Backend) {
        self.backend = backend
        auth = AuthState(session: backend == .rest ? restSession : oidc.session)
        profile = nil
    }

    /// Signs in with OpenID Connect through `agent` (on iOS, `WebAuthenticationSessionAgent`).
    public func signInWithOpenIDConnect(using agent: some AuthorizationUserAgent) async {
        await attempt {
            try await self.oidc.signIn(with: agent)
            self.follow(.openIDConnect)
        }
    }

    /// Signs in to the REST backend with ``email`` and ``password``; the password field is cleared either way.
    public func signInWithPassword() async {
        let (email, password) = (self.email, self.password)
        self.password = ""
        await attempt {
            try await self.restSession.signIn(with: try await self.rest.login(email: email, password: password))
            self.follow(.rest)
        }
    }

    /// Calls the API as the signed-in user: UserInfo for OpenID Connect, `GET /me` for REST.
    public func loadProfile() async {
        struct Me: Decodable { let email: String? }
        await attempt {
            switch self.backend {
            case .openIDConnect:
                self.profile = try await self.oidc.userInfo()["email"]?.stringValue
            case .rest:
                let me: Me = try await AuthorizedClient(session: self.restSession, baseURL: self.settings.restBase)
                    .get("/me")
                self.profile = me.email
            }
        }
    }

    /// Signs out of the session in use (revoking at the server); the root view then shows the sign-in screen.
    public func signOut() async {
        if backend == .rest { _ = await restSession.signOut() } else { _ = await oidc.signOut() }
        profile = nil
        await auth.reload()
    }

    private func attempt(_ body: () async throws -> Void) async {
        do {
            try await body()
            problem = nil
        } catch let error as AuthError where error.code == .cancelled {
            problem = nil
        } catch let error as AuthError {
            problem = error.isTransient ? "You seem to be offline. Try again." : error.message
        } catch {
            problem = "Something went wrong."
        }
        await auth.reload()
    }
}
