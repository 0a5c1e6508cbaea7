import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `sleep 30`, started by `posix_spawn` with no file actions — as an app starting a browser with `system(3)` or a
/// plain spawn would: it inherits every descriptor not marked close-on-exec.
package struct InheritingChild: Sendable {
    package let pid: Int32

    package init() throws {
        var pid: pid_t = 0
        let arguments: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sleep"), strdup("30"), nil]
        defer {
            for argument in arguments { free(argument) }
        }
        let environment: [UnsafeMutablePointer<CChar>?] = [nil]
        let status = posix_spawn(&pid, "/bin/sleep", nil, nil, arguments, environment)
        guard status == 0 else { throw POSIXError(POSIXErrorCode(rawValue: status) ?? .EIO) }
        self.pid = pid
    }

    /// What each of the child's descriptors names (`socket:[INODE]` for a socket), read from `/proc` (Linux).
    ///
    /// Never empty where `/proc` can be read: the child has its standard input, output and error.
    package func descriptorNames() -> Set<String> {
        let folder = "/proc/\(pid)/fd"
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        return Set(entries.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: folder + "/" + $0) })
    }

    /// Kills and reaps the child.
    package func end() {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }
}

#if os(Linux)
    /// This process's IPv4 sockets whose local port is `localPort` (the listener and accepted connections of a server
    /// on 127.0.0.1) or whose peer's port is `peerPort` (clients of that server), with the `socket:[INODE]` name
    /// `/proc` gives each. (IPv4 only: a server of the parallel run on `::1` may have the same port number.)
    package func socketDescriptors(localPort: Int? = nil, peerPort: Int? = nil) -> [(fd: Int32, name: String)] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return entries.compactMap { entry -> (fd: Int32, name: String)? in
            guard let fd = Int32(entry),
                let name = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + entry),
                name.hasPrefix("socket:")
            else { return nil }
            if let localPort, port(of: fd, peer: false) == localPort { return (fd, name) }
            if let peerPort, port(of: fd, peer: true) == peerPort { return (fd, name) }
            return nil
        }
    }

    /// The local or peer port of socket `fd`, or nil.
    private func port(of fd: Int32, peer: Bool) -> Int? {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                peer ? getpeername(fd, $0, &length) : getsockname(fd, $0, &length)
            }
        }
        guard named == 0 else { return nil }
        let family = Int32(address.ss_family)
        return withUnsafePointer(to: &address) { pointer -> Int? in
            if family == AF_INET {
                return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    Int(UInt16(bigEndian: $0.pointee.sin_port))
                }
            }
            return nil
        }
    }
#endif
