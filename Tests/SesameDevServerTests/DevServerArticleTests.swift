import Foundation
import SesameDevServer
import Testing

/// Keeps the Swift snippet of `Sesame.docc/RunningTheDevServer.md` compiling and true (the file it loads is the
/// article's own `dev-idp.json`, taken from its walk-through).
@Suite struct DevServerArticleTests {
    static let article = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources/Sesame/Sesame.docc/RunningTheDevServer.md")

    /// The `dev-idp.json` the walk-through writes (between `cat > dev-idp.json <<'EOF'` and `EOF`).
    static func configurationFile() throws -> Data {
        let text = try String(contentsOf: article, encoding: .utf8)
        let start = try #require(text.range(of: "cat > dev-idp.json <<'EOF'\n"))
        let end = try #require(text.range(of: "\nEOF\n", range: start.upperBound..<text.endIndex))
        return Data(text[start.upperBound..<end.lowerBound].utf8)
    }

    @Test("Running the dev server: the in-test snippet starts both issuers from the article's file")
    func snippet() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sesame-article-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("dev-idp.json")
        try Self.configurationFile().write(to: file)

        var configuration = DevServer.Configuration()
        try configuration.load(json: Data(contentsOf: URL(fileURLWithPath: "\(file.path)")))
        configuration.passwordIterations = 1000  // fast tests; the default is 600,000
        configuration.accessTokenTTL = 5  // watch refreshes happen
        let server = try DevServer(configuration: configuration)
        let issuer = try server.start()  // http://127.0.0.1:PORT
        defer { server.stop() }
        let partner = issuer.appendingPathComponent("partner")

        #expect(server.issuer(named: "partner")?.issuer == partner)
        #expect(configuration.clients.map(\.id) == ["web", "ios"])
        #expect(configuration.seededUsers.first?.subject == "alice")
        #expect(configuration.issuers["partner"]?.seededUsers.count == 1)
    }
}
