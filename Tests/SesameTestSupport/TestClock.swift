package import Foundation

/// A clock the test moves (the dev server's `clock`, a client's time source), so expiry tests do not sleep.
// @unchecked Sendable: `current` is only touched under `lock`.
package final class TestClock: @unchecked Sendable {
    private let lock = NSLock()
    private var current = Date()

    package init() {}

    package var now: Date { lock.withLock { current } }

    package func advance(by seconds: TimeInterval) { lock.withLock { current += seconds } }
}
