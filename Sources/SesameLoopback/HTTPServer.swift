import Dispatch
public import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A small HTTP/1.1 server over POSIX sockets, for loopback use: the RFC 8252 redirect receiver and the base of
/// Sesame's development identity server.
///
/// One event loop (epoll on Linux, poll elsewhere) accepts, reads and writes every connection without blocking, so
/// an idle, trickling or non-reading connection costs a descriptor and a buffer, never a thread; requests are
/// handled on a pool, one at a time per connection and in order, so keep-alive and pipelining work. Every limit
/// answers with its status: 431 for a head over ``Configuration/maxHeaderBytes``, 413 for a body over
/// ``Configuration/maxBodyBytes``, 411 for a chunked body (not supported: send `Content-Length`), 400 for anything
/// malformed, 408 when a client stalls mid-request past its deadline, 503 when every connection is busy.
///
/// Its sockets are close-on-exec: a program you start while it runs inherits none of them.
///
/// > Important: This is a development and test server. Bind it to loopback addresses.
public final class HTTPServer: @unchecked Sendable {
    /// Limits and addresses.
    public struct Configuration: Sendable {
        /// The host to bind: an IP literal or a name; every address it resolves to is bound.
        ///
        /// Default 127.0.0.1.
        public var host = "127.0.0.1"
        /// The port; 0 picks a free one (see ``HTTPServer/port``).
        public var port = 0
        /// The largest request line plus headers.
        ///
        /// Default 16 KiB.
        public var maxHeaderBytes = 16 * 1024
        /// The largest request body.
        ///
        /// Default 1 MiB.
        public var maxBodyBytes = 1 << 20
        /// How long a keep-alive connection may stay idle between requests.
        ///
        /// Default 10 s.
        public var readTimeout: TimeInterval = 10
        /// How long a whole request (head and body) may take to arrive, however it trickles in.
        ///
        /// A client that sends a byte every few seconds gets a 408 when this runs out.
        ///
        /// Default 10 s.
        public var requestTimeout: TimeInterval = 10
        /// How long a new connection may take to send its first request line.
        ///
        /// One that has not is closed (with a 408 when it sent part of a line): connections opened and left
        /// half-sent cannot pile up.
        ///
        /// Default 2 s.
        public var requestLineTimeout: TimeInterval = 2
        /// How long a response may wait for a client that does not read it.
        ///
        /// The connection is closed then.
        ///
        /// Default 10 s.
        public var writeTimeout: TimeInterval = 10
        /// The most connections open at once.
        ///
        /// When they are all taken, the one that has waited longest without a request being handled (idle
        /// between requests, or still sending one) is closed to make room: a newcomer is never refused while such
        /// a connection exists. Only when every connection has a request being handled or a response being
        /// written is the newcomer answered 503 at once (never left hanging).
        ///
        /// Default 1024.
        public var maxConnections = 1024
        /// The most connections one peer address may hold (default: ``maxConnections``, no cap of its own: on
        /// loopback every client is 127.0.0.1, and making room already falls on whoever waits longest).
        ///
        /// Past it the peer's own waiting connections make room first, then it is answered 503.
        public var maxConnectionsPerPeer: Int?

        /// The defaults.
        public init() {}
    }

    /// What the server reports after each response, for logging: no headers and no bodies.
    public struct Completion: Sendable {
        /// The request method, or `-` when the request could not be parsed.
        public let method: String
        /// The request path without the query, or `-`.
        public let path: String
        /// The status sent (0 when the connection was dropped).
        public let status: Int
        /// Time from a complete request to the response written.
        public let duration: TimeInterval
    }

    /// Handles one request.
    ///
    /// Called on a pool thread; may block (other connections are served meanwhile).
    public typealias Handler = @Sendable (HTTPServerRequest) -> HTTPServerResponse

    let configuration: Configuration
    let handler: Handler
    let observer: (@Sendable (Completion) -> Void)?
    /// What other threads share with the loop: the port, whether to stop, finished handlers' responses.
    let shared = Locked(Shared())
    /// Wakes the loop: a byte written to `wakeWrite` makes `wakeRead` readable.
    var wakeRead: Int32 = -1
    var wakeWrite: Int32 = -1
    let loopDone = DispatchSemaphore(value: 0)
    /// Where handlers run: threads of the server's own (a handler may block; Dispatch's shared pool must not).
    let handlers = WorkerPool(maximum: 64, name: "sesame-loopback-handler")

