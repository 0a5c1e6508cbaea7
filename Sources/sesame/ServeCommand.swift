import Dispatch
import Foundation
import SesameDevServer
import SesameJOSE

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `sesame serve`: the local development identity server.
enum ServeCommand {
    static let help = """
        USAGE: sesame serve [--host 127.0.0.1] [--port 8080] [--db PATH|:memory:] [--issuer URL]
                            [--access-token-ttl S] [--refresh-token-ttl S] [--signing-alg RS256|ES256|EdDSA]
                            [--user EMAIL:PASSWORD]... [--faults SPEC] [--no-dev-endpoints]
                            [--password-iterations N] [--apple-bundle-id ID] [--apple-jwks FILE|URL]

        A development identity server on this machine: the REST contract (POST /register, /login,
        /refresh-token, /logout, /auth/apple; GET /me, /jwks). NOT a production identity provider.
        It prints its issuer URL on stdout when ready; Ctrl-C stops it cleanly.

        OPTIONS:
          --db PATH              SQLite file (created if missing; users, sessions and keys survive restarts).
                                 Default :memory:.
          --access-token-ttl S   access-token lifetime in seconds (default 900; 1 is fine for tests)
          --refresh-token-ttl S  refresh-token lifetime in seconds (default 2592000)
          --user EMAIL:PASSWORD  seed a user (repeatable)
          --apple-bundle-id ID   audience of Sign in with Apple tokens (default dev.sesame.demo)
          --apple-jwks FILE|URL  verify Apple identity tokens with these keys instead of the stand-in issuer

        DEVELOPMENT ENDPOINTS (off with --no-dev-endpoints):
          GET  /_dev/counters                requests per route, refreshes, reuse detections, …
          POST /_dev/counters/reset
          POST /_dev/faults                  body: a fault SPEC (replaces the current plan; empty clears it)
          POST /_dev/apple/identity-token    {"sub","email","nonce"[,"aud","iss","expiresIn"]} -> a stand-in
                                             Apple identity token (nonce claim = SHA-256 hex of the raw nonce)
          GET  /_dev/apple/jwks              the stand-in Apple issuer's keys

        FAULT SPEC:
          SPEC   := RULE (';' RULE)*
          RULE   := ROUTE ':' ACTION ('@' PROBABILITY)?
          ROUTE  := '*' | PATH | 'METHOD PATH'
          ACTION := latency=200ms | latency=1.5s | status=503 | drop | unauthorized
          e.g.   --faults '/refresh-token:status=503@0.3;*:latency=50ms@0.1;/me:unauthorized@0.2'
        """

    static let options: Set<String> = [
        "--host", "--port", "--db", "--issuer", "--access-token-ttl", "--refresh-token-ttl", "--signing-alg", "--user",
        "--faults", "--password-iterations", "--apple-bundle-id", "--apple-jwks",
    ]

    static func run(_ arguments: ParsedArguments) async throws {
        if arguments.flags.contains("--help") {
            print(help)
            return
        }
        let configuration = try await configuration(from: arguments)
        let server = try DevServer(configuration: configuration)
        let issuer = try server.start()
        FileHandle.standardOutput.write(Data((issuer.absoluteString + "\n").utf8))
        FileHandle.standardError.write(
            Data("sesame serve: listening on \(issuer.absoluteString) (Ctrl-C stops)\n".utf8))
        await waitForTermination()
        server.stop()
        FileHandle.standardError.write(Data("sesame serve: stopped\n".utf8))
    }

    static func configuration(from arguments: ParsedArguments) async throws -> DevServer.Configuration {
        var configuration = DevServer.Configuration()
        configuration.host = try arguments.value("--host") ?? "127.0.0.1"
        configuration.port = try integer(arguments, "--port", default: 8080, range: 0...65535)
        configuration.databasePath = try arguments.value("--db") ?? ":memory:"
        if let issuer = try arguments.value("--issuer") {
            guard let url = URL(string: issuer), url.scheme == "http" || url.scheme == "https" else {
                throw CLIError.usage("--issuer takes an http(s) URL")
            }
            configuration.issuer = url
        }
        configuration.accessTokenTTL = Int64(
            try integer(arguments, "--access-token-ttl", default: 900, range: 1...86400 * 365))
        configuration.refreshTokenTTL = Int64(
            try integer(arguments, "--refresh-token-ttl", default: 30 * 86400, range: 1...86400 * 3650))
        configuration.passwordIterations = try integer(
            arguments, "--password-iterations", default: 100_000, range: 1000...10_000_000)
        if let name = try arguments.value("--signing-alg") {
            guard let algorithm = JWSAlgorithm(name: name), [.rs256, .es256, .eddsa].contains(algorithm) else {
                throw CLIError.usage("--signing-alg takes RS256, ES256 or EdDSA")
            }
            configuration.signingAlgorithm = algorithm
        }
        configuration.users = try arguments.values("--user").map { pair in
            guard let colon = pair.firstIndex(of: ":") else { throw CLIError.usage("--user takes EMAIL:PASSWORD") }
            return (email: String(pair[..<colon]), password: String(pair[pair.index(after: colon)...]))
        }
        if let spec = try arguments.value("--faults") {
            do {
                configuration.faults = try FaultPlan(spec: spec)
            } catch {
                throw CLIError.usage("--faults: \(error)")
            }
        }
        configuration.devEndpoints = !arguments.flags.contains("--no-dev-endpoints")
        if let bundle = try arguments.value("--apple-bundle-id") { configuration.appleBundleID = bundle }
        if let source = try arguments.value("--apple-jwks") {
            configuration.appleKeys = try await KeySource.load(source, allowSymmetric: false)
        }
        configuration.log = { line in FileHandle.standardError.write(Data((line + "\n").utf8)) }
        return configuration
    }

    private static func integer(
        _ arguments: ParsedArguments, _ name: String, default value: Int, range: ClosedRange<Int>
    )
        throws -> Int
    {
        guard let text = try arguments.value(name) else { return value }
        guard let number = Int(text), range.contains(number) else {
            throw CLIError.usage("\(name) takes a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return number
    }

    /// Suspends until SIGINT or SIGTERM.
    private static func waitForTermination() async {
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumed = SignalLatch(continuation)
            for number in [SIGINT, SIGTERM] {
                let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                source.setEventHandler { resumed.fire() }
                source.resume()
                resumed.keep(source)
            }
        }
    }
}

/// Resumes a continuation once, from whichever signal arrives first, and keeps the signal sources alive.
private final class SignalLatch: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var continuation: CheckedContinuation<Void, Never>?
    private var sources: [any DispatchSourceSignal] = []

    init(_ continuation: CheckedContinuation<Void, Never>) { self.continuation = continuation }

    func keep(_ source: any DispatchSourceSignal) {
        lock.lock()
        sources.append(source)
        lock.unlock()
    }

    func fire() {
        lock.lock()
        let pending = continuation
        continuation = nil
        lock.unlock()
        pending?.resume()
    }
}
