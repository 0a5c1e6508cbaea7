import Foundation
import Testing

/// Ties the DocC articles' Swift examples to code that is compiled, as the README's are (``ReadmeSnippetTests``).
///
/// Every code line of every ```swift block of every article is, in the block's order, a line of one Swift file that
/// CI builds: a test (most run the example against the dev server: `ArticleExampleTests`), the sample apps in
/// `Examples/` (the iOS views are compiled for iOS against Apple stand-ins; only Xcode can run them), or the Alamofire
/// integration. String literals and comments aside; the lines below are excused, each with its reason. A package
/// manifest in an article must resolve against this clone, as the README's does.
@Suite struct DocCSnippetTests {
    /// Article lines no compiled file can hold as written, and why.
    static let excused: [String: String] = [
        #"let folder = URL(fileURLWithPath: config).appendingPathComponent("")"#:
            "the tests write to a scratch folder, never the user's configuration folder",
        "let agent = try LoopbackUserAgent()":
            "this opens a real browser: the tests pass a stand-in that posts the sign-in form (`open:`)",
        "exit(error.requiresReauthentication ? 2 : 1)":
            "a test cannot end its process: it records the failure with the status the tool would exit with",
        "_ = await again.signOut(endSession: try LoopbackUserAgent())":
            "this opens a real browser: the test ends the session with the form-posting stand-in",
    ]

    /// The articles of every catalog.
    static func articles() -> [URL] {
        let sources = ReadmeSnippetTests.root.appendingPathComponent("Sources")
        let paths = FileManager.default.enumerator(atPath: sources.path)?.compactMap { $0 as? String } ?? []
        return paths.filter { $0.contains(".docc/") && $0.hasSuffix(".md") }.sorted()
            .map { sources.appendingPathComponent($0) }
    }

    @Test("DocC: each Swift example is, line for line and in order, the code of one compiled file (literals aside)")
    func examplesAreCompiled() throws {
        let sources = try ReadmeSnippetTests.testSources(in: ["Tests", "Examples", "Integrations"])
        var used: Set<String> = []
        var count = 0
        for article in Self.articles() {
            for block in try ReadmeSnippetTests.swiftBlocks(in: article)
            where !block.contains("import PackageDescription") {
                count += 1
                used.formUnion(
                    ReadmeSnippetTests.expectTied(
                        block, to: sources, excused: Self.excused, place: article.lastPathComponent))
            }
        }
        #expect(count >= 40, "the articles' Swift examples were not found (\(count))")
        #expect(
            used == Set(Self.excused.keys),
            "excused but no longer in an article: \(Set(Self.excused.keys).subtracting(used))")
    }

    @Test(
        "DocC: a package manifest in an article, as written, resolves against this clone in a folder named Sesame",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/env")))
    func manifestsResolve() throws {
        let manifests = try Self.articles().flatMap { try ReadmeSnippetTests.swiftBlocks(in: $0) }
            .filter { $0.contains("import PackageDescription") }
        #expect(!manifests.isEmpty, "no article shows a package manifest")
        for manifest in manifests { try ReadmeSnippetTests.resolve(manifest) }
    }
}
