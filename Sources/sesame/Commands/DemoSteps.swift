import Foundation
import Sesame
import SesameJOSE

/// `sesame demo`'s JOSE step: a token signed and verified, then the forgeries a verifier must refuse.
enum DemoJOSE {
    static func attacks(_ log: DemoNarrator.Log) throws {
        let key = try JWK.generate(for: .es256)
        let jwks = try JWKSet(keys: [try key.publicKey()])
        let now = Date()
        let issued = Int64(now.timeIntervalSince1970)
        let nonce = Base64URL.encode(JOSECrypto.randomBytes(16))
        let claims = JWTClaims([
            "iss": "https://id.example", "sub": "alice", "aud": "demo-app", "nonce": .string(nonce),
            "iat": .integer(issued), "exp": .integer(issued + 300),
        ])
        let token = try JWT.sign(claims, key: key, algorithm: .es256)
        let policy = ClaimValidationPolicy(issuer: "https://id.example", audience: "demo-app", nonce: nonce)
        let verifier = JWTVerifier(keys: jwks, policy: policy)
        log.check("a genuine ES256 token verifies", (try? verifier.verify(token, now: now)) != nil)
        func refused(_ label: String, _ expected: JOSEError.Code, _ body: () throws -> Void) {
            do {
                try body()
                log.check("\(label) is refused", false, "it was accepted")
            } catch let error as JOSEError {
                log.check("\(label) is refused", error.code == expected, error.code.rawValue)
            } catch {
                log.check("\(label) is refused", false, "\(error)")
            }
        }
        let parts = token.split(separator: ".").map(String.init)
        var forged = claims.values
        forged["sub"] = "admin"
        let tampered = "\(parts[0]).\(Base64URL.encode(JWTClaims(forged).jsonValue.jsonBytes)).\(parts[2])"
        refused("the payload changed to sub=admin", .signatureInvalid) { _ = try verifier.verify(tampered, now: now) }
        let none = "\(Base64URL.encode(Array(#"{"alg":"none"}"#.utf8))).\(parts[1])."
        refused("alg: none", .unsupportedAlgorithm) { _ = try verifier.verify(none, now: now) }
        let impostor = try JWT.sign(claims, key: try JWK.generate(for: .es256, keyID: key.keyID), algorithm: .es256)
        refused("another key with the same kid", .signatureInvalid) { _ = try verifier.verify(impostor, now: now) }
        refused("the token two hours later", .expired) { _ = try verifier.verify(token, now: now + 7200) }
        var replay = policy
        replay.nonce = Base64URL.encode(JOSECrypto.randomBytes(16))
        refused("the token replayed into another sign-in", .nonceMismatch) {
            _ = try JWTVerifier(keys: jwks, policy: replay).verify(token, now: now)
        }
    }
}

/// `sesame demo`'s REST step: the `/register` + `/login` + `/refresh-token` + `/logout` contract most apps start
/// from, spoken raw so every body shows on the wire.
enum DemoREST {
    static func contract(base: URL, wire: DemoWire, log: DemoNarrator.Log) async throws {
        func call(_ method: String, _ path: String, _ body: JOSEValue? = nil, bearer: String? = nil) async throws
            -> (status: Int, json: JOSEValue?)
        {
            var headers = SesameHTTP.Headers()
            if body != nil { headers["Content-Type"] = "application/json" }
            if let bearer { headers["Authorization"] = "Bearer \(bearer)" }
            let response = try await wire.send(
                .init(
                    method: method, url: base.appendingPathComponent(path), headers: headers,
                    body: body.map { Data($0.jsonBytes) }))
            return (response.status, try? JOSEValue.parse(response.body))
        }
        let credentials: JOSEValue = ["email": "bea@example.com", "password": "another-long-password"]
        let registered = try await call("POST", "register", credentials)
        log.check("POST /register", registered.status == 201, "\(registered.status)")
        let refresh = registered.json?["refreshToken"]?.stringValue ?? ""
        let me = try await call("GET", "me", bearer: registered.json?["accessToken"]?.stringValue)
        log.check("GET /me with the access token", me.json?["email"] == "bea@example.com")
        let rotated = try await call("POST", "refresh-token", ["refreshToken": .string(refresh)])
        let next = rotated.json?["refreshToken"]?.stringValue ?? ""
        log.check("POST /refresh-token rotates", rotated.status == 200 && !next.isEmpty && next != refresh)
        let replayed = try await call("POST", "refresh-token", ["refreshToken": .string(refresh)])
        let family = try await call("POST", "refresh-token", ["refreshToken": .string(next)])
        log.check(
            "the spent one replayed revokes the family",
            replayed.json?["error"] == "invalid_grant" && family.status == 401
                || family.json?["error"] == "invalid_grant")
        let login = try await call("POST", "login", credentials)
        let logout = try await call(
            "POST", "logout", ["refreshToken": login.json?["refreshToken"] ?? .null],
            bearer: login.json?["accessToken"]?.stringValue)
        log.check(
            "POST /login, then POST /logout answers 204 with an empty body",
            login.status == 200 && logout.status == 204 && logout.json == nil)
    }
}
