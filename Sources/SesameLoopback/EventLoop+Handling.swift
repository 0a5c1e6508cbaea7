import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The pool threads' side of the event loop: handling requests and writing their answers.
extension EventLoop {
    /// On a pool thread: answers `request`, writes the answer straight away, and goes on with the next request
    /// already buffered (pipelining) until the input runs dry, the client stops reading, or the connection is to
    /// close; then hands the connection back to the loop (or closes it when the loop has ended).
    static func handle(
        _ connection: Connection, _ first: HTTPServerRequest, keepAlive firstKeepAlive: Bool, server: HTTPServer,
        limits: HTTPRequestParser.Limits, poller: Poller
    ) {
        var (request, keepAlive) = (first, firstKeepAlive)
        // A connection keeps a pool thread for one turn only: at most `turnRequests` requests or `turnNanoseconds`,
        // then it goes back to the loop and waits its turn again behind the others (a client that pipelines or
        // answers at once cannot hold a thread for good).
        let turnStart = DispatchTime.now().uptimeNanoseconds
        var handled = 0
        // A stopped server runs no more handlers: the connection is closed.
        if server.shared.withLock({ $0.exited }) {
            closeSocket(connection.fd)
            return
        }
        while true {
            let start = DispatchTime.now()
            let response = server.handler(request)
            handled += 1
            if response.dropsConnection {
                server.report(request.method, request.path, 0, start)
                connection.dropped = true
                break
            }
            let stopping = server.shared.withLock { $0.stopping }
            let staysOpen = keepAlive && !response.closesConnection && !stopping
            connection.output.append(contentsOf: response.serialized(keepAlive: staysOpen))
            server.report(request.method, request.path, response.status, start)
            connection.served += 1
            if !staysOpen { connection.closeAfterWrite = true }
            let turnLeft =
                handled < Self.turnRequests && DispatchTime.now().uptimeNanoseconds &- turnStart < Self.turnNanoseconds
            // Pipelined requests: their answers are gathered and written together when the input runs dry.
            if turnLeft, !connection.closeAfterWrite, connection.pendingOutput < 64 * 1024,
                let next = connection.takeRequest(limits: limits)
            {
                (request, keepAlive) = next
                continue
            }
            while connection.pendingOutput > 0 {
                guard let sent = Socket.sendSome(connection.fd, connection.output, from: connection.written) else {
                    connection.dropped = true
                    break
                }
                if sent == 0 { break }
                connection.written += sent
            }
            if connection.dropped || connection.pendingOutput > 0 || connection.closeAfterWrite { break }
            connection.output.removeAll(keepingCapacity: connection.output.capacity <= 64 * 1024)
            connection.written = 0
            connection.writeStalledSince = nil
            if !turnLeft { break }  // the loop gives it another turn (a request may be buffered)
            switch HTTPRequestParser.parse(connection.input[connection.inputStart...], limits: limits) {
            case .request(let next, let nextKeepAlive, let consumed):
                connection.consume(consumed)
                (request, keepAlive) = (next, nextKeepAlive)
                continue
            case .needMore:
                // A busy keep-alive client sends its next request right after reading the answer: wait for it a
                // moment here (in the kernel, no CPU), which saves two thread hand-offs per request under load.
                if connection.pendingInput == 0, !connection.peerClosed, !server.handlers.hasWaitingJobs,
                    Self.awaitInput(connection, milliseconds: 1)
                {
                    // Half a request or a malformed one: the loop's to wait for or to answer.
                    guard let next = connection.takeRequest(limits: limits) else { break }
                    (request, keepAlive) = next
                    continue
                }
                // The clean end: everything written, waiting for more. The connection goes back to the loop and
                // its descriptor is watched again from here, without waking the loop.
                let now = DispatchTime.now().uptimeNanoseconds
                if connection.pendingInput == 0 { connection.waitingSince = now }
                connection.requestStarted = connection.pendingInput == 0 ? nil : now
                connection.rearmed = true
            case .failure:
                break  // the loop answers it
            }
            break
        }
        if !server.handBack(connection, poller: poller) { closeSocket(connection.fd) }
    }

    /// The most requests, and time, one connection's turn on a pool thread may take.
    static let turnRequests = 64
    static let turnNanoseconds: UInt64 = 10_000_000

    /// On a pool thread: waits up to `milliseconds` for input on the connection and reads what came (false when
    /// nothing did, or the peer closed: the loop takes it from there).
    private static func awaitInput(_ connection: Connection, milliseconds: Int32) -> Bool {
        var descriptor = pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, milliseconds) == 1 else { return false }
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        var got = false
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(connection.fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                let now = DispatchTime.now().uptimeNanoseconds
                if connection.pendingInput == 0 { connection.requestStarted = now }
                connection.lastRead = now
                connection.input.append(contentsOf: chunk[0..<count])
                got = true
                if count < chunk.count || connection.pendingInput >= 64 * 1024 { break }
                continue
            }
            if count == 0 { connection.peerClosed = true }
            if count < 0, errno == EINTR { continue }
            break
        }
        return got && !connection.peerClosed
    }
}
