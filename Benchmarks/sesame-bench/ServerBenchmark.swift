import Foundation
import SesameDevServer
import SesameJOSE
import SesameLoopback

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `sesame-bench server`: the dev server in-process, loaded over keep-alive loopback connections by a small
/// built-in client (or wrk, when installed, for `GET /me` as a second opinion).
///
/// `GET /me` verifies an ES256 JWT on every request, so its ceiling is the JOSE verify rate of the signing
/// algorithm, measured in the same run. The `/me` load is one pipelined connection, which one server thread
/// serves: the ratio compares one core with one core.
enum ServerBenchmark {
    static func run(seconds: Double) throws {
        // A file-backed database, as `sesame serve --db` uses: every rotation is a durable SQLite write.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sesame-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = DevServer.Configuration()
        configuration.databasePath = directory.appendingPathComponent("bench.sqlite").path
        configuration.passwordIterations = 1000
        configuration.users = [(email: "bench@example.com", password: "bench-password")]
        try OIDCServerBenchmark.prepare(&configuration)
        let server = try DevServer(configuration: configuration)
        try server.start()
        defer { server.stop() }
        let port = server.port
        print("# sesame-bench server: dev server on 127.0.0.1:\(port), file DB, \(seconds) s per measurement")

        let login = try BenchClient(port: port)
        let auth = try login.request(
            "POST", "/login", body: #"{"email":"bench@example.com","password":"bench-password"}"#)
        guard let accessToken = auth["accessToken"]?.stringValue else { throw BenchmarkError("login failed") }

        // The ceiling: verifying this very token with the server's published key, single-threaded.
        let jwks = try JWKSet(json: Array(try login.raw("GET", "/jwks").utf8))
        let issuer = server.issuer?.absoluteString ?? ""
        var policy = ClaimValidationPolicy(issuer: issuer, audience: issuer)
        policy.acceptedTypes = ["at+jwt"]
        let verifier = JWTVerifier(keys: jwks, policy: policy)
        let now = Date()
        let ceiling = try measure(seconds: seconds) { blackHole(try verifier.verify(accessToken, now: now)) }

        let me = try BenchClient(port: port)
        if ProcessInfo.processInfo.environment["SESAME_BENCH_PROFILE"] == "me" {
            // For profiling only: spin on GET /me.
            report("server_me", try me.pipelinedGets("/me", bearer: accessToken, depth: 16, seconds: seconds))
            return
        }
        let meRate = try me.pipelinedGets("/me", bearer: accessToken, depth: 16, seconds: seconds)
        if ProcessInfo.processInfo.environment["SESAME_BENCH_PROFILE"] == "http" {
            // For profiling only: the HTTP layer alone, on a route that does almost nothing.
            report(
                "server_http_floor",
                try me.pipelinedGets("/_dev/counters", bearer: accessToken, depth: 16, seconds: seconds))
        }

        // Refresh chains: each connection rotates its own family, request after response.
        let chains = 4
        var tokens: [String] = []
        for _ in 0..<chains {
            let response = try login.request(
                "POST", "/login", body: #"{"email":"bench@example.com","password":"bench-password"}"#)
            guard let token = response["refreshToken"]?.stringValue else { throw BenchmarkError("login failed") }
            tokens.append(token)
        }
        let refreshRate = try refreshLoad(port: port, tokens: tokens, seconds: seconds)

        // The OIDC routes, and the ES256 signing rate they are bounded by (a refresh signs two tokens).
        let key = try JWK.generate(for: .es256)
        let claims = JWTClaims(["iss": .string(issuer), "sub": "bench", "aud": "sesame-cli", "exp": 4_102_444_800])
        let signRate = try measure(seconds: seconds) { blackHole(try JWT.sign(claims, key: key, algorithm: .es256)) }
        let oidc = try OIDCServerBenchmark.run(
            port: port, email: "bench@example.com", password: "bench-password", seconds: seconds)

        report("jose_es256_verify", ceiling)
        report("jose_es256_sign", signRate)
        report("server_me", meRate)
        report("server_refresh_token", refreshRate)
        report("ratio_me_over_es256_verify", meRate / ceiling)
        report("oidc_userinfo", oidc.userInfo)
        report("oidc_token_refresh", oidc.refresh)
        report("oidc_token_code_exchange", oidc.codeExchange)
        report("ratio_userinfo_over_es256_verify", oidc.userInfo / ceiling)
        report("ratio_refresh_over_es256_sign", oidc.refresh / signRate)
        report("ratio_code_exchange_over_es256_sign", oidc.codeExchange / signRate)
        // wrk (Debian's): the same routes with 10 and with 1,000 keep-alive connections, and the server's memory.
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/wrk") {
            let oidcAccess = oidc.accessToken
            for connections in [10, 1000] {
                for (route, bearer) in [("/me", accessToken), ("/userinfo", oidcAccess)] {
                    if let rate = wrkRate(
                        port: port, path: route, bearer: bearer, connections: connections, seconds: seconds)
                    {
                        report("wrk_c\(connections)\(route.replacingOccurrences(of: "/", with: "_"))", rate)
                    }
                }
            }
            if let soak = Double(ProcessInfo.processInfo.environment["SESAME_BENCH_SOAK"] ?? "") {
                let before = residentKiB()
                let rate = wrkRate(port: port, path: "/userinfo", bearer: oidcAccess, connections: 1000, seconds: soak)
                report("soak_seconds", soak)
                report("soak_wrk_c1000_userinfo", rate ?? -1)
                report("soak_rss_kib_before", Double(before))
                report("soak_rss_kib_after", Double(residentKiB()))
            }
        } else {
            print("# wrk not installed (Scripts/install-deps.sh installs it): no wrk figures")
        }
    }

    private static func refreshLoad(port: Int, tokens: [String], seconds: Double) throws -> Double {
        chainLoad(port: port, tokens: tokens, seconds: seconds) { client, current in
            (try? client.request("POST", "/refresh-token", body: #"{"refreshToken":"\#(current)"}"#))?["refreshToken"]?
                .stringValue
        }
    }

    /// Requests per second of one chain per token, each on its own connection and thread: `step` sends one
    /// request with the current token and returns the next (nil stops the chain).
    static func chainLoad(
        port: Int, tokens: [String], seconds: Double, step: @escaping @Sendable (BenchClient, String) -> String?
    ) -> Double {
        let counts = LockedCounts()
        let group = DispatchGroup()
        let deadline = Date().addingTimeInterval(seconds)
        let start = Date()
        for token in tokens {
            group.enter()
            let thread = Thread {
                defer { group.leave() }
                guard let client = try? BenchClient(port: port) else { return }
                var current = token
                var done = 0
                while Date() < deadline, let next = step(client, current) {
                    current = next
                    done += 1
                }
                counts.add(done)
            }
            thread.start()
        }
        group.wait()
        return Double(counts.total) / Date().timeIntervalSince(start)
    }

    /// This process's resident memory (the in-process server's), from /proc.
    static func residentKiB() -> Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
    }

    /// Requests a second wrk reaches on `path` with `connections` keep-alive connections (two threads).
    private static func wrkRate(port: Int, path: String, bearer: String, connections: Int, seconds: Double)
        -> Double?
    {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/wrk")
        process.arguments = [
            "-t2", "-c\(connections)", "-d\(max(1, Int(seconds)))s", "-H", "Authorization: Bearer \(bearer)",
            "http://127.0.0.1:\(port)\(path)",
        ]
        let output = Pipe()
        process.standardOutput = .pipe(output)
        process.standardError = .null
        guard (try? process.run()) != nil else { return nil }
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let line = text.split(separator: "\n").first { $0.hasPrefix("Requests/sec:") }
        return line.flatMap { Double($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) }
    }
}

final class LockedCounts: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var sum = 0

    func add(_ value: Int) {
        lock.lock()
        sum += value
        lock.unlock()
    }

    var total: Int {
        lock.lock()
        defer { lock.unlock() }
        return sum
    }
}

/// A keep-alive HTTP/1.1 client over one socket, enough for load: it writes requests and reads responses by
/// `Content-Length`.
final class BenchClient {
    private let fd: Int32
    private var buffer: [UInt8] = []

