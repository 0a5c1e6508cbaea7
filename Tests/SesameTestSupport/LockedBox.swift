import Foundation

/// A value behind a lock, shared between a test and server or helper threads.
package final class LockedBox<Value>: @unchecked Sendable {
    // `stored` is only touched under `lock`.
    private let lock = NSLock()
    private var stored: Value

    package init(_ value: Value) { stored = value }

    package var value: Value {
        get {
            lock.lock()
            defer { lock.unlock() }
            return stored
        }
        set {
            lock.lock()
            stored = newValue
            lock.unlock()
        }
    }

    /// Changes the value in one step under the lock (`value += 1` from two threads is two steps).
    package func mutate(_ body: (inout Value) -> Void) {
        lock.lock()
        defer { lock.unlock() }
        body(&stored)
    }
}
