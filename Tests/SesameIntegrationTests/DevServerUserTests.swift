import Foundation
import Sesame
import SesameDevServer
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

/// `SesameTesting.DevServerUser`, the person at the dev server's pages that users' own tests use (issue 18): it
/// signs in through the real form, passes the second step, approves and denies device codes, and fails clearly.
@Suite struct DevServerUserTests {
    @Test("signs in through the form (then straight back, remembered), with a typed error for a wrong password")
    func signIn() async throws {
        let server = try DevServer(configuration: Self.configuration())
        let issuer = try server.start()
        defer { server.stop() }
        let auth = try await OIDCAuth.configure(
            issuer: issuer, clientID: "sesame-cli", redirectURI: "http://127.0.0.1:5555/callback",
            store: InMemoryTokenStore())
        let alice = DevServerUser(email: "alice@example.com", password: "correct-horse")
        let tokens = try await auth.signIn(with: alice)
        #expect(tokens.user?.email == "alice@example.com")
        #expect("\(alice)" == "DevServerUser(alice@example.com)")
        var dumped = ""
        dump(alice, to: &dumped)
        #expect(!dumped.contains("correct-horse") && dumped.contains("alice@example.com"))
        let wrong = DevServerUser(email: "alice@example.com", password: "not-her-password")
        do {
            try await auth.signIn(with: wrong)
            Issue.record("signed in with a wrong password")
        } catch let error as AuthError {
            #expect(error.code == .invalidResponse && error.message.contains("refused the password"))
            #expect(!error.message.contains("not-her-password"))
        }
    }

    @Test("passes the second step with the code from the server's log")
    func secondStep() async throws {
        let codes = LockedBox<[String]>([])
        var configuration = Self.configuration()
        configuration.log = { line in
            guard let range = line.range(of: "one-time code ") else { return }
            codes.mutate { $0.append(String(line[range.upperBound...].prefix(6))) }
        }
        let server = try DevServer(configuration: configuration)
        let issuer = try server.start()
        defer { server.stop() }
        let auth = try await OIDCAuth.configure(
            issuer: issuer, clientID: "sesame-cli", redirectURI: "http://127.0.0.1:5555/callback",
            store: InMemoryTokenStore())
        let user = DevServerUser(email: "alice@example.com", password: "correct-horse") {
            guard let code = codes.value.last else { throw AuthError(.invalidResponse, "no code in the log") }
            return code
        }
        var options = AuthorizationOptions()
        options.acrValues = [DevServer.mfaACR]
        let tokens = try await auth.signIn(with: user, options: options)
        let idToken = try #require(tokens.idToken)
        #expect(try JWT.unverified(idToken).claims["acr"] == .string(DevServer.mfaACR))
    }

    @Test("approves a device code (the device signs in) and denies another (cancelled)")
    func deviceCodes() async throws {
        let server = try DevServer(configuration: Self.configuration())
        let issuer = try server.start()
        defer { server.stop() }
        let metadata = try await OIDCProviderMetadata.discover(issuer: issuer)
        let provider = OIDCAuthProvider(
            metadata: metadata,
            configuration: .init(clientID: "sesame-cli", redirectURI: "", scopes: ["openid", "email"]),
            sleep: { _ in })
        let auth = OIDCAuth(provider: provider, store: InMemoryTokenStore())
        let user = DevServerUser(email: "bob@example.com", password: "battery-staple")
        let tokens = try await auth.signInOnAnotherDevice { authorization, progress in
            guard progress == nil else { return }
            try? await user.confirmDevice(userCode: authorization.userCode, at: authorization.verificationURI)
        }
        #expect(tokens.user?.email == "bob@example.com")
        do {
            try await auth.signInOnAnotherDevice { authorization, progress in
                guard progress == nil else { return }
                try? await user.confirmDevice(
                    userCode: authorization.userCode, at: authorization.verificationURI, approve: false)
            }
            Issue.record("a denied device signed in")
        } catch let error as AuthError {
            #expect(error.code == .cancelled)
        }
    }

    @Test("README: the dev server in your tests, verbatim")
    func readmeSnippet() async throws {
        // README, verbatim:
        var configuration = DevServer.Configuration()
        configuration.users = [("alice@example.com", "correct-horse")]
        configuration.passwordIterations = 1000  // fast tests; the default is 600,000
        // Your app's own client: configuration.clients = [RegisteredClient(id: "my-app", redirectURIs: ["com.example.app:/oauth"])]
        let server = try DevServer(configuration: configuration)
        let issuer = try server.start()  // http://127.0.0.1:PORT, SQLite in memory
        defer { server.stop() }

        let auth = try await OIDCAuth.configure(
            issuer: issuer, clientID: "sesame-cli", redirectURI: "http://127.0.0.1:5555/callback",
            store: InMemoryTokenStore())
        try await auth.signIn(with: DevServerUser(email: "alice@example.com", password: "correct-horse"))
        let email = try await auth.userInfo()["email"]?.stringValue  // "alice@example.com"

        #expect(email == "alice@example.com")
    }

    static func configuration() -> DevServer.Configuration {
        var configuration = DevServer.Configuration()
        configuration.passwordIterations = 1000
        configuration.users = [("alice@example.com", "correct-horse"), ("bob@example.com", "battery-staple")]
        return configuration
    }
}
