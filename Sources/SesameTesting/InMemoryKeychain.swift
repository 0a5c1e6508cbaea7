public import Foundation
public import Sesame

/// An in-memory emulation of the `SecItem` semantics ``KeychainTokenStore`` relies on: items keyed by service,
/// account and access group; add fails on duplicates; update and copy fail when missing; and a locked state
/// that answers `errSecInteractionNotAllowed`.
public final class InMemoryKeychain: KeychainBackend, @unchecked Sendable {
    private struct Key: Hashable {
        let service: String
        let account: String
        let accessGroup: String?
    }

    /// What an item holds besides its key.
    public struct Item: Sendable, Equatable {
        /// The data.
        public var data: Data
        /// Its accessibility.
        public var accessibility: KeychainAccessibility?
        /// Whether an access-control object guards it.
        public var usesAccessControl: Bool
        /// What the user must show to read it.
        public var presence: KeychainPresence.Requirement? = nil
    }

    /// What the emulated user does when a read of a guarded item prompts.
    public enum PresenceAnswer: Sendable {
        /// Authenticates.
        case approve
        /// Cancels the prompt (`errSecUserCanceled`).
        case cancel
        /// Fails to authenticate (`errSecAuthFailed`).
        case fail
    }

    // Touched only under `lock`.
    private let lock = NSLock()
    private var items: [Key: Item] = [:]
    private var locked = false
    private var answer = PresenceAnswer.approve
    private var authenticated = false
    private var promptCount = 0
    private var reasons: [String] = []

    /// An empty, unlocked keychain.
    public init() {}

    /// Simulates a locked device (every call answers `interactionNotAllowed`).
    public func setLocked(_ value: Bool) {
        lock.lock()
        locked = value
        lock.unlock()
    }

    /// What the emulated user answers from now on when a read prompts (approve by default).
    public func setPresenceAnswer(_ value: PresenceAnswer) { withLock { answer = value } }

    /// How many times a read prompted the user, and the reasons shown.
    public var prompts: (count: Int, reasons: [String]) { withLock { (promptCount, reasons) } }

    /// The item for a query's key, for assertions.
    public func item(_ query: KeychainQuery) -> Item? {
        lock.lock()
        defer { lock.unlock() }
        return items[Self.key(query)]
    }

    private static func key(_ query: KeychainQuery) -> Key {
        Key(service: query.service, account: query.account, accessGroup: query.accessGroup)
    }

    private func withLock<R>(_ body: () -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }

    /// `SecItemAdd`.
    public func add(_ query: KeychainQuery) -> KeychainStatus {
        withLock {
            if locked { return .interactionNotAllowed }
            guard let data = query.data else { return .other(-50) }  // errSecParam
            guard items[Self.key(query)] == nil else { return .duplicateItem }
            items[Self.key(query)] = Item(
                data: data, accessibility: query.accessibility, usesAccessControl: query.usesAccessControl,
                presence: query.presence)
            return .success
        }
    }

    /// `SecItemUpdate`.
    public func update(_ query: KeychainQuery, data: Data) -> KeychainStatus {
        withLock {
            if locked { return .interactionNotAllowed }
            guard items[Self.key(query)] != nil else { return .itemNotFound }
            items[Self.key(query)]?.data = data
            return .success
        }
    }

    /// `SecItemCopyMatching`.
    public func copyData(_ query: KeychainQuery) -> (KeychainStatus, Data?) {
        withLock {
            if locked { return (.interactionNotAllowed, nil) }
            guard let item = items[Self.key(query)] else { return (.itemNotFound, nil) }
            // A guarded item prompts, unless the read reuses an authentication that happened (a context never
            // evaluated cannot be reused).
            if item.presence != nil, !(query.reusesAuthentication && authenticated) {
                promptCount += 1
                reasons.append(query.prompt ?? "")
                switch answer {
                case .approve: authenticated = true
                case .cancel: return (.userCanceled, nil)
                case .fail: return (.authenticationFailed, nil)
                }
            }
            return (.success, query.returnsData ? item.data : nil)
        }
    }

    /// `SecItemDelete`.
    public func delete(_ query: KeychainQuery) -> KeychainStatus {
        withLock {
            if locked { return .interactionNotAllowed }
            return items.removeValue(forKey: Self.key(query)) == nil ? .itemNotFound : .success
        }
    }
}
