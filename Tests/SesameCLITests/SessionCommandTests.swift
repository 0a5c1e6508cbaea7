import Foundation
import SesameTestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `sesame serve` as a subprocess, stopped with SIGINT when the test ends.
final class ServeProcess {
    let process = Process()
    let base: URL

    /// Starts `sesame serve` on an ephemeral port; its stderr (the request log) goes to `log` when given.
    init(_ extra: [String] = [], log: URL? = nil) throws {
        process.executableURL = CLIRunner.binary
        process.arguments = ["serve", "--port", "0", "--password-iterations", "1000"] + extra
        let output = Pipe()
        process.standardOutput = output
        if let log {
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
            process.standardError = try FileHandle(forWritingTo: log)
        } else {
            process.standardError = FileHandle.nullDevice
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
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", script]
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        let output = Pipe()
        process.standardOutput = output
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

/// The real Linux keyring: a private D-Bus session bus with gnome-keyring-daemon (Debian `dbus`, `gnome-keyring`),
/// both stopped when the test ends.
@Suite struct KeyringStoreTests {
    static let toolsAvailable: Bool = {
        let found = ["/usr/bin/dbus-daemon", "/usr/bin/gnome-keyring-daemon"].allSatisfy {
            FileManager.default.isExecutableFile(atPath: $0)
        }
        if !found { print("◇ NOTICE: dbus-daemon or gnome-keyring-daemon missing; the keyring test is skipped.") }
        return found
    }()

    @Test(
        "--store keyring keeps credentials in GNOME Keyring (nothing on disk), is the default when a keyring answers, 24 processes across 2 s expiries share one refresh lock (0 reuse), and a locked keyring is exit 4 (unavailable, nothing deleted) until it is unlocked",
        .enabled(if: toolsAvailable, "dbus-daemon and gnome-keyring-daemon are not installed"))
    func keyring() throws {
        let server = try ServeProcess(["--access-token-ttl", "2"])
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-keyring-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        let binary = CLIRunner.binary.path
        // The keyring runs in the foreground inside the private session and is stopped at the end, so nothing
        // outlives the test; output goes to a file (daemons would hold a pipe open).
        let logFile = home.appendingPathExtension("log")
        defer {
            for suffix in ["", ".address", ".pid", ".tokens"] {
                try? FileManager.default.removeItem(atPath: logFile.path + suffix)
            }
        }
        let script = """
            exec 2>'\(logFile.path)'
            dbus-daemon --session --fork --print-address=3 --print-pid=4 3>'\(logFile.path).address' 4>'\(logFile.path).pid' \
                </dev/null >/dev/null || exit 10
            export DBUS_SESSION_BUS_ADDRESS=$(cat '\(logFile.path).address')
            bus_pid=$(cat '\(logFile.path).pid')
            echo -n pw | gnome-keyring-daemon --foreground --unlock --components=secrets >/dev/null 2>&1 &
            keyring=$!
            # Wait (up to 10 s) until the keyring owns its bus name.
            for _ in $(seq 1 100); do
                dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
                    org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null | grep -q true && break
                sleep 0.1
            done
            run() {
                export SESAME_HOME='\(home.path)'
                echo pw-correct-horse | '\(binary)' register --rest '\(server.base.absoluteString)' --email kay@example.com || return 11
                '\(binary)' token >/dev/null || return 12
                '\(binary)' token --store keyring --force-refresh >/dev/null || return 13
                [ -e '\(home.path)/credentials/default.json' ] && return 14
                # 24 processes across the expiry of a 2 s access token, a third forcing a refresh.
                for round in 1 2; do
                    sleep 2.3
                    pids=""
                    for i in $(seq 1 24); do
                        if [ $((i % 3)) -eq 0 ]; then force=--force-refresh; else force=; fi
                        '\(binary)' token --store keyring $force >/dev/null 2>>'\(logFile.path).tokens' &
                        pids="$pids $!"
                    done
                    for pid in $pids; do wait $pid || return 17; done
                done
                curl -s '\(server.base.absoluteString)/_dev/counters' | grep -q '"reuseDetections":0' || return 18
                '\(binary)' logout || return 15
                '\(binary)' status --store keyring >/dev/null 2>&1; [ $? -eq 3 ] || return 16
                # A locked keyring holding the item is "unavailable" (exit 4), never "not signed in".
                echo pw-correct-horse | '\(binary)' login --rest '\(server.base.absoluteString)' --email kay@example.com \
                    --store keyring || return 19
                dbus-send --session --print-reply --dest=org.freedesktop.secrets /org/freedesktop/secrets \
                    org.freedesktop.Secret.Service.Lock array:objpath:/org/freedesktop/secrets/collection/login \
                    >/dev/null || return 20
                '\(binary)' status >/dev/null 2>>'\(logFile.path).tokens'; [ $? -eq 4 ] || return 21
                # Unlocked again (the user logs in: the keyring starts unlocked from its file), the same session is
                # there: nothing was deleted while it was locked.
                kill -9 $keyring 2>/dev/null; wait $keyring 2>/dev/null
                echo -n pw | gnome-keyring-daemon --foreground --unlock --components=secrets >/dev/null 2>&1 &
                keyring=$!
                for _ in $(seq 1 100); do
                    dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
                        org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null | grep -q true && break
                    sleep 0.1
                done
                '\(binary)' token >/dev/null 2>>'\(logFile.path).tokens' || return 23
                return 0
            }
            run; status=$?
            kill -9 $keyring 2>/dev/null
            kill $bus_pid 2>/dev/null
            exit $status
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        let log =
            ((try? String(contentsOf: logFile, encoding: .utf8)) ?? "")
            + ((try? String(contentsOfFile: logFile.path + ".tokens", encoding: .utf8)) ?? "")
        #expect(process.terminationStatus == 0, "\(log)")
        #expect(!log.contains("pw-correct-horse"))
    }
}
