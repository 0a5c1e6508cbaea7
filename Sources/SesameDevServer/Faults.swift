public import Foundation
import SesameJOSE

/// Fault injection for a misbehaving backend, parsed from a SPEC string (`sesame serve --faults SPEC`).
///
/// ```
/// SPEC   := RULE (';' RULE)*
/// RULE   := ROUTE ':' ACTION ('@' PROBABILITY)?
/// ROUTE  := '*' | PATH | METHOD ' ' PATH            e.g. /refresh-token, "POST /login"
/// ACTION := 'latency=' DURATION                     e.g. latency=200ms, latency=1.5s (then the request proceeds)
///         | 'status=' CODE                          answer CODE (e.g. 503) with {"error":"server_error"}
///         | 'drop'                                  close the connection without answering
///         | 'unauthorized'                          answer 401 (invalid_token; invalid_grant on /refresh-token)
/// PROBABILITY := a number from 0 to 1 (default 1)
/// ```
///
/// Example: `/refresh-token:status=503@0.3;*:latency=50ms@0.1;/me:unauthorized@0.2`.
public struct FaultPlan: Sendable, CustomStringConvertible {
    /// What a matching rule does.
    public enum Action: Sendable, Equatable {
        case latency(TimeInterval)
        case status(Int)
        case drop
        case unauthorized
    }

    /// One rule of the plan.
    public struct Rule: Sendable {
        /// The method to match, or nil for any.
        public let method: String?
        /// The path to match, or nil for any (`*`).
        public let path: String?
        /// The action.
        public let action: Action
        /// The probability that the rule fires for a matching request.
        public let probability: Double
    }

    /// The rules, applied in order.
    public let rules: [Rule]
    /// The spec as given.
    public let description: String

    /// No faults.
    public init() {
        rules = []
        description = ""
    }

    /// Parses a SPEC.
    ///
    /// - Throws: ``DevServerError`` naming the rule that does not parse.
    public init(spec: String) throws {
        description = spec
        rules = try spec.split(separator: ";").map {
            try Self.parseRule(String($0).trimmingCharacters(in: .whitespaces))
        }
    }

    private static func parseRule(_ text: String) throws -> Rule {
        guard let colon = text.lastIndex(of: ":") else { throw DevServerError("fault rule '\(text)' has no ':'") }
        let route = text[..<colon].trimmingCharacters(in: .whitespaces)
        var actionText = String(text[text.index(after: colon)...])
        var probability = 1.0
        if let at = actionText.firstIndex(of: "@") {
            guard let value = Double(actionText[actionText.index(after: at)...]), (0...1).contains(value) else {
                throw DevServerError("fault rule '\(text)' has a probability outside 0…1")
            }
            probability = value
            actionText = String(actionText[..<at])
        }
        var method: String?
        var path: String? = route
        if route == "*" {
            path = nil
        } else if let space = route.firstIndex(of: " ") {
            method = String(route[..<space]).uppercased()
            path = String(route[route.index(after: space)...])
        }
        guard path == nil || path?.hasPrefix("/") == true else {
            throw DevServerError("fault rule '\(text)': bad route")
        }
        return Rule(
            method: method, path: path, action: try parseAction(actionText, rule: text), probability: probability)
    }

    private static func parseAction(_ text: String, rule: String) throws -> Action {
        if text == "drop" { return .drop }
        if text == "unauthorized" { return .unauthorized }
        if text.hasPrefix("status="), let code = Int(text.dropFirst(7)), (400...599).contains(code) {
            return .status(code)
        }
        if text.hasPrefix("latency=") {
            let value = text.dropFirst(8)
            // Finite and at most a minute: "inf" and "1e300" parse as Doubles and must not hang a worker.
            if value.hasSuffix("ms"), let ms = Double(value.dropLast(2)), ms >= 0, ms <= 60_000 {
                return .latency(ms / 1000)
            }
            if value.hasSuffix("s"), let s = Double(value.dropLast(1)), s >= 0, s <= 60 { return .latency(s) }
        }
        throw DevServerError("fault rule '\(rule)': unknown action '\(text)'")
    }

    /// The actions that fire for a request (each rule rolls its own die).
    func actions(method: String, path: String, dice: FaultDice) -> [Action] {
        rules.filter { rule in
            (rule.method == nil || rule.method == method) && (rule.path == nil || rule.path == path)
                && (rule.probability >= 1 || dice.roll() < rule.probability)
        }.map(\.action)
    }
}

/// The dice of probabilistic faults: the system generator, or a seeded SplitMix64 for reproducible runs.
final class FaultDice: Sendable {
    private let state: LockedValue<UInt64?>

    init(seed: UInt64?) { state = LockedValue(seed) }

    /// A number in 0..<1.
    func roll() -> Double {
        let next: UInt64? = state.withLock { value in
            guard var seed = value else { return nil }
            seed &+= 0x9E37_79B9_7F4A_7C15
            value = seed
            var z = seed
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        guard let next else { return Double.random(in: 0..<1) }
        return Double(next >> 11) / Double(1 << 53)
    }
}
