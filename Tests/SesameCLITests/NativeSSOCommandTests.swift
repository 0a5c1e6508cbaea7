import Foundation
import SesameTestSupport
import Testing

/// `sesame login --native-sso NAME`: two profiles, two client IDs of one vendor, two processes, one shared entry
/// (catalog NSSO-01..NSSO-04 from the command line), as the article `Sesame.docc/NativeSSO.md` walks through it.
@Suite struct NativeSSOCommandTests {
    static let article = OIDCLoginCommandTests.root.appendingPathComponent("Sources/Sesame/Sesame.docc/NativeSSO.md")

    /// The article's `native-sso.json` (between `cat > native-sso.json <<'EOF'` and `EOF`).
    static func configurationFile() throws -> Data {
        let text = try String(contentsOf: article, encoding: .utf8)
        let start = try #require(text.range(of: "cat > native-sso.json <<'EOF'\n"))
        let end = try #require(text.range(of: "\nEOF\n", range: start.upperBound..<text.endIndex))
        return Data(text[start.upperBound..<end.lowerBound].utf8)
    }

    @Test(
        "the second profile signs in from the first's shared sign-in with no browser; logging out of the first ends both"
    )
    func twoProfilesShareASignIn() throws {
        let config = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: config) }
        let file = config.appendingPathComponent("native-sso.json")
        try Self.configurationFile().write(to: file)
        let workspace = try OIDCLoginCommandTests.Workspace(serving: ["--config", file.path])
        defer { workspace.stop() }
        let issuer = workspace.server.base.absoluteString
        func login(_ client: String) -> [String] {
            ["login", "--issuer", issuer, "--client-id", client, "--profile", client, "--native-sso", "vendor"]
        }
        // The first app: the browser, as always.
        let first = try OIDCLoginCommandTests.BackgroundLogin(
            login("mail") + ["--no-browser"], environment: workspace.environment)
        let url = try #require(first.line(where: { $0.hasPrefix("http://") }))
        let callback = try workspace.signInOnForm(url)
        _ = try TestBrowser(port: callback.port ?? 0).get(callback.path + "?" + (callback.percentEncodedQuery ?? ""))
        let (status, rest) = first.finish()
        #expect(status == 0, "\(rest)")
        // The device secret is in the shared entry (0600) only, not in the first profile's credentials.
        let shared = workspace.folder.appendingPathComponent("shared/vendor.json")
        let entry = try JSONSerialization.jsonObject(with: Data(contentsOf: shared)) as? [String: Any]
        let secret = try #require(entry?["deviceSecret"] as? String)
        let mode = try FileManager.default.attributesOfItem(atPath: shared.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let own = try String(
            contentsOf: workspace.folder.appendingPathComponent("credentials/mail.json"), encoding: .utf8)
        #expect(!own.contains(secret))
        // The second app, another process: no browser, no URL printed, signed in at once.
        let second = try CLIRunner.run(login("calendar") + ["--no-browser"], environment: workspace.environment)
        #expect(second.status == 0 && second.stderr.contains("from the shared sign-in"), "\(second.stderr)")
        #expect(!second.stderr.contains("http://"))
        let token = try CLIRunner.run(["token", "--profile", "calendar"], environment: workspace.environment)
        #expect(token.status == 0)
        let who = try CLIRunner.run(["userinfo", "--profile", "calendar"], environment: workspace.environment)
        #expect(who.stdout.contains("alice@example.com"), "\(who.stderr)")
        // Nothing secret on any output.
        for output in [second.stdout, second.stderr, who.stdout, who.stderr] { #expect(!output.contains(secret)) }
        // A client in no group stops with what to do, instead of a browser sign-in bound to fail.
        let outsider = try CLIRunner.run(
            ["login", "--issuer", issuer, "--client-id", "sesame-cli", "--native-sso", "vendor", "--no-browser"],
            environment: workspace.environment)
        #expect(outsider.status == 1 && outsider.stderr.contains("native_sso_group"), "\(outsider.stderr)")
        // Logging out of the first ends the shared sign-in: the second's refresh is refused, the entry gone.
        let logout = try CLIRunner.run(["logout", "--profile", "mail"], environment: workspace.environment)
        #expect(logout.status == 0 && logout.stderr.contains("ended the shared sign-in vendor"), "\(logout.stderr)")
        #expect(!FileManager.default.fileExists(atPath: shared.path))
        let after = try CLIRunner.run(
            ["token", "--profile", "calendar", "--force-refresh"], environment: workspace.environment)
        #expect(after.status == 3, "\(after.stderr)")
        // A usage error: a bad entry name, or with --device.
        for arguments in [login("calendar").dropLast() + [".hidden"], login("calendar") + ["--device"]] {
            #expect(try CLIRunner.run(Array(arguments), environment: workspace.environment).status == 2)
        }
    }
}
