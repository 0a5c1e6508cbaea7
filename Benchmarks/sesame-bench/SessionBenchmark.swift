import Foundation
import Sesame
import SesameDevServer
import SesameJOSE
import SesameLoopback

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `sesame-bench session`: 10,000 concurrent requests through `AuthorizedClient` while the access token expires,
/// against the in-process dev server; then the median latency `AuthorizedClient` adds over the raw transport to
/// the same endpoint, measured in alternating rounds in the same run.
enum SessionBenchmark {
    /// An in-process dev server on an ephemeral loopback port (fast password hashing, 512 connections).
    static func startServer(_ configure: (inout DevServer.Configuration) throws -> Void = { _ in }) throws
        -> (DevServer, URL)
    {
        var configuration = DevServer.Configuration()
        configuration.passwordIterations = 1000
        configuration.http.maxConnections = 512
        try configure(&configuration)
        let server = try DevServer(configuration: configuration)
        try server.start()
        guard let base = server.localURL else {
            server.stop()
            throw BenchmarkError("no server address")
        }
        return (server, base)
    }

    static func run(requests: Int = 10_000, samples: Int = 2000) async throws {
        let (server, base) = try startServer()
        defer { server.stop() }
        print("# sesame-bench session: dev server on \(base.absoluteString)")

        let transport = SesameHTTP.platformTransport
        let provider = RESTAuthProvider(baseURL: base, transport: transport)
        var tokens = try await provider.register(email: "bench@example.com", password: "bench-password")
        tokens.expiresAt = Date().addingTimeInterval(-1)  // already expired: the first callers must refresh
        let session = AuthSession(provider: provider, store: InMemoryTokenStore())
        try await session.signIn(with: tokens)
        let client = AuthorizedClient(session: session, baseURL: base, transport: transport)

        let start = ContinuousClock.now
        let succeeded = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<requests {
                group.addTask { (try? await client.send(AuthorizedClient.Endpoint("GET", "/me")))?.status == 200 }
            }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        let elapsed = ContinuousClock.now - start
        let counters = try JOSEValue.parse(
            try await transport.send(
                SesameHTTP.Request(method: "GET", url: base.appendingPathComponent("_dev/counters"))
            ).body
        )
        let refreshes = counters["refreshes"]?.doubleValue ?? -1
        print("session_requests \(requests)")
        print("session_requests_succeeded \(succeeded)")
        print("session_refreshes \(Int(refreshes))")
        report("session_requests_per_sec", Double(requests) / seconds(elapsed))

        // Latency: the same GET /me through the raw transport (a request built once, the header set by hand: the
        // floor) and through AuthorizedClient, alternating which goes first; five rounds, the median round reported.
        let current = try await session.validTokens()
        let raw = SesameHTTP.Request(
            method: "GET", url: base.appendingPathComponent("me"),
            headers: ["Authorization": "Bearer \(current.accessToken)", "Accept": "application/json"])
        for _ in 0..<(samples / 10) {  // warm-up
            _ = try await transport.send(raw)
            _ = try await client.send(AuthorizedClient.Endpoint("GET", "/me"))
        }
        var rounds: [(raw: Double, client: Double)] = []
        for _ in 0..<5 {
            var rawTimes: [Double] = []
            var clientTimes: [Double] = []
            for index in 0..<samples {
                let rawFirst = index % 2 == 0
                let t0 = ContinuousClock.now
                if rawFirst {
                    _ = try await transport.send(raw)
                } else {
                    _ = try await client.send(AuthorizedClient.Endpoint("GET", "/me"))
                }
                let t1 = ContinuousClock.now
                if rawFirst {
                    _ = try await client.send(AuthorizedClient.Endpoint("GET", "/me"))
                } else {
                    _ = try await transport.send(raw)
                }
                let t2 = ContinuousClock.now
                rawTimes.append(seconds(rawFirst ? t1 - t0 : t2 - t1))
                clientTimes.append(seconds(rawFirst ? t2 - t1 : t1 - t0))
            }
            rounds.append((median(rawTimes), median(clientTimes)))
        }
        let middle = rounds.sorted { ($0.client / $0.raw) < ($1.client / $1.raw) }[rounds.count / 2]
        report("raw_transport_me_median_us", middle.raw * 1e6)
        report("authorized_client_me_median_us", middle.client * 1e6)
        report("added_latency_us", (middle.client - middle.raw) * 1e6)
        report("added_latency_percent", (middle.client - middle.raw) / middle.raw * 100)
        print(
            "added_latency_percent_rounds "
                + rounds.map { String(format: "%.2f", ($0.client - $0.raw) / $0.raw * 100) }.joined(separator: " "))
        try await clientCPU(session: session, base: base, accessToken: current.accessToken)
        try await waitingCost()
        try await crossProcess()
    }

