import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The loop's writing, deadlines and closing.
extension EventLoop {
    func flush(_ connection: Connection, _ now: UInt64) {
        while connection.pendingOutput > 0 {
            guard let sent = Socket.sendSome(connection.fd, connection.output, from: connection.written) else {
                return close(connection)
            }
            if sent == 0 {
                if connection.writeStalledSince == nil { connection.writeStalledSince = now }
                return updateInterest(connection)
            }
            connection.written += sent
        }
        connection.output.removeAll(keepingCapacity: connection.output.capacity <= 64 * 1024)
        connection.written = 0
        connection.writeStalledSince = nil
        if connection.closeAfterWrite, !connection.handling {
            guard connection.lingerAfterWrite else { return close(connection) }
            // Half-close, then drain what the client still sends (up to 1 MiB or 1 s) so that closing with unread
            // input does not reset the connection before it has read the answer (RFC 9112 §9.6).
            shutdown(connection.fd, Int32(SHUT_WR))
            connection.lingerUntil = now + 1_000_000_000
            connection.dropInput()
        }
        updateInterest(connection)
    }

    /// Answers `status` and closes (after a lingering drain).
    func fail(_ connection: Connection, status: Int, message: String, _ now: UInt64) {
        var response = HTTPServerResponse.text(status, message + "\n")
        response.closesConnection = true
        connection.output.append(contentsOf: response.serialized(keepAlive: false))
        server.report("-", "-", status, DispatchTime.now())
        connection.closeAfterWrite = true
        connection.lingerAfterWrite = true
        connection.dropInput()
        flush(connection, now)
    }

    func updateInterest(_ connection: Connection) {
        guard connections[connection.fd] === connection, !connection.handling else { return }
        let read =
            connection.lingerUntil != nil
            || (!connection.peerClosed && !connection.closeAfterWrite && connection.pendingInput < inputCap)
        let write = connection.pendingOutput > 0
        guard read != connection.watching.read || write != connection.watching.write else { return }
        connection.watching = (read, write)
        poller.watch(connection.fd, read: read, write: write, new: false, oneShot: true)
    }

    func close(_ connection: Connection) {
        guard connections[connection.fd] === connection else { return }
        connections[connection.fd] = nil
        poller.forget(connection.fd)
        closeSocket(connection.fd)
    }

    /// Deadlines: a request line, a whole request, silence mid-request, an idle keep-alive, a client not reading,
    /// a lingering drain.
    func sweep(_ now: UInt64) {
        let configuration = server.configuration
        for connection in Array(connections.values) {
            if let until = connection.lingerUntil {
                if now >= until { close(connection) }
                continue
            }
            if connection.handling { continue }
            if let stalled = connection.writeStalledSince {
                if now &- stalled >= Self.nanoseconds(configuration.writeTimeout) { close(connection) }
                continue
            }
            if connection.pendingInput == 0 {
                let limit = connection.served == 0 ? configuration.requestLineTimeout : configuration.readTimeout
                if now &- connection.waitingSince >= Self.nanoseconds(limit) { close(connection) }
                continue
            }
            let started = connection.requestStarted ?? connection.waitingSince
            let lineLate =
                connection.served == 0 && !connection.input[connection.inputStart...].contains(0x0A)
                && now &- started >= Self.nanoseconds(configuration.requestLineTimeout)
            if lineLate || now &- started >= Self.nanoseconds(configuration.requestTimeout)
                || now &- connection.lastRead >= Self.nanoseconds(configuration.readTimeout)
            {
                fail(connection, status: 408, message: "the request was not completed in time", now)
            }
        }
    }

    func beginStopping() {
        guard !stopStarted else { return }
        stopStarted = true
        for fd in listeners {
            poller.forget(fd)
            closeSocket(fd)
        }
        listeners = []
        // Connections with a pool thread are left to it: it sees `stopping` and closes them after the answer.
        for connection in Array(connections.values) where !connection.handling {
            if connection.waiting && connection.lingerUntil == nil {
                close(connection)
            } else {
                connection.closeAfterWrite = true
            }
        }
    }
}
