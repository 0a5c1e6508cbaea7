import Foundation
import SesameLoopback
import Synchronization
import Testing

#if os(Linux)
    import Glibc

    /// What Sesame and its tests start processes with: `ChildProcess`.
    ///
    /// Foundation's `Process.run()` on Linux can crash a process holding over about 1,350 descriptors. Every test
    /// runs both ways of starting: `posix_spawn` (glibc 2.34 and later) and `fork` (C libraries without
    /// `addclosefrom_np`).
    @Suite(.timeLimit(.minutes(1))) struct ChildProcessTests {
        /// Runs `path` with `arguments` and returns what it printed, with the process once it ended.
        private func output(
            _ method: ChildProcess.Method, _ path: String, _ arguments: [String],
            configure: (ChildProcess) -> Void = { _ in }
        ) throws -> (text: String, process: ChildProcess) {
            let process = ChildProcess(URL(fileURLWithPath: path), arguments)
            process.method = method
            let pipe = Pipe()
            process.standardOutput = .pipe(pipe)
            process.standardError = .null
            configure(process)
            try process.run()
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (String(decoding: data, as: UTF8.self), process)
        }

        @Test(
            "with 1,400 descriptors open, none of them reaches the child, which gets only its three streams (each way of closing them)",
            arguments: [ChildProcess.Method.spawn, .fork, .forkListingDescriptors, .forkClosingEach])
        func onlyItsStreams(method: ChildProcess.Method) throws {
            // 1,400 is past where Foundation's Process.run() can crash; raise a soft limit below that if we may.
            var limit = rlimit()
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            if limit.rlim_cur < 2048, limit.rlim_max >= 2048 {
                limit.rlim_cur = 2048
                setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            }
            // dup(2) copies are not close-on-exec, like any descriptor a C library or an old API opens: only
            // closing them in the child keeps them out.
            let held = (0..<1400).map { _ in dup(STDERR_FILENO) }
            defer { for fd in held where fd >= 0 { close(fd) } }
            try #require(held.allSatisfy { $0 >= 0 }, "the open-file limit allows 1,400 more descriptors")
            let listed = try output(method, "/bin/ls", ["/proc/self/fd"])
            let names = listed.text.split(separator: "\n")
            // ls's own directory descriptor is the only one past the three streams.
            #expect(names.count == 4, "the child had \(names.count) descriptors open")
            #expect(names.prefix(5) == ["0", "1", "2", "3"])
            #expect(listed.process.terminationStatus == 0)
        }

        @Test(
            "every signal reaches the child at its default and unblocked, though this process ignores SIGPIPE and blocks SIGUSR2",
            arguments: [ChildProcess.Method.spawn, .fork, .forkListingDescriptors])
        func signalsAtDefault(method: ChildProcess.Method) throws {
            let previous = signal(SIGPIPE, SIG_IGN)
            defer { signal(SIGPIPE, previous) }
            var blocked = sigset_t()
            var before = sigset_t()
            sigemptyset(&blocked)
            sigaddset(&blocked, SIGUSR2)
            pthread_sigmask(SIG_BLOCK, &blocked, &before)  // this thread's, which starts the child
            defer { pthread_sigmask(SIG_SETMASK, &before, nil) }
            let status = try output(method, "/bin/grep", ["-E", "^Sig(Ign|Blk):", "/proc/self/status"]).text
            let masks = status.split(separator: "\n").compactMap {
                UInt64($0.split(separator: "\t").last ?? "", radix: 16)
            }
            #expect(masks.count == 2, "\(status)")
            #expect(masks.first == 0, "nothing blocked: \(status)")
            // Signals 1-31 (SIGPIPE is 13) at their default; 32 and 33 are glibc's own, set up in every process.
            #expect(masks.last.map { $0 & 0x7fff_ffff } == 0, "nothing ignored: \(status)")
        }

        @Test(
            "exit codes, a killing signal, terminate() and the termination handler are reported as they happened",
            arguments: [ChildProcess.Method.spawn, .fork])
        func endings(method: ChildProcess.Method) throws {
            let seven = try output(method, "/bin/sh", ["-c", "exit 7"]).process
            #expect(seven.terminationStatus == 7 && seven.terminationReason == .exit && !seven.isRunning)
            let killed = try output(method, "/bin/sh", ["-c", "kill -KILL $$"]).process
            #expect(killed.terminationStatus == SIGKILL && killed.terminationReason == .uncaughtSignal)

            let sleeper = ChildProcess(URL(fileURLWithPath: "/bin/sleep"), ["60"])
            sleeper.method = method
            let handled = DispatchSemaphore(value: 0)
            let calls = Atomic(0)
            sleeper.terminationHandler = { ended in
                #expect(ended.terminationReason == .uncaughtSignal)
                calls.add(1, ordering: .relaxed)
                handled.signal()
            }
            try sleeper.run()
            #expect(sleeper.isRunning && sleeper.processIdentifier > 0)
            sleeper.terminate()
            sleeper.waitUntilExit()
            #expect(sleeper.terminationStatus == SIGTERM && !sleeper.isRunning)
            #expect(handled.wait(timeout: .now() + 30) == .success)
            sleeper.interrupt()  // after it ended: nothing is sent (its process ID may be someone else's by now)
            #expect(sleeper.terminationStatus == SIGTERM && calls.load(ordering: .relaxed) == 1)
            #expect(throws: POSIXError(.EBUSY)) { try sleeper.run() }

            // A child that ends at once: its handler already sees its process ID (recorded before the wait began).
            for _ in 0..<20 {
                let quick = ChildProcess(URL(fileURLWithPath: "/bin/true"))
                quick.method = method
                let seen = Atomic<Int32>(-1)
                let done = DispatchSemaphore(value: 0)
                quick.terminationHandler = { ended in
                    seen.store(ended.processIdentifier, ordering: .relaxed)
                    done.signal()
                }
                try quick.run()
                #expect(done.wait(timeout: .now() + 30) == .success)
                #expect(seen.load(ordering: .relaxed) > 0)
            }
        }

        @Test(
            "its environment and working directory are the ones given; standard input reaches it and ends",
            arguments: [ChildProcess.Method.spawn, .fork])
        func environmentDirectoryInput(method: ChildProcess.Method) throws {
            let environment = try output(method, "/usr/bin/env", []) { $0.environment = ["ONLY": "this"] }.text
            #expect(environment == "ONLY=this\n")
            let empty = try output(method, "/usr/bin/env", []) { $0.environment = [:] }.text
            #expect(empty.isEmpty)
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("child-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let printed = try output(method, "/bin/pwd", []) { $0.currentDirectoryURL = directory }.text
            #expect(printed == directory.resolvingSymlinksInPath().path + "\n", "\(printed)")

            let input = Pipe()
            let echoed = try output(method, "/bin/cat", []) { process in
                process.standardInput = .pipe(input)
                input.fileHandleForWriting.write(Data("hello\n".utf8))
                try? input.fileHandleForWriting.close()
            }
            #expect(echoed.text == "hello\n")
        }

        @Test(
            "standard error sent to this process's stdout stays there when stdout goes to a pipe (no crossed dup2)",
            arguments: [ChildProcess.Method.spawn, .fork])
        func streamsNotCrossed(method: ChildProcess.Method) throws {
            let script = "echo out; echo 'ChildProcessTests: this line on the test run output is expected' >&2"
            let printed = try output(method, "/bin/sh", ["-c", script]) {
                $0.standardError = .file(FileHandle.standardOutput)
            }
            #expect(printed.text == "out\n", "the child's stderr went into its stdout pipe")
        }

        @Test(
            "what run() refuses: a missing executable, a closed stream, a NUL byte, a bad variable name, a second start",
            arguments: [ChildProcess.Method.spawn, .fork])
        func refused(method: ChildProcess.Method) throws {
            func start(_ configure: (ChildProcess) -> Void) throws {
                let process = ChildProcess(URL(fileURLWithPath: "/bin/true"))
                process.method = method
                configure(process)
                try process.run()
                process.waitUntilExit()
            }
            let missing = "/nonexistent/sesame-\(UUID().uuidString)"
            #expect(throws: POSIXError(.ENOENT)) { try start { $0.executableURL = URL(fileURLWithPath: missing) } }
            #expect(throws: POSIXError(.ENOENT)) { try start { $0.executableURL = nil } }
            // A closed handle's descriptor is -1, which would otherwise mean "this process's own stream".
            #expect(throws: POSIXError(.EBADF)) { try start { $0.standardOutput = .file(FileHandle.nullDevice) } }
            let used = Pipe()
            try start { $0.standardOutput = .pipe(used) }
            #expect(throws: POSIXError(.EBADF)) { try start { $0.standardOutput = .pipe(used) } }
            #expect(throws: POSIXError(.EINVAL)) { try start { $0.arguments = ["a\u{0}b"] } }
            #expect(throws: POSIXError(.EINVAL)) { try start { $0.environment = ["LD_PRELOAD=/x.so": ""] } }
            #expect(throws: POSIXError(.EINVAL)) { try start { $0.environment = ["": "x"] } }
            #expect(throws: POSIXError(.EINVAL)) { try start { $0.environment = ["A": "b\u{0}"] } }
            let never = ChildProcess(URL(fileURLWithPath: missing))
            #expect(throws: POSIXError(.ENOENT)) { try never.run() }
            #expect(!never.isRunning)
            never.waitUntilExit()  // returns: it never started
        }

        @Test("run() from many threads at once starts one child")
        func oneStart() throws {
            let process = ChildProcess(URL(fileURLWithPath: "/bin/sleep"), ["0.2"])
            let started = Atomic(0)
            DispatchQueue.concurrentPerform(iterations: 16) { _ in
                if (try? process.run()) != nil { started.add(1, ordering: .relaxed) }
            }
            process.waitUntilExit()
            #expect(started.load(ordering: .relaxed) == 1 && process.terminationStatus == 0)
        }
    }
#endif
