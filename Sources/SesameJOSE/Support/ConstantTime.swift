/// Comparisons whose running time does not depend on where two secrets differ.
public enum ConstantTime {
    /// Whether two byte sequences are equal, in time that depends only on their lengths.
    public static func equals(_ lhs: some Collection<UInt8>, _ rhs: some Collection<UInt8>) -> Bool {
        guard lhs.count == rhs.count else { return false }
        var difference: UInt8 = 0
        for (a, b) in zip(lhs, rhs) { difference |= a ^ b }
        return difference == 0
    }

    /// Whether two strings have the same UTF-8 bytes, compared in constant time.
    public static func equals(_ lhs: String, _ rhs: String) -> Bool {
        equals(Array(lhs.utf8), Array(rhs.utf8))
    }
}
