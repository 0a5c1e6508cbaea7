#if canImport(CSesameOpenSSL)
    import CSesameOpenSSL
    import Foundation

    /// A libcrypto `EVP_PKEY`, imported and checked once, with a small pool of verification contexts per
    /// algorithm so that concurrent verifies neither re-initialise a context per call nor share one
    /// (an `EVP_PKEY_CTX` is not safe to use from two threads at once).
    package final class BackingKey: @unchecked Sendable {
        let pkey: OpaquePointer
        private let modulusLength: Int
        /// Verification contexts per algorithm (indexed by ``JWSAlgorithm/index``), each a configured
        /// `EVP_PKEY_CTX` and an `EVP_MD_CTX` for the digest, reused across calls.
        // A pthread-backed lock (LockedValue) rather than Synchronization.Mutex: ThreadSanitizer models the former,
        // and the cost difference does not show in the benchmarks.
        private let pool = LockedValue<[[VerifyContext]]>(Array(repeating: [], count: JWSAlgorithm.all.count))

        private struct VerifyContext: @unchecked Sendable {
            // Owned by exactly one caller at a time: taken out of the pool, used, and put back.
            let key: OpaquePointer
            let digest: OpaquePointer

            func free() {
                EVP_PKEY_CTX_free(key)
                EVP_MD_CTX_free(digest)
            }
        }

        private init(owning pkey: OpaquePointer) {
            self.pkey = pkey
            self.modulusLength = Int((EVP_PKEY_get_bits(pkey) + 7) / 8)
        }

        deinit {
            pool.withLock { pool in
                for contexts in pool { for context in contexts { context.free() } }
            }
            EVP_PKEY_free(pkey)
        }

        // MARK: Import

        package convenience init(components: JWK.Components) throws(JOSEError) {
            let pkey: OpaquePointer
            switch components {
            case .rsa(let n, let e, let privatePart):
                var fields = [("n", n), ("e", e)]
                if let p = privatePart {
                    fields += [
                        ("d", p.d), ("rsa-factor1", p.p), ("rsa-factor2", p.q), ("rsa-exponent1", p.dp),
                        ("rsa-exponent2", p.dq), ("rsa-coefficient1", p.qi),
                    ]
                }
                pkey = try Self.fromData(type: "RSA", isPrivate: privatePart != nil) { builder throws(JOSEError) in
                    for (name, bytes) in fields { try builder.pushBigNumber(name, bytes) }
                }
            case .ec(let curve, let x, let y, let d):
                pkey = try Self.fromData(type: "EC", isPrivate: d != nil) { builder throws(JOSEError) in
                    try builder.pushString("group", curve.name)
                    try builder.pushOctets("pub", [0x04] + x + y)
                    if let d { try builder.pushBigNumber("priv", d) }
                }
            case .okp(_, let x, let d):
                let made: OpaquePointer? =
                    if let d {
                        d.withUnsafeBufferPointer {
                            EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, $0.baseAddress, 32)
                        }
                    } else {
                        x.withUnsafeBufferPointer {
                            EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, $0.baseAddress, 32)
                        }
                    }
                guard let made else { throw JOSEError(.invalidKey, "libcrypto refused the Ed25519 key") }
                if d != nil {
                    var derived = [UInt8](repeating: 0, count: 32)
                    var length = 32
                    guard EVP_PKEY_get_raw_public_key(made, &derived, &length) == 1, ConstantTime.equals(derived, x)
                    else {
                        EVP_PKEY_free(made)
                        throw JOSEError(.invalidKey, "the Ed25519 public key does not match the private key")
                    }
                }
                pkey = made
            case .octet:
                throw JOSEError(.invalidKey, "symmetric keys have no asymmetric backing")
            }
            self.init(owning: pkey)
            try check(isPrivate: components.isPrivate)
        }

        /// Runs libcrypto's own consistency check: the point is on the curve, the RSA key pair is consistent.
        private func check(isPrivate: Bool) throws(JOSEError) {
            guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else {
                throw JOSEError(.cryptoFailure, "could not create a key context")
            }
            defer { EVP_PKEY_CTX_free(ctx) }
            let result = isPrivate ? EVP_PKEY_check(ctx) : EVP_PKEY_public_check(ctx)
            ERR_clear_error()
            guard result == 1 else { throw JOSEError(.invalidKey, "the key fails libcrypto's consistency check") }
        }

        private static func fromData(
            type: String,
            isPrivate: Bool,
            _ build: (inout ParameterBuilder) throws(JOSEError) -> Void
        ) throws(JOSEError) -> OpaquePointer {
            var builder = ParameterBuilder()
            defer { builder.free() }
            try build(&builder)
            guard let params = OSSL_PARAM_BLD_to_param(builder.builder) else {
                throw JOSEError(.cryptoFailure, "could not build key parameters")
            }
            defer { OSSL_PARAM_free(params) }
            guard let ctx = EVP_PKEY_CTX_new_from_name(nil, type, nil) else {
                throw JOSEError(.cryptoFailure, "libcrypto has no \(type) implementation")
            }
            defer { EVP_PKEY_CTX_free(ctx) }
            var pkey: OpaquePointer?
            let selection = isPrivate ? CSESAME_EVP_PKEY_KEYPAIR : CSESAME_EVP_PKEY_PUBLIC_KEY
            guard EVP_PKEY_fromdata_init(ctx) == 1, EVP_PKEY_fromdata(ctx, &pkey, selection, params) == 1, let pkey
            else {
                ERR_clear_error()
                throw JOSEError(.invalidKey, "libcrypto refused the \(type) key")
            }
            return pkey
        }

        /// Collects `OSSL_PARAM`s.
        ///
        /// libcrypto keeps the name, string and octet pointers until
        /// `OSSL_PARAM_BLD_to_param`, so the builder owns stable copies of them (and the big numbers) until `free()`.
        private struct ParameterBuilder {
            let builder: OpaquePointer? = OSSL_PARAM_BLD_new()
            var numbers: [OpaquePointer] = []
            var allocations: [UnsafeMutableRawPointer] = []

            private mutating func keep(_ string: String) throws(JOSEError) -> UnsafeMutablePointer<CChar> {
                guard let copy = strdup(string) else { throw JOSEError(.cryptoFailure, "out of memory") }
                allocations.append(UnsafeMutableRawPointer(copy))
                return copy
            }

            mutating func pushBigNumber(_ name: String, _ bytes: [UInt8]) throws(JOSEError) {
                guard let bn = bytes.withUnsafeBufferPointer({ BN_bin2bn($0.baseAddress, Int32($0.count), nil) }) else {
                    throw JOSEError(.cryptoFailure, "out of memory")
                }
                numbers.append(bn)
                guard OSSL_PARAM_BLD_push_BN(builder, try keep(name), bn) == 1 else {
                    throw JOSEError(.cryptoFailure, "out of memory")
                }
            }

            mutating func pushString(_ name: String, _ value: String) throws(JOSEError) {
                guard OSSL_PARAM_BLD_push_utf8_string(builder, try keep(name), try keep(value), 0) == 1 else {
                    throw JOSEError(.cryptoFailure, "out of memory")
                }
            }

            mutating func pushOctets(_ name: String, _ bytes: [UInt8]) throws(JOSEError) {
                guard let copy = malloc(max(bytes.count, 1)) else { throw JOSEError(.cryptoFailure, "out of memory") }
                allocations.append(copy)
                bytes.withUnsafeBytes { buffer in
                    if let base = buffer.baseAddress { copy.copyMemory(from: base, byteCount: buffer.count) }
                }
                guard OSSL_PARAM_BLD_push_octet_string(builder, try keep(name), copy, bytes.count) == 1 else {
                    throw JOSEError(.cryptoFailure, "out of memory")
                }
            }

            func free() {
                for number in numbers { BN_clear_free(number) }
                OSSL_PARAM_BLD_free(builder)
                for allocation in allocations { Foundation.free(allocation) }
            }
        }

        // MARK: Generation and export

        /// Generates a key pair for an algorithm family and returns it with its JWK components.
        package static func generate(for algorithm: JWSAlgorithm) throws(JOSEError) -> (BackingKey, JWK.Components) {
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

        // MARK: Verification

        /// Verifies a JWS signature (`R‖S` for ECDSA) over `message`.
        ///
        /// Never throws: any failure is `false`.
        package func verify(
            signature: UnsafeRawBufferPointer,
            message: UnsafeRawBufferPointer,
            algorithm: JWSAlgorithm
        ) -> Bool {
            switch algorithm.family {
            case .eddsa:
                return signature.count == 64 && verifyEd25519(signature: signature, message: message)
            case .rsaPKCS1, .rsaPSS:
                guard signature.count == modulusLength else { return false }
                return verifyDigest(signature: signature, message: message, algorithm: algorithm)
            case .ecdsa:
                guard let curve = algorithm.requiredCurve else { return false }
                return ECDSASignature.withDER(fromRaw: signature, curve: curve) { der in
                    der.map { verifyDigest(signature: $0, message: message, algorithm: algorithm) } ?? false
                }
            case .hmac:
                return false
            }
        }

        private func verifyDigest(
            signature: UnsafeRawBufferPointer,
            message: UnsafeRawBufferPointer,
            algorithm: JWSAlgorithm
        ) -> Bool {
            guard let context = borrowContext(algorithm), let md = OpenSSLDigest.md(algorithm.hash) else {
                return false
            }
            let result = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 64) { digest -> Int32 in
                var digestLength: UInt32 = 0
                guard let base = digest.baseAddress,
                    EVP_DigestInit_ex2(context.digest, md, nil) == 1,
                    EVP_DigestUpdate(context.digest, message.baseAddress, message.count) == 1,
                    EVP_DigestFinal_ex(context.digest, base, &digestLength) == 1
                else { return 0 }
                return EVP_PKEY_verify(
                    context.key,
                    signature.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    signature.count,
                    base,
                    Int(digestLength)
                )
            }
            if result != 1 { ERR_clear_error() }
            returnContext(context, algorithm)
            return result == 1
        }

        private func borrowContext(_ algorithm: JWSAlgorithm) -> VerifyContext? {
            if let context = pool.withLock({ $0[algorithm.index].popLast() }) { return context }
            guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else { return nil }
            guard EVP_PKEY_verify_init(ctx) == 1, Self.configure(ctx, for: algorithm), let digest = EVP_MD_CTX_new()
            else {
                EVP_PKEY_CTX_free(ctx)
                ERR_clear_error()
                return nil
            }
            return VerifyContext(key: ctx, digest: digest)
        }

        private func returnContext(_ context: VerifyContext, _ algorithm: JWSAlgorithm) {
            let kept = pool.withLock { pool -> Bool in
                guard pool[algorithm.index].count < 8 else { return false }
                pool[algorithm.index].append(context)
                return true
            }
            if !kept { context.free() }
        }

        /// Sets padding, digest and PSS parameters on a sign or verify context.
        private static func configure(_ ctx: OpaquePointer, for algorithm: JWSAlgorithm) -> Bool {
            guard let md = OpenSSLDigest.md(algorithm.hash) else { return false }
            switch algorithm.family {
            case .rsaPKCS1:
                return EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) == 1
                    && EVP_PKEY_CTX_set_signature_md(ctx, md) == 1
            case .rsaPSS:
                return EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PSS_PADDING) == 1
                    && EVP_PKEY_CTX_set_signature_md(ctx, md) == 1
                    && EVP_PKEY_CTX_set_rsa_mgf1_md(ctx, md) == 1
                    && EVP_PKEY_CTX_set_rsa_pss_saltlen(ctx, Int32(algorithm.digestLength)) == 1
            case .ecdsa:
                return EVP_PKEY_CTX_set_signature_md(ctx, md) == 1
            case .eddsa, .hmac:
                return false
            }
        }

        private func verifyEd25519(signature: UnsafeRawBufferPointer, message: UnsafeRawBufferPointer) -> Bool {
            guard let mdctx = EVP_MD_CTX_new() else { return false }
            defer { EVP_MD_CTX_free(mdctx) }
            guard EVP_DigestVerifyInit_ex(mdctx, nil, nil, nil, nil, pkey, nil) == 1 else {
                ERR_clear_error()
                return false
            }
            let result = EVP_DigestVerify(
                mdctx,
                signature.baseAddress?.assumingMemoryBound(to: UInt8.self),
                signature.count,
                message.baseAddress?.assumingMemoryBound(to: UInt8.self),
                message.count
            )
            if result != 1 { ERR_clear_error() }
            return result == 1
        }

        // MARK: Signing

        /// Signs `message`; ECDSA signatures come back as the fixed-length JWS `R‖S`.
        package func sign(_ message: UnsafeRawBufferPointer, algorithm: JWSAlgorithm) throws(JOSEError) -> [UInt8] {
            guard let mdctx = EVP_MD_CTX_new() else { throw JOSEError(.cryptoFailure, "out of memory") }
            defer { EVP_MD_CTX_free(mdctx) }
            let mdName: String? =
                switch algorithm.family {
                case .eddsa: nil
                default: OpenSSLDigest.name(algorithm.hash)
                }
            var pctx: OpaquePointer?
            guard EVP_DigestSignInit_ex(mdctx, &pctx, mdName, nil, nil, pkey, nil) == 1 else {
                ERR_clear_error()
                throw JOSEError(.cryptoFailure, "this key cannot sign with \(algorithm)")
            }
            if algorithm.family == .rsaPSS, let pctx {
                guard EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) == 1,
                    EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, Int32(algorithm.digestLength)) == 1
                else { throw JOSEError(.cryptoFailure, "could not configure RSA-PSS") }
            }
            let input = message.baseAddress?.assumingMemoryBound(to: UInt8.self)
            var length = 0
            guard EVP_DigestSign(mdctx, nil, &length, input, message.count) == 1 else {
                ERR_clear_error()
                throw JOSEError(.cryptoFailure, "signing failed")
            }
            var signature = [UInt8](repeating: 0, count: length)
            guard EVP_DigestSign(mdctx, &signature, &length, input, message.count) == 1 else {
                ERR_clear_error()
                throw JOSEError(.cryptoFailure, "signing failed")
            }
            signature.removeSubrange(length...)
            if algorithm.family == .ecdsa, let curve = algorithm.requiredCurve {
                guard let raw = ECDSASignature.raw(fromDER: signature, curve: curve) else {
                    throw JOSEError(.cryptoFailure, "libcrypto returned a malformed ECDSA signature")
                }
                return raw
            }
            return signature
        }
    }

    /// Message digests and HMAC through libcrypto, with the algorithm objects fetched once.
    package enum OpenSSLDigest {
        private struct Fetched: @unchecked Sendable {
            // Fetched EVP_MD objects are immutable and may be shared between threads.
            let sha256 = EVP_MD_fetch(nil, "SHA256", nil)
            let sha384 = EVP_MD_fetch(nil, "SHA384", nil)
            let sha512 = EVP_MD_fetch(nil, "SHA512", nil)
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
            var bytes = [UInt8](repeating: 0, count: count)
            precondition(RAND_bytes(&bytes, Int32(count)) == 1, "the system random generator failed")
            return bytes
        }
    }
#endif
