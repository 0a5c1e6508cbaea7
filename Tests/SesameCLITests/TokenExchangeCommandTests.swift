import Foundation
import SesameJOSE
import SesameTestSupport
import Testing

/// `sesame token --audience|--resource`: RFC 8693 from the command line against `sesame serve --exchange-audience`.
@Suite struct TokenExchangeCommandTests {
    @Test("token --audience prints a token for that API; a refused target is exit 1; bad options are usage errors")
    func exchange() throws {
        let workspace = try OIDCLoginCommandTests.Workspace(serving: ["--exchange-audience", "https://api.example"])
        defer { workspace.stop() }
        try workspace.signIn([])
        let json = try CLIRunner.run(
            ["token", "--audience", "https://api.example", "--json"], environment: workspace.environment)
        #expect(json.status == 0, "\(json.stderr)")
        let answer = try JOSEValue.parse(Data(json.stdout.utf8))
        #expect(answer["issuedTokenType"] == "urn:ietf:params:oauth:token-type:access_token")
        #expect(try JWT.unverified(answer["accessToken"]?.stringValue ?? "").claims.audience == ["https://api.example"])
        let session = try CLIRunner.run(["token"], environment: workspace.environment)
        #expect(session.stdout.trimmingCharacters(in: .whitespacesAndNewlines) != answer["accessToken"]?.stringValue)
        let refused = try CLIRunner.run(
            ["token", "--audience", "https://other.example"], environment: workspace.environment)
        #expect(
            refused.status == 1 && refused.stderr.contains("exchange_rejected")
                && refused.stderr.contains("invalid_target"), "\(refused.stderr)")
        #expect(refused.stdout.isEmpty && !refused.stderr.contains("exchange_rejected: exchange_rejected"))
        for arguments in [
            ["token", "--audience", "a", "--resource", "https://a.example"], ["token", "--scope", "openid"],
            ["token", "--resource", "not a url"],
        ] {
            #expect(try CLIRunner.run(arguments, environment: workspace.environment).status == 2, "\(arguments)")
        }
    }
}
