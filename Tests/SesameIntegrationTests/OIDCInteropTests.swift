import Foundation
import Sesame
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The OIDC client against a real third-party provider: django-oauth-toolkit (PyPI) on SQLite, on loopback.
@Suite struct OIDCInteropTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let required = ProcessInfo.processInfo.environment["SESAME_REQUIRE_INTEROP"] == "1"

    static let available: Bool = {
        let probe = ChildProcess()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        probe.arguments = ["python3", "-c", "import django, oauth2_provider"]
        probe.standardOutput = .null
        probe.standardError = .null
        let found =
            (try? probe.run()).map {
                probe.waitUntilExit()
                return probe.terminationStatus == 0
            } ?? false
        if !found && !required {
            print("notice: OIDCInteropTests: django-oauth-toolkit missing; the third-party provider test is skipped")
        }
        return found || required
    }()

    /// django-oauth-toolkit running for one test.
    final class Provider {
        let process = ChildProcess()
        let folder: URL
        let issuer: URL

        init() throws {
            folder = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-dot-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [
                "python3", OIDCInteropTests.root.appendingPathComponent("Tests/Interop/dot/dot_server.py").path,
                folder.appendingPathComponent("dot.sqlite").path, "0",
            ]
            let output = Pipe()
            process.standardOutput = .pipe(output)
            process.standardError = .null
            try process.run()
            let line = output.fileHandleForReading.readLineUnbuffered()
            guard line.hasPrefix("ready "),
                let url = URL(string: String(line.dropFirst(6)).trimmingCharacters(in: .whitespacesAndNewlines))
            else {
                process.terminate()
                throw AuthError(.transport, "django-oauth-toolkit did not start: \(line)")
            }
            issuer = url
        }

        func stop() {
            // SIGKILL: a child spawned from a test's worker thread may inherit a mask that blocks SIGTERM.
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            try? FileManager.default.removeItem(at: folder)
        }
    }

    /// Follows the provider's redirects, signing in on its login form, until the redirect to the client.
    static func userAgent(_ url: URL, browser: TestBrowser) throws -> URL {
        // The path as sent (URL.path would drop django's trailing slashes).
        func pathAndQuery(_ url: URL) -> String {
            let parts = URLComponents(url: url, resolvingAgainstBaseURL: true)
            return (parts?.percentEncodedPath ?? url.path) + (parts?.percentEncodedQuery.map { "?" + $0 } ?? "")
        }
        var target = pathAndQuery(url)
        for _ in 0..<8 {
            let page = try browser.get(target)
            if let location = page.location {
                if location.hasPrefix("http://127.0.0.1:5555/callback"), let redirect = URL(string: location) {
                    return redirect
                }
                target = URL(string: location).map(pathAndQuery) ?? location
                continue
            }
            guard page.status == 200, page.body.contains("csrfmiddlewaretoken") else {
                throw AuthError(.invalidResponse, "unexpected page \(page.status): \(page.body.prefix(300))")
            }
            let signedIn = try browser.post(
                "/accounts/login/",
                form: page.hiddenFields() + [("username", "alice@example.com"), ("password", "correct-horse")])
            guard let next = signedIn.location else {
                throw AuthError(.invalidResponse, "the login form answered \(signedIn.status)")
            }
            target = URL(string: next).map(pathAndQuery) ?? next
        }
        throw AuthError(.invalidResponse, "too many redirects")
    }

    @Test(
        "RP-01 RP-02 RP-35 REV-01 against django-oauth-toolkit: discovery, code + PKCE through its login form, RS256 ID token, UserInfo, refresh, revocation",
        .enabled(if: available), .timeLimit(.minutes(2)))
    func djangoOAuthToolkit() async throws {
        let dot = try Provider()
        defer { dot.stop() }
        var metadata = try await OIDCProviderMetadata.discover(issuer: dot.issuer)
        #expect(metadata.issuer == dot.issuer.absoluteString)
        // Its discovery lists HS256 as well; an HMAC ID token would never be accepted from a public client's view.
        #expect(metadata.idTokenSigningAlgorithms.contains("RS256"))
        // It has a revocation endpoint but does not list it: configured by hand, as an app would.
        metadata.revocationEndpoint = URL(string: dot.issuer.absoluteString + "/revoke_token/")
        let provider = OIDCAuthProvider(
            metadata: metadata,
            configuration: OIDCAuthProvider.Configuration(
                clientID: "sesame-native", redirectURI: "http://127.0.0.1:5555/callback",
                scopes: ["openid", "profile", "email"]))
        let browser = TestBrowser(port: dot.issuer.port ?? 0)
        let pending = try await provider.authorizationRequest()
        let tokens = try await provider.completeAuthorization(
            redirect: try Self.userAgent(pending.url, browser: browser), pending: pending)
        let idToken = try #require(tokens.idToken)
        #expect(try JWT.unverified(idToken).header.algorithmName == "RS256")
        #expect(tokens.refreshToken != nil && tokens.user?.id.isEmpty == false)
        let info = try await provider.userInfo(for: tokens)
        #expect(info["sub"] == .string(tokens.user?.id ?? "-"))
        let refreshed = try await provider.refresh(tokens)
        #expect(refreshed.refreshToken != tokens.refreshToken && refreshed.user?.id == tokens.user?.id)
        try await provider.signOut(refreshed)
        do {
            _ = try await provider.refresh(refreshed)
            Issue.record("a revoked refresh token refreshed")
        } catch let error as AuthError {
            #expect(error.code == .refreshRejected)
        }
        // A response that claims another issuer is refused before the code is used.
        let second = try await provider.authorizationRequest()
        let redirect = try Self.userAgent(second.url, browser: browser)
        let forged = try #require(URL(string: redirect.absoluteString + "&iss=https%3A%2F%2Fattacker.example"))
        await #expect(throws: AuthError.self) {
            try await provider.completeAuthorization(redirect: forged, pending: second)
        }
    }
}
