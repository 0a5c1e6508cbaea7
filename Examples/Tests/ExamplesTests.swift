import ExampleAppModel
import ExampleCLICore
import Foundation
import Sesame
import SesameDevServer
import SesameTesting
import Testing

/// The sample apps against a real dev server: what the iOS app's views call, and the Linux CLI's commands.
@Suite struct ExamplesTests {
    static func server() throws -> (DevServer, URL) {
        var configuration = DevServer.Configuration()
        configuration.users = [("alice@example.com", "correct-horse")]
        configuration.passwordIterations = 1000
        let server = try DevServer(configuration: configuration)
        return (server, try server.start())
    }

    @Test("the iOS app's model: OpenID Connect sign-in, an API call, sign-out; then the REST backend; a wrong password")
    @MainActor
    func appModel() async throws {
        let (server, issuer) = try Self.server()
        defer { server.stop() }
        let store = InMemoryTokenStore()
        let model = try await AppModel.make(
            settings: .init(
                issuer: issuer, clientID: "sesame-cli", redirectURI: "http://127.0.0.1:5555/callback",
                restBase: issuer),
            store: store)
        await model.auth.reload()
        #expect(model.auth.status == .signedOut(reason: nil))
        await model.signInWithOpenIDConnect(using: DevServerUser(email: "alice@example.com", password: "correct-horse"))
        guard case .signedIn = model.auth.status else {
            Issue.record("not signed in: \(String(describing: model.problem))")
            return
        }
        await model.loadProfile()
        #expect(model.profile == "alice@example.com" && model.backend == .openIDConnect)
        await model.signOut()
        #expect(model.auth.status == .signedOut(reason: nil) && model.profile == nil)
        model.email = "alice@example.com"
        model.password = "wrong-password"
        await model.signInWithPassword()
        #expect(model.problem != nil && model.password.isEmpty)
        model.password = "correct-horse"
        await model.signInWithPassword()
        #expect(model.backend == .rest && model.problem == nil)
        await model.loadProfile()
        #expect(model.profile == "alice@example.com")
        // A relaunch finds the REST session.
        let relaunched = try await AppModel.make(
            settings: .init(
                issuer: issuer, clientID: "sesame-cli", redirectURI: "http://127.0.0.1:5555/callback",
                restBase: issuer),
            store: store)
        #expect(relaunched.backend == .rest)
    }

    @Test("the Linux CLI: device-flow login approved by a person at /device, whoami through AuthorizedClient, logout")
    func linuxCLI() async throws {
        let (server, issuer) = try Self.server()
        defer { server.stop() }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("example-cli-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let lines = Lines()
        let cli = ExampleCLI(folder: folder, usesKeyring: false, output: { lines.append($0) })
        let user = DevServerUser(email: "alice@example.com", password: "correct-horse")
        try await cli.login(issuer: issuer) { authorization in
            try? await user.confirmDevice(userCode: authorization.userCode, at: authorization.verificationURI)
        }
        try await cli.whoami()
        try await cli.logout()
        #expect(lines.all == ["signed in as alice@example.com", "alice@example.com (HTTP 200)", "signed out"])
        await #expect(throws: AuthError.self) { try await cli.whoami() }
    }
}

final class Lines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}
