// The Secure Enclave for DPoP keys: a thin shim over CryptoKit's SecureEnclave.P256.Signing. What to keep, when to
// make a key, how a locked device or a restored backup is handled — all of it is KeychainDPoPKeyStore's portable
// logic, tested on Linux with SesameTesting's EmulatedSecureEnclave; this file only creates, reopens and signs.
#if canImport(CryptoKit) && canImport(Security)
    import CryptoKit
    public import Foundation
    public import Security
    public import Sesame
    public import SesameJOSE

    // @unchecked: SecAccessControl is an immutable CF object, safe to share.
    /// ``HardwareKeyBackend`` over the Secure Enclave: non-exportable P-256 keys; the handle is CryptoKit's
    /// `dataRepresentation` (an encrypted blob only this device's enclave can use).
    public struct SecureEnclaveKeys: HardwareKeyBackend, @unchecked Sendable {
        /// The keys' access control: by default usable after first unlock on this device, with no user prompt
        /// (a refresh in the background must be able to sign).
        private let accessControl: SecAccessControl?

        /// A backend whose keys carry `accessControl` (nil: after first unlock, this device only, no prompt).
        public init(accessControl: SecAccessControl? = nil) { self.accessControl = accessControl }

        /// `SecureEnclave.isAvailable`.
        public var isAvailable: Bool { SecureEnclave.isAvailable }

        /// A new enclave key.
        public func createP256Key() throws -> (key: any DPoPSigningKey, handle: Data) {
            let control: SecAccessControl
            if let accessControl {
                control = accessControl
            } else {
                var error: Unmanaged<CFError>?
                guard
                    let made = SecAccessControlCreateWithFlags(
                        nil, kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly, .privateKeyUsage, &error)
                else { throw error.map { $0.takeRetainedValue() as any Error } ?? CocoaError(.featureUnsupported) }
                control = made
            }
            let key = try SecureEnclave.P256.Signing.PrivateKey(accessControl: control)
            return (try EnclaveKey(key), key.dataRepresentation)
        }

        /// The enclave key behind `handle`; nil when this device's enclave cannot open it.
        public func p256Key(handle: Data) throws -> (any DPoPSigningKey)? {
            // Opening a handle never prompts (signing does), so a handle this enclave refuses is the definitive
            // case: another device's, or a reset enclave.
            guard let key = try? SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: handle) else { return nil }
            return try EnclaveKey(key)
        }

        // @unchecked: the enclave key is an immutable handle; CryptoKit signs with it from any thread.
        private struct EnclaveKey: DPoPSigningKey, @unchecked Sendable {
            let key: SecureEnclave.P256.Signing.PrivateKey
            let publicKey: JWK

            init(_ key: SecureEnclave.P256.Signing.PrivateKey) throws {
                self.key = key
                // x963: 0x04 ‖ x ‖ y.
                let point = [UInt8](key.publicKey.x963Representation)
                let x = Base64URL.encode(point[1..<33])
                let y = Base64URL.encode(point[33..<65])
                publicKey = try JWK(json: #"{"kty":"EC","crv":"P-256","x":"\#(x)","y":"\#(y)"}"#)
            }

            var algorithm: JWSAlgorithm { .es256 }

            /// The raw `R‖S` (CryptoKit's `rawRepresentation`), as JWS wants it.
            func signature(for signingInput: [UInt8]) throws -> [UInt8] {
                [UInt8](try key.signature(for: Data(signingInput)).rawRepresentation)
            }
        }
    }

    extension KeychainDPoPKeyStore {
        /// DPoP keys in the Keychain for `service` (items under `service.dpop`), made in the Secure Enclave when
        /// the device has one.
        ///
        /// - Parameters:
        ///   - service: the same service as the token store's, for instance the bundle identifier.
        ///   - accessGroup: the Keychain access group shared with extensions, if any.
        ///   - secureEnclave: use the Secure Enclave when available (default true).
        /// - Returns: the store.
        public static func keychain(service: String, accessGroup: String? = nil, secureEnclave: Bool = true)
            -> KeychainDPoPKeyStore
        {
            KeychainDPoPKeyStore(
                service: service, accessGroup: accessGroup, backend: SecItemKeychain(),
                hardware: secureEnclave ? SecureEnclaveKeys() : nil)
        }
    }
#endif
