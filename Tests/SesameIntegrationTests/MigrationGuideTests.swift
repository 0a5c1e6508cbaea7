import Foundation
import Sesame
import SesameDevServer
import SesameJOSE
import SesameTesting
import Testing

/// Keeps the Sesame snippets of `Sesame.docc/MigratingFromAHandRolledInterceptor.md` compiling and true.
@Suite struct MigrationGuideTests {
    @Test("Migration guide: store, 204, failure classes, the deviceId refresh contract, the Apple exchange")
    func snippets() async throws {
        var configuration = DevServer.Configuration()
        configuration.passwordIterations = 1000
        let clock = ManualTimeSource(Date())
        configuration.clock = { clock.now }
        let server = try DevServer(configuration: configuration)
        try server.start()
        defer { server.stop() }
        let api = try #require(server.localURL)
        let credentialsDirectory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sesame-guide-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: credentialsDirectory) }
        let deviceID = "device-7"
        var shownSignIn = false
        var shownRetry = false
        func showSignIn() { shownSignIn = true }
        func showRetryBanner() { shownRetry = true }

        // "Use another backend's contract": the dev server's refresh path stands in for auth/refresh.
        var contract = RESTAuthProvider.Contract()
        contract.refreshPath = "refresh-token"
        contract.refreshBody = { token in ["refreshToken": .string(token), "deviceId": .string(deviceID)] }
        let provider = RESTAuthProvider(baseURL: api, contract: contract)

        // Tokens in UserDefaults → a TokenStore.
        let store = try FileTokenStore(directory: credentialsDirectory)
        let session = AuthSession(provider: provider, store: store)
        try await session.signIn(
            with: try await provider.register(email: "guide@example.com", password: "correct-horse"))
        let client = AuthorizedClient(session: session, baseURL: api)

        // EmptyResponse → send.
        let response = try await client.send(.post("/logout", body: Data("{}".utf8)))
        #expect(response.status == 204 && response.body.isEmpty)

        // Definitive vs transient: the server ends the session behind the app's back.
        try await provider.signOut(try #require(try await session.currentTokens))
        clock.advance(by: 1000)  // the access token has expired at the server: the next call refreshes
        do {
            _ = try await client.send(.get("/me"))  // any call through the session
        } catch let error as AuthError where error.requiresReauthentication {
            showSignIn()
        } catch let error as AuthError where error.isTransient {
            showRetryBanner()
        }
        #expect(shownSignIn && !shownRetry)

        // The Apple exchange (the dev server's stand-in Apple issuer mints the identity token).
        let nonce = SignInWithAppleNonce()
        let minted = try await SesameHTTP.platformTransport.send(
            SesameHTTP.Request(
                method: "POST", url: api.appendingPathComponent("_dev/apple/identity-token"),
                headers: ["Content-Type": "application/json"],
                body: JOSEValue.object([
                    "sub": "000123.guide", "email": "guide-apple@example.com", "nonce": .string(nonce.raw),
                ]).jsonData))
        let identityToken = try #require(try JOSEValue.parse(minted.body)["identityToken"]?.stringValue)
        let tokens = try await provider.signInWithApple(
            identityToken: identityToken, rawNonce: nonce.raw, deviceID: deviceID)
        try await session.signIn(with: tokens)
        #expect(try await session.currentTokens?.user?.email == "guide-apple@example.com")
    }
}
