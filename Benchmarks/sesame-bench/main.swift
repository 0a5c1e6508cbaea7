import Foundation

// sesame-bench: benchmarks that compare Sesame with a reference measured in the same run.
//   sesame-bench jose [--svg FILE]   JOSE verify/sign/decode vs a direct libcrypto loop and Python's standard
//                         library; --svg also writes a bar chart of Sesame against those references
//   sesame-bench server   the dev server's GET /me and POST /refresh-token vs the JOSE verify ceiling
//   sesame-bench oidc     ID-token validation vs raw verification of the same token; code flows per second
//   sesame-bench session  10,000 concurrent AuthorizedClient requests across a token expiry; added latency; CPU
//                         while waiting (platform transport vs URLSession); N processes on one file store
//                         across 2 s expiries (refreshes vs token generations, reuse detections)
let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "jose":
    do {
        let chart = arguments.count == 3 && arguments[1] == "--svg" ? arguments[2] : nil
        try JOSEBenchmark.run(
            seconds: Double(ProcessInfo.processInfo.environment["SESAME_BENCH_SECONDS"] ?? "") ?? 1.0, chart: chart)
    } catch {
        FileHandle.standardError.write(Data("error: \(error)\n".utf8))
        exit(1)
    }
case "server":
    do {
        try ServerBenchmark.run(
            seconds: Double(ProcessInfo.processInfo.environment["SESAME_BENCH_SECONDS"] ?? "") ?? 2.0)
    } catch {
        FileHandle.standardError.write(Data("error: \(error)\n".utf8))
        exit(1)
    }
case "oidc":
    do {
        try await OIDCBenchmark.run(
            seconds: Double(ProcessInfo.processInfo.environment["SESAME_BENCH_SECONDS"] ?? "") ?? 2.0)
    } catch {
        FileHandle.standardError.write(Data("error: \(error)\n".utf8))
        exit(1)
    }
case "session":
    do {
        try await SessionBenchmark.run()
    } catch {
        FileHandle.standardError.write(Data("error: \(error)\n".utf8))
        exit(1)
    }
case "wait-worker" where arguments.count == 3:
    do {
        guard let url = URL(string: arguments[2]) else { exit(2) }
        try await SessionBenchmark.waitWorker(transport: arguments[1], url: url)
    } catch {
        FileHandle.standardError.write(Data("error: \(error)\n".utf8))
        exit(1)
    }
case "session-worker" where arguments.count == 4:
    do {
        guard let base = URL(string: arguments[1]), let seconds = Double(arguments[3]) else { exit(2) }
        try await SessionBenchmark.worker(
            base: base, directory: URL(fileURLWithPath: arguments[2]), seconds: seconds)
    } catch {
        FileHandle.standardError.write(Data("error: \(error)\n".utf8))
        exit(1)
    }
default:
    FileHandle.standardError.write(Data("usage: sesame-bench jose | server | oidc | session\n".utf8))
    exit(2)
}
