import Foundation
import SesameLoopback
import SesameTestSupport
import Testing

@Suite struct LoopbackRedirectReceiverTests {
    @Test(
        "NAT-12: only the path and state complete it; 200 half-sent requests from local processes cannot crowd it out")
    func onlyTheRealRedirect() async throws {
        let receiver = LoopbackRedirectReceiver()
        let url = try receiver.start()
        defer { receiver.stop() }
        receiver.expect(state: "s-1")
        let port = url.port ?? 0
        // Two hundred local connections that never finish a request (the receiver holds 64): each newcomer makes
        // the oldest of them room, so the browser's redirect below still gets through (issue 20 #5).
        let squatters = try (0..<200).map { _ -> RawClient in
            let client = try RawClient(port: port)
            client.send("GET /callback?state=s-1 HTTP/1.1\r\n")
            return client
        }
        let other = try TestBrowser(port: port).get("/elsewhere?state=s-1")
        #expect(other.status == 404)
        let bare = try TestBrowser(port: port).get("/callback")
        #expect(bare.status == 400, "no state, code or error: not a response, waiting goes on")
        let rebound = try TestBrowser(port: port).get("/callback?code=x&state=s-1", headers: [("Host", "evil.example")])
        #expect(rebound.status == 421 || rebound.status == 400)
        let page = try TestBrowser(port: port).get("/callback?code=c-1&state=s-1")
        #expect(page.status == 200 && page.body.contains("close this tab") && !page.body.contains("Signed in"))
        let redirect = try await receiver.waitForRedirect(state: "s-1", timeout: 5)
        #expect(redirect.query?.contains("code=c-1") == true)
        withExtendedLifetime(squatters) {}
    }

    @Test(
        "BCP-14 BCP-15: the landing page is static: it never redirects (whatever URL a request carries), loads nothing, and sends Referrer-Policy no-referrer"
    )
    func staticLandingPage() async throws {
        let receiver = LoopbackRedirectReceiver()
        let url = try receiver.start()
        defer { receiver.stop() }
        receiver.expect(state: "s-1")
        let port = url.port ?? 0
        let evil = "https%3A%2F%2Fevil.example%2F"
        var pages: [TestBrowser.Page] = []
        for target in [
            "/elsewhere?next=\(evil)", "/callback?redirect_uri=\(evil)",
            "/callback?code=c-1&state=s-1&next=\(evil)&redirect_uri=\(evil)",
        ] {
            pages.append(try TestBrowser(port: port).get(target))
        }
        for page in pages {
            #expect(!(300..<400).contains(page.status) && page.location == nil)
        }
        let landing = try #require(pages.last)
        #expect(landing.status == 200)
        #expect(landing.header("Referrer-Policy") == "no-referrer")
        #expect(landing.header("Content-Security-Policy")?.contains("default-src 'none'") == true)
        for reference in ["src=", "href=", "http:", "https:", "evil.example"] {
            #expect(!landing.body.contains(reference), "the page carries \(reference)")
        }
        let redirect = try await receiver.waitForRedirect(state: "s-1", timeout: 5)
        #expect(redirect.query?.contains("code=c-1") == true)
    }

    @Test("NAT-12: names that only start like loopback (127.evil.example, localhost.evil.example) are refused")
    func hostIsParsedNotPrefixMatched() async throws {
        let receiver = LoopbackRedirectReceiver()
        let url = try receiver.start()
        defer { receiver.stop() }
        receiver.expect(state: "s-1")
        let port = url.port ?? 0
        for host in [
            "127.evil.example", "127.evil.example:\(port)", "localhost.evil.example", "localhost.evil.example:\(port)",
            "127.0.0.1.evil.example", "[::1].evil.example", "[::1]x", "127.0.0.1:80x", "127.a.b.c", "evil.example",
            "",
        ] {
            let answer = try TestBrowser(port: port).get("/callback?code=x&state=s-1", headers: [("Host", host)])
            #expect(answer.status == 421 || answer.status == 400, "Host: \(host) → \(answer.status)")
        }
        let page = try TestBrowser(port: port).get(
            "/callback?code=c-1&state=s-1", headers: [("Host", "localhost:\(port)")])
        #expect(page.status == 200, "a loopback name passes")
        let redirect = try await receiver.waitForRedirect(state: "s-1", timeout: 5)
        #expect(redirect.query?.contains("code=c-1") == true, "none of the foreign hosts completed it")
    }

    @Test(
        "NAT-12 RP-58: a response with another state (or none) ends the wait at once, the browser told why",
        arguments: ["/callback?code=x&state=other", "/callback?code=x", "/callback?error=access_denied&state=s-"])
    func mismatchedStateEndsTheWait(target: String) async throws {
        let receiver = LoopbackRedirectReceiver()
        let url = try receiver.start()
        defer { receiver.stop() }
        receiver.expect(state: "s-1")
        let port = url.port ?? 0
        let waiting = Task { try await receiver.waitForRedirect(state: "s-1", timeout: 30) }
        let forged = try TestBrowser(port: port).get(target)
        #expect(forged.status == 400 && forged.body.contains("state does not match"))
        #expect(forged.body.contains("sign in again"))
        do {
            _ = try await waiting.value
            Issue.record("the wait went on after a mismatched state")
        } catch let failure as LoopbackRedirectReceiver.Failure {
            #expect(failure == .stateMismatch)
        }
        let late = try TestBrowser(port: port).get("/callback?code=c-1&state=s-1")
        #expect(late.status == 400, "the flow is over: the right state afterwards completes nothing")
        await #expect(throws: LoopbackRedirectReceiver.Failure.stateMismatch) {
            _ = try await receiver.waitForRedirect(state: "s-1", timeout: 5)
        }
    }
}