    /// The CPU `AuthorizedClient` spends per call, without a network: the same `GET /me` answered at once by an
    /// in-process transport, sent raw and through the client in alternating batches (the median batch;
    /// the raw call goes through the same existential as the client's, so it is not optimized away).
    static func clientCPU(session: AuthSession, base: URL, accessToken: String, calls: Int = 20_000) async throws {
        struct Canned: HTTPTransport {
            let response = SesameHTTP.Response(
                status: 200, headers: ["Content-Type": "application/json"], body: Data(#"{"id":"1"}"#.utf8))
            func send(_ request: SesameHTTP.Request) async throws -> SesameHTTP.Response { response }
        }
        let canned: any HTTPTransport = Canned()
        let client = AuthorizedClient(session: session, baseURL: base, transport: canned)
        let raw = SesameHTTP.Request(
            method: "GET", url: base.appendingPathComponent("me"),
            headers: ["Authorization": "Bearer \(accessToken)", "Accept": "application/json"])
        var rawBatches: [Double] = []
        var clientBatches: [Double] = []
        for _ in 0..<7 {
            let t0 = ContinuousClock.now
            for _ in 0..<calls { _ = try await canned.send(raw) }
            let t1 = ContinuousClock.now
            for _ in 0..<calls { _ = try await client.send(AuthorizedClient.Endpoint("GET", "/me")) }
            let t2 = ContinuousClock.now
            rawBatches.append(seconds(t1 - t0) / Double(calls))
            clientBatches.append(seconds(t2 - t1) / Double(calls))
        }
        report("in_process_raw_call_us", median(rawBatches) * 1e6)
        report("in_process_authorized_client_call_us", median(clientBatches) * 1e6)
    }

    /// CPU time a process spends while one request waits 2 s for a slow server: the platform transport vs
    /// FoundationNetworking's `URLSession`, each in a fresh worker process (this executable, `wait-worker`), in
    /// the same run.
    static func waitingCost() async throws {
        let (server, base) = try startServer { $0.faults = try FaultPlan(spec: "GET /me:latency=2s") }
        defer { server.stop() }
        func workerCPU(_ transport: String) throws -> Double {
            let process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            process.arguments = ["wait-worker", transport, base.appendingPathComponent("me").absoluteString]
            let output = Pipe()
            process.standardOutput = .pipe(output)
            try process.run()
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            guard let cpu = Double(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw BenchmarkError("the \(transport) worker failed: \(text)")
            }
            return cpu
        }
        let platform = try workerCPU("platform")
        let foundation = try workerCPU("urlsession")
        report("waiting_2s_cpu_ms_platform_transport", platform * 1000)
        report("waiting_2s_cpu_ms_urlsession", foundation * 1000)
        report("waiting_cpu_ratio_urlsession_over_platform", foundation / max(platform, 0.0005))
    }

    /// One worker of ``waitingCost()``: a single request through `transport`, then the CPU seconds it cost.
    static func waitWorker(transport name: String, url: URL) async throws {
        let transport: any HTTPTransport = name == "urlsession" ? URLSessionTransport() : SesameHTTP.platformTransport
        let before = processCPUSeconds()
        let started = ContinuousClock.now
        _ = try await transport.send(SesameHTTP.Request(method: "GET", url: url))
        guard ContinuousClock.now - started >= .seconds(2) else { throw BenchmarkError("the server did not wait") }
        print(processCPUSeconds() - before)
    }

    /// User + system CPU time of this process so far.
    static func processCPUSeconds() -> Double {
        var usage = rusage()
        #if canImport(Glibc)
            getrusage(RUSAGE_SELF.rawValue, &usage)  // an enum in Glibc
        #else
            getrusage(RUSAGE_SELF, &usage)  // an Int32 in Darwin
        #endif
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    /// Runs N worker processes on one file store while 2 s access tokens keep expiring.
    ///
    /// The workers (this executable, `session-worker`) call `GET /me` through `AuthorizedClient` for a few
    /// seconds. Every refresh the server performs must
    /// have produced a token that some worker used (refreshes = distinct tokens − 1), and no refresh token may
    /// ever be reused.
    static func crossProcess(processes: Int = 8, seconds: Double = 6.5) async throws {
        let (server, base) = try startServer { $0.accessTokenTTL = 2 }
        defer { server.stop() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sesame-bench-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let provider = RESTAuthProvider(baseURL: base)
        let session = AuthSession(provider: provider, store: try FileTokenStore(directory: directory))
        try await session.signIn(with: try await provider.register(email: "procs@example.com", password: "bench-pw"))

        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        let workers = try (0..<processes).map { _ -> (ChildProcess, Pipe) in
            let process = ChildProcess()
            process.executableURL = executable
            process.arguments = ["session-worker", base.absoluteString, directory.path, String(seconds)]
            let output = Pipe()
            process.standardOutput = .pipe(output)
            try process.run()
            return (process, output)
        }
        var tokens = Set<String>()
        var requests = 0
        var failed = 0
        for (process, output) in workers {
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            for line in text.split(separator: "\n") {
                let parts = line.split(separator: " ")
                guard parts.count == 2 else { continue }
                switch parts[0] {
                case "token": tokens.insert(String(parts[1]))
                case "ok": requests += Int(parts[1]) ?? 0
                case "failed": failed += Int(parts[1]) ?? 0
                default: break
                }
            }
        }
        let counters = try JOSEValue.parse(
            try await SesameHTTP.platformTransport.send(
                SesameHTTP.Request(method: "GET", url: base.appendingPathComponent("_dev/counters"))
            ).body)
        let refreshes = Int(counters["refreshes"]?.doubleValue ?? -1)
        print("cross_process_processes \(processes)")
        print("cross_process_requests_succeeded \(requests)")
        print("cross_process_requests_failed \(failed)")
        print("cross_process_access_tokens_used \(tokens.count)")
        print("cross_process_refreshes \(refreshes) (expected \(max(0, tokens.count - 1)): one per token generation)")
        print("cross_process_reuse_detections \(Int(counters["reuseDetections"]?.doubleValue ?? -1)) (expected 0)")
    }

    /// One worker of ``crossProcess(processes:seconds:)``: prints `token HASH` for every access token it used
    /// (a SHA-256 prefix, never the token), then `ok N` and `failed N`.
    static func worker(base: URL, directory: URL, seconds: Double) async throws {
        let provider = RESTAuthProvider(baseURL: base)
        let session = AuthSession(provider: provider, store: try FileTokenStore(directory: directory))
        let client = AuthorizedClient(session: session, baseURL: base)
        var used = Set<String>()
        var ok = 0
        var failed = 0
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            do {
                let tokens = try await session.validTokens()
                used.insert(
                    JOSECrypto.sha256(Array(tokens.accessToken.utf8)).prefix(8).map { String(format: "%02x", $0) }
                        .joined())
                if try await client.send(.get("/me")).status == 200 { ok += 1 } else { failed += 1 }
            } catch {
                failed += 1
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        for hash in used { print("token \(hash)") }
        print("ok \(ok)")
        print("failed \(failed)")
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    private static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }
}
