import Foundation
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import SesameTesting
import Testing

@testable import SesameDevServer

/// Third-party peers against the provider: headless Chromium driven by Selenium, and Authlib's OAuth client.
///
/// `Scripts/test.sh` installs them and sets `SESAME_REQUIRE_INTEROP=1`, so there a missing peer fails the run; a
/// bare `swift test` without them skips these tests with a notice.
@Suite struct InteropTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let required = ProcessInfo.processInfo.environment["SESAME_REQUIRE_INTEROP"] == "1"

    static func pythonHas(_ modules: String) -> Bool {
        (try? runPython(["-c", "import \(modules)"]).status) == 0
    }

    static let browserAvailable: Bool = {
        let found =
            FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium")
            && FileManager.default.isExecutableFile(atPath: "/usr/bin/chromedriver") && pythonHas("selenium")
        if !found && !required {
            print("notice: InteropTests: Chromium, chromedriver or Selenium missing; the browser test is skipped")
        }
        return found || required
    }()

    static let authlibAvailable: Bool = {
        let found = pythonHas("authlib, requests")
        if !found && !required { print("notice: InteropTests: Authlib missing; the interop test is skipped") }
        return found || required
    }()

    struct Run {
        let status: Int32
        let output: String
        let errors: String
    }

    /// Runs python3 with `arguments`, killing it after `timeout` seconds.
    static func runPython(_ arguments: [String], timeout: TimeInterval = 120) throws -> Run {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3"] + arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = .pipe(output)
        process.standardError = .pipe(errors)
        try process.run()
        let killer = DispatchWorkItem { process.terminate() }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: killer)
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        killer.cancel()
        return Run(
            status: process.terminationStatus, output: String(decoding: out, as: UTF8.self),
            errors: String(decoding: err, as: UTF8.self))
    }

    /// What `browser_signin.py` saw, and what the hostile neighbour on another loopback port received.
    struct BrowserRun {
        let result: JOSEValue
        let neighbourCookies: [String]
        let callbacks: Int
        let requests: [OIDCTestServer.PKCE]
        let redirect: String
    }

    /// Runs `browser_signin.py` against a dev server configured by `configure`: sign-in (wrong password first),
    /// prompt=login, a visit to a neighbour on another loopback port that plants `planted` as the session cookie,
    /// then a new authorization request.
    func browserRun(
        planting plant: (OIDCTestServer) throws -> String?,
        configure: @escaping (inout DevServer.Configuration) -> Void = { _ in }
    ) throws -> (BrowserRun, OIDCTestServer) {
        let oidc = try OIDCTestServer { configure(&$0) }
        let planted = try plant(oidc)
        // The app's loopback redirect: a real listener, as a native app's would be.
        let app = try RecordingServer { _ in
            .html(200, "<!doctype html><title>App</title><p>Signed in; back to the app.</p>")
        }
        defer { app.stop() }
        // The neighbour: another program on another loopback port, with a page the browser is made to open.
        let neighbour = try RecordingServer { _ in
            var response = HTTPServerResponse.html(200, "<!doctype html><title>Neighbour</title><p>Nothing here.</p>")
            if let planted {
                for path in ["/authorize", "/device"] {
                    response.headers.add("Set-Cookie", "sesame_session=\(planted); Path=\(path); HttpOnly")
                }
            }
            return response
        }
        defer { neighbour.stop() }
        let redirect = "http://127.0.0.1:\(app.port)/callback"
        let requests = (0..<3).map { _ in OIDCTestServer.PKCE() }
        let urls = requests.enumerated().map { index, pkce in
            oidc.issuerText + "/authorize?"
                + OIDCTestServer.query(
                    oidc.parameters(
                        pkce, scope: "openid email",
                        ["redirect_uri": redirect, "state": "state-\(index)", "prompt": index == 1 ? "login" : nil]))
        }
        let artifacts = Self.packageRoot.appendingPathComponent(".build/test-artifacts")
        try FileManager.default.createDirectory(at: artifacts, withIntermediateDirectories: true)
        let script = Self.packageRoot.appendingPathComponent("Tests/Interop/browser_signin.py").path
        let run = try Self.runPython(
            [
                script, artifacts.path, OIDCTestServer.email, OIDCTestServer.password, urls[0], urls[1],
                "http://127.0.0.1:\(neighbour.port)/authorize?client_id=sesame-cli", urls[2],
            ])
        guard run.status == 0 else {
            oidc.stop()
            throw HarnessError("browser_signin.py: \(run.output) \(run.errors.suffix(2000))")
        }
        return (
            BrowserRun(
                result: try JOSEValue.parse(Data(run.output.utf8)),
                neighbourCookies: neighbour.requests.flatMap { $0.headers.values("Cookie") },
                callbacks: app.requests.filter { $0.path == "/callback" }.count, requests: requests,
                redirect: redirect),
            oidc
        )
    }

    @Test(
        "a real browser signs in (keyboard only), sees the wrong-password error and prompt=login's form; a neighbour on another loopback port gets no session cookie, and its planted one is ignored (issue 20 #1–#3)",
        .enabled(if: browserAvailable), .timeLimit(.minutes(3)))
    func browserSignIn() throws {
        // The neighbour plants a real session of bob's, as a remembered browser of its own would have had.
        let (run, oidc) = try browserRun(planting: { oidc in
            let now = Int64(oidc.clock.now.timeIntervalSince1970)
            let bob = try #require(try oidc.server.store.passwordRecord(email: "bob@example.com")).user.id
            return try oidc.server.store.createSession(userID: bob, authTime: now, ttl: 3600, now: now)
        })
        defer { oidc.stop() }
        let result = run.result
        #expect(result["wrongPasswordMessage"]?.stringValue?.contains("email or password is wrong") == true)
        #expect(result["forcedForm"] == true)
        #expect(result["callbackPage"]?.stringValue?.contains("back to the app") == true)
        #expect(result["first"]?["state"] == "state-0" && result["first"]?["iss"] == .string(oidc.issuerText))
        #expect(run.neighbourCookies.allSatisfy { !$0.contains("sesame_session") }, "\(run.neighbourCookies)")
        #expect(result["again"] == "form", "no silent sign-in, and the planted cookie means nothing")
        #expect(result["againPage"]?.stringValue?.contains("127.0.0.1:") == true, "the form names the port")
        // The code the browser brought back is good, once, with its verifier.
        let code = try #require(result["first"]?["code"]?.stringValue)
        let tokens = try oidc.exchange(code, run.requests[0], redirect: run.redirect)
        #expect(tokens.status == 200 && tokens.json?["id_token"] != nil, "\(tokens.body)")
        #expect(run.callbacks == 1)
        let artifacts = Self.packageRoot.appendingPathComponent(".build/test-artifacts")
        for name in ["sign-in.png", "sign-in-error.png"] {
            let size =
                (try? FileManager.default.attributesOfItem(atPath: artifacts.appendingPathComponent(name).path)[.size]
                    as? Int) ?? 0
            #expect(size > 10_000, "\(name) screenshot")
        }
    }

    @Test(
        "a remembered browser (opt-in) asks before a code goes to a loopback port: the consent page names it, Enter continues; the neighbour does receive the cookie (the documented risk)",
        .enabled(if: browserAvailable), .timeLimit(.minutes(3)))
    func rememberedBrowserConsent() throws {
        let (run, oidc) = try browserRun(planting: { _ in nil }, configure: { $0.rememberBrowser = true })
        defer { oidc.stop() }
        #expect(run.result["again"] == "consent")
        let page = run.result["againPage"]?.stringValue ?? ""
        #expect(page.contains("Continue as \(OIDCTestServer.email)") && page.contains("sesame-cli"), "\(page)")
        #expect(page.contains("127.0.0.1:"), "the consent page names the port")
        #expect(run.result["consented"]?["state"] == "state-2")
        let code = try #require(run.result["consented"]?["code"]?.stringValue)
        #expect(try oidc.exchange(code, run.requests[2], redirect: run.redirect).status == 200)
        #expect(run.callbacks == 2)
        #expect(
            run.neighbourCookies.contains { $0.contains("sesame_session") },
            "cookies ignore ports: why remembering the browser is opt-in")
    }

    @Test(
        "Authlib's OAuth client: discovery, code + PKCE, ID token verified with Authlib's JOSE, refresh, userinfo, revocation",
        .enabled(if: authlibAvailable), .timeLimit(.minutes(2)))
    func authlibClient() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        let script = Self.packageRoot.appendingPathComponent("Tests/Interop/authlib_client.py").path
        let run = try Self.runPython([
            "-W", "ignore", script, oidc.issuerText, OIDCTestServer.email, OIDCTestServer.password,
        ])
        try #require(run.status == 0, "authlib_client.py: \(run.output) \(run.errors.suffix(2000))")
        let result = try JOSEValue.parse(Data(run.output.utf8))
        #expect(result["email"] == "alice@example.com" && result["userinfoName"] == "alice")
        #expect(result["refreshAfterRevoke"] == "invalid_grant")
        #expect(result["accessTokenType"] == "Bearer")
    }
}
