import Foundation
import Sesame
import SesameDevServer
import SesameJOSE
import Testing

/// Keeps the README's OpenID Connect example compiling and true, against the dev server (a form-posting agent
/// stands in for the browser sheet).
@Suite struct ReadmeOIDCExampleTests {
    @Test("README: signing in with OpenID Connect")
    func readmeExample() async throws {
        let oidc = try OIDCClientHarness()
        defer { oidc.stop() }
        let store = InMemoryTokenStore()
        let agent = FormUserAgent(harness: oidc)
        let issuer = oidc.issuer.absoluteString

        // README, verbatim but for the issuer, client, redirect URI and API URL:
        // swift-format-ignore: NeverForceUnwrap
        let signIn = try await OIDCSignIn.configure(
            issuer: URL(string: issuer)!, clientID: "sesame-cli",
            redirectURI: "http://127.0.0.1:5555/callback", store: store)
        try await signIn.signIn(with: agent)
        let token = try await signIn.accessToken()
        let claims = try await signIn.userInfo()
        // swift-format-ignore: NeverForceUnwrap
        let api = signIn.client(for: URL(string: issuer)!)
        let result = await signIn.signOut(endSession: agent)

        #expect(token.split(separator: ".").count == 3 && claims["email"] == "alice@example.com")
        #expect(api.credentialOrigins.count == 1)
        #expect(result.credentialsRemoved)
        await #expect(throws: AuthError.self) { try await signIn.accessToken() }
    }
}
