import Foundation
import SesameTestSupport
import Testing

/// RFC 9470 from the command line: `sesame request` names the challenge and the command that meets it, and
/// `sesame login --acr-values` meets it through the dev server's second step.
@Suite struct StepUpCommandTests {
    @Test("request names a step-up challenge and the login that meets it; login --acr-values does; then 200")
    func stepUpFromTheCommandLine() throws {
        let workspace = try OIDCLoginCommandTests.Workspace(logging: true)
        defer { workspace.stop() }
        try workspace.signIn(["--dpop", "--scope", "openid offline_access", "--resource", "http://127.0.0.1:9"])
        let refused = try CLIRunner.run(["request", "/protected"], environment: workspace.environment)
        #expect(refused.status == 1, "\(refused.stderr)")
        let issuer = workspace.server.base.absoluteString
        // The profile's own options come back, so following the hint keeps DPoP, the scopes and the origins.
        let command =
            "sesame login --issuer \(issuer) --client-id sesame-cli --scope 'openid offline_access' --dpop "
            + "--resource http://127.0.0.1:9 --acr-values urn:sesame:acr:mfa"
        #expect(
            refused.stderr.contains("error: step_up_required: ") && refused.stderr.contains(command),
            "\(refused.stderr)")

        let (login, url) = try workspace.startLogin([
            "--no-browser", "--dpop", "--scope", "openid offline_access", "--resource", "http://127.0.0.1:9",
            "--acr-values", "urn:sesame:acr:mfa",
        ])
        let components = try #require(URLComponents(string: url))
        // (The URL names a pushed request: the acr_values went to /par; the second step below shows they arrived.)
        let browser = TestBrowser(port: workspace.server.base.port ?? 0)
        let form = try browser.get(components.path + "?" + (components.percentEncodedQuery ?? ""))
        let second = try browser.post(
            "/authorize", form: form.hiddenFields() + [("email", "alice@example.com"), ("password", "correct-horse")])
        #expect(second.body.contains("id=\"otp\""))
        let log = try String(contentsOf: workspace.log, encoding: .utf8)
        let code = try #require(log.range(of: "one-time code ").map { String(log[$0.upperBound...].prefix(6)) })
        let done = try browser.post("/authorize", form: second.hiddenFields() + [("otp", code), ("action", "verify")])
        let callback = try #require(done.location.flatMap { URLComponents(string: $0) })
        _ = try TestBrowser(port: callback.port ?? 0).get(callback.path + "?" + (callback.percentEncodedQuery ?? ""))
        let (status, rest) = login.finish()
        #expect(status == 0, "\(rest)")
        let allowed = try CLIRunner.run(["request", "/protected"], environment: workspace.environment)
        #expect(allowed.status == 0 && allowed.stdout.contains("urn:sesame:acr:mfa"), "\(allowed.stderr)")
    }

    @Test("login --acr-values and --max-age are checked before any network call")
    func usage() throws {
        let folder = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let environment = ["SESAME_HOME": folder.path, "SESAME_STORE": "file"]
        let base = ["login", "--issuer", "http://127.0.0.1:9", "--client-id", "x"]
        for extra in [
            ["--acr-values", "a", "--device"], ["--max-age", "-1"], ["--max-age", "soon"], ["--acr-values", ""],
        ] {
            let result = try CLIRunner.run(base + extra, environment: environment)
            #expect(result.status == 2, "\(extra): \(result.stderr)")
        }
    }
}
