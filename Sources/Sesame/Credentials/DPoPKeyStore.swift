public import Foundation
public import SesameJOSE

/// Where a profile's DPoP key lives (RFC 9449): the refresh token of a public client is bound to it, so it must
/// outlive the process exactly as long as the tokens do.
///
/// A store that cannot be read right now (a locked device) throws ``AuthError/Code/storeUnavailable``; it never
/// answers "no key" for that, because a new key would orphan the stored tokens.
public protocol DPoPKeyStore: Sendable {
    /// The profile's key, or nil when there is none (never made, deleted, or unusable on this device).
    ///
    /// - Throws: ``AuthError`` — ``AuthError/Code/storeUnavailable`` (try later), ``AuthError/Code/storeCorrupt``.
    func key(profile: String) async throws -> DPoPSigner?
    /// A new key for the profile, replacing any other.
    ///
    /// - Throws: ``AuthError`` — ``AuthError/Code/storeUnavailable``, ``AuthError/Code/configuration`` for an
    ///   algorithm the store cannot make.
    func createKey(profile: String, algorithm: JWSAlgorithm) async throws -> DPoPSigner
    /// Deletes the profile's key (nothing when there is none).
    func deleteKey(profile: String) async throws
}

/// A ``DPoPKeyStore`` and the profile whose key it holds.
public struct DPoPKeySource: Sendable {
    /// The store.
    public let store: any DPoPKeyStore
    /// The profile.
    public let profile: String

    /// Names the profile's key in `store`.
    public init(store: any DPoPKeyStore, profile: String) {
        self.store = store
        self.profile = profile
    }
}

extension DPoPKeyStore {
    /// The profile's key, or a new one when it has none.
    ///
    /// A new key with stored DPoP tokens means those tokens are unusable: the session reports
    /// ``AuthError/Code/dpopKeyMismatch`` (sign in again) without sending anything.
    ///
    /// - Throws: as ``key(profile:)`` and ``createKey(profile:algorithm:)``; never a new key when the store is
    ///   unavailable.
    public func keyCreatingIfNeeded(profile: String, algorithm: JWSAlgorithm = .es256) async throws -> DPoPSigner {
        if let key = try await key(profile: profile) { return key }
        return try await createKey(profile: profile, algorithm: algorithm)
    }
}

/// DPoP keys in memory, for tests and for apps whose tokens do not outlive the process either.
public actor InMemoryDPoPKeyStore: DPoPKeyStore {
    private var keys: [String: DPoPSigner] = [:]

    /// An empty store.
    public init() {}

    /// The profile's key.
    public func key(profile: String) -> DPoPSigner? { keys[profile] }

    /// A new software key.
    public func createKey(profile: String, algorithm: JWSAlgorithm) throws -> DPoPSigner {
        let signer = try Self.softwareKey(algorithm)
        keys[profile] = signer
        return signer
    }

    /// Forgets the profile's key.
    public func deleteKey(profile: String) { keys[profile] = nil }

    static func softwareKey(_ algorithm: JWSAlgorithm) throws -> DPoPSigner {
        guard !algorithm.isSymmetric else {
            throw AuthError(.configuration, "a DPoP key needs an asymmetric algorithm, not \(algorithm.name)")
        }
        do {
            return try DPoPSigner(key: try JWK.generate(for: algorithm))
        } catch {
            throw AuthError(.configuration, "could not make a \(algorithm.name) DPoP key")
        }
    }
}

/// Keys held by hardware that never exports them — the Secure Enclave — as a seam: `SesameApple`'s
/// `SecureEnclaveKeys` implements it over CryptoKit; the logic around it is ``KeychainDPoPKeyStore``'s.
public protocol HardwareKeyBackend: Sendable {
    /// Whether this device has the hardware.
    var isAvailable: Bool { get }
    /// A new non-exportable P-256 key and the opaque handle to keep for it (an encrypted blob only this device's
    /// hardware can use; not a secret by itself, but kept in the Keychain all the same).
    func createP256Key() throws -> (key: any DPoPSigningKey, handle: Data)
    /// The key behind `handle`; nil only when this device can never use it (another device's, or the hardware
    /// was reset). Throw for anything that may pass (a cancelled prompt, a busy enclave): the store then reports
    /// ``AuthError/Code/storeUnavailable`` instead of replacing the key.
    func p256Key(handle: Data) throws -> (any DPoPSigningKey)?
}

/// DPoP keys in the Keychain: in the Secure Enclave when the device has one (ES256, the key never leaves it;
/// the Keychain item holds its handle), else a software key in the item itself; one item per profile, after
/// first unlock and on this device only by default, so background refreshes work and no backup carries it.
///
/// A locked device is ``AuthError/Code/storeUnavailable`` (try later); an unreadable item is
/// ``AuthError/Code/storeCorrupt`` and is left in place; a Secure Enclave handle this device cannot use (a
/// restored backup, a reset enclave) counts as no key — the session then asks to sign in again.
public struct KeychainDPoPKeyStore: DPoPKeyStore {
    /// The items' service: the token store's service with `.dpop` appended, so that no profile name can collide
    /// with a token item.
    public let service: String
    /// The access group, for sharing with extensions.
    public let accessGroup: String?
    /// When the items can be read.
    public let accessibility: KeychainAccessibility
    private let backend: any KeychainBackend
    private let hardware: (any HardwareKeyBackend)?

