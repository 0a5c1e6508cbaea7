// The Apple backend: CryptoKit for EC and Ed25519 keys, digests and HMAC; RSA through Security
// (RSAKey+Security.swift). It implements the same package interface as BackingKey+OpenSSL.swift, and every
// encoding it needs (PKCS#1, SubjectPublicKeyInfo, PKCS#8) comes from the portable, Linux-tested DER.swift.
//
// SESAME_CRYPTO_BACKEND compiles this file on Linux against swift-crypto's `Crypto` (CryptoKit's API) for
// Scripts/check-apple-backend.sh; there, PBKDF2 and random bytes come from the portable fallbacks below instead of
// CommonCrypto and Security, and RSA is unavailable (no Security framework).
#if !canImport(CSesameOpenSSL) && ((canImport(CryptoKit) && canImport(Security)) || SESAME_CRYPTO_BACKEND)
    #if canImport(CryptoKit)
        import CryptoKit
    #else
        import Crypto
    #endif
    #if canImport(CommonCrypto)
        import CommonCrypto
    #endif
    #if canImport(Security)
        import Security
    #endif
    import Foundation

    typealias BackingDigest = CryptoKitDigest

    /// A platform key, imported and checked once.
    package final class BackingKey: @unchecked Sendable {
        // CryptoKit keys are immutable values and SecKey is thread-safe, so sharing is sound.
        private enum Storage {
            case p256(P256.Signing.PublicKey, P256.Signing.PrivateKey?)
            case p384(P384.Signing.PublicKey, P384.Signing.PrivateKey?)
            case p521(P521.Signing.PublicKey, P521.Signing.PrivateKey?)
            case ed25519(Curve25519.Signing.PublicKey, Curve25519.Signing.PrivateKey?)
            case rsa(RSAKey)
        }

        private let storage: Storage

        private init(_ storage: Storage) { self.storage = storage }

        package convenience init(components: JWK.Components) throws(JOSEError) {
            do {
                switch components {
                case .rsa:
                    self.init(.rsa(try RSAKey(components: components)))
                case .ec(let curve, let x, let y, let d):
                    self.init(try Self.ecStorage(curve: curve, point: Data(x + y), d: d.map { Data($0) }))
                case .okp(_, let x, let d):
                    let publicKey = try Curve25519.Signing.PublicKey(rawRepresentation: Data(x))
                    let privateKey = try d.map { try Curve25519.Signing.PrivateKey(rawRepresentation: Data($0)) }
                    if let privateKey, privateKey.publicKey.rawRepresentation != publicKey.rawRepresentation {
                        throw JOSEError(.invalidKey, "the Ed25519 public key does not match the private key")
                    }
                    self.init(.ed25519(publicKey, privateKey))
                case .octet:
                    throw JOSEError(.invalidKey, "symmetric keys have no asymmetric backing")
                }
            } catch let error as JOSEError {
                throw error
            } catch {
                throw JOSEError(.invalidKey, "the platform refused the key")
            }
        }

        private static func ecStorage(curve: JWK.Curve, point: Data, d: Data?) throws -> Storage {
            func check(_ derived: Data) throws {
                guard derived == point else {
                    throw JOSEError(.invalidKey, "the EC public key does not match the private key")
                }
            }
            switch curve {
            case .p256:
                let privateKey = try d.map { try P256.Signing.PrivateKey(rawRepresentation: $0) }
                if let privateKey { try check(privateKey.publicKey.rawRepresentation) }
                return .p256(try P256.Signing.PublicKey(rawRepresentation: point), privateKey)
            case .p384:
                let privateKey = try d.map { try P384.Signing.PrivateKey(rawRepresentation: $0) }
                if let privateKey { try check(privateKey.publicKey.rawRepresentation) }
                return .p384(try P384.Signing.PublicKey(rawRepresentation: point), privateKey)
            case .p521:
                let privateKey = try d.map { try P521.Signing.PrivateKey(rawRepresentation: $0) }
                if let privateKey { try check(privateKey.publicKey.rawRepresentation) }
                return .p521(try P521.Signing.PublicKey(rawRepresentation: point), privateKey)
            default:
                throw JOSEError(.invalidKey, "unsupported EC curve")
            }
        }

        // MARK: Generation and export

        package static func generate(for algorithm: JWSAlgorithm) throws(JOSEError) -> (BackingKey, JWK.Components) {
            let key: BackingKey
            switch (algorithm.family, algorithm.requiredCurve) {
            case (.rsaPKCS1, _), (.rsaPSS, _):
                key = BackingKey(.rsa(try RSAKey.generate(bits: 2048)))
            case (.ecdsa, JWK.Curve.p256?):
                let privateKey = P256.Signing.PrivateKey()
                key = BackingKey(.p256(privateKey.publicKey, privateKey))
            case (.ecdsa, JWK.Curve.p384?):
                let privateKey = P384.Signing.PrivateKey()
                key = BackingKey(.p384(privateKey.publicKey, privateKey))
            case (.ecdsa, _):
                let privateKey = P521.Signing.PrivateKey()
                key = BackingKey(.p521(privateKey.publicKey, privateKey))
            case (.eddsa, _):
                let privateKey = Curve25519.Signing.PrivateKey()
                key = BackingKey(.ed25519(privateKey.publicKey, privateKey))
            case (.hmac, _):
                throw JOSEError(.invalidKey, "HMAC keys are generated with JOSECrypto.randomBytes")
            }
            return (key, try key.components())
        }

        package func components() throws(JOSEError) -> JWK.Components {
            func ec(_ curve: JWK.Curve, _ point: Data, _ d: Data?) -> JWK.Components {
                let size = curve.coordinateLength
                return .ec(
                    curve: curve, x: Array(point.prefix(size)), y: Array(point.suffix(size)), d: d.map(Array.init))
            }
            switch storage {
            case .p256(let publicKey, let privateKey):
                return ec(.p256, publicKey.rawRepresentation, privateKey?.rawRepresentation)
            case .p384(let publicKey, let privateKey):
                return ec(.p384, publicKey.rawRepresentation, privateKey?.rawRepresentation)
            case .p521(let publicKey, let privateKey):
                return ec(.p521, publicKey.rawRepresentation, privateKey?.rawRepresentation)
            case .ed25519(let publicKey, let privateKey):
                return .okp(
                    curve: .ed25519, x: Array(publicKey.rawRepresentation),
                    d: privateKey.map { Array($0.rawRepresentation) })
            case .rsa(let key):
                return try key.components()
            }
        }

        package static func fromPEM(_ pem: String) throws(JOSEError) -> BackingKey {
            let isPrivate = pem.contains("PRIVATE KEY")
            let label = isPrivate ? "PRIVATE KEY" : "PUBLIC KEY"
            let der = try DER.der(fromPEM: pem, label: label)
            if var components = try? DER.components(keyInfo: der) {
                if case .okp(let curve, _, let d?) = components,
                    let derived = try? Curve25519.Signing.PrivateKey(rawRepresentation: Data(d))
                {
                    components = .okp(curve: curve, x: Array(derived.publicKey.rawRepresentation), d: d)
                }
                return try BackingKey(components: components)
            }
            if isPrivate {
                if let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) {
                    return BackingKey(.p256(key.publicKey, key))
                }
                if let key = try? P384.Signing.PrivateKey(pemRepresentation: pem) {
                    return BackingKey(.p384(key.publicKey, key))
                }
                if let key = try? P521.Signing.PrivateKey(pemRepresentation: pem) {
                    return BackingKey(.p521(key.publicKey, key))
                }
            } else {
                if let key = try? P256.Signing.PublicKey(pemRepresentation: pem) { return BackingKey(.p256(key, nil)) }
                if let key = try? P384.Signing.PublicKey(pemRepresentation: pem) { return BackingKey(.p384(key, nil)) }
                if let key = try? P521.Signing.PublicKey(pemRepresentation: pem) { return BackingKey(.p521(key, nil)) }
            }
            throw JOSEError(.invalidKey, "not a PEM public key or PKCS#8 private key")
        }

        package func pem(includingPrivate: Bool) throws(JOSEError) -> String {
            switch storage {
            case .p256(let publicKey, let privateKey):
                return try Self.ecPEM(publicKey.pemRepresentation, privateKey?.pemRepresentation, includingPrivate)
            case .p384(let publicKey, let privateKey):
                return try Self.ecPEM(publicKey.pemRepresentation, privateKey?.pemRepresentation, includingPrivate)
            case .p521(let publicKey, let privateKey):
                return try Self.ecPEM(publicKey.pemRepresentation, privateKey?.pemRepresentation, includingPrivate)
            case .ed25519, .rsa:
                let components = try components()
                return includingPrivate
                    ? DER.pem(try DER.privateKeyInfo(components), label: "PRIVATE KEY")
                    : DER.pem(try DER.subjectPublicKeyInfo(components), label: "PUBLIC KEY")
            }
        }

        private static func ecPEM(_ publicPEM: String, _ privatePEM: String?, _ includingPrivate: Bool)
            throws(JOSEError)
            -> String
        {
            guard includingPrivate else { return publicPEM + "\n" }
            guard let privatePEM else { throw JOSEError(.invalidKey, "not a private key") }
            return privatePEM + "\n"
        }

        // MARK: Verification and signing

        package func verify(
            signature: UnsafeRawBufferPointer,
            message: UnsafeRawBufferPointer,
            algorithm: JWSAlgorithm
        ) -> Bool {
            let data = Data(message)
            switch storage {
            case .p256(let key, _):
                guard algorithm == .es256, ECDSASignature.isWellFormed(raw: signature, curve: .p256),
                    let sig = try? P256.Signing.ECDSASignature(rawRepresentation: Data(signature))
                else { return false }
                return key.isValidSignature(sig, for: data)
            case .p384(let key, _):
                guard algorithm == .es384, ECDSASignature.isWellFormed(raw: signature, curve: .p384),
                    let sig = try? P384.Signing.ECDSASignature(rawRepresentation: Data(signature))
                else { return false }
                return key.isValidSignature(sig, for: data)
            case .p521(let key, _):
                guard algorithm == .es512, ECDSASignature.isWellFormed(raw: signature, curve: .p521),
                    let sig = try? P521.Signing.ECDSASignature(rawRepresentation: Data(signature))
                else { return false }
                return key.isValidSignature(sig, for: data)
            case .ed25519(let key, _):
                return algorithm.family == .eddsa && signature.count == 64
                    && key.isValidSignature(Data(signature), for: data)
            case .rsa(let key):
                return key.verify(signature: Data(signature), message: data, algorithm: algorithm)
            }
        }

        package func sign(_ message: UnsafeRawBufferPointer, algorithm: JWSAlgorithm) throws(JOSEError) -> [UInt8] {
            let data = Data(message)
            do {
                switch storage {
                case .p256(_, let key?) where algorithm == .es256:
                    return Array(try key.signature(for: data).rawRepresentation)
                case .p384(_, let key?) where algorithm == .es384:
                    return Array(try key.signature(for: data).rawRepresentation)
                case .p521(_, let key?) where algorithm == .es512:
                    return Array(try key.signature(for: data).rawRepresentation)
                case .ed25519(_, let key?) where algorithm.family == .eddsa:
                    return Array(try key.signature(for: data))
                case .rsa(let key):
                    return try key.sign(message: data, algorithm: algorithm)
                default:
                    throw JOSEError(.cryptoFailure, "this key cannot sign with \(algorithm)")
                }
            } catch let error as JOSEError {
                throw error
            } catch {
                throw JOSEError(.cryptoFailure, "signing failed")
            }
        }
    }

    /// Digests, HMAC and random bytes through CryptoKit and Security.
    enum CryptoKitDigest {
        static func digest(_ message: UnsafeRawBufferPointer, _ hash: JWSAlgorithm.Hash) -> [UInt8] {
            switch hash {
            case .sha256: Array(SHA256.hash(data: message))
            case .sha384: Array(SHA384.hash(data: message))
            case .sha512: Array(SHA512.hash(data: message))
            }
        }

        static func hmac(key: [UInt8], message: UnsafeRawBufferPointer, _ hash: JWSAlgorithm.Hash) -> [UInt8] {
            let symmetricKey = SymmetricKey(data: key)
            switch hash {
            case .sha256: return Array(HMAC<SHA256>.authenticationCode(for: message, using: symmetricKey))
            case .sha384: return Array(HMAC<SHA384>.authenticationCode(for: message, using: symmetricKey))
            case .sha512: return Array(HMAC<SHA512>.authenticationCode(for: message, using: symmetricKey))
            }
        }

        static func pbkdf2SHA256(password: [UInt8], salt: [UInt8], iterations: Int, length: Int) -> [UInt8] {
            #if canImport(CommonCrypto)
                return commonCryptoPBKDF2(password: password, salt: salt, iterations: iterations, length: length)
            #else
                return portablePBKDF2(password: password, salt: salt, iterations: iterations, length: length)
            #endif
        }

        /// RFC 8018 §5.2 over CryptoKit's HMAC-SHA256 (the check build has no CommonCrypto).
        static func portablePBKDF2(password: [UInt8], salt: [UInt8], iterations: Int, length: Int) -> [UInt8] {
            let key = SymmetricKey(data: password)
            var output: [UInt8] = []
            output.reserveCapacity(length)
            var block: UInt32 = 1
            while output.count < length {
                var u = Array(
                    HMAC<SHA256>.authenticationCode(
                        for: salt + withUnsafeBytes(of: block.bigEndian, Array.init), using: key))
                var t = u
                for _ in 1..<max(iterations, 1) {
                    u = Array(HMAC<SHA256>.authenticationCode(for: u, using: key))
                    for index in t.indices { t[index] ^= u[index] }
                }
                output.append(contentsOf: t.prefix(length - output.count))
                block += 1
            }
            return output
        }

        static func randomBytes(_ count: Int) -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: count)
            #if canImport(Security)
                let status = SecRandomCopyBytes(kSecRandomDefault, count, &bytes)
                precondition(status == errSecSuccess, "the system random generator failed")
            #else
                // The system CSPRNG (getrandom on Linux).
                var generator = SystemRandomNumberGenerator()
                for index in bytes.indices { bytes[index] = generator.next() }
            #endif
            return bytes
        }
    }

    #if canImport(CommonCrypto)
        private func commonCryptoPBKDF2(password: [UInt8], salt: [UInt8], iterations: Int, length: Int) -> [UInt8] {
            var output = [UInt8](repeating: 0, count: length)
            let status = password.withUnsafeBufferPointer { passwordBuffer in
                passwordBuffer.withMemoryRebound(to: CChar.self) { passwordChars in
                    CCKeyDerivationPBKDF(
                        CCPBKDFAlgorithm(kCCPBKDF2), passwordChars.baseAddress, passwordChars.count, salt, salt.count,
                        CCPseudoRandomAlgorithm(kCCPRFHmacAlgSHA256), UInt32(iterations), &output, length)
                }
            }
            precondition(status == kCCSuccess, "CommonCrypto could not derive a key")
            return output
        }
    #endif
#endif
