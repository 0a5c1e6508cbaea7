import Foundation
import SesameJOSE
import SesameLoopback

/// Password checks for `/login`, the sign-in form and the device page: one path, under a per-account back-off
/// with a bucket of its own for a browser where the account signed in before.
extension DevServer {
    /// What a password check found.
    enum PasswordCheck {
        case user(DevStore.User)
        case wrong
        /// The account is in back-off (``PasswordBackOff``): try again in this many seconds; nothing was checked.
        case backOff(Int64)
    }

    /// Checks `password` for `email` (normalized), under the account's back-off.
    ///
    /// A browser where this account signed in before (its `sesame_known` cookie, see ``knownBrowserCookie(for:)``)
    /// has a back-off bucket of its own: someone guessing the account's password elsewhere does not keep its owner
    /// out (OWASP's "device cookie").
    func checkPassword(email: String, password: String, request: HTTPServerRequest? = nil) -> PasswordCheck {
        // No account has an empty password: refused without counting against the account (an empty form is a
        // slip, not a guess).
        // Nor do attempts that cannot be right and are never hashed (no plausible email, a password over 1 KiB):
        // counting them would let anyone churn the failure table for free.
        guard !password.isEmpty, password.utf8.count <= 1024, Self.isPlausible(email: email) else { return .wrong }
        let time = now
        let bucket = request.flatMap { knownBrowser($0, email: email) }.map { "known \($0) \(email)" } ?? email
        if let wait = state.withLock({ $0.passwordBackOff.admit(bucket, now: time) }) { return .backOff(wait) }
        state.withLock { $0.counters.passwordChecks += 1 }
        guard let user = verifyPassword(email: email, password: password) else {
            state.withLock { $0.passwordBackOff.failed(bucket, now: time) }
            return .wrong
        }
        state.withLock { $0.passwordBackOff.succeeded(bucket) }
        return .user(user)
    }

    static let knownCookie = "sesame_known"

    /// The `Set-Cookie` values that mark this browser as one where `email` signed in (30 days): a random tag and
    /// its MAC with the account under this run's form secret.
    func knownBrowserCookie(for email: String) -> [String] {
        let tag = Base64URL.encode(JOSECrypto.randomBytes(16))
        return setCookie(Self.knownCookie, tag + "." + knownBrowserMAC(tag: tag, email: email), maxAge: 30 * 86400)
    }

    /// The tag of a valid `sesame_known` cookie for `email` in `request`, or nil.
    private func knownBrowser(_ request: HTTPServerRequest, email: String) -> String? {
        guard let value = cookie(Self.knownCookie, in: request) else { return nil }
        let parts = value.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].utf8.count == 22, parts[0].utf8.allSatisfy(AuthorizationRequest.isBase64URL)
        else { return nil }
        let tag = String(parts[0])
        let expected = knownBrowserMAC(tag: tag, email: email)
        return ConstantTime.equals(Array(expected.utf8), Array(parts[1].utf8)) ? tag : nil
    }

    private func knownBrowserMAC(tag: String, email: String) -> String {
        Base64URL.encode(JOSECrypto.hmac(Array("known\n\(tag)\n\(email)".utf8), key: formSecret, algorithm: .hs256))
    }

    /// The user whose password this is, or nil; as slow for an unknown email as for a wrong password.
    private func verifyPassword(email: String, password: String) -> DevStore.User? {
        guard Self.isPlausible(email: email), password.utf8.count <= 1024 else { return nil }
        let record = try? store.passwordRecord(email: email)
        let hash = hashPassword(
            password, salt: record?.salt ?? Self.unknownUserSalt,
            iterations: record?.iterations ?? configuration.passwordIterations)
        guard let record, ConstantTime.equals(hash, record.hash) else { return nil }
        return record.user
    }

    static let unknownUserSalt = [UInt8](repeating: 0xA5, count: 16)
}
