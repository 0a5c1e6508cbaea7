package import Foundation

/// A value behind a lock: the one place SesameJOSE keeps shared mutable state (STYLE.md §4).
///
/// `@unchecked Sendable` is sound because every access goes through `withLock`, and the lock is never held
/// across an `await` or while calling user code.
///
/// Inlinable, so that callers in other modules get a version specialized for their value (an unspecialized generic
/// call costs microseconds with cold caches, on every authorized request).
package final class LockedValue<Value>: @unchecked Sendable {
    @usableFromInline let lock = NSLock()
    @usableFromInline var value: Value

    @inlinable package init(_ value: Value) { self.value = value }

    @inlinable package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
