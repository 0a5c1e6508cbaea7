public import Foundation

/// What the user must show before stored credentials are read — user presence, the current biometry set, or the
/// device passcode — and how often they are asked (Auth0's `BiometricPolicy` is the model).
///
/// ```swift
/// let store = KeychainTokenStore.keychain(
///     service: "com.example.app",
///     presence: KeychainPresence(.biometryCurrentSet, policy: .every(300), prompt: "Unlock your account"))
/// ```
///
/// A cancelled prompt is ``AuthError/Code/cancelled`` — the credentials are kept and nothing is signed out — and a
/// refresh that needed the prompt fails the same way, leaving the session as it was. Writes never prompt (the
/// Keychain asks only to read). On Linux, the Secret Service keyring has no per-item prompt: the login keyring is
/// unlocked with the session, and a locked one answers ``AuthError/Code/storeUnavailable``.
public struct KeychainPresence: Sendable, Hashable {
    /// What unlocks the item.
    public enum Requirement: Sendable, Hashable {
        /// Biometry or the passcode (`userPresence`).
        case userPresence
        /// Biometry as enrolled when the item was saved: adding a fingerprint or a face makes it unreadable
        /// (`biometryCurrentSet`), so sign in again.
        case biometryCurrentSet
        /// The device passcode (`devicePasscode`).
        case devicePasscode
    }

    /// How often the user is asked.
    public enum Policy: Sendable, Hashable {
        /// On every read.
        case always
        /// Once while the store lives (once per launch, for a store made at launch).
        case oncePerLaunch
        /// Once, then not again for this many seconds.
        case every(TimeInterval)
    }

    /// What unlocks the item.
    public var requirement: Requirement
    /// How often the user is asked.
    public var policy: Policy
    /// Why, in the system's prompt.
    public var prompt: String

    /// A requirement, asked as `policy` says, with `prompt` as the reason shown.
    public init(_ requirement: Requirement, policy: Policy = .always, prompt: String) {
        self.requirement = requirement
        self.policy = policy
        self.prompt = prompt
    }

    /// Whether a read now may reuse the authentication of `last` (nil: the user has not authenticated yet).
    func mayReuse(since last: Date?, now: Date) -> Bool {
        guard let last else { return false }
        switch policy {
        case .always: return false
        case .oncePerLaunch: return true
        case .every(let seconds): return seconds.isFinite && now.timeIntervalSince(last) < seconds && now >= last
        }
    }
}
