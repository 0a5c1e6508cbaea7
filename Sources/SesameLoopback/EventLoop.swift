import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The thread that owns every connection of an ``HTTPServer``: accepts, reads, writes and enforces deadlines
/// without ever blocking on a client; only request handlers run elsewhere (on the server's pool).
// @unchecked Sendable: everything but `server` (whose shared state is locked) belongs to the loop's thread.
final class EventLoop: @unchecked Sendable {
    let server: HTTPServer
    let poller: Poller
    var listeners: [Int32]
    var connections: [Int32: Connection] = [:]
    private var nextID: UInt64 = 0
    private var acceptPausedUntil: UInt64?
    private var lastSweep: UInt64 = 0
    var stopStarted = false
    private var chunk = [UInt8](repeating: 0, count: 64 * 1024)
    private let limits: HTTPRequestParser.Limits
    private let maximum: Int
    private let perPeer: Int
    let inputCap: Int

    init(server: HTTPServer, poller: Poller, listeners: [Int32]) {
        self.server = server
        self.poller = poller
        self.listeners = listeners
        let configuration = server.configuration
        limits = .init(maxHeaderBytes: configuration.maxHeaderBytes, maxBodyBytes: configuration.maxBodyBytes)
        // Never more connections than descriptors (less a reserve for the database, logs and listeners): past the
        // limit accept would fail before anything could be made room for.
        var limit = rlimit()
        #if canImport(Glibc)
            let resource = Int32(RLIMIT_NOFILE.rawValue)
        #else
            let resource = RLIMIT_NOFILE
        #endif
        let descriptors = getrlimit(resource, &limit) == 0 ? Int(clamping: limit.rlim_cur) : Int.max
        maximum = max(1, min(configuration.maxConnections, descriptors - 64))
        perPeer = max(1, configuration.maxConnectionsPerPeer ?? maximum)
        inputCap = configuration.maxHeaderBytes + configuration.maxBodyBytes + 64 * 1024
    }

    static func nanoseconds(_ seconds: TimeInterval) -> UInt64 { UInt64(max(0, min(seconds, 86_400)) * 1e9) }

    func run() {
        for fd in listeners { poller.watch(fd, read: true, write: false, new: true) }
        poller.watch(server.wakeRead, read: true, write: false, new: true)
        while true {
            let events = poller.wait(milliseconds: 50)
            var now = DispatchTime.now().uptimeNanoseconds
            // First the connections pool threads are done with: an event below may be for one of them.
            takeBack(now)
            for event in events {
                if event.fd == server.wakeRead {
                    drainWake()
                } else if listeners.contains(event.fd) {
                    acceptAll(event.fd, now)
                } else if let connection = connections[event.fd], !connection.handling {
                    connection.watching = (false, false)  // one shot: watched again only when asked for
                    if event.readable || event.failed { read(connection, now) }
                    if event.writable, connections[event.fd] === connection {
                        flush(connection, now)
                        // Output drained below the mark: the requests held back behind it may go on.
                        if connections[event.fd] === connection { advance(connection, now) }
                    }
                }
            }
            now = DispatchTime.now().uptimeNanoseconds
            let (stopping, deadline) = server.shared.withLock { ($0.stopping, $0.stopDeadline) }
            if stopping { beginStopping() }
            if now &- lastSweep >= 50_000_000 || stopping {
                sweep(now)
                lastSweep = now
            }
            if let paused = acceptPausedUntil, now >= paused {
                acceptPausedUntil = nil
                for fd in listeners { poller.watch(fd, read: true, write: false, new: false) }
            }
            if stopping && (connections.isEmpty || now >= deadline) { break }
        }
        // Pool threads re-arm their connections under this lock, so after it none touches the poller; those handed
        // back since the last look are the loop's to close.
        let late = server.shared.withLock { shared -> [Connection] in
            shared.exited = true
            defer { shared.returned = [] }
            return shared.returned
        }
        for connection in late { connection.handling = false }
        poller.close()
        // A connection with a pool thread is closed by that thread when it finds the loop gone.
        for connection in connections.values where !connection.handling { closeSocket(connection.fd) }
        connections = [:]
        closeDescriptor(server.wakeRead)
        closeDescriptor(server.wakeWrite)
        server.loopDone.signal()
    }

    // MARK: Accepting

