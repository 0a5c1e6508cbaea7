import Foundation

/// SHA-2 digests, HMAC and secure random bytes from the platform's cryptography (libcrypto on Linux,
/// CryptoKit on Apple platforms).
public enum JOSECrypto {
    /// SHA-256 of `bytes`.
    public static func sha256(_ bytes: some Collection<UInt8>) -> [UInt8] {
        withBytes(bytes) { BackingDigest.digest($0, .sha256) }
    }

    /// SHA-384 of `bytes`.
    public static func sha384(_ bytes: some Collection<UInt8>) -> [UInt8] {
        withBytes(bytes) { BackingDigest.digest($0, .sha384) }
    }

    /// SHA-512 of `bytes`.
    public static func sha512(_ bytes: some Collection<UInt8>) -> [UInt8] {
        withBytes(bytes) { BackingDigest.digest($0, .sha512) }
    }

    /// HMAC of `bytes` under `key` with the hash of an HMAC algorithm (HS256, HS384, HS512).
    public static func hmac(_ bytes: some Collection<UInt8>, key: [UInt8], algorithm: JWSAlgorithm) -> [UInt8] {
        precondition(algorithm.isSymmetric, "HMAC needs an HS* algorithm")
        return withBytes(bytes) { BackingDigest.hmac(key: key, message: $0, algorithm.hash) }
    }

    /// `count` bytes from the system's cryptographically secure random generator.
    public static func randomBytes(_ count: Int) -> [UInt8] {
        BackingDigest.randomBytes(count)
    }

    /// PBKDF2-HMAC-SHA256 (RFC 8018 §5.2), for password hashing.
    ///
    /// - Parameters:
    ///   - password: the password's bytes.
    ///   - salt: a per-password random salt (16 bytes or more).
    ///   - iterations: the work factor.
    ///   - length: the output length in bytes.
    /// - Returns: the derived key.
    public static func pbkdf2SHA256(password: [UInt8], salt: [UInt8], iterations: Int, length: Int = 32) -> [UInt8] {
        BackingDigest.pbkdf2SHA256(password: password, salt: salt, iterations: iterations, length: length)
    }

    package static func hmac(_ message: UnsafeRawBufferPointer, key: [UInt8], hash: JWSAlgorithm.Hash) -> [UInt8] {
        BackingDigest.hmac(key: key, message: message, hash)
    }

    private static func withBytes<R>(_ bytes: some Collection<UInt8>, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        if let result = bytes.withContiguousStorageIfAvailable({ body(UnsafeRawBufferPointer($0)) }) { return result }
        return Array(bytes).withUnsafeBytes(body)
    }
}

#if canImport(CSesameOpenSSL)
    typealias BackingDigest = OpenSSLDigest
#endif

extension JOSECrypto {
    /// Whether this build's backend has RSA: false only in the CryptoKit-on-Linux check build
    /// (Scripts/check-apple-backend.sh), which has no Security framework.
    package static let supportsRSA: Bool = {
        #if SESAME_CRYPTO_BACKEND && !canImport(Security) && !canImport(CSesameOpenSSL)
            false
        #else
            true
        #endif
    }()
}
