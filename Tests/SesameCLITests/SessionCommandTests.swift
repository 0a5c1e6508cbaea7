import Foundation
import SesameLoopback
import SesameTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `sesame serve` as a subprocess, stopped with SIGINT when the test ends.
final class ServeProcess {
    let process = ChildProcess()
    let base: URL

    /// Starts `sesame serve` on an ephemeral port; its stderr (the request log) goes to `log` when given.
    init(_ extra: [String] = [], log: URL? = nil) throws {
        process.executableURL = CLIRunner.binary
        process.arguments = ["serve", "--port", "0", "--password-iterations", "1000"] + extra
        let output = Pipe()
        process.standardOutput = .pipe(output)
        if let log {
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
            process.standardError = .file(try FileHandle(forWritingTo: log))
        } else {
            process.standardError = .null
        }
        try process.run()
        let line = output.fileHandleForReading.readLineUnbuffered()
        guard let url = URL(string: line.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw URLError(.badServerResponse)
        }
        base = url
    }

    func counters() async throws -> [String: Any] {
        let (data, _) = try await URLSession.shared.data(from: base.appendingPathComponent("_dev/counters"))
        return try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
    }

    /// Stops the server as Ctrl-C would and returns its exit status.
    @discardableResult
    func interrupt() -> Int32 {
        if process.isRunning { process.interrupt() }
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit { interrupt() }
}

@Suite struct SessionCommandTests {
    let home = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-home-\(UUID().uuidString)")
    var environment: [String: String] { ["SESAME_HOME": home.path] }

    func sesame(_ arguments: [String], stdin: String? = nil) throws -> CLIResult {
        try CLIRunner.run(arguments, stdin: stdin, environment: environment)
    }

    @Test("register, status, token, request, logout against sesame serve; passwords never from argv")
    func sessionFlow() async throws {
        let server = try ServeProcess()
        defer { try? FileManager.default.removeItem(at: home) }
        let base = server.base.absoluteString
        let register = try sesame(
            ["register", "--rest", base, "--email", "kai@example.com"], stdin: "pw-correct-horse\n")
        #expect(register.status == 0, "\(register.stderr)")
        let status = try sesame(["status", "--json"])
        #expect(status.status == 0 && status.stdout.contains("kai@example.com"))
        let token = try sesame(["token"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(token.split(separator: ".").count == 3)
        #expect(!status.stdout.contains(token), "status never prints a token")
        let me = try sesame(["request", base + "/me"])
        #expect(me.status == 0 && me.stdout.contains("kai@example.com"))
        // A PATH is whatever starts with '/', even with '://' in its query.
        let query = try sesame(["request", "/me?next=http://x.example/"])
        #expect(query.status == 0 && query.stdout.contains("kai@example.com"), "\(query.stderr)")
        let credentials = home.appendingPathComponent("credentials/default.json").path
        #expect((try FileManager.default.attributesOfItem(atPath: credentials)[.posixPermissions] as? Int) == 0o600)

        let argv = try sesame(["login", "--rest", base, "--email", "kai@example.com", "pw-correct-horse"])
        #expect(argv.status == 2 && argv.stderr.contains("never from arguments"))
        let wrong = try sesame(["login", "--rest", base, "--email", "kai@example.com"], stdin: "wrong-password\n")
        #expect(wrong.status == 1 && wrong.stderr.hasPrefix("error: invalid_credentials: "))
        #expect(!wrong.stderr.contains("wrong-password"))

        #expect(try sesame(["logout"]).status == 0)
        let after = try sesame(["status"])
        #expect(after.status == 3 && after.stderr.hasPrefix("error: not_signed_in: "))
        #expect(try sesame(["token"]).status == 3)
    }

    @Test(
        "24 processes (a third with --force-refresh) across expiries of 2 s tokens on one file store: all succeed, 0 reuse"
    )
    func concurrentProcesses() async throws {
        let server = try ServeProcess(["--access-token-ttl", "2"])
        defer { try? FileManager.default.removeItem(at: home) }
        let register = try sesame(
            ["register", "--rest", server.base.absoluteString, "--email", "lia@example.com", "--store", "file"],
            stdin: "pw-correct-horse\n")
        #expect(register.status == 0, "\(register.stderr)")
        let runs = (0..<24).map { index in
            ["token", "--store", "file"] + (index % 3 == 0 ? ["--force-refresh"] : [])
        }
        for round in 0..<2 {
            // The other process's clock (the server's) is real: wait until the 2 s access token has expired.
            try await Task.sleep(for: .milliseconds(2300))
            let results = try CLIRunner.runConcurrently(runs, environment: environment)
            for result in results { #expect(result.status == 0, "round \(round): \(result.stderr)") }
        }
        let counters = try await server.counters()
        #expect(counters["reuseDetections"] as? Int == 0)
        #expect((counters["refreshes"] as? Int ?? 0) >= 2)
        let after = try sesame(["request", "--store", "file", "/me"])
        #expect(after.status == 0 && after.stdout.contains("lia@example.com"), "\(after.stderr)")
    }
}

@Suite(.disabled(if: underSanitizer, "a CPU-time bound does not hold under a sanitizer's slowdown"))
struct WaitingCostTests {
    @Test("Waiting 3 s for a slow server costs under 5 % of a core (the Linux transport waits in the kernel)")
    func slowResponseDoesNotSpin() async throws {
        let server = try ServeProcess(["--faults", "GET /me:latency=3s"])
        let home = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: home) }
        let environment = ["SESAME_HOME": home.path]
        let register = try CLIRunner.run(
            ["register", "--rest", server.base.absoluteString, "--email", "slow@example.com", "--store", "file"],
            stdin: "pw-correct-horse\n", environment: environment)
        #expect(register.status == 0, "\(register.stderr)")
        // bash's `times` prints the CPU time of the shell's finished children: exactly the one `sesame` run.
        let script = "'\(CLIRunner.binary.path)' request --store file /me >/dev/null || exit 9; times"
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", script]
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        let output = Pipe()
        process.standardOutput = .pipe(output)
        let started = ContinuousClock.now
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let wall = ContinuousClock.now - started
        #expect(process.terminationStatus == 0)
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n")
        let cpu = try #require(lines.last).split(separator: " ").map { Self.seconds(String($0)) }.reduce(0, +)
        print("◇ FIGURE: sesame request waiting \(wall) for a 3 s response used \(cpu) s of CPU")
        #expect(wall >= .seconds(3))
        #expect(cpu < 0.15, "\(cpu) s of CPU while waiting 3 s")
    }

    /// `0m0.052s` → 0.052.
    static func seconds(_ text: String) -> Double {
        guard let m = text.firstIndex(of: "m") else { return .infinity }
        let minutes = Double(text[..<m]) ?? .infinity
        let seconds = Double(text[text.index(after: m)...].dropLast()) ?? .infinity
        return minutes * 60 + seconds
    }
}
