import Foundation
import SesameJOSE
import SesameTestSupport
import Testing

/// `sesame login --client-credentials`: a service account against `sesame serve --config` (catalog PKJ-01..PKJ-03
/// from the command line).
@Suite struct ServiceAccountCommandTests {
    static let secret = "correct-horse-battery-staple"

    /// Two service accounts in a dev-server configuration file in `folder`: `nightly` (`private_key_jwt`, its key
    /// written to `nightly.jwk`, 0600, with scope `nightlyScope`) and `legacy` (`client_secret_basic` with `secret`,
    /// scope `reports.read`).
    static func serviceAccounts(in folder: URL, secret: String, nightlyScope: String) throws -> (
        key: JWK, keyFile: URL, config: URL
    ) {
        let key = try JWK.generate(for: .es256)
        let keyFile = folder.appendingPathComponent("nightly.jwk")
        try Data(key.jsonValue(includingPrivate: true).jsonBytes).write(to: keyFile)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyFile.path)
        let jwks = String(decoding: try JWKSet(keys: [key.publicKey()]).jsonValue.jsonBytes, as: UTF8.self)
        let config = folder.appendingPathComponent("dev-idp.json")
        try Data(
            #"""
            {"clients": [
              {"client_id": "nightly", "grant_types": ["client_credentials"], "token_endpoint_auth_method": "private_key_jwt",
               "jwks": \#(jwks), "scope": "\#(nightlyScope)"},
              {"client_id": "legacy", "grant_types": ["client_credentials"], "token_endpoint_auth_method": "client_secret_basic",
               "client_secret": "\#(secret)", "scope": "reports.read"}
            ]}
            """#.utf8
        ).write(to: config)
        return (key, keyFile, config)
    }

    @Test("a key or a secret signs a service account in; token renews; logout revokes; a bad key file is refused")
    func serviceAccount() throws {
        let folder = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (_, keyFile, config) = try Self.serviceAccounts(
            in: folder, secret: Self.secret, nightlyScope: "reports.read reports.write")
        let workspace = try OIDCLoginCommandTests.Workspace(serving: ["--config", config.path])
        defer { workspace.stop() }
        let issuer = workspace.server.base.absoluteString
        // A key.
        let login = try CLIRunner.run(
            [
                "login", "--client-credentials", "--issuer", issuer, "--client-id", "nightly", "--key", keyFile.path,
                "--scope", "reports.read",
            ], environment: workspace.environment)
        #expect(login.status == 0 && login.stderr.contains("service account nightly"), "\(login.stderr)")
        let token = try CLIRunner.run(["token"], environment: workspace.environment)
        let claims = try JWT.unverified(token.stdout.trimmingCharacters(in: .whitespacesAndNewlines)).claims
        #expect(claims.subject == "nightly" && claims["scope"] == "reports.read")
        let renewed = try CLIRunner.run(["token", "--force-refresh"], environment: workspace.environment)
        #expect(renewed.status == 0 && renewed.stdout != token.stdout, "\(renewed.stderr)")
        let status = try CLIRunner.run(["status", "--json"], environment: workspace.environment)
        #expect(status.status == 0 && !status.stdout.contains("eyJ"))
        // The key file is read each time: a copy others can read is refused.
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: keyFile.path)
        let exposed = try CLIRunner.run(["token", "--force-refresh"], environment: workspace.environment)
        #expect(exposed.status == 1 && exposed.stderr.contains("key_unreadable"), "\(exposed.stderr)")
        #expect(exposed.stderr.contains("chmod 600"))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyFile.path)
        // Another key in the file: the renewal is refused (exit 1, the provider's error), and the profile stays —
        // with the right key back, the next command gets a token by the grant again.
        let original = try Data(contentsOf: keyFile)
        try Data(try JWK.generate(for: .es256).jsonValue(includingPrivate: true).jsonBytes).write(to: keyFile)
        let refused = try CLIRunner.run(["token", "--force-refresh"], environment: workspace.environment)
        #expect(refused.status == 1 && refused.stderr.contains("invalid_client"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("invalid_client: invalid_client") && !refused.stderr.contains("sign in again"))
        try original.write(to: keyFile)
        let recovered = try CLIRunner.run(["token"], environment: workspace.environment)
        #expect(recovered.status == 0, "\(recovered.stderr)")
        let request = try CLIRunner.run(["status"], environment: workspace.environment)
        #expect(request.stdout.contains("service account") && request.stdout.contains("nightly.jwk"))
        let userinfo = try CLIRunner.run(["userinfo"], environment: workspace.environment)
        #expect(userinfo.status == 2 && userinfo.stderr.contains("service account"))
        #expect(try CLIRunner.run(["logout"], environment: workspace.environment).status == 0)
        // A secret, from standard input, kept 0600 and never printed.
        let secretLogin = try CLIRunner.run(
            [
                "login", "--client-credentials", "--issuer", issuer, "--client-id", "legacy", "--client-secret-stdin",
                "--profile", "legacy",
            ], stdin: Self.secret + "\n", environment: workspace.environment)
        #expect(secretLogin.status == 0, "\(secretLogin.stderr)")
        let stored = workspace.folder.appendingPathComponent("credentials/legacy.client-secret")
        let mode = try FileManager.default.attributesOfItem(atPath: stored.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let again = try CLIRunner.run(
            ["token", "--force-refresh", "--profile", "legacy"], environment: workspace.environment)
        #expect(again.status == 0, "\(again.stderr)")
        for output in [secretLogin.stdout, secretLogin.stderr, again.stderr] { #expect(!output.contains(Self.secret)) }
        #expect(try CLIRunner.run(["logout", "--profile", "legacy"], environment: workspace.environment).status == 0)
        #expect(!FileManager.default.fileExists(atPath: stored.path))
        // A wrong secret: exit 1, the provider's error named.
        let wrong = try CLIRunner.run(
            [
                "login", "--client-credentials", "--issuer", issuer, "--client-id", "legacy", "--client-secret-stdin",
            ], stdin: "guess\n", environment: workspace.environment)
        #expect(wrong.status == 1 && wrong.stderr.contains("invalid_client"), "\(wrong.stderr)")
        // Usage errors: neither or both credentials, browser options, a key option without --client-credentials.
        for arguments in [
            ["login", "--client-credentials", "--issuer", issuer, "--client-id", "nightly"],
            [
                "login", "--client-credentials", "--issuer", issuer, "--client-id", "nightly", "--key", keyFile.path,
                "--device",
            ],
            ["login", "--issuer", issuer, "--client-id", "nightly", "--key", keyFile.path],
            [
                "login", "--client-credentials", "--issuer", issuer, "--client-id", "nightly", "--key", keyFile.path,
                "--assertion-audience", "everyone",
            ],
        ] {
            #expect(try CLIRunner.run(arguments, environment: workspace.environment).status == 2, "\(arguments)")
        }
    }
}
