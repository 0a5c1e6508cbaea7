import Foundation
import SesameLoopback
import SesameTestSupport
import Testing

@Suite struct LoopbackRedirectReceiverTests {
    @Test("NAT-12: only the path and state complete it; half-sent requests from local processes cannot crowd it out")
    func onlyTheRealRedirect() async throws {
        let receiver = LoopbackRedirectReceiver()
        let url = try receiver.start()
        defer { receiver.stop() }
        receiver.expect(state: "s-1")
        let port = url.port ?? 0
        // Twenty local connections that never finish a request.
        let squatters = try (0..<20).map { _ -> RawClient in
            let client = try RawClient(port: port)
            client.send("GET /callback?state=s-1 HTTP/1.1\r\n")
            return client
        }
        let other = try TestBrowser(port: port).get("/elsewhere?state=s-1")
        #expect(other.status == 404)
        let forged = try TestBrowser(port: port).get("/callback?code=x&state=other")
        #expect(forged.status == 400)
        let rebound = try TestBrowser(port: port).get("/callback?code=x&state=s-1", headers: [("Host", "evil.example")])
        #expect(rebound.status == 421 || rebound.status == 400)
        let page = try TestBrowser(port: port).get("/callback?code=c-1&state=s-1")
        #expect(page.status == 200 && page.body.contains("close this tab") && !page.body.contains("Signed in"))
        let redirect = try await receiver.waitForRedirect(state: "s-1", timeout: 5)
        #expect(redirect.query?.contains("code=c-1") == true)
        withExtendedLifetime(squatters) {}
    }
}
