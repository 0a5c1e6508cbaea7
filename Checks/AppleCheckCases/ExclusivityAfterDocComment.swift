// expect (iOS): overlapping accesses
// a closure reading self inside a mutating call, in a struct whose doc comment ends with a period
import Foundation

/// Failures in a window.
struct FailureWindow {
    var stamp: Date?
    let limit = 3
    var items: [Int] = []
    mutating func trim() { items.removeAll { $0 > limit } }
}
