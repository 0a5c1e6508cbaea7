import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

extension EventLoop {
    /// One connection's buffers and clocks (uptime nanoseconds).
    ///
    /// Owned by the loop, except while ``handling``: then a pool thread owns it (the loop has stopped watching its
    /// descriptor and touches nothing of it) until it hands it back through ``HTTPServer/handBack(_:)``, whose lock
    /// orders the two.
    final class Connection: @unchecked Sendable {
        let fd: Int32
        let id: UInt64
        let peer: String
        /// What has arrived; requests already taken from it end at `inputStart`.
        var input: [UInt8] = []
        var inputStart = 0
        var output: [UInt8] = []
        var written = 0
        /// A request of this connection is with a handler.
        var handling = false
        /// Requests answered so far.
        var served = 0
        var closeAfterWrite = false
        /// After the output: half-close and drain (an error response must reach a client still sending).
        var lingerAfterWrite = false
        var peerClosed = false
        /// The pool thread watched the descriptor again itself (a clean end: written, waiting for input).
        var rearmed = false
        /// `100 Continue` was sent for the request being received.
        var continued = false
        /// The handler asked for the connection to be dropped, or the peer went away while a pool thread wrote.
        var dropped = false
        /// When it began waiting for its next request: accepted, or its last response written.
        var waitingSince: UInt64
        /// When the first byte of the request being received arrived.
        var requestStarted: UInt64?
        var lastRead: UInt64
        /// When output first could not be written in full (cleared once it all is).
        var writeStalledSince: UInt64?
        /// Draining before the close, until this instant.
        var lingerUntil: UInt64?
        var drained = 0
        var watching = (read: false, write: false)

        init(fd: Int32, id: UInt64, peer: String, now: UInt64) {
            self.fd = fd
            self.id = id
            self.peer = peer
            waitingSince = now
            lastRead = now
        }

        var pendingOutput: Int { output.count - written }
        var pendingInput: Int { input.count - inputStart }

        /// How much of the pending input has been searched for a head's end without finding one.
        var headScanned = 0
        /// The pending input a complete request needs (its head and body), once its head is known; 0 until then.
        var requestBytes = 0
        /// The request being received asked for `100 Continue` (known once its head is).
        var expectsContinue = false

        /// Takes `count` bytes off the front of the input (moving what is left only now and then).
        func consume(_ count: Int) {
            headScanned = 0
            requestBytes = 0
            expectsContinue = false
            inputStart += count
            if inputStart == input.count {
                input.removeAll(keepingCapacity: input.capacity <= 64 * 1024)
                inputStart = 0
            } else if inputStart > 64 * 1024 {
                input.removeFirst(inputStart)
                inputStart = 0
            }
        }

        /// Takes the next whole request off the input, when there is one.
        func takeRequest(limits: HTTPRequestParser.Limits) -> (request: HTTPServerRequest, keepAlive: Bool)? {
            guard
                case .request(let request, let keepAlive, let consumed) = HTTPRequestParser.parse(
                    input[inputStart...], limits: limits)
            else { return nil }
            consume(consumed)
            return (request, keepAlive)
        }

        func dropInput() {
            input = []
            inputStart = 0
            headScanned = 0
            requestBytes = 0
            expectsContinue = false
        }
        /// Neither a request with a handler nor a response on its way: it may be closed to make room.
        var waiting: Bool { !handling && pendingOutput == 0 }

        /// Whether it may be closed to make room at `now`: waiting, or stuck on a client that has not read its
        /// answer for a second.
        func evictable(at now: UInt64) -> Bool {
            waiting || (!handling && writeStalledSince.map { now &- $0 >= 1_000_000_000 } == true)
        }
    }
}
