#if canImport(CSesameOpenSSL)
    import CSesameOpenSSL
    import Foundation

    /// The signing reference: raw P-256 ECDSA with SHA-256 over the same bytes, `EVP_DigestSignInit` +
    /// `EVP_DigestSign` on a fresh `EVP_MD_CTX` with a key parsed once — no JOSE, no encoding of the result.
    final class DirectLibcryptoSigner {
        private let pkey: OpaquePointer

        init(privateKeyPEM: String) throws {
            let bytes = Array(privateKeyPEM.utf8)
            let key: OpaquePointer? = bytes.withUnsafeBytes { buffer in
                guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
                defer { BIO_free(bio) }
                return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
            }
            guard let key else { throw BenchmarkError("libcrypto refused the private PEM key") }
            pkey = key
        }

        deinit { EVP_PKEY_free(pkey) }

        /// Signs `input`; returns the DER signature's length (0 on failure).
        func sign(_ input: [UInt8]) -> Int {
            guard let ctx = EVP_MD_CTX_new() else { return 0 }
            defer { EVP_MD_CTX_free(ctx) }
            guard EVP_DigestSignInit(ctx, nil, EVP_sha256(), nil, pkey) == 1 else { return 0 }
            var signature = [UInt8](repeating: 0, count: 80)
            var length = signature.count
            let ok = input.withUnsafeBufferPointer { bytes in
                EVP_DigestSign(ctx, &signature, &length, bytes.baseAddress, bytes.count) == 1
            }
            return ok ? length : 0
        }
    }

    /// The reference: what a careful hand-written libcrypto verifier does per token, with no JOSE library —
    /// split the token, base64url-decode the signature with its own decoder, convert ES256's `R‖S` to DER, and run
    /// `EVP_DigestVerifyInit` + `EVP_DigestVerify` on a fresh `EVP_MD_CTX` over the same key (parsed once).
    ///
    /// It checks no header, no claims and no key policy, so it is a floor for the cost of the cryptography.
    final class DirectLibcryptoVerifier {
        private let pkey: OpaquePointer
        private let isECDSA: Bool

        init(publicKeyPEM: String, isECDSA: Bool) throws {
            let bytes = Array(publicKeyPEM.utf8)
            let key: OpaquePointer? = bytes.withUnsafeBytes { buffer in
                guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
                defer { BIO_free(bio) }
                return PEM_read_bio_PUBKEY(bio, nil, nil, nil)
            }
            guard let key else { throw BenchmarkError("libcrypto refused the PEM key") }
            self.pkey = key
            self.isECDSA = isECDSA
        }

        deinit { EVP_PKEY_free(pkey) }

        /// Verifies the signature of a compact JWS.
        ///
        /// Returns false on any failure.
        func verify(_ token: String) -> Bool {
            let utf8 = Array(token.utf8)
            guard let lastDot = utf8.lastIndex(of: UInt8(ascii: ".")),
                var signature = Self.base64URLDecode(utf8[(lastDot + 1)...])
            else { return false }
            if isECDSA {
                guard let der = Self.der(fromRaw: signature) else { return false }
                signature = der
            }
            guard let ctx = EVP_MD_CTX_new() else { return false }
            defer { EVP_MD_CTX_free(ctx) }
            guard EVP_DigestVerifyInit(ctx, nil, EVP_sha256(), nil, pkey) == 1 else { return false }
            return utf8.withUnsafeBufferPointer { input in
                EVP_DigestVerify(ctx, signature, signature.count, input.baseAddress, lastDot) == 1
            }
        }

        /// A plain base64url decoder (no padding), as a hand-rolled verifier would write it.
        private static func base64URLDecode(_ text: ArraySlice<UInt8>) -> [UInt8]? {
            var output: [UInt8] = []
            output.reserveCapacity(text.count * 3 / 4)
            var accumulator: UInt32 = 0
            var bits = 0
            for byte in text {
                let value: UInt8
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = byte - UInt8(ascii: "A")
                case UInt8(ascii: "a")...UInt8(ascii: "z"): value = byte - UInt8(ascii: "a") + 26
                case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0") + 52
                case UInt8(ascii: "-"): value = 62
                case UInt8(ascii: "_"): value = 63
                default: return nil
                }
                accumulator = accumulator << 6 | UInt32(value)
                bits += 6
                if bits >= 8 {
                    bits -= 8
                    output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                }
            }
            return output
        }

        /// `R‖S` (64 bytes) to DER through libcrypto's own `ECDSA_SIG`.
        private static func der(fromRaw raw: [UInt8]) -> [UInt8]? {
            guard raw.count == 64, let sig = ECDSA_SIG_new() else { return nil }
            defer { ECDSA_SIG_free(sig) }
            let r = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
            let s = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress.map { $0 + 32 }, 32, nil) }
            guard let r, let s, ECDSA_SIG_set0(sig, r, s) == 1 else { return nil }
            var out: UnsafeMutablePointer<UInt8>?
            let length = i2d_ECDSA_SIG(sig, &out)
            guard length > 0, let out else { return nil }
            defer { CRYPTO_free(out, #file, #line) }
            return Array(UnsafeBufferPointer(start: out, count: Int(length)))
        }
    }
#endif

struct BenchmarkError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
