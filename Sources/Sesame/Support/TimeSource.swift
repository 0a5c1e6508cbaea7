public import Foundation

/// Where the current time comes from: injected so that tests control it.
public protocol TimeSource: Sendable {
    /// The current time.
    var now: Date { get }
}

/// The system clock.
public struct SystemTimeSource: TimeSource {
    /// Creates the system clock.
    public init() {}
    /// `Date()`.
    public var now: Date { Date() }
}
