import Foundation
import SesameJOSE
for alg in [JWSAlgorithm.es256, .es384, .es512, .rs256, .ps256, .eddsa, .hs256] {
    let key = try JWK.generate(for: alg)
    let now = Date()
    let token = try JWT.sign(JWTClaims(["sub": "a", "exp": .integer(Int64(now.timeIntervalSince1970) + 100)]), key: key, algorithm: alg)
    let set = try JWKSet(keys: [alg.isSymmetric ? key : try key.publicKey()])
    let v = JWTVerifier(keys: set, allowedAlgorithms: [alg])
    let jwt = try v.verify(token, now: now)
    print(alg, jwt.claims.subject ?? "-", key.thumbprint, try? key.pemRepresentation.prefix(30) ?? "")
    do { _ = try v.verify(token.dropLast(2) + "AA", now: now); print("BAD accepted") } catch { print("  rejected:", error) }
}
