import Foundation
import SesameJOSE
import SesameLoopback

/// `sesame-bench jose`: Sesame's public API against a direct libcrypto loop and Python's standard library.
enum JOSEBenchmark {
    /// A realistic OIDC ID token claim set (about 350 bytes).
    static func claims(now: Int64) -> JWTClaims {
        JWTClaims([
            "iss": "https://accounts.example.com", "sub": "248289761001", "aud": "s6BhdRkqt3.apps.example.com",
            "azp": "s6BhdRkqt3.apps.example.com", "nonce": "n-0S6_WzA2Mj-8fgHy3l2Q", "auth_time": .integer(now - 60),
            "iat": .integer(now), "exp": .integer(now + 3600), "email": "janedoe@example.com", "email_verified": true,
            "name": "Jane Doe", "given_name": "Jane", "family_name": "Doe", "at_hash": "HK6E_P6Dh8Y93mRNtsDB1Q",
        ])
    }

    static func run(seconds: Double, chart: String? = nil) throws {
        let nowDate = Date()
        let now = Int64(nowDate.timeIntervalSince1970)
        let claims = claims(now: now)
        print("# sesame-bench jose: claim set \(claims.jsonValue.jsonBytes.count) bytes, \(seconds) s per measurement")

        let rsa = try JWK.generate(for: .rs256, keyID: "rsa-bench")
        let ec = try JWK.generate(for: .es256, keyID: "ec-bench")
        let ed = try JWK.generate(for: .eddsa, keyID: "ed-bench")
        let keys = try JWKSet(keys: [try rsa.publicKey(), try ec.publicKey(), try ed.publicKey()])
        let policy = ClaimValidationPolicy(
            issuer: "https://accounts.example.com", audience: "s6BhdRkqt3.apps.example.com",
            nonce: "n-0S6_WzA2Mj-8fgHy3l2Q")
        let verifier = JWTVerifier(keys: keys, policy: policy)
        let rsToken = try JWT.sign(claims, key: rsa, algorithm: .rs256)
        let esToken = try JWT.sign(claims, key: ec, algorithm: .es256)
        let edToken = try JWT.sign(claims, key: ed, algorithm: .eddsa)
        print(
            "# token sizes: RS256 \(rsToken.utf8.count), ES256 \(esToken.utf8.count), EdDSA \(edToken.utf8.count) bytes"
        )

        if ProcessInfo.processInfo.environment["SESAME_BENCH_PROFILE"] == "rs256"
            || ProcessInfo.processInfo.environment["SESAME_BENCH_PROFILE"] == "es256"
        {
            // For profiling only: spin on the RS256 verify path.
            let token = ProcessInfo.processInfo.environment["SESAME_BENCH_PROFILE"] == "es256" ? esToken : rsToken
            report(
                "profile_verify", try measure(seconds: seconds) { blackHole(try verifier.verify(token, now: nowDate)) })
            return
        }
        if ProcessInfo.processInfo.environment["SESAME_BENCH_PROFILE"] == "decode" {
            // For profiling only: spin on the decode path.
            report(
                "sesame_decode_noverify",
                try measure(seconds: seconds) { blackHole(try JWT.unverifiedClaims(of: rsToken)) })
            return
        }
        // Every verify includes the claim checks; a failure aborts the benchmark rather than measuring errors.
        // RS256 and ES256 are measured alternately with the direct libcrypto loop, for a fair ratio.
        var rsVerify = 0.0
        var esVerify = 0.0
        var directRSRate = 0.0
        var directESRate = 0.0
        #if canImport(CSesameOpenSSL)
            let directRS = try DirectLibcryptoVerifier(publicKeyPEM: try rsa.pemRepresentation, isECDSA: false)
            let directES = try DirectLibcryptoVerifier(publicKeyPEM: try ec.pemRepresentation, isECDSA: true)
            guard directRS.verify(rsToken), directES.verify(esToken) else { throw BenchmarkError("direct loop failed") }
            (rsVerify, directRSRate) = try measurePair(
                seconds: 2 * seconds,
                { blackHole(try verifier.verify(rsToken, now: nowDate)) },
                { blackHole(directRS.verify(rsToken)) }
            )
            (esVerify, directESRate) = try measurePair(
                seconds: 2 * seconds,
                { blackHole(try verifier.verify(esToken, now: nowDate)) },
                { blackHole(directES.verify(esToken)) }
            )
        #else
            rsVerify = try measure(seconds: seconds) { blackHole(try verifier.verify(rsToken, now: nowDate)) }
            esVerify = try measure(seconds: seconds) { blackHole(try verifier.verify(esToken, now: nowDate)) }
        #endif
        let edVerify = try measure(seconds: seconds) { blackHole(try verifier.verify(edToken, now: nowDate)) }
        let esSign = try measure(seconds: seconds) { blackHole(try JWT.sign(claims, key: ec, algorithm: .es256)) }
        let rsSign = try measure(seconds: seconds) { blackHole(try JWT.sign(claims, key: rsa, algorithm: .rs256)) }
        let decode = try measure(seconds: seconds) { blackHole(try JWT.unverifiedClaims(of: rsToken)) }
        report("sesame_rs256_verify", rsVerify)
        report("sesame_es256_verify", esVerify)
        report("sesame_eddsa_verify", edVerify)
        report("sesame_es256_sign", esSign)
        report("sesame_rs256_sign", rsSign)
        report("sesame_decode_noverify", decode)
        #if canImport(CSesameOpenSSL)
            report("direct_rs256_verify", directRSRate)
            report("direct_es256_verify", directESRate)
            report("ratio_rs256_verify_sesame_over_direct", rsVerify / directRSRate)
            report("ratio_es256_verify_sesame_over_direct", esVerify / directESRate)
        #endif

        // DPoP proofs (RFC 9449): a whole proof (claims, header with the public JWK, ES256 signature, encoding) beside
        // the raw P-256 signature of an input of the same size, in alternating rounds.
        guard let proofURL = URL(string: "https://as.example.com/token") else { throw BenchmarkError("bad URL") }
        let sample = try DPoPProof.make(key: ec, method: "POST", url: proofURL, issuedAt: nowDate)
        #if canImport(CSesameOpenSSL)
            let signer = try DirectLibcryptoSigner(privateKeyPEM: ec.unsafePrivatePEMRepresentation)
            let input = Array(sample.utf8[..<(sample.utf8.lastIndex(of: UInt8(ascii: ".")) ?? sample.utf8.endIndex)])
            let dpop = try DPoPSigner(key: ec)
            let (proofRate, rawSign) = try measurePair(
                seconds: seconds * 2,
                { blackHole(try dpop.proof(method: "POST", url: proofURL, issuedAt: nowDate)) },
                { blackHole(signer.sign(input)) }
            )
            report("sesame_dpop_proof", proofRate)
            report("libcrypto_p256_sign_raw", rawSign)
            report("ratio_dpop_proof_over_raw_sign", proofRate / rawSign)
        #else
            report(
                "sesame_dpop_proof",
                try measure(seconds: seconds) {
                    blackHole(try DPoPProof.make(key: ec, method: "POST", url: proofURL, issuedAt: nowDate))
                })
        #endif

        var rows: [ChartRow] = []
        #if canImport(CSesameOpenSSL)
            rows.append(
                .init(
                    label: "RS256 verify (+ claims)", sesame: rsVerify, reference: directRSRate,
                    referenceName: "libcrypto alone"))
            rows.append(
                .init(
                    label: "ES256 verify (+ claims)", sesame: esVerify, reference: directESRate,
                    referenceName: "libcrypto alone"))
            rows.append(
                .init(
                    label: "DPoP proof (whole)", sesame: proofRate, reference: rawSign, referenceName: "raw P-256 sign")
            )
        #endif
        if let python = pythonDecodeRate(token: rsToken, seconds: seconds) {
            report("python_stdlib_decode_noverify", python)
            report("ratio_decode_sesame_over_python", decode / python)
            rows.append(
                .init(
                    label: "JWT decode (no verify)", sesame: decode, reference: python, referenceName: "Python stdlib"))
        } else {
            print("# python3 not found: no Python reference for decode")
        }
        if let chart {
            try writeChart(
                title: "Sesame against references measured in the same run",
                subtitle: "sesame-bench jose, \(seconds) s per measurement, operations per second (higher is better)",
                rows: rows, to: chart)
        }
    }

    /// Decodes the same token's payload with `base64` + `json` in CPython, timed by `timeit` in the same run.
    static func pythonDecodeRate(token: String, seconds: Double) -> Double? {
        let script = """
            import base64, json, sys, timeit
            token = sys.argv[1]
            def decode():
                payload = token.split(".")[1]
                return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
            assert decode()["sub"] == "248289761001"
            number = 2000
            budget = float(sys.argv[2])
            best = 0.0
            for _ in range(3):
                t = timeit.timeit(decode, number=number)
                while t < budget / 3:
                    number *= 2
                    t = timeit.timeit(decode, number=number)
                best = max(best, number / t)
            print(best)
            """
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, token, String(seconds)]
        let output = Pipe()
        process.standardOutput = .pipe(output)
        process.standardError = .null
        guard (try? process.run()) != nil else { return nil }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { return nil }
        return Double(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
