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
    static func run(requests: Int = 10_000, samples: Int = 2000) async throws {
        var configuration = DevServer.Configuration()
        configuration.passwordIterations = 1000
        configuration.http.maxConnections = 512
        let server = try DevServer(configuration: configuration)
        try server.start()
        defer { server.stop() }
        guard let base = server.localURL else { throw BenchmarkError("no server address") }
        print("# sesame-bench session: dev server on \(base.absoluteString)")

        let urlConfiguration = URLSessionConfiguration.ephemeral
        urlConfiguration.httpMaximumConnectionsPerHost = 16
        let transport = URLSessionTransport(session: URLSession(configuration: urlConfiguration))
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

        // Latency: the same GET /me, raw transport with the header set by hand vs AuthorizedClient, alternating.
        let current = try await session.validTokens()
        let raw = SesameHTTP.Request(
            method: "GET", url: base.appendingPathComponent("me"),
            headers: ["Authorization": "Bearer \(current.accessToken)", "Accept": "application/json"])
        var rawTimes: [Double] = []
        var clientTimes: [Double] = []
        for _ in 0..<(samples / 10) {  // warm-up
            _ = try await transport.send(raw)
            _ = try await client.send(AuthorizedClient.Endpoint("GET", "/me"))
        }
        for _ in 0..<samples {
            let t0 = ContinuousClock.now
            _ = try await transport.send(raw)
            let t1 = ContinuousClock.now
            _ = try await client.send(AuthorizedClient.Endpoint("GET", "/me"))
            let t2 = ContinuousClock.now
            rawTimes.append(seconds(t1 - t0))
            clientTimes.append(seconds(t2 - t1))
        }
        let rawMedian = median(rawTimes)
        let clientMedian = median(clientTimes)
        report("raw_transport_me_median_us", rawMedian * 1e6)
        report("authorized_client_me_median_us", clientMedian * 1e6)
        report("added_latency_percent", (clientMedian - rawMedian) / rawMedian * 100)
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    private static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }
}
