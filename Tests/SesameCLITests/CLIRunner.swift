import Foundation
import SesameLoopback
import Testing

/// Runs the built `sesame` binary and captures what it prints.
struct CLIResult {
    let status: Int32
    let stdout: String
    let stderr: String
}

enum CLIRunner {
    /// The `sesame` binary next to the test bundle (SwiftPM builds it because this target depends on it).
    static let binary: URL = {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("sesame")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/sesame")
    }()

    /// Runs `executable` (sesame by default) with `arguments`, `stdin` and `environment` added to this one's.
    static func run(
        executable: URL = binary, _ arguments: [String], stdin: String? = nil, environment: [String: String] = [:]
    ) throws -> CLIResult {
        let process = ChildProcess()
        process.executableURL = executable
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        let output = Pipe()
        let error = Pipe()
        let input = Pipe()
        process.standardOutput = .pipe(output)
        process.standardError = .pipe(error)
        process.standardInput = .pipe(input)
        try process.run()
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        try input.fileHandleForWriting.close()
        let outData = output.fileHandleForReading.readDataToEndOfFile()
        let errData = error.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return CLIResult(
            status: process.terminationStatus,
            stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errData, as: UTF8.self)
        )
    }

    /// Starts every run at once, then waits for all of them.
    ///
    /// This is real OS-level concurrency, not limited by the test's thread pool. Outputs must stay small (they
    /// wait in the pipes until the end).
    static func runConcurrently(_ runs: [[String]], environment: [String: String] = [:]) throws -> [CLIResult] {
        let started = try runs.map { arguments -> (ChildProcess, Pipe, Pipe) in
            let process = ChildProcess()
            process.executableURL = binary
            process.arguments = arguments
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
            let output = Pipe()
            let error = Pipe()
            process.standardOutput = .pipe(output)
            process.standardError = .pipe(error)
            process.standardInput = .null
            try process.run()
            return (process, output, error)
        }
        return started.map { process, output, error in
            process.waitUntilExit()
            return CLIResult(
                status: process.terminationStatus,
                stdout: String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self),
                stderr: String(decoding: error.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
        }
    }

    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("sesame-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}
