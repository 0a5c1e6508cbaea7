import Foundation
import SesameJOSE

/// `sesame demo`: a narrated run that shows what Sesame checks, and fails (exit 1) if any check misbehaves.
struct DemoCommand: SesameCommand {
    static let spec = CommandSpec(
        words: ["demo"], summary: "a narrated run of what Sesame does, on an embedded dev server (loopback only)",
        arguments: nil,
        discussion: """
            Signs and verifies tokens, shows forged ones rejected, then runs the REST contract against a dev server
            embedded on an ephemeral loopback port. Exits 1 if any check misbehaves.
            """,
        options: [], examples: ["sesame demo"], exitCodes: [], command: Self.self)

    init(_ arguments: ParsedArguments) throws { try arguments.noPositionals() }

    func run() async throws {
        var failures = 0
        func step(_ text: String) { print("\n▸ \(text)") }
        func expectRejection(_ label: String, _ expected: JOSEError.Code, _ body: () throws -> Void) {
            do {
                try body()
                print("  ✗ \(label): accepted — this is a bug")
                failures += 1
            } catch let error as JOSEError where error.code == expected {
                print("  ✓ \(label): rejected with \(error.code)")
            } catch {
                print("  ✗ \(label): rejected, but with \(error) instead of \(expected)")
                failures += 1
            }
        }

        print("Sesame demo — tokens signed and verified, then a session against the embedded development server.")

        step("The provider generates an ES256 signing key and publishes its public half as a JWKS")
        let key = try JWK.generate(for: .es256)
        let jwks = try JWKSet(keys: [try key.publicKey()])
        print("  kid (RFC 7638 thumbprint): \(key.keyID ?? "-")")
        print("  JWKS: \(jwks.jsonValue.jsonString.prefix(96))…")

        step("It issues an ID token for alice, for the app 'demo-app', bound to the app's nonce")
        let now = Date()
        let issued = Int64(now.timeIntervalSince1970)
        let nonce = Base64URL.encode(JOSECrypto.randomBytes(16))
        let claims = JWTClaims([
            "iss": "https://id.example", "sub": "alice", "aud": "demo-app", "nonce": .string(nonce),
            "iat": .integer(issued), "exp": .integer(issued + 300), "email": "alice@example.com",
        ])
        let token = try JWT.sign(claims, key: key, algorithm: .es256)
        print("  token: \(token.prefix(40))… (\(token.utf8.count) bytes; never printed whole in logs)")

        step("The app decodes it for display (no verification) …")
        print("  claims: \(try JWT.unverifiedClaims(of: token).jsonValue.jsonString)")

        step("… and verifies it: signature against the JWKS, then iss, aud, nonce, exp, iat")
        let policy = ClaimValidationPolicy(issuer: "https://id.example", audience: "demo-app", nonce: nonce)
        let verifier = JWTVerifier(keys: jwks, policy: policy)
        let verified = try verifier.verify(token, now: now)
        print(
            "  ✓ verified: subject \(verified.claims.subject ?? "?"), expires \(verified.claims.expiresAt.map { "\($0)" } ?? "?")"
        )

        step("Now the attacks a verifier must survive")
        let parts = token.split(separator: ".").map(String.init)
        var forgedValues = claims.values
        forgedValues["sub"] = "admin"
        let forgedClaims = JWTClaims(forgedValues)
        let tampered = "\(parts[0]).\(Base64URL.encode(forgedClaims.jsonValue.jsonBytes)).\(parts[2])"
        expectRejection("payload changed to sub=admin", .signatureInvalid) {
            _ = try verifier.verify(tampered, now: now)
        }
        let none = "\(Base64URL.encode(Array(#"{"alg":"none"}"#.utf8))).\(parts[1])."
        expectRejection("alg: none", .unsupportedAlgorithm) { _ = try verifier.verify(none, now: now) }
        let attacker = try JWK.generate(for: .es256, keyID: key.keyID)
        let impostor = try JWT.sign(claims, key: attacker, algorithm: .es256)
        expectRejection("signed by another key with the same kid", .signatureInvalid) {
            _ = try verifier.verify(impostor, now: now)
        }
        expectRejection("two hours later", .expired) {
            _ = try verifier.verify(token, now: now.addingTimeInterval(7200))
        }
        var otherApp = policy
        otherApp.audience = "other-app"
        expectRejection("presented to another app", .audienceMismatch) {
            _ = try JWTVerifier(keys: jwks, policy: otherApp).verify(token, now: now)
        }
        var replay = policy
        replay.nonce = Base64URL.encode(JOSECrypto.randomBytes(16))
        expectRejection("replayed into another sign-in", .nonceMismatch) {
            _ = try JWTVerifier(keys: jwks, policy: replay).verify(token, now: now)
        }

        failures += try await DemoServerPart.run()
        if failures > 0 {
            throw CLIError(status: .failure, code: "demo_failed", message: "\(failures) check(s) did not behave")
        }
        print("\nDemo complete: every check behaved.")
    }
}
