import Foundation

/// Runs `body` in batches for about `seconds` and returns the best operations per second of three rounds.
func measure(seconds: Double, _ body: () throws -> Void) rethrows -> Double {
    var best = 0.0
    for _ in 0..<3 { best = max(best, try round(seconds: seconds / 3, body)) }
    return best
}

/// Measures two bodies in alternating rounds (so that both see the same machine state) and returns the best
/// rate of each: the fair way to print a ratio between them.
func measurePair(seconds: Double, _ first: () throws -> Void, _ second: () throws -> Void) rethrows -> (Double, Double)
{
    var best = (0.0, 0.0)
    for _ in 0..<6 {
        best.0 = max(best.0, try round(seconds: seconds / 6, first))
        best.1 = max(best.1, try round(seconds: seconds / 6, second))
    }
    return best
}

/// One timed round: operations per second over about `seconds`.
private func round(seconds: Double, _ body: () throws -> Void) rethrows -> Double {
    let clock = ContinuousClock()
    var operations = 0
    var batch = 8
    let start = clock.now
    let deadline = start.advanced(by: .milliseconds(Int(seconds * 1000)))
    while clock.now < deadline {
        for _ in 0..<batch { try body() }
        operations += batch
        batch = min(batch * 2, 4096)
    }
    let elapsed = clock.now - start
    let secondsElapsed = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return Double(operations) / secondsElapsed
}

/// Prints one `name value` line, the format the issue fixes for benchmark output.
func report(_ name: String, _ value: Double) {
    let formatted = value >= 100 ? String(Int(value.rounded())) : String(format: "%.2f", value)
    print("\(name) \(formatted)")
}

/// Prevents the optimiser from discarding a result.
@inline(never)
func blackHole<T>(_ value: T) {
    withExtendedLifetime(value) {}
}
