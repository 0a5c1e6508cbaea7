import Foundation

/// Collects log lines from any thread, for tests that assert on what was logged.
package final class LineCollector: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var collected: [String] = []

    package init() {}

    package func append(_ line: String) {
        lock.lock()
        collected.append(line)
        lock.unlock()
    }

    package var lines: [String] {
        lock.lock()
        defer { lock.unlock() }
        return collected
    }
}

extension FileHandle {
    /// Reads one line (without its newline) byte by byte, so nothing after it is consumed; what was read when
    /// the other end closes first.
    package func readLineUnbuffered() -> String {
        var line: [UInt8] = []
        while true {
            let byte = readData(ofLength: 1)
            guard let value = byte.first, value != UInt8(ascii: "\n") else { break }
            line.append(value)
        }
        return String(decoding: line, as: UTF8.self)
    }
}
