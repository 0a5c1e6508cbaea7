public import Foundation
internal import SesameJOSE

/// A resource's demand for a stronger or more recent sign-in (RFC 9470): a 401 whose `Bearer` (or `DPoP`)
/// challenge says `error="insufficient_user_authentication"`, with the `acr_values` and `max_age` it needs.
///
/// Not a reason to refresh: the token is valid, the sign-in behind it is not enough. ``AuthorizedClient`` throws
/// ``AuthError/Code/stepUpRequired`` carrying it (``AuthError/stepUpChallenge``), or, given a step-up handler
/// (``OIDCAuth/client(for:additionalOrigins:stepUpWith:)``), signs in again with these requirements and retries
/// the call once.
///
/// ```swift
/// do {
///     let report: Report = try await client.get("/reports/2026")
/// } catch let error as AuthError where error.code == .stepUpRequired {
///     guard let challenge = error.stepUpChallenge else { throw error }
///     try await auth.stepUp(challenge, with: agent)  // then call again
/// }
/// ```
public struct StepUpChallenge: Sendable, Hashable, CustomStringConvertible {
    /// The authentication context classes that would satisfy the resource, in its order (any one of them).
    public let acrValues: [String]
    /// How recent the sign-in must be, in seconds.
    public let maxAge: TimeInterval?
    /// The resource's `error_description`, when it sent one.
    public let errorDescription: String?

    /// A challenge with these requirements.
    public init(acrValues: [String] = [], maxAge: TimeInterval? = nil, errorDescription: String? = nil) {
        self.acrValues = acrValues
        self.maxAge = maxAge
        self.errorDescription = errorDescription
    }

    /// The step-up challenge of `response` (catalog STEP-01), or nil when it has none.
    ///
    /// Only a 401 with a `Bearer` or `DPoP` challenge whose `error` is `insufficient_user_authentication` counts.
    /// Values are bounded (10 classes of at most 256 bytes, a `max_age` from 0 to 10 years, else ignored) and
    /// cleaned of control characters: they came from a server.
    public init?(_ response: SesameHTTP.Response) {
        guard response.status == 401 else { return nil }
        guard
            let challenge = response.challenges.first(where: { challenge in
                (challenge.isScheme("Bearer") || challenge.isScheme("DPoP"))
                    && challenge["error"] == "insufficient_user_authentication"
            }),
            // A repeated error, acr_values or max_age makes the challenge ambiguous (which max_age?): not trusted.
            challenge.repeatedParameters.isDisjoint(with: ["error", "acr_values", "max_age"])
        else { return nil }
        let values = (challenge["acr_values"] ?? "").split(separator: " ").prefix(10).map(String.init)
        // RFC 6749's NQCHAR, no space: visible ASCII without a quote or backslash (nothing a message could be
        // made to say with look-alike spaces or quotes).
        acrValues = values.filter { PrintableText.isQuotableWord($0) }
        if let text = challenge["max_age"], let seconds = Int(text), (0...10 * 365 * 86400).contains(seconds) {
            maxAge = TimeInterval(seconds)
        } else {
            maxAge = nil
        }
        errorDescription = challenge["error_description"].map { PrintableText.sanitized($0, limit: 200) }
    }

    /// What the resource asks for, for messages: `acr_values "…", max_age N`.
    public var description: String {
        var parts: [String] = []
        if !acrValues.isEmpty { parts.append("acr_values \"\(acrValues.joined(separator: " "))\"") }
        if let maxAge { parts.append("max_age \(Int(maxAge))") }
        return parts.isEmpty ? "a new sign-in" : parts.joined(separator: ", ")
    }
}
