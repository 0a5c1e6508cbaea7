#if canImport(CSesameEpoll) || os(macOS)
    package import Foundation
#endif
#if canImport(CSesameEpoll)
    import CSesameEpoll
    #if canImport(Glibc)
        import Glibc
    #elseif canImport(Musl)
        import Musl
    #endif
#endif

#if canImport(CSesameEpoll) || os(macOS)
    /// A child process: what Sesame and its tests start instead of Foundation's `Process`.
    ///
    /// On Linux, `Process.run()` (swift-corelibs-foundation before its PR #5472; Swift 6.3.1 has the bug) reads
    /// `/proc/self/fd` by copying 256 bytes of every entry: with over about 1,350 descriptors open, the copy can run
    /// off glibc's directory buffer into an unmapped page and kill the whole process with SIGSEGV (it did, in a test
    /// run whose servers held 1,370 descriptors while a test started `sesame`). Here `posix_spawn(3)` starts the
    /// child with every descriptor from 3 up closed by the C library (`posix_spawn_file_actions_addclosefrom_np`;
    /// `fork` and `close_range` where the C library lacks it), so nothing is read, and none of this process's sockets
    /// or pipes leak into the child. On macOS, where Foundation has no such code, it is a thin wrapper over `Process`.
    ///
    /// Configure, then ``run()`` once; a thread waits for the child, so ``terminationHandler`` is called and
    /// ``waitUntilExit()`` returns without anyone polling.
    package final class ChildProcess: @unchecked Sendable {
        /// Where one of the child's standard streams goes.
        package enum Stream {
            /// This process's own.
            case inherit
            /// `/dev/null`.
            case null
            /// A pipe: the child gets the end for its direction; this process closes that end once the child runs.
            case pipe(Pipe)
            /// An open file.
            case file(FileHandle)
        }

        /// Why the child ended.
        package enum TerminationReason: Sendable, Equatable {
            /// It exited (``ChildProcess/terminationStatus`` is its exit code).
            case exit
            /// A signal killed it (``ChildProcess/terminationStatus`` is the signal's number).
            case uncaughtSignal
        }

        /// How a child is started on Linux (tests run both).
        package enum Method: Sendable {
            /// `posix_spawn(3)`, where the C library can close descriptors in the child (glibc 2.34 and later);
            /// `fork` elsewhere.
            case spawn
            /// `fork(2)` and `execve(2)`: what C libraries without `posix_spawn_file_actions_addclosefrom_np` get.
            case fork
            /// `fork`, closing descriptors as it does where the kernel has no `close_range(2)` (before 5.9): by the
            /// list in `/proc/self/fd` (tests).
            case forkListingDescriptors
            /// `fork`, closing descriptors one number at a time up to the open-file limit, as where `/proc` is not
            /// mounted either (tests).
            case forkClosingEach
        }

        /// The executable (an absolute path: no `PATH` search).
        package var executableURL: URL?
        /// The arguments after the executable's name.
        package var arguments: [String]
        /// The child's whole environment; `nil`: this process's.
        package var environment: [String: String]?
        /// The child's working directory; `nil`: this process's.
        package var currentDirectoryURL: URL?
        /// The child's standard input.
        package var standardInput: Stream = .inherit
        /// The child's standard output.
        package var standardOutput: Stream = .inherit
        /// The child's standard error.
        package var standardError: Stream = .inherit
        /// Called once, on the waiting thread, when the child has ended (as it was when ``run()`` was called).
        package var terminationHandler: (@Sendable (ChildProcess) -> Void)?
        /// How the child is started (Linux; ignored elsewhere).
        package var method: Method = .spawn

        // The configuration above is the caller's to set before run(), from one thread; what follows is shared
        // with the waiting thread and read under `condition`.
        private let condition = NSCondition()
        private var starting = false
        private var pid: Int32 = 0
        private var ended: (status: Int32, reason: TerminationReason)?
        /// Linux: a pidfd for the child while it runs (-1: none), so a signal never reaches another process.
        private var pidfd: Int32 = -1

        /// A child that will run `executableURL` with `arguments`.
        package init(_ executableURL: URL? = nil, _ arguments: [String] = []) {
            self.executableURL = executableURL
            self.arguments = arguments
        }

        /// The child's process ID once it runs (0 before).
        package var processIdentifier: Int32 { locked { pid } }

        /// Whether it has started and not yet ended.
        package var isRunning: Bool { locked { pid != 0 && ended == nil } }

        /// Its exit code, or the number of the signal that killed it; call only after it ended.
        package var terminationStatus: Int32 {
            locked {
                precondition(ended != nil, "ChildProcess.terminationStatus read before the child ended")
                return ended?.status ?? 0
            }
        }

        /// Whether it exited or a signal killed it; call only after it ended.
        package var terminationReason: TerminationReason {
            locked {
                precondition(ended != nil, "ChildProcess.terminationReason read before the child ended")
                return ended?.reason ?? .exit
            }
        }

        /// Blocks until the child has ended; returns at once if it has, or if it never started.
        package func waitUntilExit() {
            condition.lock()
            defer { condition.unlock() }
            while pid != 0, ended == nil { condition.wait() }
        }

        /// Sends SIGINT.
        package func interrupt() { send(SIGINT) }

        /// Sends SIGTERM.
        package func terminate() { send(SIGTERM) }

        /// Sends `signal` while the child runs.
        ///
        /// Never to a process ID that may have been reused: on Linux the child is reaped only under the same lock,
        /// after it is marked ended, and the signal goes through a pidfd where the kernel has them (the kernel reaps
        /// a child itself when this process ignores SIGCHLD).
        package func send(_ signal: Int32) {
            locked {
                guard pid != 0, ended == nil else { return }
                #if canImport(CSesameEpoll)
                    _ = csesame_spawn_signal(pid, pidfd, signal)
                #else
                    _ = kill(pid, signal)
                #endif
            }
        }

        /// `body` under the condition's lock (`NSLocking.withLock` needs macOS 14).
        private func locked<Result>(_ body: () -> Result) -> Result {
            condition.lock()
            defer { condition.unlock() }
            return body()
        }

        /// Claims the one start, or throws `EBUSY` (started, or being started on another thread).
        private func claimStart() throws {
            let claimed = locked {
                guard !starting, pid == 0 else { return false }
                starting = true
                return true
            }
            guard claimed else { throw POSIXError(.EBUSY) }
        }

        /// Records the started child, or frees the start for another try.
        private func started(_ child: Int32?) {
            locked {
                starting = false
                if let child { pid = child }
            }
        }

        #if canImport(CSesameEpoll)
            /// Starts the child.
            ///
            /// Throws a POSIX error when it cannot: `ENOENT` or `EACCES` for the executable, `EBUSY` once it has
            /// run, `EBADF` for a stream whose descriptor is closed (a `Pipe` already given to another child, or
            /// `FileHandle.nullDevice`: use ``Stream/null``), `EINVAL` for a NUL byte in a path, argument or
            /// environment entry, or an environment name that is empty or holds `=`.
            package func run() throws {
                try claimStart()
                var child: Int32?
                defer { started(child) }
                guard let path = executableURL?.path else { throw POSIXError(.ENOENT) }
                let environmentEntries = try environment.map { variables in
                    try variables.sorted { $0.key < $1.key }.map { name, value in
                        guard !name.isEmpty, !name.utf8.contains(UInt8(ascii: "=")) else { throw POSIXError(.EINVAL) }
                        return "\(name)=\(value)"
                    }
                }
                let directory = currentDirectoryURL?.path
                let strings = [path] + arguments + (environmentEntries ?? []) + (directory.map { [$0] } ?? [])
                guard strings.allSatisfy({ !$0.utf8.contains(0) }) else { throw POSIXError(.EINVAL) }

                var opened: [Int32] = []  // /dev/null descriptors, closed once the child has its copies
                defer { for fd in opened { close(fd) } }
                func descriptor(_ stream: Stream, childReads: Bool) throws -> Int32 {
                    let fd: Int32
                    switch stream {
                    case .inherit: return -1
                    case .null:
                        fd = open("/dev/null", (childReads ? O_RDONLY : O_WRONLY) | O_CLOEXEC)
                        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
                        opened.append(fd)
                    case .pipe(let pipe):
                        // Foundation's pipe(2) is not close-on-exec: a program another thread starts meanwhile would
                        // keep our ends, and a reader here would wait for an end that does not come while it lives.
                        for end in [pipe.fileHandleForReading.fileDescriptor, pipe.fileHandleForWriting.fileDescriptor]
                        where end >= 0 {
                            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
                        }
                        fd =
                            childReads
                            ? pipe.fileHandleForReading.fileDescriptor : pipe.fileHandleForWriting.fileDescriptor
                    case .file(let handle): fd = handle.fileDescriptor
                    }
                    // A closed handle reports -1, which the C side would take for "this process's own".
                    guard fd >= 0 else { throw POSIXError(.EBADF) }
                    return fd
                }
                let stdio = [
                    try descriptor(standardInput, childReads: true), try descriptor(standardOutput, childReads: false),
                    try descriptor(standardError, childReads: false),
                ]
                let argv = try Self.cStrings([path] + arguments)
                defer { for pointer in argv { free(pointer) } }
                let envp = try environmentEntries.map(Self.cStrings)
                defer { for pointer in envp ?? [] { free(pointer) } }
                let method = method
                func spawn(
                    _ argv: UnsafePointer<UnsafeMutablePointer<CChar>?>?,
                    _ envp: UnsafePointer<UnsafeMutablePointer<CChar>?>?, _ streams: UnsafePointer<Int32>?,
                    _ pid: inout Int32
                ) -> Int32 {
                    switch method {
                    case .spawn: return csesame_spawn(path, argv, envp, streams, directory, &pid)
                    case .fork: return csesame_spawn_fork_closing(path, argv, envp, streams, directory, &pid, 0)
                    case .forkListingDescriptors:
                        return csesame_spawn_fork_closing(path, argv, envp, streams, directory, &pid, 1)
                    case .forkClosingEach:
                        return csesame_spawn_fork_closing(path, argv, envp, streams, directory, &pid, 2)
                    }
                }
                var spawned: Int32 = 0
                let status = stdio.withUnsafeBufferPointer { streams in
                    argv.withUnsafeBufferPointer { argv in
                        guard let envp else { return spawn(argv.baseAddress, nil, streams.baseAddress, &spawned) }
                        return envp.withUnsafeBufferPointer { envp in
                            spawn(argv.baseAddress, envp.baseAddress, streams.baseAddress, &spawned)
                        }
                    }
                }
                guard status == 0 else { throw POSIXError(POSIXErrorCode(rawValue: status) ?? .EIO) }
                child = spawned
                // Recorded before the waiting thread starts: its handler may run at once and read the ID.
                let descriptor = csesame_spawn_pidfd(spawned)
                locked { pidfd = descriptor }
                started(spawned)
                // The child has its copies: this process keeps only its own ends, so reading to the end sees EOF.
                if case .pipe(let pipe) = standardInput { try? pipe.fileHandleForReading.close() }
                if case .pipe(let pipe) = standardOutput { try? pipe.fileHandleForWriting.close() }
                if case .pipe(let pipe) = standardError { try? pipe.fileHandleForWriting.close() }
                let handler = terminationHandler
                let waiter = Thread { [self, spawned] in
                    var code: Int32 = 0
                    var signal: Int32 = 0
                    let waited = csesame_spawn_wait(spawned, &code, &signal)
                    // Marked ended, then reaped, under the lock that send(_:) takes: no signal to a reused ID.
                    locked {
                        if waited != 0 {
                            ended = (-1, .exit)  // ECHILD: SIGCHLD ignored, so the kernel reaped it; status unknown
                        } else {
                            ended = signal != 0 ? (signal, .uncaughtSignal) : (code, .exit)
                            csesame_spawn_reap(spawned)
                        }
                        if pidfd >= 0 {
                            close(pidfd)
                            pidfd = -1
                        }
                        condition.broadcast()
                    }
                    handler?(self)
                }
                waiter.name = "ChildProcess \(spawned)"
                waiter.start()
            }

            /// `strings` as C strings, NULL-terminated; the caller frees them.
            private static func cStrings(_ strings: [String]) throws -> [UnsafeMutablePointer<CChar>?] {
                var pointers: [UnsafeMutablePointer<CChar>?] = []
                for string in strings {
                    guard let pointer = strdup(string) else {
                        for pointer in pointers { free(pointer) }
                        throw POSIXError(.ENOMEM)
                    }
                    pointers.append(pointer)
                }
                return pointers + [nil]
            }
        #else
            /// Starts the child.
            ///
            /// Throws when it cannot, and `EBUSY` once it has run.
            package func run() throws {
                try claimStart()
                var child: Int32?
                defer { started(child) }
                guard let executableURL else { throw POSIXError(.ENOENT) }
                let process = Process()
                process.executableURL = executableURL
                process.arguments = arguments
                if let environment { process.environment = environment }
                if let currentDirectoryURL { process.currentDirectoryURL = currentDirectoryURL }
                func foundation(_ stream: Stream) -> Any? {
                    switch stream {
                    case .inherit: return nil
                    case .null: return FileHandle.nullDevice
                    case .pipe(let pipe): return pipe
                    case .file(let handle): return handle
                    }
                }
                if let stream = foundation(standardInput) { process.standardInput = stream }
                if let stream = foundation(standardOutput) { process.standardOutput = stream }
                if let stream = foundation(standardError) { process.standardError = stream }
                // Foundation reaps the child before this handler: a signal sent in between could reach a reused ID.
                let handler = terminationHandler
                process.terminationHandler = { [self] finished in
                    let reason: TerminationReason =
                        finished.terminationReason == .uncaughtSignal ? .uncaughtSignal : .exit
                    locked {
                        ended = (finished.terminationStatus, reason)
                        condition.broadcast()
                    }
                    handler?(self)
                }
                try process.run()
                child = process.processIdentifier
            }
        #endif
    }
#endif
