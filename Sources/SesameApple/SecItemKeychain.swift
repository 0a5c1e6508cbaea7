// The Keychain shim: maps the portable KeychainQuery one-to-one onto SecItem calls. All logic (upsert, status
// mapping, locked-device handling) lives in Sesame's KeychainTokenStore and is tested on Linux.
#if canImport(Security)
    public import Foundation
    public import Sesame
    public import Security
    #if canImport(LocalAuthentication)
        import LocalAuthentication
    #endif

    // @unchecked: SecAccessControl is an immutable CF object, safe to share (the SDK does not mark it Sendable).
    /// ``KeychainBackend`` over Security's `SecItem` functions (generic-password items).
    public struct SecItemKeychain: KeychainBackend, @unchecked Sendable {
        private let accessControl: SecAccessControl?
        #if canImport(LocalAuthentication)
            /// The context the user last authenticated in, reused by reads that may (``KeychainPresence/Policy``).
            private let context = AuthenticationContextBox()
        #endif

        /// Creates the backend; `accessControl` guards items added with ``KeychainQuery/usesAccessControl`` that
        /// name no ``KeychainQuery/presence`` (one that does gets an access control made from it).
        public init(accessControl: SecAccessControl? = nil) { self.accessControl = accessControl }

        /// The access control for `presence`: readable only while a passcode is set, on this device, by it.
        private static func accessControl(for presence: KeychainPresence.Requirement) -> SecAccessControl? {
            let flags: SecAccessControlCreateFlags =
                switch presence {
                case .userPresence: .userPresence
                case .biometryCurrentSet: .biometryCurrentSet
                case .devicePasscode: .devicePasscode
                }
            return SecAccessControlCreateWithFlags(
                nil, kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly, flags, nil)
        }

        private func base(_ query: KeychainQuery) -> [CFString: Any] {
            var dictionary: [CFString: Any] = [
                kSecClass: kSecClassGenericPassword, kSecAttrService: query.service, kSecAttrAccount: query.account,
                kSecUseDataProtectionKeychain: true,
            ]
            if let group = query.accessGroup { dictionary[kSecAttrAccessGroup] = group }
            return dictionary
        }

        private static func accessible(_ value: KeychainAccessibility) -> CFString {
            switch value {
            case .afterFirstUnlockThisDeviceOnly: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            case .whenUnlockedThisDeviceOnly: kSecAttrAccessibleWhenUnlockedThisDeviceOnly
            case .whenPasscodeSetThisDeviceOnly: kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly
            }
        }

        /// `SecItemAdd`.
        public func add(_ query: KeychainQuery) -> KeychainStatus {
            var dictionary = base(query)
            dictionary[kSecValueData] = query.data
            if let presence = query.presence, let control = Self.accessControl(for: presence) {
                dictionary[kSecAttrAccessControl] = control
            } else if query.usesAccessControl, let accessControl {
                dictionary[kSecAttrAccessControl] = accessControl
            } else if let accessibility = query.accessibility {
                dictionary[kSecAttrAccessible] = Self.accessible(accessibility)
            }
            return KeychainStatus(osStatus: SecItemAdd(dictionary as CFDictionary, nil))
        }

        /// `SecItemUpdate`.
        public func update(_ query: KeychainQuery, data: Data) -> KeychainStatus {
            KeychainStatus(
                osStatus: SecItemUpdate(base(query) as CFDictionary, [kSecValueData: data] as CFDictionary))
        }

        /// `SecItemCopyMatching` with `kSecReturnData`.
        public func copyData(_ query: KeychainQuery) -> (KeychainStatus, Data?) {
            var dictionary = base(query)
            dictionary[kSecReturnData] = true
            dictionary[kSecMatchLimit] = kSecMatchLimitOne
            #if canImport(LocalAuthentication)
                if let prompt = query.prompt {
                    dictionary[kSecUseAuthenticationContext] = context.context(
                        reusing: query.reusesAuthentication, reason: prompt)
                }
            #endif
            var result: CFTypeRef?
            let status = KeychainStatus(osStatus: SecItemCopyMatching(dictionary as CFDictionary, &result))
            return (status, result as? Data)
        }

        /// `SecItemDelete`.
        public func delete(_ query: KeychainQuery) -> KeychainStatus {
            KeychainStatus(osStatus: SecItemDelete(base(query) as CFDictionary))
        }
    }

    #if canImport(LocalAuthentication)
        // @unchecked: the context is touched only under the lock.
        /// The last authentication context: reused when the policy allows, else replaced by a fresh one (which
        /// prompts).
        final class AuthenticationContextBox: @unchecked Sendable {
            private let lock = NSLock()
            private var current: LAContext?

            func context(reusing: Bool, reason: String) -> LAContext {
                lock.lock()
                defer { lock.unlock() }
                if reusing, let current { return current }
                current?.invalidate()
                let fresh = LAContext()
                fresh.localizedReason = reason
                current = fresh
                return fresh
            }
        }
    #endif

    extension KeychainTokenStore {
        /// A Keychain store for `service` (generic-password items, after first unlock, this device only).
        ///
        /// - Parameters:
        ///   - service: the items' service.
        ///   - accessGroup: the Keychain access group shared with extensions, if any.
        ///   - appGroup: the app group (`group.…`) whose shared container holds the cross-process refresh lock,
        ///     so that an app and its extensions refresh once between them. Give it whenever `accessGroup` is
        ///     shared; without it (and without `lockDirectory`) there is no cross-process lock.
        ///   - lockDirectory: an explicit folder for the lock files instead of the app group's container.
        ///   - accessibility: when the items can be read.
        ///   - accessControl: an access-control object (biometry, passcode) for new items.
        ///   - presence: what the user must show to read the credentials, and how often they are asked
        ///     (``KeychainPresence``); takes precedence over `accessControl`.
        /// - Returns: the store.
        public static func keychain(
            service: String,
            accessGroup: String? = nil,
            appGroup: String? = nil,
            lockDirectory: URL? = nil,
            accessibility: KeychainAccessibility = .afterFirstUnlockThisDeviceOnly,
            accessControl: SecAccessControl? = nil,
            presence: KeychainPresence? = nil
        ) -> KeychainTokenStore {
            let shared = appGroup.flatMap {
                FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: $0)?
                    .appendingPathComponent("Library/Caches/SesameLocks", isDirectory: true)
            }
            return KeychainTokenStore(
                service: service, accessGroup: accessGroup, accessibility: accessibility,
                usesAccessControl: accessControl != nil, lockDirectory: lockDirectory ?? shared, presence: presence,
                backend: SecItemKeychain(accessControl: accessControl))
        }
    }
#endif
