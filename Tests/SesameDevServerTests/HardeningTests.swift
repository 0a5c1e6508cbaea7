import Foundation
import SesameDevServer
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import Testing

/// The dev server as tried from outside: hostile numbers, NUL bytes and look-alike emails (issue 9's hardening,
/// first part).
@Suite struct HardeningTests {
    @Test(
        "Absurd numbers from a request are a 400, and the server keeps serving",
        arguments: ["1e300", "-1e300", "1e19", "315360001"])
    func absurdExpiresIn(value: String) async throws {
        let running = try RunningServer()
        defer { running.server.stop() }
        let body = try JOSEValue.parse(Data(#"{"sub":"x","nonce":"n","expiresIn":\#(value)}"#.utf8))
        let minted = try await running.client.send("POST", "/_dev/apple/identity-token", json: body)
        #expect(minted.status == 400 && minted.error == "invalid_request")
        #expect(try await running.register("still@example.com").status == 201)
        let negative = try await running.client.send(
            "POST", "/_dev/apple/identity-token", json: ["sub": "x", "nonce": "n", "expiresIn": -60])
        #expect(negative.status == 200, "a negative lifetime within bounds stays possible for negative tests")
    }

    @Test("A latency fault is finite and bounded: inf, NaN and hours are refused")
    func boundedLatency() {
        for spec in ["*:latency=infs", "*:latency=nans", "*:latency=1e300ms", "*:latency=3601s", "*:latency=-1s"] {
            #expect(throws: (any Error).self, "\(spec)") { try FaultPlan(spec: spec) }
        }
        #expect(throws: Never.self) { try FaultPlan(spec: "*:latency=60s") }
    }

    @Test("A NUL inside an email never signs in as the account before it")
    func nulInEmail() async throws {
        let running = try RunningServer()
        defer { running.server.stop() }
        #expect(try await running.register("alice@example.com").status == 201)
        let smuggled = try await running.login("alice@example.com\u{0}evil")
        #expect(smuggled.status == 400 && smuggled.json?["accessToken"] == nil)
        let registered = try await running.register("alice@example.com\u{0}evil")
        #expect(registered.status == 400)
        #expect(try await running.login("alice@example.com").status == 200)
    }

    @Test("Look-alike emails are one account (NFC, case, full width) or refused (zero-width, bidi)")
    func lookAlikes() async throws {
        let running = try RunningServer()
        defer { running.server.stop() }
        #expect(try await running.register("jos\u{E9}@example.com").status == 201)
        for same in ["jose\u{301}@example.com", "JOS\u{C9}@EXAMPLE.COM", "\u{FF4A}os\u{E9}@example.com"] {
            #expect(try await running.register(same).status == 409, "\(same.unicodeScalars.map { $0.value })")
            #expect(try await running.login(same).status == 200)
        }
        for invisible in ["jo\u{200B}se@example.com", "jose@exa\u{202E}mple.com", "jose\u{7}@example.com"] {
            #expect(try await running.register(invisible).status == 400)
        }
    }
}
