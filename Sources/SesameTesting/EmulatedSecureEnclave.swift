public import Foundation
public import Sesame
public import SesameJOSE

/// A ``HardwareKeyBackend`` that behaves like the Secure Enclave for tests on any platform: P-256 keys that
/// are reachable only through the handle it returned, and only from this instance (another instance is
/// "another device"), with faults to inject: unavailable hardware, DER-encoded signatures, a failing key.
public final class EmulatedSecureEnclave: HardwareKeyBackend, @unchecked Sendable {
    // `keys` and the switches are only touched under `lock`.
    private let lock = NSLock()
    private var keys: [Data: JWK] = [:]
    private var available: Bool
    private var derSignatures = false
    private var failing = false

    /// An enclave, available unless told otherwise.
    public init(available: Bool = true) { self.available = available }

    /// Whether the device has the hardware.
    public var isAvailable: Bool { lock.withLock { available } }

    /// Makes ``isAvailable`` `value`.
    public func setAvailable(_ value: Bool) { lock.withLock { available = value } }

    /// Makes signatures come back DER-encoded (what `SecKeyCreateSignature` returns), the mistake a shim could make.
    public func setDERSignatures(_ value: Bool) { lock.withLock { derSignatures = value } }

    /// Makes every operation throw.
    public func setFailing(_ value: Bool) { lock.withLock { failing = value } }

    /// How many keys it holds.
    public var keyCount: Int { lock.withLock { keys.count } }

    private struct Failure: Error {}

    /// A new key and a random handle for it.
    public func createP256Key() throws -> (key: any DPoPSigningKey, handle: Data) {
        let key = try JWK.generate(for: .es256)
        let handle = Data(JOSECrypto.randomBytes(32))
        try lock.withLock {
            if failing { throw Failure() }
            keys[handle] = key
        }
        return (EmulatedKey(key: key, enclave: self), handle)
    }

    /// The key behind `handle`, nil for a handle it never made.
    public func p256Key(handle: Data) throws -> (any DPoPSigningKey)? {
        try lock.withLock {
            if failing { throw Failure() }
            return keys[handle].map { EmulatedKey(key: $0, enclave: self) }
        }
    }

    fileprivate func sign(_ input: [UInt8], with key: JWK) throws -> [UInt8] {
        let (fail, der) = lock.withLock { (failing, derSignatures) }
        if fail { throw Failure() }
        guard let backing = key.backing else { throw Failure() }
        let raw = try input.withUnsafeBytes { try backing.sign($0, algorithm: .es256) }
        guard der else { return raw }
        return try raw.withUnsafeBytes { raw in
            guard let encoded = ECDSASignature.der(fromRaw: raw, curve: .p256) else { throw Failure() }
            return encoded
        }
    }

    private struct EmulatedKey: DPoPSigningKey {
        let key: JWK
        let enclave: EmulatedSecureEnclave
        var publicKey: JWK { (try? key.publicKey()) ?? key }
        var algorithm: JWSAlgorithm { .es256 }
        func signature(for signingInput: [UInt8]) throws -> [UInt8] { try enclave.sign(signingInput, with: key) }
    }
}
