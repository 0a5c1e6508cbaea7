import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
    let streamSocketType = Int32(SOCK_STREAM.rawValue)
    let noSignalFlag = Int32(MSG_NOSIGNAL)
#elseif canImport(Musl)
    import Musl
    let streamSocketType = SOCK_STREAM
    let noSignalFlag = MSG_NOSIGNAL
#elseif canImport(Darwin)
    import Darwin
    let streamSocketType = SOCK_STREAM
    let noSignalFlag: Int32 = 0
#endif

/// `listen(2)`, outside `Socket` whose own `listen` would shadow it.
private func posixListen(_ fd: Int32, _ backlog: Int32) -> Int32 { listen(fd, backlog) }

/// Thin wrappers over the POSIX socket calls the server needs, with errors as `LoopbackError`.
enum Socket {
    /// Creates listening sockets for every address `host` resolves to, all on one port (`port` 0 picks one).
    ///
    /// `localhost` means both loopback addresses whatever the resolver says (RFC 8252 §7.3, §8.3).
    static func listen(host: String, port: Int, backlog: Int32) throws -> (descriptors: [Int32], port: Int) {
        guard host.lowercased() == "localhost" else { return try listen(resolving: host, port: port, backlog: backlog) }
        let first = try listen(resolving: "127.0.0.1", port: port, backlog: backlog)
        guard let second = try? listen(resolving: "::1", port: first.port, backlog: backlog) else { return first }
        return (first.descriptors + second.descriptors, first.port)
    }

    private static func listen(resolving host: String, port: Int, backlog: Int32) throws -> (
        descriptors: [Int32], port: Int
    ) {
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = streamSocketType
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, "0", &hints, &list)
        guard status == 0, let list else { throw LoopbackError("cannot resolve host \(host)") }
        defer { freeaddrinfo(list) }
        var descriptors: [Int32] = []
        var chosenPort = port
        var entry: UnsafeMutablePointer<addrinfo>? = list
        var lastError = "no usable address for \(host)"
        while let info = entry {
            entry = info.pointee.ai_next
            guard let address = info.pointee.ai_addr else { continue }
            let fd = socket(info.pointee.ai_family, streamSocketType, 0)
            guard fd >= 0 else { continue }
            var one: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            if info.pointee.ai_family == AF_INET6 {
                setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size))
            }
            setPort(address, chosenPort)
            guard bind(fd, address, info.pointee.ai_addrlen) == 0, posixListen(fd, backlog) == 0 else {
                lastError = "cannot listen on \(host):\(chosenPort): \(String(cString: strerror(errno)))"
                close(fd)
                continue
            }
            if chosenPort == 0 { chosenPort = boundPort(fd) }
            descriptors.append(fd)
        }
        guard !descriptors.isEmpty else { throw LoopbackError(lastError) }
        return (descriptors, chosenPort)
    }

    private static func setPort(_ address: UnsafeMutablePointer<sockaddr>, _ port: Int) {
        let networkPort = in_port_t(UInt16(port).bigEndian)
        if address.pointee.sa_family == sa_family_t(AF_INET) {
            address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_port = networkPort }
        } else {
            address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_port = networkPort }
        }
    }

    private static func boundPort(_ fd: Int32) -> Int {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        let family = storage.ss_family
        return withUnsafePointer(to: &storage) { pointer in
            if family == sa_family_t(AF_INET) {
                return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    Int(UInt16(bigEndian: $0.pointee.sin_port))
                }
            }
            return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                Int(UInt16(bigEndian: $0.pointee.sin6_port))
            }
        }
    }

    /// Sets the receive timeout and disables Nagle's algorithm on an accepted connection.
    static func configure(_ fd: Int32, readTimeout: TimeInterval, writeTimeout: TimeInterval) {
        setReadTimeout(fd, readTimeout)
        var sendTimeout = timeval(seconds: writeTimeout)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &sendTimeout, socklen_t(MemoryLayout<timeval>.size))
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        #if canImport(Darwin)
            setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
    }

    /// Sets how long one `recv` may wait.
    static func setReadTimeout(_ fd: Int32, _ seconds: TimeInterval) {
        var timeout = timeval(seconds: seconds)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// The peer's address as text (for per-peer limits), or "?".
    static func peerAddress(_ fd: Int32) -> String {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        }
        guard status == 0 else { return "?" }
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        let named = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getnameinfo($0, length, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST)
            }
        }
        return named == 0 ? String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "?"
    }

    /// Half-closes and drains what the client is still sending (up to 1 MiB or 1 s), so that closing with unread
    /// input does not reset the connection before the client has read the error response (RFC 9112 §9.6).
    ///
    /// The drain is bounded in total (1 s), not per `recv`: a client trickling a byte at a time cannot hold the
    /// connection open this way.
    static func lingeringClose(_ fd: Int32) {
        shutdown(fd, Int32(SHUT_WR))
        let deadline = DispatchTime.now().uptimeNanoseconds + 1_000_000_000
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var drained = 0
        while drained < 1 << 20 {
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else { break }
            setReadTimeout(fd, Double(deadline - now) / 1e9)
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            drained += count
        }
    }

    /// Writes all of `bytes`.
    ///
    /// Returns false when the peer has gone or has not read for the write timeout.
    /// `deadline` bounds the whole write, not each `send` (a client reading a little now and then cannot stretch
    /// it); the socket's send timeout bounds each call.
    static func write(_ fd: Int32, _ bytes: [UInt8], deadline: DispatchTime? = nil) -> Bool {
        var offset = 0
        while offset < bytes.count {
            if let deadline, DispatchTime.now() >= deadline { return false }
            let sent = bytes.withUnsafeBytes { buffer in
                send(fd, buffer.baseAddress.map { $0 + offset }, bytes.count - offset, noSignalFlag)
            }
            if sent < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += sent
        }
        return true
    }
}

/// An error starting or running the loopback server.
public struct LoopbackError: Error, CustomStringConvertible, Sendable {
    /// What went wrong.
    public let description: String

    /// Creates an error.
    public init(_ description: String) { self.description = description }
}

extension timeval {
    /// A timeval of `seconds` (at least 1 ms, at most a day).
    init(seconds: TimeInterval) {
        let clamped = Swift.min(Swift.max(seconds, 0.001), 86_400)
        // `.init`: tv_usec is Int on Linux and Int32 on Darwin.
        self.init(tv_sec: .init(clamped), tv_usec: .init((clamped - Double(Int(clamped))) * 1_000_000))
    }
}
