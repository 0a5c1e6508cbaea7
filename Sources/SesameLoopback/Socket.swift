import Dispatch
import Foundation

#if canImport(CSesameEpoll)
    import CSesameEpoll
#endif

// Every descriptor is close-on-exec (set atomically at creation on Linux, right after it elsewhere): a program an app
// starts while a server runs — a browser opened for the redirect — must not keep the listening socket (the port
// stays bound, and connections queue that nobody accepts once the server stopped) nor a connection (its client never
// sees the end). A process that forks without exec still inherits them all.
#if canImport(Glibc)
    import Glibc
    let streamSocketType = Int32(SOCK_STREAM.rawValue)
    let closeOnExecFlag = Int32(SOCK_CLOEXEC.rawValue)
    let noSignalFlag = Int32(MSG_NOSIGNAL)
#elseif canImport(Musl)
    import Musl
    let streamSocketType = SOCK_STREAM
    let closeOnExecFlag = SOCK_CLOEXEC
    let noSignalFlag = MSG_NOSIGNAL
#elseif canImport(Darwin)
    import Darwin
    let streamSocketType = SOCK_STREAM
    let closeOnExecFlag: Int32 = 0  // none: fcntl(2) right after socket(2)
    let noSignalFlag: Int32 = 0
#endif

/// `listen(2)`, outside `Socket` whose own `listen` would shadow it.
private func posixListen(_ fd: Int32, _ backlog: Int32) -> Int32 { listen(fd, backlog) }

#if !canImport(CSesameEpoll)
    /// `accept(2)` and `pipe(2)`, outside `Socket` whose own would shadow them (where there is no `accept4`).
    private func posixAccept(_ fd: Int32) -> Int32 { accept(fd, nil, nil) }
    private func posixPipe(_ ends: inout [Int32]) -> Int32 { pipe(&ends) }
#endif

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
            let fd = socket(info.pointee.ai_family, streamSocketType | closeOnExecFlag, 0)
            guard fd >= 0 else { continue }
            if closeOnExecFlag == 0 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
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

    /// Accepts a connection on `listener`, close-on-exec: the descriptor, or -1 with `errno` set.
    static func accept(_ listener: Int32) -> Int32 {
        #if canImport(CSesameEpoll)
            return csesame_accept(listener)
        #else
            let fd = posixAccept(listener)
            if fd >= 0 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            return fd
        #endif
    }

    /// A pipe, both ends close-on-exec: (read, write), or nil with `errno` set.
    static func pipe() -> (read: Int32, write: Int32)? {
        var ends: [Int32] = [0, 0]
        #if canImport(CSesameEpoll)
            guard csesame_pipe(&ends) == 0 else { return nil }
        #else
            guard posixPipe(&ends) == 0 else { return nil }
            for fd in ends { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        #endif
        return (ends[0], ends[1])
    }

    /// Makes `fd` non-blocking.
    static func setNonBlocking(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
    }

    /// Disables Nagle's algorithm (and SIGPIPE, where that is a socket option) on an accepted connection.
    static func configureAccepted(_ fd: Int32) {
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        // A bounded send buffer: on loopback the kernel's autotuning grows it to megabytes per connection, which a
        // client that never reads fills before the write timeout can start (1,024 such clients would pin gigabytes
        // of kernel memory). 256 KiB still carries any answer of this server at loopback speed.
        var size = Int32(sendBufferBytes)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        #if canImport(Darwin)
            setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
    }

    /// The send buffer of each accepted connection.
    static let sendBufferBytes = 256 * 1024

    /// Sends what a non-blocking socket takes now of `bytes` from `offset`: the count (0 when it is full), or nil
    /// when the peer has gone.
    static func sendSome(_ fd: Int32, _ bytes: [UInt8], from offset: Int) -> Int? {
        guard offset < bytes.count else { return 0 }
        while true {
            let sent = bytes.withUnsafeBytes { buffer in
                send(fd, buffer.baseAddress.map { $0 + offset }, bytes.count - offset, noSignalFlag)
            }
            if sent >= 0 { return sent }
            if errno == EINTR { continue }
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : nil
        }
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
}

/// An error starting or running the loopback server.
public struct LoopbackError: Error, CustomStringConvertible, Sendable {
    /// What went wrong.
    public let description: String

    /// Creates an error.
    public init(_ description: String) { self.description = description }
}
