import Foundation
import Sesame
import SesameJOSE
import Testing

/// Files an earlier release wrote are read by this one (issue 23: Okta's users lost their sessions to a format
/// change with no migration): the fixtures in `Fixtures/release-0.2.0` are that release's own output.
@Suite struct StoredFormatTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/release-0.2.0")

    /// A SESAME_HOME holding the fixtures, with the modes the release gave them (git keeps no modes).
    static func home() throws -> URL {
        let home = try CLIRunner.temporaryDirectory()
        for folder in ["profiles", "credentials"] {
            let target = home.appendingPathComponent(folder)
            try FileManager.default.copyItem(at: fixtures.appendingPathComponent(folder), to: target)
            try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: target.path)
            for file in try FileManager.default.contentsOfDirectory(atPath: target.path) {
                try FileManager.default.setAttributes(
                    [.posixPermissions: 0o600], ofItemAtPath: target.appendingPathComponent(file).path)
            }
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: home.path)
        return home
    }

    @Test("0.2.0's profiles, credentials and DPoP key are read: status --all and --json show them as they were")
    func releaseFiles() async throws {
        let home = try Self.home()
        defer { try? FileManager.default.removeItem(at: home) }
        let environment = ["SESAME_HOME": home.path, "SESAME_STORE": "file"]
        let all = try CLIRunner.run(["status", "--all", "--json"], environment: environment)
        #expect(all.status == 0, "\(all.stderr)")
        let rows = try #require(try JOSEValue.parse(Data(all.stdout.utf8)).arrayValue)
        #expect(rows.compactMap { $0["profile"]?.stringValue } == ["default", "oidc"])
        #expect(rows.allSatisfy { $0["signedIn"] == true && $0["user"] == "alice@example.com" && $0["problem"] == nil })
        #expect(rows.map { $0["kind"]?.stringValue } == ["rest", "oidc"])
        let text = try CLIRunner.run(["status", "--all"], environment: environment)
        #expect(text.stdout.split(separator: "\n").count == 2 && !text.stdout.contains("eyJ"))
        let oidc = try CLIRunner.run(["status", "--json", "--profile", "oidc"], environment: environment)
        let status = try JOSEValue.parse(Data(oidc.stdout.utf8))
        #expect(status["dpop"] == true && status["tokenType"] == "DPoP" && status["dpopKeyThumbprint"] != nil)
        // The SDK's file store reads the credentials field by field.
        let store = try FileTokenStore(directory: home.appendingPathComponent("credentials"))
        let tokens = try #require(try await store.load(profile: "default"))
        #expect(!tokens.accessToken.isEmpty && tokens.refreshToken != nil && tokens.user?.email == "alice@example.com")
        #expect(tokens.expiresAt != nil && tokens.receivedAt != nil && tokens.deviceSecret == nil)
    }

    @Test(
        "0.2.0's credentials are migrated in place on read (format 2, read the same after); profiles at their next save"
    )
    func migratedInPlace() throws {
        let home = try Self.home()
        defer { try? FileManager.default.removeItem(at: home) }
        let environment = ["SESAME_HOME": home.path, "SESAME_STORE": "file"]
        func format(_ path: String, _ member: String = "format") throws -> JOSEValue? {
            try JOSEValue.parse(Data(contentsOf: home.appendingPathComponent(path)))[member]
        }
        #expect(try format("profiles/oidc.json") == nil && format("credentials/oidc.json") == nil)
        let before = try CLIRunner.run(["status", "--all", "--json"], environment: environment)
        #expect(before.status == 0, "\(before.stderr)")
        for path in ["credentials/default.json", "credentials/oidc.json"] {
            #expect(try format(path) == 2, "\(path)")
        }
        // A profile file is read as it is (no lock guards it against a concurrent login); its next save is format 2.
        #expect(try format("profiles/oidc.json") == nil)
        let after = try CLIRunner.run(["status", "--all", "--json"], environment: environment)
        #expect(after.stdout == before.stdout)
        let folders = ["profiles", "credentials"].map { home.appendingPathComponent($0).path }
        let names = try folders.flatMap { try FileManager.default.contentsOfDirectory(atPath: $0) }
        #expect(!names.contains { $0.contains("tmp") || $0.contains("corrupt") }, "\(names)")
    }

    @Test("a profile a newer sesame wrote (of another shape) is refused, left byte for byte; logout touches nothing")
    func newerProfileIsLeft() throws {
        let home = try Self.home()
        defer { try? FileManager.default.removeItem(at: home) }
        let environment = ["SESAME_HOME": home.path, "SESAME_STORE": "file"]
        let url = home.appendingPathComponent("profiles/default.json")
        var members = try #require(try JOSEValue.parse(Data(contentsOf: url)).objectValue)
        members["format"] = 3
        members["store"] = "tpm"
        let newer = Data(JOSEValue.object(members).jsonBytes)
        try newer.write(to: url)
        let credentials = try Data(contentsOf: home.appendingPathComponent("credentials/default.json"))
        let result = try CLIRunner.run(["status", "--json"], environment: environment)
        #expect(result.status != 0 && result.stderr.contains("newer sesame"), "\(result.stderr)")
        let logout = try CLIRunner.run(["logout", "--no-revoke"], environment: environment)
        #expect(logout.status != 0 && !logout.stderr.contains("signed out"), "\(logout.stderr)")
        #expect(try Data(contentsOf: url) == newer)
        #expect(try Data(contentsOf: home.appendingPathComponent("credentials/default.json")) == credentials)
        let names = try FileManager.default.contentsOfDirectory(atPath: home.appendingPathComponent("profiles").path)
        #expect(!names.contains { $0.contains("corrupt") })
    }
}
