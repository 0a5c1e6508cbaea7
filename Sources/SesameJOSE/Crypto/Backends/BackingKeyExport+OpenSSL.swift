#if canImport(CSesameOpenSSL)
    import CSesameOpenSSL
    import Foundation

    /// Key generation, reading components back out of libcrypto, and PEM import/export.
    extension BackingKey {
        // MARK: Generation and export

        /// Generates a key pair for an algorithm family and returns it with its JWK components.
        package static func generate(for algorithm: JWSAlgorithm) throws(JOSEError) -> (BackingKey, JWK.Components) {
            LibCrypto.prepare()
            let type: String
            switch algorithm.family {
            case .rsaPKCS1, .rsaPSS: type = "RSA"
            case .ecdsa: type = "EC"
            case .eddsa: type = "ED25519"
            case .hmac: throw JOSEError(.invalidKey, "HMAC keys are generated with Crypto.randomBytes")
            }
            guard let ctx = EVP_PKEY_CTX_new_from_name(nil, type, nil), EVP_PKEY_keygen_init(ctx) == 1 else {
                throw JOSEError(.cryptoFailure, "libcrypto cannot generate \(type) keys")
            }
            defer { EVP_PKEY_CTX_free(ctx) }
            if type == "RSA" { EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, 2048) }
            if let curve = algorithm.requiredCurve, type == "EC" { EVP_PKEY_CTX_set_group_name(ctx, curve.name) }
            var pkey: OpaquePointer?
            guard EVP_PKEY_generate(ctx, &pkey) == 1, let pkey else {
                throw JOSEError(.cryptoFailure, "key generation failed")
            }
            let key = BackingKey(owning: pkey)
            return (key, try key.components())
        }

        /// Reads the key's JWK components back out of libcrypto.
        package func components() throws(JOSEError) -> JWK.Components {
            if EVP_PKEY_is_a(pkey, "RSA") == 1 {
                let n = try bigNumber("n")
                let e = try bigNumber("e")
                guard let d = try? bigNumber("d") else { return .rsa(n: n, e: e, private: nil) }
                return .rsa(
                    n: n,
                    e: e,
                    private: JWK.RSAPrivate(
                        d: d,
                        p: try bigNumber("rsa-factor1"),
                        q: try bigNumber("rsa-factor2"),
                        dp: try bigNumber("rsa-exponent1"),
                        dq: try bigNumber("rsa-exponent2"),
                        qi: try bigNumber("rsa-coefficient1")
                    )
                )
            }
            if EVP_PKEY_is_a(pkey, "EC") == 1 {
                var name = [CChar](repeating: 0, count: 64)
                var length = 0
                guard EVP_PKEY_get_utf8_string_param(pkey, "group", &name, name.count, &length) == 1 else {
                    throw JOSEError(.invalidKey, "an EC key without a named curve")
                }
                let curve: JWK.Curve
                switch String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self) {
                case "prime256v1", "P-256": curve = .p256
                case "secp384r1", "P-384": curve = .p384
                case "secp521r1", "P-521": curve = .p521
                default: throw JOSEError(.invalidKey, "an EC key on an unsupported curve")
                }
                let size = curve.coordinateLength
                let d = try? bigNumber("priv", paddedTo: size)
                return .ec(
                    curve: curve, x: try bigNumber("qx", paddedTo: size), y: try bigNumber("qy", paddedTo: size), d: d)
            }
            if EVP_PKEY_is_a(pkey, "ED25519") == 1 {
                var x = [UInt8](repeating: 0, count: 32)
                var d = [UInt8](repeating: 0, count: 32)
                var xLength = 32
                var dLength = 32
                guard EVP_PKEY_get_raw_public_key(pkey, &x, &xLength) == 1 else {
                    throw JOSEError(.cryptoFailure, "could not read the Ed25519 key")
                }
                let hasPrivate = EVP_PKEY_get_raw_private_key(pkey, &d, &dLength) == 1
                ERR_clear_error()
                return .okp(curve: .ed25519, x: x, d: hasPrivate ? d : nil)
            }
            throw JOSEError(.invalidKey, "unsupported key type")
        }

        private func bigNumber(_ name: String, paddedTo size: Int? = nil) throws(JOSEError) -> [UInt8] {
            var bn: OpaquePointer?
            guard EVP_PKEY_get_bn_param(pkey, name, &bn) == 1, let bn else {
                ERR_clear_error()
                throw JOSEError(.invalidKey, "the key lacks \(name)")
            }
            defer { BN_clear_free(bn) }
            let count = size ?? Int((BN_num_bits(bn) + 7) / 8)
            var bytes = [UInt8](repeating: 0, count: count)
            guard BN_bn2binpad(bn, &bytes, Int32(count)) == Int32(count) else {
                throw JOSEError(.invalidKey, "\(name) is too long")
            }
            return bytes
        }

        /// Imports a PEM SubjectPublicKeyInfo or PKCS#8 private key.
        package static func fromPEM(_ pem: String) throws(JOSEError) -> BackingKey {
            LibCrypto.prepare()
            let bytes = Array(pem.utf8)
            let pkey: OpaquePointer? = bytes.withUnsafeBytes { buffer in
                guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
                defer { BIO_free(bio) }
                return pem.contains("PRIVATE KEY")
                    ? PEM_read_bio_PrivateKey(bio, nil, nil, nil) : PEM_read_bio_PUBKEY(bio, nil, nil, nil)
            }
            ERR_clear_error()
            guard let pkey else { throw JOSEError(.invalidKey, "not a PEM public key or PKCS#8 private key") }
            return BackingKey(owning: pkey)
        }

        /// The key as PEM: SubjectPublicKeyInfo, or PKCS#8 for the private key.
        package func pem(includingPrivate: Bool) throws(JOSEError) -> String {
            guard let bio = BIO_new(BIO_s_mem()) else { throw JOSEError(.cryptoFailure, "out of memory") }
            defer { BIO_free(bio) }
            let ok =
                includingPrivate
                ? PEM_write_bio_PrivateKey(bio, pkey, nil, nil, 0, nil, nil) : PEM_write_bio_PUBKEY(bio, pkey)
            guard ok == 1 else {
                ERR_clear_error()
                throw JOSEError(.cryptoFailure, "could not write PEM")
            }
            var data: UnsafeMutablePointer<CChar>?
            let length = csesame_BIO_get_mem_data(bio, &data)
            guard let data, length > 0 else { throw JOSEError(.cryptoFailure, "could not write PEM") }
            return data.withMemoryRebound(to: UInt8.self, capacity: length) {
                String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
            }
        }
    }
#endif