    init(port: Int) throws {
        #if canImport(Glibc)
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard status == 0 else { throw BenchmarkError("cannot connect to the server") }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    deinit { close(fd) }

    private func write(_ text: String) throws {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { send(fd, $0.baseAddress.map { $0 + offset }, bytes.count - offset, 0) }
            guard sent > 0 else { throw BenchmarkError("send failed") }
            offset += sent
        }
    }

    /// Reads one response; returns its status and body.
    private func readResponse() throws -> (Int, [UInt8]) {
        let (status, _, body) = try readResponse(keepingHead: false)
        return (status, body)
    }

    /// Reads one response; returns its status, its head (when asked for) and its body.
    private func readResponse(keepingHead: Bool) throws -> (Int, String, [UInt8]) {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            if let end = headEnd() {
                let status = end >= 12 ? buffer[9..<12].reduce(0) { $0 * 10 + Int($1) - 48 } : 0
                let length = contentLength(end)
                if buffer.count >= end + 4 + length {
                    let head = keepingHead ? String(decoding: buffer[..<end], as: UTF8.self) : ""
                    let body = Array(buffer[(end + 4)..<(end + 4 + length)])
                    buffer.removeFirst(end + 4 + length)
                    return (status, head, body)
                }
            }
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { throw BenchmarkError("the server closed the connection") }
            buffer.append(contentsOf: chunk[0..<count])
        }
    }

