import Foundation
import SesameLoopback
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `ChildProcess`, what Sesame and its tests start processes with instead of Foundation's `Process` (whose
/// `run()` on Linux can crash a process holding over about 1,350 descriptors).
@Suite(.timeLimit(.minutes(1))) struct ChildProcessTests {
    /// Runs `path` with `arguments` and returns what it printed, with the process once it ended.
    private func output(
        _ path: String, _ arguments: [String], configure: (ChildProcess) -> Void = { _ in }
    ) throws -> (text: String, process: ChildProcess) {
        let process = ChildProcess(URL(fileURLWithPath: path), arguments)
        let pipe = Pipe()
        process.standardOutput = .pipe(pipe)
        process.standardError = .null
        configure(process)
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (String(decoding: data, as: UTF8.self), process)
    }

    @Test("with 1,400 descriptors open, none of them reaches the child, which gets only its three streams")
    func onlyItsStreams() throws {
        // dup(2) copies are not close-on-exec, like any descriptor a C library or an old API opens: only closing
        // them in the child keeps them out. 1,400 is past where Foundation's Process.run() can crash.
        let held = (0..<1400).map { _ in dup(STDERR_FILENO) }
        defer { for fd in held where fd >= 0 { close(fd) } }
        #expect(held.allSatisfy { $0 >= 0 })
        let open = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count
        #expect(open > 1400, "the descriptors are open here")
        let listed = try output("/bin/ls", ["/proc/self/fd"])
        // ls's own directory descriptor is the only one past the three streams.
        let names = listed.text.split(separator: "\n")
        #expect(names.count == 4, "the child had \(names.count) descriptors open")
        #expect(names.prefix(5) == ["0", "1", "2", "3"])
        #expect(listed.process.terminationStatus == 0)
    }

    @Test("every signal reaches the child at its default and unblocked, though this process ignores SIGPIPE")
    func signalsAtDefault() throws {
        let previous = signal(SIGPIPE, SIG_IGN)
        defer { signal(SIGPIPE, previous) }
        let status = try output("/bin/grep", ["-E", "^Sig(Ign|Blk):", "/proc/self/status"]).text
        let masks = status.split(separator: "\n").compactMap { UInt64($0.split(separator: "\t").last ?? "", radix: 16) }
        #expect(masks.count == 2, "\(status)")
        #expect(masks.first == 0, "nothing blocked: \(status)")
        // Signals 1-31 (SIGPIPE is 13) at their default; 32 and 33 are glibc's own, which it sets up in every process.
        #expect(masks.last.map { $0 & 0x7fff_ffff } == 0, "nothing ignored: \(status)")
    }

    @Test("exit codes, a killing signal, terminate() and the termination handler are reported as they happened")
    func endings() throws {
        let seven = try output("/bin/sh", ["-c", "exit 7"]).process
        #expect(seven.terminationStatus == 7 && seven.terminationReason == .exit && !seven.isRunning)
        let killed = try output("/bin/sh", ["-c", "kill -KILL $$"]).process
        #expect(killed.terminationStatus == SIGKILL && killed.terminationReason == .uncaughtSignal)

        let sleeper = ChildProcess(URL(fileURLWithPath: "/bin/sleep"), ["60"])
        let handled = DispatchSemaphore(value: 0)
        sleeper.terminationHandler = { ended in
            #expect(ended.terminationReason == .uncaughtSignal)
            handled.signal()
        }
        try sleeper.run()
        #expect(sleeper.isRunning && sleeper.processIdentifier > 0)
        sleeper.terminate()
        sleeper.waitUntilExit()
        #expect(sleeper.terminationStatus == SIGTERM && !sleeper.isRunning)
        #expect(handled.wait(timeout: .now() + 30) == .success)
        sleeper.terminate()  // after it ended: no signal to a process ID that may be someone else's by now
        #expect(throws: POSIXError.self) { try sleeper.run() }
    }

    @Test("its environment and working directory are the ones given; standard input reaches it and ends")
    func environmentDirectoryInput() throws {
        let environment = try output("/usr/bin/env", []) { $0.environment = ["ONLY": "this"] }.text
        #expect(environment == "ONLY=this\n")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("child-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let printed = try output("/bin/pwd", []) { $0.currentDirectoryURL = directory }.text
        #expect(printed == directory.resolvingSymlinksInPath().path + "\n", "\(printed)")

        let input = Pipe()
        let echoed = try output("/bin/cat", []) { process in
            process.standardInput = .pipe(input)
            input.fileHandleForWriting.write(Data("hello\n".utf8))
            try? input.fileHandleForWriting.close()
        }
        #expect(echoed.text == "hello\n")
    }

    @Test("a missing executable is a POSIX error from run(), not a crash or a child that never ends")
    func missingExecutable() {
        let process = ChildProcess(URL(fileURLWithPath: "/nonexistent/sesame-\(UUID().uuidString)"))
        #expect(throws: POSIXError(.ENOENT)) { try process.run() }
        #expect(!process.isRunning)
        #expect(throws: POSIXError(.ENOENT)) { try ChildProcess().run() }
    }
}