    struct Shared {
        var port = 0
        var started = false
        var stopping = false
        var stopDeadline: UInt64 = 0
        /// Connections pool threads have handed back.
        var returned: [EventLoop.Connection] = []
        /// The loop has ended and closed the wake pipe: nothing may write to it any more.
        var exited = false
    }

    /// Creates a server; call ``start()`` to listen.
    ///
    /// - Parameters:
    ///   - configuration: addresses and limits.
    ///   - observer: called after every response (including the server's own 4xx answers), for logging.
    ///   - handler: answers each request.
    public init(
        configuration: Configuration = Configuration(),
        observer: (@Sendable (Completion) -> Void)? = nil,
        handler: @escaping Handler
    ) {
        self.configuration = configuration
        self.handler = handler
        self.observer = observer
    }

    /// The port the server listens on (after ``start()``).
    public var port: Int { shared.withLock { $0.port } }

    /// Binds, listens and starts serving.
    ///
    /// - Returns: the port (the chosen one when the configuration says 0).
    /// - Throws: ``LoopbackError`` when the address cannot be bound.
    @discardableResult
    public func start() throws -> Int {
        let (listeners, port) = try Socket.listen(host: configuration.host, port: configuration.port, backlog: 512)
        guard let wake = Socket.pipe() else {
            for fd in listeners { close(fd) }
            throw LoopbackError("pipe failed")
        }
        let poller: Poller
        do {
            poller = try Poller()
        } catch {
            for fd in listeners + [wake.read, wake.write] { close(fd) }
            throw error
        }
        (wakeRead, wakeWrite) = wake
        for fd in [wakeRead, wakeWrite] + listeners { Socket.setNonBlocking(fd) }
        shared.withLock {
            $0.port = port
            $0.started = true
        }
        let loop = EventLoop(server: self, poller: poller, listeners: listeners)
        let thread = Thread { loop.run() }
        thread.name = "sesame-loopback-loop"
        thread.start()
        return port
    }

    /// Stops gracefully: no new connections, requests in flight finish and their responses are written, idle
    /// connections close, the port is released.
    ///
    /// Returns when every connection has closed (or after `timeout`, when the rest are cut).
    public func stop(timeout: TimeInterval = 10) {
        let wasRunning = shared.withLock { shared -> Bool in
            guard shared.started, !shared.stopping else { return false }
            shared.stopping = true
            shared.stopDeadline = DispatchTime.now().uptimeNanoseconds + EventLoop.nanoseconds(timeout)
            return true
        }
        guard wasRunning else { return }
        wake()
        _ = loopDone.wait(timeout: .now() + max(0, timeout) + 1)
        handlers.shutdown()
    }

    deinit { stop(timeout: 1) }

    /// Makes the loop look at ``Shared`` again (a byte on the wake pipe, unless the loop has ended and closed it).
    func wake() {
        shared.withLock { shared in
            guard !shared.exited else { return }
            signalLoop()
        }
    }

    /// Hands a connection back to the loop; false when the loop has ended (the caller closes it then).
    ///
    /// A connection that ended cleanly (``EventLoop/Connection/rearmed``) is watched again here and the loop is
    /// not woken: it takes the connection back before it looks at the connection's next event. Any other wakes it.
    func handBack(_ connection: EventLoop.Connection, poller: Poller) -> Bool {
        shared.withLock { shared in
            guard !shared.exited else { return false }
            shared.returned.append(connection)
            if connection.rearmed {
                poller.watch(connection.fd, read: true, write: false, new: false, oneShot: true)
                #if !canImport(CSesameEpoll) || SESAME_FORCE_POLL
                    // poll(2) takes its set when it starts waiting: wake it to see the re-armed descriptor.
                    signalLoop()
                #endif
            } else {
                signalLoop()
            }
            return true
        }
    }

    /// A byte on the wake pipe; only under `shared`'s lock, while the loop has not exited (it closes the pipe).
    private func signalLoop() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    func report(_ method: String, _ path: String, _ status: Int, _ start: DispatchTime) {
        guard let observer else { return }
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
        observer(Completion(method: method, path: path, status: status, duration: elapsed))
    }
}

/// A value behind a lock (SesameLoopback depends on Foundation only).
final class Locked<Value>: @unchecked Sendable {
    // Every access goes through withLock; the lock is never held while calling user code.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
