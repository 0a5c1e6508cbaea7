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
/// One thread serves each connection (bounded by ``Configuration/maxConnections``), reading requests in order,
/// so keep-alive and pipelining work. Every limit answers with its status: 431 for a head over
/// ``Configuration/maxHeaderBytes``, 413 for a body over ``Configuration/maxBodyBytes``, 411 for a chunked body
/// (not supported: send `Content-Length`), 400 for anything malformed, 408 when a client stalls mid-request
/// for longer than ``Configuration/readTimeout``.
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
        /// How long writing a response may block on a client that does not read.
        ///
        /// The connection is closed then.
        ///
        /// Default 10 s.
        public var writeTimeout: TimeInterval = 10
        /// The most connections served at once.
        ///
        /// When they are all taken, the oldest idle keep-alive connection is closed to make room; when none is
        /// idle, the newcomer is answered 503 at once (never left hanging).
        ///
        /// Default 256.
        public var maxConnections = 256
        /// The most connections one peer address may hold (default: three quarters of ``maxConnections``).
        ///
        /// One client cannot take them all: its idle ones make room first, then it is answered 503.
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
    /// Called on the connection's thread; may block.
    public typealias Handler = @Sendable (HTTPServerRequest) -> HTTPServerResponse

    private let configuration: Configuration
    private let handler: Handler
    private let observer: (@Sendable (Completion) -> Void)?
    private let state = Locked(State())
    private let connectionsDone = DispatchGroup()
    private let listenersDone = DispatchGroup()

    private struct Connection {
        /// Busy with a request (not idle between requests).
        var busy = false
        /// When it last became idle (for choosing whom to close when all are taken).
        var idleSince = DispatchTime.now()
        /// The peer address.
        var peer: String
    }

    private struct State {
        var listeners: [Int32] = []
        var port = 0
        var stopping = false
        /// Accepted connections.
        var connections: [Int32: Connection] = [:]
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
    public var port: Int { state.withLock { $0.port } }

    /// Binds, listens and starts accepting connections.
    ///
    /// - Returns: the port (the chosen one when the configuration says 0).
    /// - Throws: ``LoopbackError`` when the address cannot be bound.
    @discardableResult
    public func start() throws -> Int {
        let (descriptors, port) = try Socket.listen(host: configuration.host, port: configuration.port, backlog: 512)
        state.withLock {
            $0.listeners = descriptors
            $0.port = port
        }
        for fd in descriptors {
            listenersDone.enter()
            let thread = Thread { [self] in
                acceptLoop(fd)
                // Only this thread closes its listener, so the descriptor cannot be reused under a later accept().
                close(fd)
                listenersDone.leave()
            }
            thread.name = "sesame-loopback-accept"
            thread.start()
        }
        return port
    }

    /// Stops gracefully: no new connections, requests in flight finish, idle connections close, the port is
    /// released.
    ///
    /// Returns when every connection has closed (or after `timeout`).
    public func stop(timeout: TimeInterval = 10) {
        let listeners = state.withLock { state -> [Int32] in
            guard !state.stopping else { return [] }
            state.stopping = true
            // Wake idle connections while holding the lock: a connection removes itself under the lock before
            // closing, so these descriptors are still ours (not reused by another socket).
            for (fd, connection) in state.connections where !connection.busy { shutdown(fd, Int32(SHUT_RD)) }
            defer { state.listeners = [] }
            return state.listeners
        }
        for fd in listeners { shutdown(fd, Int32(SHUT_RDWR)) }
        _ = listenersDone.wait(timeout: .now() + timeout)
        _ = connectionsDone.wait(timeout: .now() + timeout)
    }

    deinit { stop(timeout: 1) }

    // MARK: Connections

    private enum Admission {
        case serve
        case refuse(String)
    }

    private func acceptLoop(_ listener: Int32) {
        let maximum = max(1, configuration.maxConnections)
        let perPeer = max(1, configuration.maxConnectionsPerPeer ?? max(1, maximum * 3 / 4))
        while true {
            let fd = accept(listener, nil, nil)
            if fd < 0 {
                if state.withLock({ $0.stopping }) { return }
                if errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE {
                    if errno == EMFILE || errno == ENFILE { usleep(10_000) }
                    continue
                }
                return
            }
            let peer = Socket.peerAddress(fd)
            let admission = state.withLock { state -> Admission? in
                guard !state.stopping else { return nil }
                // Make room by closing the longest-idle keep-alive connection (the peer's own when the peer is at
                // its cap); the descriptor is still ours while the lock is held. Refuse only when none is idle.
                func evictIdle(_ candidates: [Int32: Connection]) -> Bool {
                    guard
                        let (idle, _) = candidates.filter({ !$0.value.busy })
                            .min(by: { $0.value.idleSince < $1.value.idleSince })
                    else { return false }
                    shutdown(idle, Int32(SHUT_RD))
                    state.connections[idle]?.busy = true  // not chosen again while it closes
                    state.connections[idle]?.peer = "closing"
                    return true
                }
                let own = state.connections.filter { $0.value.peer == peer }
                if own.count >= perPeer, !evictIdle(own) { return .refuse("too many connections from this address") }
                if state.connections.filter({ $0.value.peer != "closing" }).count >= maximum,
                    !evictIdle(state.connections)
                {
                    return .refuse("the server is busy; try again")
                }
                state.connections[fd] = Connection(peer: peer)
                return .serve
            }
            switch admission {
            case nil:
                close(fd)
                return
            case .refuse(let reason)?:
                // Answered at once, never left hanging in the backlog (a short write timeout bounds it).
                Socket.configure(fd, readTimeout: 1, writeTimeout: 1)
                var response = HTTPServerResponse.text(503, reason + "\n")
                response.headers.set("Retry-After", "1")
                _ = Socket.write(fd, response.serialized(keepAlive: false))
                report("-", "-", 503, DispatchTime.now())
                close(fd)
            case .serve?:
                connectionsDone.enter()
                let thread = Thread { [self] in
                    serve(fd)
                    state.withLock { _ = $0.connections.removeValue(forKey: fd) }
                    close(fd)
                    connectionsDone.leave()
                }
                thread.name = "sesame-loopback-connection"
                thread.start()
            }
        }
    }

    private func serve(_ fd: Int32) {
        Socket.configure(fd, readTimeout: configuration.readTimeout, writeTimeout: configuration.writeTimeout)
        let limits = HTTPRequestParser.Limits(
            maxHeaderBytes: configuration.maxHeaderBytes, maxBodyBytes: configuration.maxBodyBytes)
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        // Responses to pipelined requests are gathered and written together when the buffer runs dry.
        var output: [UInt8] = []
        // When the request being received started: its whole head and body must arrive by the deadline.
        var requestStarted: DispatchTime?
        while true {
            switch HTTPRequestParser.parse(buffer, limits: limits) {
            case .request(let request, let keepAlive, let consumed):
                buffer.removeFirst(consumed)
                requestStarted = buffer.isEmpty ? nil : .now()
                guard respond(to: request, keepAlive: keepAlive, into: &output, fd: fd) else {
                    _ = Socket.write(fd, output)
                    return
                }
                if buffer.isEmpty || output.count > 64 * 1024 {
                    guard Socket.write(fd, output, deadline: writeDeadline()) else { return }
                    output.removeAll(keepingCapacity: true)
                }
            case .failure(let status, let message):
                _ = Socket.write(fd, output)
                fail(fd, status: status, message: message)
                return
            case .needMore:
                if !output.isEmpty {
                    guard Socket.write(fd, output, deadline: writeDeadline()) else { return }
                    output.removeAll(keepingCapacity: true)
                }
                let stopping = state.withLock { state -> Bool in
                    if buffer.isEmpty, state.connections[fd]?.busy == true {
                        state.connections[fd]?.busy = false
                        state.connections[fd]?.idleSince = .now()
                    }
                    return state.stopping
                }
                if stopping && buffer.isEmpty { return }
                // Idle: the keep-alive timeout. Mid-request: whatever is left of the request's deadline.
                var wait = configuration.readTimeout
                if let requestStarted {
                    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - requestStarted.uptimeNanoseconds) / 1e9
                    wait = configuration.requestTimeout - elapsed
                    if wait <= 0 {
                        fail(fd, status: 408, message: "the request was not completed in time")
                        return
                    }
                }
                Socket.setReadTimeout(fd, min(wait, max(configuration.readTimeout, 0.001)))
                let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count > 0 {
                    if buffer.isEmpty {
                        requestStarted = .now()
                        state.withLock { $0.connections[fd]?.busy = true }
                    }
                    buffer.append(contentsOf: chunk[0..<count])
                    continue
                }
                if count < 0, errno == EINTR { continue }
                if count < 0, errno == EAGAIN || errno == EWOULDBLOCK, !buffer.isEmpty {
                    fail(fd, status: 408, message: "the request was not completed in time")
                }
                return
            }
        }
    }

    private func writeDeadline() -> DispatchTime {
        .now() + .milliseconds(Int(max(0.001, configuration.writeTimeout) * 1000))
    }

    /// Answers one request into `output`; false when the connection must close after writing it.
    private func respond(to request: HTTPServerRequest, keepAlive: Bool, into output: inout [UInt8], fd: Int32) -> Bool
    {
        state.withLock { $0.connections[fd]?.busy = true }
        let start = DispatchTime.now()
        let response = handler(request)
        if response.dropsConnection {
            report(request.method, request.path, 0, start)
            return false
        }
        let stopping = state.withLock { $0.stopping }
        let staysOpen = keepAlive && !response.closesConnection && !stopping
        output.append(contentsOf: response.serialized(keepAlive: staysOpen))
        report(request.method, request.path, response.status, start)
        return staysOpen
    }

    private func fail(_ fd: Int32, status: Int, message: String) {
        let start = DispatchTime.now()
        var response = HTTPServerResponse.text(status, message + "\n")
        response.closesConnection = true
        _ = Socket.write(fd, response.serialized(keepAlive: false))
        report("-", "-", status, start)
        Socket.lingeringClose(fd)
    }

    private func report(_ method: String, _ path: String, _ status: Int, _ start: DispatchTime) {
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
