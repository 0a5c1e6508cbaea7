import Foundation

/// Parses HTTP/1.1 requests (RFC 9112) out of a connection's buffer, one at a time, so pipelined requests are
/// read in order.
///
/// Strict: CRLF line endings, no obsolete line folding, one `Content-Length`, no chunked bodies.
struct HTTPRequestParser {
    struct Limits {
        var maxHeaderBytes: Int
        var maxBodyBytes: Int
    }

    enum Outcome {
        /// The buffer holds no complete request yet.
        case needMore
        /// A request, whether the connection may stay open after it, and how many bytes it used.
        case request(HTTPServerRequest, keepAlive: Bool, consumed: Int)
        /// The request is unacceptable; answer with this status and close.
        case failure(status: Int, message: String)
    }

    /// The first request in `buffer` (a slice of a connection's input: offsets in the outcome are from its start).
    static func parse(_ buffer: ArraySlice<UInt8>, limits: Limits) -> Outcome {
        let base = buffer.startIndex
        guard let headEnd = headerEnd(in: buffer, limit: limits.maxHeaderBytes) else {
            return buffer.count > limits.maxHeaderBytes
                ? .failure(status: 431, message: "the request line and headers exceed \(limits.maxHeaderBytes) bytes")
                : .needMore
        }
        guard headEnd <= limits.maxHeaderBytes else {
            return .failure(status: 431, message: "the request line and headers exceed \(limits.maxHeaderBytes) bytes")
        }
        let lines = split(buffer[base..<(base + headEnd)])
        guard let requestLine = lines.first, let (method, target, version) = parseRequestLine(requestLine) else {
            return .failure(status: 400, message: "malformed request line")
        }
        var headers = HTTPServerHeaders()
        for line in lines.dropFirst() {
            guard let (name, value) = parseField(line) else {
                return .failure(status: 400, message: "malformed header field")
            }
            headers.add(name, value)
        }
        if !headers.values("Transfer-Encoding").isEmpty {
            return .failure(status: 411, message: "chunked request bodies are not supported; send Content-Length")
        }
        let lengths = Set(headers.values("Content-Length"))
        var length = 0
        if let text = lengths.first {
            guard lengths.count == 1, !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                text.count <= 12,
                let value = Int(text)
            else { return .failure(status: 400, message: "invalid Content-Length") }
            length = value
        }
        guard length <= limits.maxBodyBytes else {
            return .failure(status: 413, message: "the body exceeds \(limits.maxBodyBytes) bytes")
        }
        let bodyStart = headEnd + 4
        guard buffer.count - bodyStart >= length else { return .needMore }
        let body = Data(buffer[(base + bodyStart)..<(base + bodyStart + length)])
        let connection = headers["Connection"] ?? ""
        let keepAlive =
            version == "HTTP/1.1"
            ? !connection.containsCaseInsensitive("close") : connection.containsCaseInsensitive("keep-alive")
        return .request(
            HTTPServerRequest(method: method, target: target, headers: headers, body: body),
            keepAlive: keepAlive,
            consumed: bodyStart + length
        )
    }

    /// Whether a head's end (CRLF CRLF) is in `buffer`, looking only from offset `from` on (less the 3 bytes an end
    /// may straddle): a connection trickling its head in is not scanned again from the start on every byte.
    static func hasHeadEnd(_ buffer: ArraySlice<UInt8>, from: Int) -> Bool {
        let start = max(0, from - 3)
        guard buffer.count - start >= 4 else { return false }
        return buffer.withUnsafeBufferPointer { bytes in
            var index = start
            while index + 3 < bytes.count {
                if bytes[index] == 0x0D, bytes[index + 1] == 0x0A, bytes[index + 2] == 0x0D, bytes[index + 3] == 0x0A {
                    return true
                }
                index += 1
            }
            return false
        }
    }

    /// The length of the whole request (head and body) whose head is complete in `buffer`; nil without a head or a
    /// readable `Content-Length` (then the full parse decides).
    static func requestLength(_ buffer: ArraySlice<UInt8>, limits: Limits) -> Int? {
        guard let headEnd = headerEnd(in: buffer, limit: limits.maxHeaderBytes) else { return nil }
        let base = buffer.startIndex
        var length = 0
        for line in split(buffer[base..<(base + headEnd)]).dropFirst() {
            guard let (name, value) = parseField(line), name.lowercased() == "content-length" else { continue }
            guard let value = Int(value), value >= 0, value <= limits.maxBodyBytes else { return nil }
            length = value
        }
        return headEnd + 4 + length
    }

    /// Whether `buffer` holds a whole head that carries `Expect: 100-continue` (its body not yet complete).
    static func expectsContinue(_ buffer: ArraySlice<UInt8>, limits: Limits) -> Bool {
        guard let headEnd = headerEnd(in: buffer, limit: limits.maxHeaderBytes) else { return false }
        let base = buffer.startIndex
        return split(buffer[base..<(base + headEnd)]).dropFirst().contains { line in
            guard let (name, value) = parseField(line) else { return false }
            return name.lowercased() == "expect" && value.lowercased() == "100-continue"
        }
    }

    /// The offset of the CRLF CRLF that ends the head, searched only within `limit + 4` bytes.
    private static func headerEnd(in buffer: ArraySlice<UInt8>, limit: Int) -> Int? {
        let end = min(buffer.count, limit + 4)
        guard end >= 4 else { return nil }
        return buffer.withUnsafeBufferPointer { bytes in
            var index = 0
            while index + 3 < end {
                if bytes[index] == 0x0D, bytes[index + 1] == 0x0A, bytes[index + 2] == 0x0D, bytes[index + 3] == 0x0A {
                    return index
                }
                index += 1
            }
            return nil
        }
    }

    private static func split(_ head: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        var lines: [ArraySlice<UInt8>] = []
        var start = head.startIndex
        var index = head.startIndex
        while index < head.endIndex {
            if head[index] == 0x0D, index + 1 < head.endIndex, head[index + 1] == 0x0A {
                lines.append(head[start..<index])
                index += 2
                start = index
            } else {
                index += 1
            }
        }
        lines.append(head[start..<head.endIndex])
        return lines
    }

    private static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }

    private static func parseRequestLine(_ line: ArraySlice<UInt8>) -> (String, String, String)? {
        let parts = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy(isTokenCharacter),
            parts[1].first == UInt8(ascii: "/"), parts[1].allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else { return nil }
        let version = String(decoding: parts[2], as: UTF8.self)
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else { return nil }
        return (String(decoding: parts[0], as: UTF8.self), String(decoding: parts[1], as: UTF8.self), version)
    }

    private static func parseField(_ line: ArraySlice<UInt8>) -> (String, String)? {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex else { return nil }
        let name = line[line.startIndex..<colon]
        guard name.allSatisfy(isTokenCharacter) else { return nil }
        var value = line[(colon + 1)...]
        guard value.allSatisfy({ $0 == 0x09 || $0 >= 0x20 && $0 != 0x7F }) else { return nil }
        while let first = value.first, first == 0x20 || first == 0x09 { value.removeFirst() }
        while let last = value.last, last == 0x20 || last == 0x09 { value.removeLast() }
        return (String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self))
    }
}
