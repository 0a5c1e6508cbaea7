public import Foundation
import SesameJOSE

/// When a Keychain item can be read (`kSecAttrAccessible`).
public enum KeychainAccessibility: String, Sendable, Hashable {
    /// After the first unlock since boot, on this device only: the default, so background refreshes work and
    /// the item never leaves the device in a backup.
    case afterFirstUnlockThisDeviceOnly
    /// Only while the device is unlocked, on this device only.
    case whenUnlockedThisDeviceOnly
    /// Only while a passcode is set and the device is unlocked, on this device only.
    case whenPasscodeSetThisDeviceOnly
}

/// A Keychain operation's description, built and tested in portable code; the Apple shim maps it one-to-one
/// onto a `SecItem` query dictionary.
public struct KeychainQuery: Sendable, Hashable {
    /// `kSecAttrService`.
    public var service: String
    /// `kSecAttrAccount` (the profile).
    public var account: String
    /// `kSecAttrAccessGroup`, for sharing with app extensions.
    public var accessGroup: String?
    /// `kSecAttrAccessible` (set on add).
    public var accessibility: KeychainAccessibility?
    /// `kSecValueData` (set on add and update).
    public var data: Data?
    /// `kSecReturnData` with `kSecMatchLimitOne` (set on copy).
    public var returnsData = false
    /// Whether an access-control object (biometry, passcode) guards the item (set on add; Apple shim supplies it).
    public var usesAccessControl = false
    /// What the user must show to read the item (set on add: the Apple shim makes the access control from it).
    public var presence: KeychainPresence.Requirement?
    /// The reason shown in the system's prompt (set on copy of a guarded item).
    public var prompt: String?
    /// Whether a copy may reuse the user's last authentication instead of asking again (``KeychainPresence/Policy``).
    public var reusesAuthentication = false

    /// Creates a query for the generic-password item of `service` and `account`.
    public init(service: String, account: String, accessGroup: String? = nil) {
        self.service = service
        self.account = account
        self.accessGroup = accessGroup
    }
}

/// The outcome of a Keychain call, mapped from `OSStatus`.
public enum KeychainStatus: Sendable, Hashable {
    /// `errSecSuccess`.
    case success
    /// `errSecItemNotFound` (-25300).
    case itemNotFound
    /// `errSecDuplicateItem` (-25299).
    case duplicateItem
    /// `errSecInteractionNotAllowed` (-25308): the device is locked or the app is prewarming. Not a sign-out.
    case interactionNotAllowed
    /// `errSecAuthFailed` (-25293): the user did not authenticate.
    case authenticationFailed
    /// `errSecUserCanceled` (-128): the user cancelled the prompt.
    case userCanceled
    /// Anything else.
    case other(Int32)

    /// Maps an `OSStatus`.
    public init(osStatus: Int32) {
        switch osStatus {
        case 0: self = .success
        case -25300: self = .itemNotFound
        case -25299: self = .duplicateItem
        case -25308: self = .interactionNotAllowed
        case -25293: self = .authenticationFailed
        case -128: self = .userCanceled
        default: self = .other(osStatus)
        }
    }
}

/// The four `SecItem` calls, as a seam: `SesameApple` implements it over Security; tests use an in-memory
/// emulation with the same semantics (`SesameTesting.InMemoryKeychain`).
public protocol KeychainBackend: Sendable {
    /// `SecItemAdd`: fails with ``KeychainStatus/duplicateItem`` when the item exists.
    func add(_ query: KeychainQuery) -> KeychainStatus
    /// `SecItemUpdate`: replaces the data of the matching item.
    func update(_ query: KeychainQuery, data: Data) -> KeychainStatus
    /// `SecItemCopyMatching` returning the data of one item.
    func copyData(_ query: KeychainQuery) -> (KeychainStatus, Data?)
    /// `SecItemDelete`.
    func delete(_ query: KeychainQuery) -> KeychainStatus
}

extension KeychainBackend {
    /// Adds the item of `query` with `data`, or replaces the data of the one that exists (add, then update on
    /// ``KeychainStatus/duplicateItem``): the one write path of the Keychain stores.
    public func upsert(
        _ query: KeychainQuery, data: Data, accessibility: KeychainAccessibility, usesAccessControl: Bool = false
    ) -> KeychainStatus {
        var item = query
        item.data = data
        item.accessibility = accessibility
        item.usesAccessControl = usesAccessControl || query.presence != nil
        let status = add(item)
        return status == .duplicateItem ? update(query, data: data) : status
    }
}

