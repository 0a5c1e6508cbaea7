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
        /// The same for signing (private keys): contexts set up by `EVP_PKEY_sign_init` once, not per signature.
        private let signingPool = LockedValue<[[VerifyContext]]>(
            Array(repeating: [], count: JWSAlgorithm.all.count))

        private struct VerifyContext: @unchecked Sendable {
            // Owned by exactly one caller at a time: taken out of the pool, used, and put back.
            let key: OpaquePointer
            let digest: OpaquePointer

            func free() {
                EVP_PKEY_CTX_free(key)
                EVP_MD_CTX_free(digest)
            }

            /// Hashes `message` with `md` on this context's digest and hands the digest to `body` (0 on failure).
            func withDigest(
                of message: UnsafeRawBufferPointer, _ md: OpaquePointer,
                _ body: (UnsafeMutablePointer<UInt8>, Int) -> Int32
            ) -> Int32 {
                withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 64) { buffer -> Int32 in
                    var length: UInt32 = 0
                    guard let base = buffer.baseAddress,
                        EVP_DigestInit_ex2(digest, md, nil) == 1,
                        EVP_DigestUpdate(digest, message.baseAddress, message.count) == 1,
                        EVP_DigestFinal_ex(digest, base, &length) == 1
                    else { return 0 }
                    return body(base, Int(length))
                }
            }
        }

        init(owning pkey: OpaquePointer) {
            self.pkey = pkey
            self.modulusLength = Int((EVP_PKEY_get_bits(pkey) + 7) / 8)
        }

        deinit {
            for pool in [pool, signingPool] {
                pool.withLock { pool in
                    for contexts in pool { for context in contexts { context.free() } }
                }
            }
            EVP_PKEY_free(pkey)
        }

        // MARK: Import

        package convenience init(components: JWK.Components) throws(JOSEError) {
            LibCrypto.prepare()
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
            let result = context.withDigest(of: message, md) { base, digestLength in
                EVP_PKEY_verify(
                    context.key,
                    signature.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    signature.count,
                    base,
                    digestLength
                )
            }
            if result != 1 { ERR_clear_error() }
            returnContext(context, algorithm)
            return result == 1
        }

        private func borrowContext(_ algorithm: JWSAlgorithm, signing: Bool = false) -> VerifyContext? {
            let pool = signing ? signingPool : pool
            if let context = pool.withLock({ $0[algorithm.index].popLast() }) { return context }
            guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else { return nil }
            let initialized = signing ? EVP_PKEY_sign_init(ctx) : EVP_PKEY_verify_init(ctx)
            guard initialized == 1, Self.configure(ctx, for: algorithm), let digest = EVP_MD_CTX_new() else {
                EVP_PKEY_CTX_free(ctx)
                ERR_clear_error()
                return nil
            }
            return VerifyContext(key: ctx, digest: digest)
        }

        private func returnContext(_ context: VerifyContext, _ algorithm: JWSAlgorithm, signing: Bool = false) {
            let pool = signing ? signingPool : pool
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

        /// Hash, then `EVP_PKEY_sign` on a pooled context (RSA and ECDSA); ECDSA signatures come back as the
        /// fixed-length JWS `R‖S`.
        private func signDigest(_ message: UnsafeRawBufferPointer, algorithm: JWSAlgorithm) throws(JOSEError)
            -> [UInt8]
        {
            guard let context = borrowContext(algorithm, signing: true), let md = OpenSSLDigest.md(algorithm.hash)
            else { throw JOSEError(.cryptoFailure, "this key cannot sign with \(algorithm)") }
            defer { returnContext(context, algorithm, signing: true) }
            var signature = [UInt8](repeating: 0, count: max(Int(EVP_PKEY_get_size(pkey)), 1))
            var length = signature.count
            let result = context.withDigest(of: message, md) { base, digestLength in
                EVP_PKEY_sign(context.key, &signature, &length, base, digestLength)
            }
            guard result == 1 else {
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

        /// Signs `message`; ECDSA signatures come back as the fixed-length JWS `R‖S`.
        package func sign(_ message: UnsafeRawBufferPointer, algorithm: JWSAlgorithm) throws(JOSEError) -> [UInt8] {
            guard algorithm.family == .eddsa else { return try signDigest(message, algorithm: algorithm) }
            // Ed25519 signs the message itself, in one shot.
            guard let mdctx = EVP_MD_CTX_new() else { throw JOSEError(.cryptoFailure, "out of memory") }
            defer { EVP_MD_CTX_free(mdctx) }
            guard EVP_DigestSignInit_ex(mdctx, nil, nil, nil, nil, pkey, nil) == 1 else {
                ERR_clear_error()
                throw JOSEError(.cryptoFailure, "this key cannot sign with \(algorithm)")
            }
            var signature = [UInt8](repeating: 0, count: 64)
            var length = signature.count
            let input = message.baseAddress?.assumingMemoryBound(to: UInt8.self)
            guard EVP_DigestSign(mdctx, &signature, &length, input, message.count) == 1, length == 64 else {
                ERR_clear_error()
                throw JOSEError(.cryptoFailure, "signing failed")
            }
            return signature
        }
    }
#endif
