import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A raw TCP client for tests that need to send what URLSession never would.
// @unchecked Sendable: the descriptor never changes, and send/recv on one socket from two threads is safe.
package final class RawClient: @unchecked Sendable {
    package let fd: Int32

    /// Connects to `host:port`, reads giving up after `timeout` seconds.
    ///
    /// A `receiveBuffer` (bytes) fixes the socket's receive buffer before it connects, so that a client that never reads stalls its peer after that much, not
    /// after the megabytes the kernel's autotuning would otherwise take in.
    package init(port: Int, host: String = "127.0.0.1", timeout: Int = 5, receiveBuffer: Int32? = nil) throws {
        let family = host.contains(":") ? AF_INET6 : AF_INET
        // Close-on-exec, so that a child another test spawns meanwhile never keeps this end open.
        #if canImport(Glibc)
            fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
            fd = socket(family, SOCK_STREAM, 0)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        #endif
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        let status: Int32
        if family == AF_INET6 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = in_port_t(UInt16(port).bigEndian)
            inet_pton(AF_INET6, host, &address.sin6_addr)
            status = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr(host)
            status = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        guard status == 0 else {
            close(fd)
            throw RawClientError.connect
        }
        var wait = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    package func send(_ text: String) { send(Array(text.utf8)) }

    package func send(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { buffer in
            #if canImport(Glibc)
                Glibc.send(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL))
            #else
                Darwin.send(fd, buffer.baseAddress, buffer.count, 0)
            #endif
        }
    }

    /// Reads until the server closes the connection (or 5 s pass).
    package func readToEnd() -> String {
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            data.append(contentsOf: chunk[0..<count])
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// Reads until `count` complete responses (by `HTTP/1.1 ` status lines and Content-Length) have arrived.
    package func readResponses(_ count: Int) -> [String] {
        var text = ""
        var chunk = [UInt8](repeating: 0, count: 65536)
        while Self.split(text).count < count {
            let read = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if read <= 0 { break }
            text += String(decoding: chunk[0..<read], as: UTF8.self)
        }
        return Self.split(text)
    }

    package static func split(_ text: String) -> [String] {
        var responses: [String] = []
        var rest = Substring(text)
        while let headEnd = rest.range(of: "\r\n\r\n") {
            let head = rest[..<headEnd.lowerBound]
            let length =
                head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
            let bodyStart = headEnd.upperBound
            guard rest.distance(from: bodyStart, to: rest.endIndex) >= length else { break }
            let end = rest.index(bodyStart, offsetBy: length)
            responses.append(String(rest[..<end]))
            rest = rest[end...]
        }
        return responses
    }
}

package enum RawClientError: Error { case connect }
