import Foundation

/// A value behind a lock: the one place SesameJOSE keeps shared mutable state (STYLE.md §4).
///
/// `@unchecked Sendable` is sound because every access goes through `withLock`, and the lock is never held
/// across an `await` or while calling user code.
package final class LockedValue<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    package init(_ value: Value) { self.value = value }

    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
