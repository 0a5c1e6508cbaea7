// The "Testing your app" article's first example, exactly as a user would paste it into a test target
// (DocCSnippetTests ties the article to this file).
import Sesame
import SesameDevServer
import SesameJOSE  // the claims' type (JOSEValue)
import SesameTesting
import Testing

@Test func signInAndCallTheAPI() async throws {
    var configuration = DevServer.Configuration()
    configuration.users = [("alice@example.com", "correct-horse")]
    configuration.passwordIterations = 1000  // fast tests; the default is 600,000
    let server = try DevServer(configuration: configuration)
    let issuer = try server.start()
    defer { server.stop() }

    let auth = try await OIDCAuth.configure(
        issuer: issuer, clientID: "sesame-cli", redirectURI: "http://127.0.0.1:5555/callback",
        store: InMemoryTokenStore())
    try await auth.signIn(with: DevServerUser(email: "alice@example.com", password: "correct-horse"))
    #expect(try await auth.userInfo()["email"] == "alice@example.com")
}