    /// A store over `backend`; `hardware` (the Secure Enclave) makes the ES256 keys when it is available.
    public init(
        service: String, accessGroup: String? = nil,
        accessibility: KeychainAccessibility = .afterFirstUnlockThisDeviceOnly, backend: any KeychainBackend,
        hardware: (any HardwareKeyBackend)? = nil
    ) {
        self.service = service + ".dpop"
        self.accessGroup = accessGroup
        self.accessibility = accessibility
        self.backend = backend
        self.hardware = hardware
    }

    /// What the item holds.
    private struct Item: Codable {
        var version = 1
        /// `secure-enclave` (``handle``) or `jwk` (``jwk``).
        var kind: String
        var handle: Data?
        var jwk: String?
    }

    private func query(_ profile: String) -> KeychainQuery {
        KeychainQuery(service: service, account: profile, accessGroup: accessGroup)
    }

    /// The profile's key.
    public func key(profile: String) async throws -> DPoPSigner? {
        var query = query(profile)
        query.returnsData = true
        let (status, data) = backend.copyData(query)
        switch status {
        case .success: break
        case .itemNotFound: return nil
        default: throw KeychainTokenStore.error(status, "read the DPoP key")
        }
        let corrupt = AuthError(.storeCorrupt, "the DPoP key's Keychain item is unreadable; it was left in place")
        guard let data, let value = try? JOSEValue.parse(data) else { throw corrupt }
        // The version first (1 is this release's): a newer release's item, of whatever shape, is left as it is.
        _ = try StoredFormat.version(value["version"] ?? .integer(0), at: "the DPoP key's Keychain item", reads: 1)
        guard let item = try? JSONDecoder().decode(Item.self, from: data) else { throw corrupt }
        switch item.kind {
        case "secure-enclave":
            guard let handle = item.handle else {
                throw AuthError(.storeCorrupt, "the DPoP key's Keychain item has no Secure Enclave handle")
            }
            // No enclave, or one that does not know the handle: the key is gone for good (another device, a reset
            // enclave), and so are the tokens bound to it. Any other failure is no reason to replace the key.
            guard let hardware, hardware.isAvailable else { return nil }
            let key: (any DPoPSigningKey)?
            do {
                key = try hardware.p256Key(handle: handle)
            } catch {
                throw AuthError(.storeUnavailable, "the Secure Enclave could not open the DPoP key; try again later")
            }
            guard let key else { return nil }
            do {
                return try DPoPSigner(signingKey: key, checkingSignature: false)  // checked when it was made
            } catch {
                throw AuthError(.storeCorrupt, "the Secure Enclave key does not fit the DPoP key's Keychain item")
            }
        case "jwk":
            guard let text = item.jwk, let key = try? JWK(json: text), key.isPrivate,
                let signer = try? DPoPSigner(key: key)
            else { throw AuthError(.storeCorrupt, "the DPoP key's Keychain item holds no usable private key") }
            return signer
        default:
            throw AuthError(.storeCorrupt, "the DPoP key's Keychain item is of an unknown kind")
        }
    }

    /// A new key: in the Secure Enclave for ES256 when available, else in software.
    public func createKey(profile: String, algorithm: JWSAlgorithm) async throws -> DPoPSigner {
        let signer: DPoPSigner
        let item: Item
        if algorithm == .es256, let hardware, hardware.isAvailable {
            do {
                let (key, handle) = try hardware.createP256Key()
                signer = try DPoPSigner(signingKey: key)
                item = Item(kind: "secure-enclave", handle: handle)
            } catch {
                throw AuthError(.storeUnavailable, "the Secure Enclave could not make a DPoP key; try again later")
            }
        } else {
            let key: JWK
            do {
                guard !algorithm.isSymmetric else { throw JOSEError(.algorithmNotAllowed, "symmetric") }
                key = try JWK.generate(for: algorithm)
                signer = try DPoPSigner(key: key)
            } catch {
                throw AuthError(.configuration, "could not make a \(algorithm.name) DPoP key")
            }
            item = Item(kind: "jwk", jwk: key.jsonValue(includingPrivate: true).jsonString)
        }
        let status = backend.upsert(query(profile), data: try JSONEncoder().encode(item), accessibility: accessibility)
        guard status == .success else { throw KeychainTokenStore.error(status, "store the DPoP key") }
        return signer
    }

    /// Deletes the profile's key item.
    public func deleteKey(profile: String) async throws {
        let status = backend.delete(query(profile))
        guard status == .success || status == .itemNotFound else {
            throw KeychainTokenStore.error(status, "delete the DPoP key")
        }
    }
}
