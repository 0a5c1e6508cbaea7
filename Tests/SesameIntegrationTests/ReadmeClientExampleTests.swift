import Foundation
import Sesame
import SesameDevServer
import Testing

/// Keeps the README's client example compiling and true, against the dev server.
@Suite struct ReadmeClientExampleTests {
    struct User: Decodable {
        let id: String
        let email: String?
    }

    @Test("README: signing in and calling an API")
    func readmeExample() async throws {
        var configuration = DevServer.Configuration()
        configuration.passwordIterations = 1000
        configuration.users = [(email: "readme@example.com", password: "correct-horse")]
        let server = try DevServer(configuration: configuration)
        try server.start()
        defer { server.stop() }
        let appSupport = FileManager.default.temporaryDirectory.appendingPathComponent("readme-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: appSupport) }
        let email = "readme@example.com"
        let password = "correct-horse"
        let local = try #require(server.localURL).absoluteString

        // README, verbatim but for the URL (ReadmeSnippetTests checks):
        // swift-format-ignore: NeverForceUnwrap
        // (the README shows the force unwrap a reader would write for a literal URL)
        let baseURL = URL(string: "\(local)/")!
        let provider = RESTAuthProvider(baseURL: baseURL)
        let store = try FileTokenStore(directory: appSupport.appendingPathComponent("credentials"))
        let session = AuthSession(provider: provider, store: store)

        try await session.signIn(with: try await provider.login(email: email, password: password))

        let api = AuthorizedClient(session: session, baseURL: baseURL)
        let me: User = try await api.get("/me")
        let result = await session.signOut()
        print(result.revocation)

        #expect(me.email == email)
        // signOut() called POST /logout with the refresh token (a 204, never decoded): the server confirmed.
        if case .confirmed = result.revocation {
        } else {
            Issue.record("the server did not confirm: \(result.revocation)")
        }
        #expect(try await store.load(profile: "default") == nil)
        #expect(result.credentialsRemoved && result.wasSignedIn)
    }
}