    /// The Content-Length in the head `buffer[..<end]`, found on bytes (this client must be cheaper than the server).
    private func contentLength(_ end: Int) -> Int {
        let name = Array("\r\ncontent-length:".utf8)
        var index = 0
        while index + name.count <= end {
            var matches = true
            for offset in 0..<name.count where buffer[index + offset] | 0x20 != name[offset] | 0x20 {
                matches = false
                break
            }
            if matches {
                var value = 0
                var position = index + name.count
                while position < end, buffer[position] == 0x20 { position += 1 }
                while position < end, buffer[position] >= 48, buffer[position] <= 57 {
                    value = value * 10 + Int(buffer[position]) - 48
                    position += 1
                }
                return value
            }
            index += 1
        }
        return 0
    }

    private func headEnd() -> Int? {
        guard buffer.count >= 4 else { return nil }
        for index in 0...(buffer.count - 4)
        where buffer[index] == 13 && buffer[index + 1] == 10 && buffer[index + 2] == 13 && buffer[index + 3] == 10 {
            return index
        }
        return nil
    }

    private static func requestText(_ method: String, _ path: String, body: String?, bearer: String?) -> String {
        var text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        if let bearer { text += "Authorization: Bearer \(bearer)\r\n" }
        if let body { text += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n" }
        return text + "\r\n" + (body ?? "")
    }

    /// Sends a request with extra header lines and a form body; returns status, head and body.
    func form(_ method: String, _ path: String, headers: [String] = [], form: String? = nil) throws
        -> (status: Int, head: String, body: [UInt8])
    {
        var text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for header in headers { text += header + "\r\n" }
        if let form {
            text += "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: \(form.utf8.count)\r\n"
        }
        try write(text + "\r\n" + (form ?? ""))
        return try readResponse(keepingHead: true)
    }

    func raw(_ method: String, _ path: String, body: String? = nil) throws -> String {
        try write(Self.requestText(method, path, body: body, bearer: nil))
        let (_, bytes) = try readResponse()
        return String(decoding: bytes, as: UTF8.self)
    }

    func request(_ method: String, _ path: String, body: String? = nil) throws -> JOSEValue {
        try write(Self.requestText(method, path, body: body, bearer: nil))
        let (status, bytes) = try readResponse()
        guard status < 300 else { throw BenchmarkError("\(method) \(path) answered \(status)") }
        return try JOSEValue.parse(bytes)
    }

    /// GETs `path` in pipelined batches of `depth` for `seconds`; returns responses per second (all must be 200).
    func pipelinedGets(_ path: String, bearer: String, depth: Int, seconds: Double) throws -> Double {
        let batch = String(repeating: Self.requestText("GET", path, body: nil, bearer: bearer), count: depth)
        let start = Date()
        var done = 0
        // Two batches in flight: the server always has queued requests while this client reads responses.
        try write(batch)
        while Date().timeIntervalSince(start) < seconds {
            try write(batch)
            for _ in 0..<depth {
                let (status, _) = try readResponse()
                guard status == 200 else { throw BenchmarkError("GET \(path) answered \(status)") }
            }
            done += depth
        }
        for _ in 0..<depth { _ = try readResponse() }
        return Double(done) / Date().timeIntervalSince(start)
    }
}
