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