/// A ``TokenStore`` on the Keychain: one generic-password item per profile, accessible after first unlock on
/// this device only by default.
///
/// Saving is an upsert (add, and on a duplicate, update). A locked device (`errSecInteractionNotAllowed`) is
/// ``AuthError/Code/storeUnavailable`` — try later — and never looks like "signed out".
///
/// With a `lockDirectory` (for an app and its extensions: a folder in the app group's shared container),
/// processes sharing the items refresh one at a time through a ``ProfileLock``; without one there is no
/// cross-process lock, which is right only when a single process uses the items.
///
/// An item an earlier release wrote is read and rewritten in the current format in place when the store has a lock
/// directory (else, and for a presence-guarded item so the user is not asked twice, at its next write); one a newer
/// release wrote is left as it is (``AuthError/Code/storeUnavailable``).
public struct KeychainTokenStore: TokenStore {
    /// The item's service.
    public let service: String
    /// The access group, for sharing with extensions.
    public let accessGroup: String?
    /// When the item can be read.
    public let accessibility: KeychainAccessibility
    /// Whether the Apple shim attaches an access-control object.
    public let usesAccessControl: Bool
    /// The cross-process lock, when a lock directory was given.
    public let lock: ProfileLock?
    /// What the user must show to read the credentials, and how often (nil: nothing).
    public let presence: KeychainPresence?
    private let backend: any KeychainBackend
    /// When the user last authenticated for this store (``KeychainPresence/Policy``), and the clock.
    private let lastAuthentication = LockedValue<Date?>(nil)
    private let now: @Sendable () -> Date

    /// Creates a store over a backend.
    public init(
        service: String,
        accessGroup: String? = nil,
        accessibility: KeychainAccessibility = .afterFirstUnlockThisDeviceOnly,
        usesAccessControl: Bool = false,
        lockDirectory: URL? = nil,
        presence: KeychainPresence? = nil,
        backend: any KeychainBackend,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.presence = presence
        self.now = now
        self.lock = lockDirectory.map { ProfileLock(directory: $0) }
        self.service = service
        self.accessGroup = accessGroup
        self.accessibility = accessibility
        self.usesAccessControl = usesAccessControl
        self.backend = backend
    }

    /// The query for one profile's item.
    public func query(profile: String) -> KeychainQuery {
        var query = KeychainQuery(service: service, account: profile, accessGroup: accessGroup)
        query.presence = presence?.requirement
        return query
    }

    /// Reads the profile's item.
    public func load(profile: String) async throws -> TokenSet? {
        var query = query(profile: profile)
        query.returnsData = true
        let time = now()
        if let presence {
            query.prompt = presence.prompt
            query.reusesAuthentication = presence.mayReuse(since: lastAuthentication.withLock { $0 }, now: time)
        }
        let (status, data) = backend.copyData(query)
        switch status {
        case .success:
            // A read of a guarded item that prompted starts the policy's period.
            if presence != nil, !query.reusesAuthentication { lastAuthentication.withLock { $0 = time } }
            guard let data else { return nil }
            let tokens: TokenSet
            let format: Int
            do {
                (tokens, format) = try StoredFormat.decodeTokens(data, from: "the Keychain item")
            } catch let error as AuthError {
                throw error  // a newer release's item: left exactly as it is
            } catch {
                throw AuthError(.storeCorrupt, "the Keychain item is unreadable; it was left in place")
            }
            // A guarded item is migrated at its next write instead: reading it again would prompt the user.
            if format < StoredFormat.tokens, presence == nil {
                await StoredFormat.migrate(profile: profile, lock: lock) {
                    var again = self.query(profile: profile)
                    again.returnsData = true
                    guard case (.success, let still?) = self.backend.copyData(again), still == data else { return }
                    try await self.save(tokens, profile: profile)
                }
            }
            return tokens
        case .itemNotFound: return nil
        default: throw Self.error(status, "read")
        }
    }

    /// Adds or updates the profile's item.
    public func save(_ tokens: TokenSet, profile: String) async throws {
        let data = try StoredFormat.encode(tokens)
        let status = backend.upsert(
            query(profile: profile), data: data, accessibility: accessibility, usesAccessControl: usesAccessControl)
        guard status == .success else { throw Self.error(status, "save") }
    }

    /// Deletes the profile's item.
    public func delete(profile: String) async throws {
        let status = backend.delete(query(profile: profile))
        guard status == .success || status == .itemNotFound else { throw Self.error(status, "delete") }
    }

    /// Holds the profile's ``ProfileLock`` while `body` runs (no lock without a lock directory).
    ///
    /// - Throws: as ``ProfileLock/withLock(profile:_:)``.
    public func withExclusiveAccess<Result: Sendable>(
        profile: String,
        _ body: @Sendable () async throws -> Result
    ) async throws -> Result {
        guard let lock else { return try await body() }
        return try await lock.withLock(profile: profile, body)
    }

    static func error(_ status: KeychainStatus, _ operation: String) -> AuthError {
        switch status {
        case .interactionNotAllowed:
            AuthError(.storeUnavailable, "the Keychain is locked (device locked or prewarming); try again later")
        case .authenticationFailed:
            AuthError(.storeUnavailable, "the user did not authenticate to the Keychain")
        case .userCanceled:
            AuthError(.cancelled, "the Keychain prompt was cancelled; the credentials are kept")
        default:
            AuthError(.storeUnavailable, "the Keychain \(operation) failed (\(status))")
        }
    }
}
