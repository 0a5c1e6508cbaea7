package import Foundation

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
    /// child with every descriptor from 3 up closed by the C library (`posix_spawn_file_actions_addclosefrom_np`), so
    /// nothing is read, and none of this process's sockets or pipes leak into the child. On macOS, where Foundation
    /// has no such code, it is a thin wrapper over `Process`.
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
        /// Called once, on the waiting thread, when the child has ended.
        package var terminationHandler: (@Sendable (ChildProcess) -> Void)?

        private let condition = NSCondition()
        private var pid: Int32 = 0
        private var ended: (status: Int32, reason: TerminationReason)?

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

        /// Blocks until the child has ended (at once if it has).
        package func waitUntilExit() {
            condition.lock()
            defer { condition.unlock() }
            while ended == nil { condition.wait() }
        }

        /// Sends SIGINT.
        package func interrupt() { send(SIGINT) }

        /// Sends SIGTERM.
        package func terminate() { send(SIGTERM) }

        /// Sends `signal` while the child runs (never to a reaped process ID, which may be someone else's by then).
        package func send(_ signal: Int32) {
            locked {
                if pid != 0, ended == nil { _ = kill(pid, signal) }
            }
        }

        /// `body` under the condition's lock (`NSLocking.withLock` needs macOS 14).
        private func locked<Result>(_ body: () -> Result) -> Result {
            condition.lock()
            defer { condition.unlock() }
            return body()
        }

        private func finish(status: Int32, reason: TerminationReason) {
            locked {
                ended = (status, reason)
                condition.broadcast()
            }
            terminationHandler?(self)
        }

        #if canImport(CSesameEpoll)
            /// Starts the child.
            ///
            /// Throws a POSIX error (`ENOENT`, `EACCES`, …) when it cannot, and once it has run.
            package func run() throws {
                guard processIdentifier == 0 else { throw POSIXError(.EBUSY) }
                guard let path = executableURL?.path else { throw POSIXError(.ENOENT) }
                var opened: [Int32] = []  // /dev/null descriptors, closed once the child has its copies
                defer { for fd in opened { close(fd) } }
                func descriptor(_ stream: Stream, childReads: Bool) throws -> Int32 {
                    switch stream {
                    case .inherit: return -1
                    case .null:
                        let fd = open("/dev/null", (childReads ? O_RDONLY : O_WRONLY) | O_CLOEXEC)
                        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
                        opened.append(fd)
                        return fd
                    case .pipe(let pipe):
                        return childReads
                            ? pipe.fileHandleForReading.fileDescriptor : pipe.fileHandleForWriting.fileDescriptor
                    case .file(let handle): return handle.fileDescriptor
                    }
                }
                let stdio = [
                    try descriptor(standardInput, childReads: true), try descriptor(standardOutput, childReads: false),
                    try descriptor(standardError, childReads: false),
                ]
                let argv = ([path] + arguments).map { strdup($0) } + [nil]
                let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
                defer {
                    for pointer in argv { free(pointer) }
                    for pointer in envp ?? [] { free(pointer) }
                }
                var child: Int32 = 0
                let status = stdio.withUnsafeBufferPointer { streams in
                    argv.withUnsafeBufferPointer { argv in
                        if let envp {
                            return envp.withUnsafeBufferPointer { envp in
                                csesame_spawn(
                                    path, argv.baseAddress, envp.baseAddress, streams.baseAddress,
                                    currentDirectoryURL?.path, &child)
                            }
                        }
                        return csesame_spawn(
                            path, argv.baseAddress, nil, streams.baseAddress, currentDirectoryURL?.path, &child)
                    }
                }
                guard status == 0 else { throw POSIXError(POSIXErrorCode(rawValue: status) ?? .EIO) }
                locked { pid = child }
                // The child has its copies: this process keeps only its own ends, so reading to the end sees EOF.
                if case .pipe(let pipe) = standardInput { try? pipe.fileHandleForReading.close() }
                if case .pipe(let pipe) = standardOutput { try? pipe.fileHandleForWriting.close() }
                if case .pipe(let pipe) = standardError { try? pipe.fileHandleForWriting.close() }
                let waiter = Thread { [self, child] in
                    var code: Int32 = 0
                    var signal: Int32 = 0
                    guard csesame_spawn_wait(child, &code, &signal) == 0 else {
                        return finish(status: -1, reason: .exit)
                    }
                    finish(status: signal != 0 ? signal : code, reason: signal != 0 ? .uncaughtSignal : .exit)
                }
                waiter.name = "ChildProcess \(child)"
                waiter.start()
            }
        #else
            /// Starts the child.
            ///
            /// Throws when it cannot, and once it has run.
            package func run() throws {
                guard processIdentifier == 0 else { throw POSIXError(.EBUSY) }
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
                process.terminationHandler = { [self] ended in
                    finish(
                        status: ended.terminationStatus,
                        reason: ended.terminationReason == .uncaughtSignal ? .uncaughtSignal : .exit)
                }
                try process.run()
                locked { pid = process.processIdentifier }
            }
        #endif
    }
#endif
