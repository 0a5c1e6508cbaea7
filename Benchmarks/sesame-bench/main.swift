import Foundation

// sesame-bench: benchmarks that compare Sesame with a reference measured in the same run.
//   sesame-bench jose     JOSE verify/sign/decode vs a direct libcrypto loop and Python's standard library
let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "jose":
    do {
        try JOSEBenchmark.run(seconds: Double(ProcessInfo.processInfo.environment["SESAME_BENCH_SECONDS"] ?? "") ?? 1.0)
    } catch {
        FileHandle.standardError.write(Data("error: \(error)\n".utf8))
        exit(1)
    }
default:
    FileHandle.standardError.write(Data("usage: sesame-bench jose\n".utf8))
    exit(2)
}
