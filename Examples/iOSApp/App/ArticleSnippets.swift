import AuthenticationServices
import Foundation
import Sesame
import SesameApple
import SwiftUI

/// The DocC articles' Apple-only examples, compiled for iOS against the stand-ins (Scripts/check-apple.sh).
///
/// DocCSnippetTests ties each article line to a line of this file. What they do is tested on Linux with the
/// portable stores and a form-posting agent (AccountsTests, ReadmeOIDCExampleTests, MigrationGuideTests).
/// Getting Started: a root view over a session's ``AuthState``.
struct AppRootView: View {
    @State var auth: AuthState  // made once: AuthState(session: session)

    var body: some View {
        switch auth.status {
        case .signedIn: MainView()
        case .signedOut: LoginView()
        case .unknown: ProgressView("Unlocking…")  // a locked Keychain at launch: never "signed out"
        }
    }
}

/// Stand-ins for an app's own screens in the examples above.
struct MainView: View {
    var body: some View { Text("Signed in") }
}

/// See ``MainView``.
struct LoginView: View {
    var body: some View { Text("Sign in") }
}

@MainActor
enum ArticleSnippets {
    /// Getting Started on iOS: sign in, call an API, sign out.
    static func signInCallSignOut(window: ASPresentationAnchor) async throws -> (String, AuthorizedClient) {
        let store = KeychainTokenStore.keychain(service: "com.example.app")
        let agent = WebAuthenticationSessionAgent { window }  // the browser sheet, ephemeral by default
        // swift-format-ignore: NeverForceUnwrap
        let auth = try await OIDCAuth.configure(
            issuer: URL(string: "https://id.example.com")!, clientID: "my-app",
            redirectURI: "com.example.app:/oauth", store: store)
        try await auth.signIn(with: agent)
        let token = try await auth.accessToken()  // refreshed first when it is about to expire
        let claims = try await auth.userInfo()  // sub checked against the ID token
        // swift-format-ignore: NeverForceUnwrap
        let api = auth.client(for: URL(string: "https://api.example.com")!)  // an AuthorizedClient for your API
        _ = await auth.signOut()  // revoke and delete: the ephemeral sheet kept no browser session
        _ = claims
        return (token, api)
    }

    /// Getting Started on iOS: the browser sheet, anchored in the key window of the app's scene.
    static func browserSheet() -> WebAuthenticationSessionAgent {
        let agent = WebAuthenticationSessionAgent {
            UIApplication.shared.connectedScenes.compactMap { ($0 as? UIWindowScene)?.keyWindow }.first
                ?? ASPresentationAnchor()
        }
        return agent
    }

    /// DPoP: Keychain stores, the key in the Secure Enclave when there is one.
    static func dpop(apiURL: URL) async throws -> (AuthorizedClient, AuthorizedClient) {
        let store = KeychainTokenStore.keychain(service: "com.example.app")
        let dpopKeys = KeychainDPoPKeyStore.keychain(service: "com.example.app")  // in the Secure Enclave if any
        // swift-format-ignore: NeverForceUnwrap
        let auth = try await OIDCAuth.configure(
            issuer: URL(string: "https://id.example.com")!, clientID: "my-app",
            redirectURI: "com.example.app:/oauth", store: store, dpopKeys: dpopKeys)
        // swift-format-ignore: NeverForceUnwrap
        let api = auth.client(for: URL(string: "https://api.example.com")!)  // proves the key on every call
        let mine = AuthorizedClient(session: auth.session, baseURL: apiURL)  // the session's scheme: DPoP here too
        return (api, mine)
    }

    /// Several accounts: two providers, one Keychain, an index file.
    static func severalAccounts(window: ASPresentationAnchor) async throws {
        let store = KeychainTokenStore.keychain(service: "com.example.app")
        let supportFolder = URL.applicationSupportDirectory  // created on the index's first save
        let agent = WebAuthenticationSessionAgent { window }  // an ephemeral browser session by default
        // swift-format-ignore: NeverForceUnwrap
        let apiBase = URL(string: "https://api.example.com")!

        // swift-format-ignore: NeverForceUnwrap
        let work = try await OIDCAuthProvider.discover(
            issuer: URL(string: "https://login.work.example")!,
            configuration: .init(clientID: "my-app", redirectURI: "com.example.app:/oauth"))
        // swift-format-ignore: NeverForceUnwrap
        let personal = try await OIDCAuthProvider.discover(
            issuer: URL(string: "https://id.example.com")!,
            configuration: .init(clientID: "my-app", redirectURI: "com.example.app:/oauth"))
        let accounts = OIDCAccounts(
            providers: [work, personal], tokens: store,
            index: FileAccountIndexStore(url: supportFolder.appendingPathComponent("accounts.json")))

        let me = try await accounts.add(signingInWith: agent, at: personal)  // now the current account
        let job = try await accounts.add(signingInWith: agent, at: work)  // now this one is current
        let api = AuthorizedClient(session: try await accounts.session(for: me), baseURL: apiBase)
        for account in try await accounts.list() { print(account) }  // label and issuer, never a token
        try await accounts.switchTo(me)
        try await accounts.remove(me)  // revokes, deletes; others untouched
        _ = (job, api)
    }

    /// Sign in with Apple: the system sheet, then the backend's exchange.
    static func signInWithApple(
        window: ASPresentationAnchor, provider: RESTAuthProvider, session: AuthSession, deviceID: String
    ) async throws {
        let apple = try await AppleIDSignIn(anchor: window).signIn()  // the system sheet; a fresh nonce per request
        let tokens = try await provider.signInWithApple(
            identityToken: apple.identityToken, rawNonce: apple.rawNonce, deviceID: deviceID)
        try await session.signIn(with: tokens)
    }
}
