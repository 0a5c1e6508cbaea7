// RSA keys on Apple platforms through Security's SecKey. The PKCS#1 encodings come from the portable DER.swift.
#if !canImport(CSesameOpenSSL) && canImport(Security)
    import Foundation
    import Security

    /// An RSA `SecKey` and whether it is private.
    struct RSAKey: @unchecked Sendable {
        // SecKey is an immutable, thread-safe CoreFoundation object.
        let key: SecKey
        let isPrivate: Bool

        init(components: JWK.Components) throws(JOSEError) {
            guard case .rsa(let n, let e, let privatePart) = components else {
                throw JOSEError(.invalidKey, "not an RSA key")
            }
            let der = privatePart.map { DER.rsaPrivateKey(n: n, e: e, $0) } ?? DER.rsaPublicKey(n: n, e: e)
            let attributes: [CFString: Any] = [
                kSecAttrKeyType: kSecAttrKeyTypeRSA,
                kSecAttrKeyClass: privatePart == nil ? kSecAttrKeyClassPublic : kSecAttrKeyClassPrivate,
            ]
            var error: Unmanaged<CFError>?
            guard let key = SecKeyCreateWithData(Data(der) as CFData, attributes as CFDictionary, &error) else {
                throw JOSEError(.invalidKey, "Security refused the RSA key")
            }
            self.key = key
            self.isPrivate = privatePart != nil
        }

        private init(key: SecKey, isPrivate: Bool) {
            self.key = key
            self.isPrivate = isPrivate
        }

        static func generate(bits: Int) throws(JOSEError) -> RSAKey {
            let attributes: [CFString: Any] = [kSecAttrKeyType: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits: bits]
            var error: Unmanaged<CFError>?
            guard let key = SecKeyCreateRandomKey(attributes as CFDictionary, &error) else {
                throw JOSEError(.cryptoFailure, "RSA key generation failed")
            }
            return RSAKey(key: key, isPrivate: true)
        }

        /// The JWK components, read back through the key's PKCS#1 external representation.
        func components() throws(JOSEError) -> JWK.Components {
            var error: Unmanaged<CFError>?
            guard let data = SecKeyCopyExternalRepresentation(key, &error) as Data? else {
                throw JOSEError(.cryptoFailure, "could not export the RSA key")
            }
            return try DER.rsaComponents(pkcs1: Array(data))
        }

        private static func algorithm(for algorithm: JWSAlgorithm) -> SecKeyAlgorithm? {
            switch (algorithm.family, algorithm.hash) {
            case (.rsaPKCS1, .sha256): .rsaSignatureMessagePKCS1v15SHA256
            case (.rsaPKCS1, .sha384): .rsaSignatureMessagePKCS1v15SHA384
            case (.rsaPKCS1, .sha512): .rsaSignatureMessagePKCS1v15SHA512
            case (.rsaPSS, .sha256): .rsaSignatureMessagePSSSHA256
            case (.rsaPSS, .sha384): .rsaSignatureMessagePSSSHA384
            case (.rsaPSS, .sha512): .rsaSignatureMessagePSSSHA512
            default: nil
            }
        }

        func verify(signature: Data, message: Data, algorithm: JWSAlgorithm) -> Bool {
            guard let secAlgorithm = Self.algorithm(for: algorithm) else { return false }
            let publicKey = isPrivate ? SecKeyCopyPublicKey(key) : key
            guard let publicKey, SecKeyGetBlockSize(publicKey) == signature.count else { return false }
            var error: Unmanaged<CFError>?
            return SecKeyVerifySignature(publicKey, secAlgorithm, message as CFData, signature as CFData, &error)
        }

        func sign(message: Data, algorithm: JWSAlgorithm) throws(JOSEError) -> [UInt8] {
            guard isPrivate, let secAlgorithm = Self.algorithm(for: algorithm) else {
                throw JOSEError(.cryptoFailure, "this key cannot sign with \(algorithm)")
            }
            var error: Unmanaged<CFError>?
            guard let signature = SecKeyCreateSignature(key, secAlgorithm, message as CFData, &error) as Data? else {
                throw JOSEError(.cryptoFailure, "signing failed")
            }
            return Array(signature)
        }
    }
#elseif !canImport(CSesameOpenSSL) && SESAME_CRYPTO_BACKEND
    import Foundation

    /// RSA in the CryptoKit-on-Linux check build (Scripts/check-apple-backend.sh), which has no Security framework.
    ///
    /// Keys import (the portable component checks run) but cannot sign or verify, and the check reports the RSA
    /// tests it skips. On Apple platforms the `SecKey` shim above is used.
    struct RSAKey: Sendable {
        static let unavailable = JOSEError(
            .unsupportedAlgorithm, "RSA needs Apple's Security framework (not in this build)")
        private let stored: JWK.Components

        init(components: JWK.Components) throws(JOSEError) {
            guard case .rsa = components else { throw JOSEError(.invalidKey, "not an RSA key") }
            stored = components
        }

        static func generate(bits: Int) throws(JOSEError) -> RSAKey { throw unavailable }
        func components() throws(JOSEError) -> JWK.Components { stored }
        func verify(signature: Data, message: Data, algorithm: JWSAlgorithm) -> Bool { false }
        func sign(message: Data, algorithm: JWSAlgorithm) throws(JOSEError) -> [UInt8] { throw Self.unavailable }
    }
#endif
