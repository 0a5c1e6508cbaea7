import Foundation
import Testing

/// Ties the README's Swift examples to the tests that compile and run them, so that neither can drift.
///
/// Every code line of every ```swift block is a line of one test file, in the block's order (string literals and
/// comments aside: the tests point at the dev server), or is excused below with the reason; and the package manifest
/// resolves against this clone.
@Suite struct ReadmeSnippetTests {
    static let root = ReadmeCLITests.readme.deletingLastPathComponent()

    /// README lines no test can hold as written, and why.
    static let excused: [String: String] = [
        #"let folder = URL(fileURLWithPath: config).appendingPathComponent("")"#:
            "the tests write to a scratch folder, never the user's configuration folder",
        "let agent = try LoopbackUserAgent()":
            "this opens a real browser: the tests pass a stand-in that posts the sign-in form (`open:`)",
        "store: try FileTokenStore(directory: folder), dpopKeys: try FileDPoPKeyStore(directory: folder))":
            "the tests add the dev server's clock (`timeSource:`) after these arguments",
        "exit(error.requiresReauthentication ? 2 : 1)":
            "a test cannot end its process: it records the failure with the status the tool would exit with",
    ]

    /// The README's ```swift blocks.
    static func swiftBlocks() throws -> [String] { try swiftBlocks(in: ReadmeCLITests.readme) }

    /// The ```swift blocks of a Markdown file.
    static func swiftBlocks(in file: URL) throws -> [String] {
        let text = try String(contentsOf: file, encoding: .utf8)
        return text.components(separatedBy: "```swift\n").dropFirst().compactMap {
            $0.components(separatedBy: "\n```").first
        }
    }

    /// A line as compared: string literals emptied, the comment cut, blanks collapsed.
    static func normalized(_ line: some StringProtocol) -> String {
        var code = String(line).replacing(/"(?:[^"\\]|\\.)*"/, with: "\"\"")
        if let comment = code.range(of: "//") { code = String(code[..<comment.lowerBound]) }
        return code.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    /// Every Swift file under `folders` (the tests, by default), each as its normalized lines.
    static func testSources(in folders: [String] = ["Tests"]) throws -> [(name: String, lines: [String])] {
        try folders.flatMap { folder in
            let base = root.appendingPathComponent(folder)
            let paths = FileManager.default.enumerator(atPath: base.path)?.compactMap { $0 as? String } ?? []
            return try paths.filter { $0.hasSuffix(".swift") && !$0.contains(".build/") }.map { path in
                let text = try String(contentsOf: base.appendingPathComponent(path), encoding: .utf8)
                return (folder + "/" + path, text.split(separator: "\n").map { normalized($0) }.filter { !$0.isEmpty })
            }
        }
    }

    /// How many of `wanted` appear in `lines` in order (greedily), and the first that does not.
    static func inOrder(_ wanted: [String], in lines: [String]) -> (matched: Int, missing: String?) {
        var position = lines.startIndex
        for (index, line) in wanted.enumerated() {
            guard let found = lines[position...].firstIndex(of: line) else { return (index, line) }
            position = lines.index(after: found)
        }
        return (wanted.count, nil)
    }

    /// Expects `block`'s code lines, but the `excused` ones, in order in one of `sources`.
    ///
    /// Returns the excused lines the block has (so that an excuse no longer needed is noticed); `place` names the
    /// block's document in a failure.
    static func expectTied(
        _ block: String, to sources: [(name: String, lines: [String])], excused: [String: String], place: String
    ) -> Set<String> {
        let lines = block.split(separator: "\n").map { normalized($0) }.filter { !$0.isEmpty }
        let wanted = lines.filter { excused[$0] == nil }
        let best = sources.map { ($0.name, inOrder(wanted, in: $0.lines)) }.max { $0.1.matched < $1.1.matched }
        #expect(
            best?.1.missing == nil,
            """
            \(place): the example starting \(wanted.first ?? "?"): closest file \(best?.0 ?? "none") lacks \
            \(best?.1.missing ?? "?")
            """)
        return Set(lines.filter { excused[$0] != nil })
    }

    @Test(
        "README: each Swift example is, line for line and in order, the code of one test (literals and comments aside)")
    func examplesAreTested() throws {
        let sources = try Self.testSources()
        var used: Set<String> = []
        let blocks = try Self.swiftBlocks().filter { !$0.contains("import PackageDescription") }
        #expect(blocks.count >= 5, "the README's Swift examples were not found")
        for block in blocks {
            used.formUnion(Self.expectTied(block, to: sources, excused: Self.excused, place: "README"))
        }
        #expect(
            used == Set(Self.excused.keys),
            "excused but no longer in the README: \(Set(Self.excused.keys).subtracting(used))")
    }

    @Test(
        "README: its package manifests (the app's, the Linux tool's), as written, resolve against this clone in a folder named Sesame (the products exist)",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/env")))
    func manifestResolves() throws {
        let manifests = try Self.swiftBlocks().filter { $0.contains("import PackageDescription") }
        #expect(manifests.count == 2, "the README's manifests were not found")
        for manifest in manifests { try Self.resolve(manifest) }
    }

    /// Checks that `manifest` resolves as an app's `Package.swift` beside this clone, linked as `Sesame`.
    static func resolve(_ manifest: String) throws {
        let folder = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let app = folder.appendingPathComponent("MyApp")
        let manager = FileManager.default
        for path in ["Sources/MyApp", "Sources/MyCLI", "Tests/MyAppTests"] {
            try manager.createDirectory(at: app.appendingPathComponent(path), withIntermediateDirectories: true)
        }
        try manager.createSymbolicLink(at: folder.appendingPathComponent("Sesame"), withDestinationURL: root)
        try Data((manifest + "\n").utf8).write(to: app.appendingPathComponent("Package.swift"))
        try Data("print(1)\n".utf8).write(to: app.appendingPathComponent("Sources/MyApp/main.swift"))
        try Data("print(1)\n".utf8).write(to: app.appendingPathComponent("Sources/MyCLI/main.swift"))
        try Data("import Testing\n".utf8).write(to: app.appendingPathComponent("Tests/MyAppTests/MyAppTests.swift"))
        let result = try CLIRunner.run(
            executable: URL(fileURLWithPath: "/usr/bin/env"),
            ["swift", "package", "--package-path", app.path, "show-dependencies"],
            // SwiftPM's lock files go to TMPDIR: this folder, so that none is left in the system's.
            environment: ["TMPDIR": folder.path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("sesame<"), "\(result.stdout)")
    }
}
