import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reading a `Host` header on a loopback server: one parser for the dev server and the redirect receiver, so that a
/// page on another name that resolves to 127.0.0.1 (DNS rebinding) is told apart from the browser's own request.
package enum LoopbackHost {
    /// The name in a `Host` header, lowercased, without its port, brackets or a trailing dot; nil when malformed.
    package static func name(inHostHeader header: String) -> String? {
        var name = header.trimmingCharacters(in: .whitespaces).lowercased()
        if name.hasPrefix("[") {
            guard let close = name.firstIndex(of: "]") else { return nil }
            let rest = name[name.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && rest.dropFirst().allSatisfy(\.isASCIIDigit)) else {
                return nil
            }
            name = String(name[name.index(after: name.startIndex)..<close])
        } else if let colon = name.lastIndex(of: ":") {
            guard name[name.index(after: colon)...].allSatisfy(\.isASCIIDigit) else { return nil }
            name = String(name[..<colon])
        }
        if name.hasSuffix(".") { name.removeLast() }
        return name.isEmpty ? nil : name
    }

    /// Whether `name` is `localhost`, `::1`, or an IPv4 literal in 127.0.0.0/8 — parsed as an address, so that
    /// `127.evil.example` and `localhost.evil.example` are names, not loopback.
    package static func isLoopback(_ name: String) -> Bool {
        if name == "localhost" || name == "::1" { return true }
        var address = in_addr()
        return inet_pton(AF_INET, name, &address) == 1 && UInt32(bigEndian: address.s_addr) >> 24 == 127
    }

    /// Whether the request's `Host` headers are exactly one that names a loopback address.
    package static func isLoopback(hostHeaders: [String]) -> Bool {
        guard hostHeaders.count == 1, let name = name(inHostHeader: hostHeaders[0]) else { return false }
        return isLoopback(name)
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
