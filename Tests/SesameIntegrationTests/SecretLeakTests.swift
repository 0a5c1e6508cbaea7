import Foundation
import Sesame
import SesameDevServer
import SesameJOSE
import SesameTestSupport
import SesameTesting
import Testing

/// Collects everything a full flow logs, describes and throws, and fails if any token, password, code or
/// verifier appears in it.
@Suite struct SecretLeakTests {
    @Test("No token or password in server logs, session events, descriptions or error messages of a full flow")
    func fullFlowLeaksNothing() async throws {
        let serverLog = LineCollector()
        let harness = try Harness { configuration in
            configuration.log = { serverLog.append($0) }
        }
        defer { harness.server.stop() }
        var seen: [String] = []
        let password = "Pa55-\(UUID().uuidString)"
        let tokens = try await harness.provider.register(email: "leak@example.com", password: password)
        seen.append("\(tokens)")
        seen.append(String(reflecting: tokens))
        try await harness.session.signIn(with: tokens)
        harness.clock.advance(by: 901)
        let refreshed = try await harness.session.validTokens()
        seen.append("\(refreshed)")
        let me: Me = try await harness.client.get("/me")
        seen.append("\(me)")
        // Errors along the way: a wrong password, a reused refresh token, a 401.
        do { _ = try await harness.provider.login(email: "leak@example.com", password: password + "x") } catch {
            seen.append("\(error)")
            seen.append(String(reflecting: error))
            seen.append(error.localizedDescription)
        }
        do { _ = try await harness.provider.refresh(tokens) } catch { seen.append("\(error)") }
        try await harness.setFaults("/me:unauthorized")
        do { _ = try await harness.client.get("/me", as: Me.self) } catch { seen.append("\(error)") }
        try await harness.setFaults("")
        let stream = harness.session.events()
        let events = Task {
            var collected: [String] = []
            for await event in stream {
                collected.append("\(event)")
                if case .signedOut = event { break }
            }
            return collected
        }
        await harness.session.signOut()
        seen += await events.value
        seen += serverLog.lines
        #expect(serverLog.lines.count >= 6)
        let secrets = [
            password, password + "x", tokens.accessToken, tokens.refreshToken, refreshed.accessToken,
            refreshed.refreshToken,
        ].compactMap { $0 }
        for text in seen {
            for secret in secrets { #expect(!text.contains(secret), "a secret appeared in: \(text.prefix(120))") }
        }
    }
}
