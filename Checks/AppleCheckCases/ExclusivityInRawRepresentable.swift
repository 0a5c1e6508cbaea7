// expect (iOS): overlapping accesses
// the same in a RawRepresentable struct, after a nested block comment and a regex literal with a quote in it
import Foundation

/* an outer comment /* with a nested one */ "still a comment" struct NotAStruct { */
func hasQuote(_ text: String) -> Bool { text.contains(/"/) }

struct Level: RawRepresentable {
    var rawValue: Int
    let limit = 3
    var items: [Int] = []
    init(rawValue: Int) { self.rawValue = rawValue }
    mutating func trim() { items.removeAll { $0 > limit } }
}
