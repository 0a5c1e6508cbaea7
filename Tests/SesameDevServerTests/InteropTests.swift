import Foundation
import SesameDevServer
import SesameJOSE
import SesameLoopback
import SesameTestSupport
import Testing

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
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3"] + arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
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

    @Test(
        "a real browser signs in (keyboard only), sees the wrong-password error, is forced by prompt=login, and is sent back silently with its session",
        .enabled(if: browserAvailable), .timeLimit(.minutes(3)))
    func browserSignIn() throws {
        let oidc = try OIDCTestServer()
        defer { oidc.stop() }
        // The app's loopback redirect: a real listener, as a native app's would be.
        let app = try RecordingServer { _ in
            .html(200, "<!doctype html><title>App</title><p>Signed in; back to the app.</p>")
        }
        defer { app.stop() }
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
            [script, artifacts.path, OIDCTestServer.email, OIDCTestServer.password] + urls)
        try #require(run.status == 0, "browser_signin.py: \(run.output) \(run.errors.suffix(2000))")
        let result = try JOSEValue.parse(Data(run.output.utf8))
        #expect(result["wrongPasswordMessage"]?.stringValue?.contains("email or password is wrong") == true)
        #expect(result["forcedForm"] == true)
        #expect(result["callbackPage"]?.stringValue?.contains("back to the app") == true)
        #expect(result["first"]?["state"] == "state-0" && result["silent"]?["state"] == "state-2")
        #expect(result["first"]?["iss"] == .string(oidc.issuerText))
        // The codes the browser brought back are good, each once, with its own verifier.
        for (key, pkce) in [("first", requests[0]), ("silent", requests[2])] {
            let code = try #require(result[key]?["code"]?.stringValue)
            let tokens = try oidc.exchange(code, pkce, redirect: redirect)
            #expect(tokens.status == 200, "\(key): \(tokens.body)")
            #expect(tokens.json?["id_token"] != nil)
        }
        #expect(app.requests.filter { $0.path == "/callback" }.count == 2)
        for name in ["sign-in.png", "sign-in-error.png"] {
            let size =
                (try? FileManager.default.attributesOfItem(atPath: artifacts.appendingPathComponent(name).path)[.size]
                    as? Int) ?? 0
            #expect(size > 10_000, "\(name) screenshot")
        }
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