    private func acceptAll(_ listener: Int32, _ now: UInt64) {
        while true {
            let fd = Socket.accept(listener)
            if fd < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { return }  // the batch is done
                // Out of descriptors (or memory): make room for the next accept by closing the longest-waiting
                // connection, and stop watching the listeners for a moment instead of spinning on them.
                if errno == EMFILE || errno == ENFILE { _ = evictOne(among: Array(connections.values)) }
                acceptPausedUntil = now + 10_000_000
                for fd in listeners { poller.watch(fd, read: false, write: false, new: false) }
                return
            }
            Socket.setNonBlocking(fd)
            Socket.configureAccepted(fd)
            let peer = Socket.peerAddress(fd)
            let own = connections.values.filter { $0.peer == peer }
            if own.count >= perPeer, !evictOne(among: own) {
                refuse(fd, "too many connections from this address")
                continue
            }
            if connections.count >= maximum, !evictOne(among: Array(connections.values)) {
                refuse(fd, "the server is busy; try again")
                continue
            }
            nextID += 1
            let connection = Connection(fd: fd, id: nextID, peer: peer, now: now)
            connections[fd] = connection
            connection.watching = (true, false)
            poller.watch(fd, read: true, write: false, new: true, oneShot: true)
            // Most clients send their request with the connection: read it now, so that a complete request goes to a
            // handler before later accepts of this batch look for a connection to close.
            connection.watching = (false, false)
            read(connection, now)
        }
    }

    /// Closes the connection among `candidates` that has waited longest without a request with a handler or a
    /// response on its way (draining ones first); false when there is none.
    private func evictOne(among candidates: [Connection]) -> Bool {
        let now = DispatchTime.now().uptimeNanoseconds
        // Longest waiting first; among equals (accepted in one batch) the one accepted first.
        guard
            let victim = candidates.filter({ $0.evictable(at: now) }).min(by: {
                (rank($0), $0.id) < (rank($1), $1.id)
            })
        else { return false }
        if victim.lingerUntil == nil, victim.pendingInput > 0 {
            // Half a request: say why, as far as the socket takes it at once.
            var response = HTTPServerResponse.text(408, "the server needed this connection\n")
            response.closesConnection = true
            _ = Socket.sendSome(victim.fd, response.serialized(keepAlive: false), from: 0)
            server.report("-", "-", 408, DispatchTime.now())
        }
        close(victim)
        return true
    }

    private func rank(_ connection: Connection) -> UInt64 {
        connection.lingerUntil != nil ? 0 : (connection.requestStarted ?? connection.waitingSince)
    }

    private func refuse(_ fd: Int32, _ reason: String) {
        var response = HTTPServerResponse.text(503, reason + "\n")
        response.headers.set("Retry-After", "1")
        _ = Socket.sendSome(fd, response.serialized(keepAlive: false), from: 0)
        server.report("-", "-", 503, DispatchTime.now())
        closeSocket(fd)
    }

    // MARK: Reading and handling

    private func read(_ connection: Connection, _ now: UInt64) {
        let fd = connection.fd
        while connection.lingerUntil != nil || connection.pendingInput < inputCap {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                connection.lastRead = now
                if connection.lingerUntil != nil {
                    connection.drained += count
                    if connection.drained > 1 << 20 { return close(connection) }
                    continue
                }
                if connection.pendingInput == 0 { connection.requestStarted = now }
                connection.input.append(contentsOf: chunk[0..<count])
                continue
            }
            if count == 0 {
                connection.peerClosed = true
                break
            }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { break }
            return close(connection)  // reset or another error: nothing more can be said to it
        }
        if connection.lingerUntil != nil {
            if connection.peerClosed { close(connection) }
            return
        }
        advance(connection, now)
    }

    /// Starts on the next buffered request when the connection is free for it.
    private func advance(_ connection: Connection, _ now: UInt64) {
        guard connections[connection.fd] === connection, !connection.handling, connection.lingerUntil == nil else {
            return updateInterest(connection)
        }
        if connection.closeAfterWrite || connection.pendingOutput > 64 * 1024 { return updateInterest(connection) }
        let pending = connection.input[connection.inputStart...]
        // Parse only when a request can be complete: a head's end seen (searched from where the last search
        // stopped) and, once the head is known, its body all here. A trickle costs a few bytes of search each time.
        var complete = true
        if connection.requestBytes == 0 {
            if connection.pendingInput <= limits.maxHeaderBytes + 4,
                !HTTPRequestParser.hasHeadEnd(pending, from: connection.headScanned)
            {
                connection.headScanned = connection.pendingInput
                complete = false
            } else {
                connection.requestBytes = HTTPRequestParser.requestLength(pending, limits: limits) ?? 0
                // Looked for once, with the head: not again for every byte of the body.
                connection.expectsContinue =
                    connection.requestBytes > 0 && HTTPRequestParser.expectsContinue(pending, limits: limits)
            }
        }
        if complete, connection.requestBytes > connection.pendingInput { complete = false }
        switch complete ? HTTPRequestParser.parse(pending, limits: limits) : .needMore {
        case .request(let request, let keepAlive, let consumed):
            connection.consume(consumed)
            connection.continued = false
            connection.requestStarted = connection.pendingInput == 0 ? nil : now
            dispatch(connection, request, keepAlive: keepAlive)
            return  // the pool thread owns it now
        case .failure(let status, let message):
            fail(connection, status: status, message: message, now)
            return
        case .needMore:
            // A client that asked to be told before sending its body (RFC 9110 §10.1.1) is told, once.
            if !connection.continued, connection.expectsContinue, connection.pendingOutput == 0 {
                connection.continued = true
                connection.output.append(contentsOf: Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
                flush(connection, now)
                guard connections[connection.fd] === connection else { return }
            }
            if connection.peerClosed {
                if connection.pendingOutput == 0 { return close(connection) }
                connection.closeAfterWrite = true
            }
        }
        updateInterest(connection)
    }

    /// Hands the connection to a pool thread for `request` (and whatever complete requests follow it).
    private func dispatch(_ connection: Connection, _ request: HTTPServerRequest, keepAlive: Bool) {
        connection.handling = true
        // Events for it are ignored from now on (one-shot watching reports at most one more); the pool thread
        // watches it again when done.
        let (server, limits, poller) = (server, limits, poller)
        server.handlers.submit {
            Self.handle(connection, request, keepAlive: keepAlive, server: server, limits: limits, poller: poller)
        }
    }

    /// Takes back the connections pool threads have finished with.
    private func takeBack(_ now: UInt64) {
        let returned = server.shared.withLock { shared -> [Connection] in
            defer { shared.returned = [] }
            return shared.returned
        }
        for connection in returned {
            guard connections[connection.fd] === connection else { continue }
            connection.handling = false
            if connection.rearmed && !stopStarted {
                // Written, waiting, watched again by the pool thread: nothing to do.
                connection.rearmed = false
                connection.watching = (true, false)
                continue
            }
            connection.rearmed = false
            connection.watching = (false, false)
            if stopStarted { connection.closeAfterWrite = true }
            if connection.dropped {
                close(connection)
                continue
            }
            if connection.pendingInput == 0 {
                connection.waitingSince = now
                connection.requestStarted = nil
            } else {
                connection.requestStarted = now
            }
            flush(connection, now)
            if connections[connection.fd] === connection { advance(connection, now) }
        }
    }

    private func drainWake() {
        var bytes = [UInt8](repeating: 0, count: 256)
        while bytes.withUnsafeMutableBytes({ readDescriptor(server.wakeRead, $0.baseAddress, $0.count) }) > 0 {}
    }
}

/// `close(2)`, outside the types whose own `close` would shadow it.
func closeDescriptor(_ fd: Int32) {
    _ = close(fd)
}

/// Ends a listener or a connection, then closes its descriptor.
///
/// `close` alone ends neither while another process has a copy of the descriptor — a child between its fork and its
/// exec, one that forked without exec — so the port would stay bound and a client would wait for an end that does
/// not come; `shutdown` ends it for every copy (queued output is still sent). Apple's kernels cannot shut a
/// listener down (ENOTCONN): there a copy kept by a process that forked without exec keeps the port.
func closeSocket(_ fd: Int32) {
    #if canImport(Darwin)
        // Each direction on its own: Darwin refuses SHUT_RDWR, sending no FIN, once the peer has half-closed.
        _ = shutdown(fd, SHUT_WR)
        _ = shutdown(fd, SHUT_RD)
    #else
        _ = shutdown(fd, Int32(SHUT_RDWR))
    #endif
    _ = close(fd)
}

/// `read(2)`, outside the types whose own `read` would shadow it.
func readDescriptor(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(fd, buffer, count)
}
