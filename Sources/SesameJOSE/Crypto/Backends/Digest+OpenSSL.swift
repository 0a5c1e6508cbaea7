#if canImport(CSesameOpenSSL)
    import CSesameOpenSSL
    import Foundation

    /// Message digests and HMAC through libcrypto, with the algorithm objects fetched once.
    package enum OpenSSLDigest {
        private struct Fetched: @unchecked Sendable {
            // Fetched EVP_MD objects are immutable and may be shared between threads.
            let sha256: OpaquePointer?
            let sha384: OpaquePointer?
            let sha512: OpaquePointer?

            init() {
                LibCrypto.prepare()
                sha256 = EVP_MD_fetch(nil, "SHA256", nil)
                sha384 = EVP_MD_fetch(nil, "SHA384", nil)
                sha512 = EVP_MD_fetch(nil, "SHA512", nil)
            }
        }
        private static let fetched = Fetched()

        static func md(_ hash: JWSAlgorithm.Hash) -> OpaquePointer? {
            switch hash {
            case .sha256: fetched.sha256
            case .sha384: fetched.sha384
            case .sha512: fetched.sha512
            }
        }

        static func name(_ hash: JWSAlgorithm.Hash) -> String {
            switch hash {
            case .sha256: "SHA256"
            case .sha384: "SHA384"
            case .sha512: "SHA512"
            }
        }

        /// Hashes into `output` (at least 64 bytes); returns the digest length.
        static func hash(
            _ message: UnsafeRawBufferPointer,
            _ hash: JWSAlgorithm.Hash,
            into output: UnsafeMutablePointer<UInt8>
        ) -> Int? {
            var length: UInt32 = 0
            let ok = EVP_Digest(message.baseAddress, message.count, output, &length, md(hash), nil)
            return ok == 1 ? Int(length) : nil
        }

        package static func digest(_ message: UnsafeRawBufferPointer, _ hash: JWSAlgorithm.Hash) -> [UInt8] {
            var output = [UInt8](repeating: 0, count: 64)
            let length = output.withUnsafeMutableBufferPointer { buffer in
                buffer.baseAddress.flatMap { self.hash(message, hash, into: $0) } ?? 0
            }
            precondition(length > 0, "libcrypto could not compute a digest")
            return Array(output.prefix(length))
        }

        package static func hmac(key: [UInt8], message: UnsafeRawBufferPointer, _ hash: JWSAlgorithm.Hash) -> [UInt8] {
            LibCrypto.prepare()
            var output = [UInt8](repeating: 0, count: 64)
            var length = 0
            let result = key.withUnsafeBytes { keyBuffer in
                EVP_Q_mac(
                    nil, "HMAC", nil, name(hash), nil, keyBuffer.baseAddress, keyBuffer.count, message.baseAddress,
                    message.count, &output, output.count, &length
                )
            }
            precondition(result != nil, "libcrypto could not compute an HMAC")
            return Array(output.prefix(length))
        }

        static func pbkdf2SHA256(password: [UInt8], salt: [UInt8], iterations: Int, length: Int) -> [UInt8] {
            var output = [UInt8](repeating: 0, count: length)
            let result = password.withUnsafeBufferPointer { passwordBuffer in
                passwordBuffer.withMemoryRebound(to: CChar.self) { passwordChars in
                    PKCS5_PBKDF2_HMAC(
                        passwordChars.baseAddress, Int32(passwordChars.count), salt, Int32(salt.count),
                        Int32(iterations),
                        fetched.sha256, Int32(length), &output)
                }
            }
            precondition(result == 1, "libcrypto could not derive a key")
            return output
        }

        package static func randomBytes(_ count: Int) -> [UInt8] {
            LibCrypto.prepare()
            var bytes = [UInt8](repeating: 0, count: count)
            precondition(RAND_bytes(&bytes, Int32(count)) == 1, "the system random generator failed")
            return bytes
        }
    }
#endif
