public import Foundation

#if canImport(CSesameSecret)
    import CSesameSecret
#endif

/// A ``TokenStore`` in the Linux desktop keyring (GNOME Keyring, KWallet) through the freedesktop Secret Service.
///
/// libsecret is loaded at run time, so the package builds without it. Where there is no session bus, no keyring,
/// or no libsecret, every call throws ``AuthError/Code/storeUnavailable`` with the reason — the store never falls
/// back to something weaker on its own (use ``FileTokenStore`` explicitly for that).
///
/// Processes sharing the keyring refresh one at a time through a ``ProfileLock`` in `lockDirectory`. An item an
/// earlier release wrote is read and rewritten in the current format in place; one a newer release wrote is left as
/// it is (``AuthError/Code/storeUnavailable``).
public struct SecretServiceTokenStore: TokenStore {
    /// The `service` attribute of the stored items.
    public let service: String
    /// The cross-process lock.
    public let lock: ProfileLock

    /// Creates a store whose items carry `service` (and the profile as `account`).
    ///
    /// - Parameters:
    ///   - service: the items' `service` attribute.
    ///   - lockDirectory: where the per-profile lock files live (default ``ProfileLock/defaultDirectory``);
    ///     every process that shares the items must use the same one.
    public init(service: String = "dev.sesame", lockDirectory: URL = ProfileLock.defaultDirectory) {
        self.service = service
        self.lock = ProfileLock(directory: lockDirectory)
    }

    /// Holds the profile's ``ProfileLock`` while `body` runs.
    ///
    /// - Throws: as ``ProfileLock/withLock(profile:_:)``.
    public func withExclusiveAccess<Result: Sendable>(
        profile: String,
        _ body: @Sendable () async throws -> Result
    ) async throws -> Result {
        try await lock.withLock(profile: profile, body)
    }

    /// Whether a keyring answers right now: libsecret is installed, a session bus is set, and a lookup works.
    public static var isAvailable: Bool {
        #if canImport(CSesameSecret)
            guard csesame_secret_available() != 0,
                ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"]?.isEmpty == false
            else { return false }
            var failed: Int32 = 0
            var error = [CChar](repeating: 0, count: 256)
            let found = csesame_secret_lookup("dev.sesame.probe", "probe", &failed, &error, error.count)
            csesame_secret_free(found)
            return failed == 0
        #else
            return false
        #endif
    }

    /// Reads the profile's item.
    public func load(profile: String) async throws -> TokenSet? {
        #if canImport(CSesameSecret)
            var failed: Int32 = 0
            var error = [CChar](repeating: 0, count: 256)
            guard let found = csesame_secret_lookup(service, profile, &failed, &error, error.count) else {
                if failed != 0 { throw Self.unavailable(error) }
                return nil
            }
            defer { csesame_secret_free(found) }
            let data = Data(bytes: found, count: strlen(found))
            let tokens: TokenSet
            let format: Int
            do {
                (tokens, format) = try StoredFormat.decodeTokens(data, from: "the keyring item")
            } catch let error as AuthError {
                throw error  // a newer release's item: left exactly as it is
            } catch {
                throw AuthError(.storeCorrupt, "the keyring item is unreadable; it was left in place")
            }
            if format < StoredFormat.tokens {
                await StoredFormat.migrate(profile: profile, lock: lock) {
                    var failed: Int32 = 0
                    var error = [CChar](repeating: 0, count: 256)
                    guard let again = csesame_secret_lookup(self.service, profile, &failed, &error, error.count)
                    else { return }
                    defer { csesame_secret_free(again) }
                    guard Data(bytes: again, count: strlen(again)) == data else { return }
                    try await self.save(tokens, profile: profile)
                }
            }
            return tokens
        #else
            throw AuthError(.storeUnavailable, "the Secret Service is not available on this platform")
        #endif
    }

    /// Stores the profile's item (replacing it).
    public func save(_ tokens: TokenSet, profile: String) async throws {
        #if canImport(CSesameSecret)
            let json = String(decoding: try StoredFormat.encode(tokens), as: UTF8.self)
            var error = [CChar](repeating: 0, count: 256)
            guard
                csesame_secret_store(service, profile, "Sesame credentials (\(profile))", json, &error, error.count)
                    != 0
            else { throw Self.unavailable(error) }
        #else
            throw AuthError(.storeUnavailable, "the Secret Service is not available on this platform")
        #endif
    }

    /// Deletes the profile's item.
    public func delete(profile: String) async throws {
        #if canImport(CSesameSecret)
            var error = [CChar](repeating: 0, count: 256)
            guard csesame_secret_clear(service, profile, &error, error.count) != 0 else {
                throw Self.unavailable(error)
            }
        #else
            throw AuthError(.storeUnavailable, "the Secret Service is not available on this platform")
        #endif
    }

    private static func unavailable(_ error: [CChar]) -> AuthError {
        let message = String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return AuthError(.storeUnavailable, "the keyring is unavailable: \(message)")
    }
}
