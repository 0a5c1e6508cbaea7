import Foundation
import SesameJOSE
import SesameLoopback

/// Sign in with Apple: the backend exchange (`POST /auth/apple`) and a stand-in Apple issuer for local use.
extension DevServer {
    /// Apple's issuer, which identity tokens must carry.
    static let appleIssuer = "https://appleid.apple.com"

    /// The `nonce` claim of an Apple identity token: the lowercase hex SHA-256 of the raw nonce the app generated.
    public static func appleNonceHash(_ rawNonce: String) -> String {
        JOSECrypto.sha256(Array(rawNonce.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// The stand-in Apple signing key (RS256, as Apple uses), created on first use and kept in the database.
    func standInAppleKey() throws -> JWK {
        if let key = state.withLock({ $0.appleKey }) { return key }
        let key = try store.signingKey(purpose: "apple", algorithm: .rs256, now: now)
        state.withLock { $0.appleKey = key }
        return key
    }

    private func appleKeySet() throws -> JWKSet {
        if let configured = configuration.appleKeys { return configured }
        return try JWKSet(keys: [try standInAppleKey().publicKey()])
    }

    func appleExchange(_ request: HTTPServerRequest) -> HTTPServerResponse {
        Self.withJSONBody(request) { body in
            guard let identityToken = body["identityToken"]?.stringValue, let nonce = body["nonce"]?.stringValue,
                !nonce.isEmpty
            else { return Self.error(400, "invalid_request", "identityToken and nonce are required strings") }
            do {
                var policy = ClaimValidationPolicy(
                    issuer: Self.appleIssuer, audience: configuration.appleBundleID, nonce: Self.appleNonceHash(nonce),
                    requiredClaims: ["exp", "iat", "sub"])
                policy.maxAge = 600
                let verifier = JWTVerifier(keys: try appleKeySet(), policy: policy)
                let claims = try verifier.verifiedClaims(of: identityToken, now: currentDate)
                guard let subject = claims.subject else { return Self.error(401, "invalid_grant", "no subject") }
                // Apple sends email_verified as a boolean or as the string "true".
                let verified = claims["email_verified"] == .bool(true) || claims["email_verified"] == .string("true")
                let email = claims["email"]?.stringValue.map(Self.normalize(email:)).flatMap {
                    Self.isPlausible(email: $0) ? $0 : nil
                }
                guard
                    try store.markUsed(
                        token: identityToken,
                        // Remembered past its exp by more than the verifier's leeway: no replay window at the end.
                        expiresAt: Int64(claims.expiresAt?.timeIntervalSince1970 ?? 0) + 120, now: now)
                else { return Self.error(401, "invalid_grant", "the identity token was already exchanged") }
                // Only tokens of a configured (real) Apple issuer may link to an existing account: the stand-in's
                // are minted by anyone who can reach /_dev/, and must not take a password account over.
                let user = try store.appleUser(
                    subject: subject, email: email, emailVerified: verified,
                    linksExisting: configuration.appleKeys != nil, now: now)
                state.withLock { $0.counters.appleExchanges += 1 }
                return try authResponse(for: user, status: 200)
            } catch let error as JOSEError {
                return Self.error(401, "invalid_grant", "the identity token was rejected: \(error.code)")
            } catch {
                return Self.error(500, "server_error", "the exchange could not be completed")
            }
        }
    }

    /// `POST /_dev/apple/identity-token` — development only: mints an identity token as Apple would, signed by
    /// the stand-in key.
    ///
    /// Body: `{"sub","email","nonce"}` (the raw nonce; the token carries its SHA-256), and for
    /// negative tests optionally `"aud"`, `"iss"` and `"expiresIn"` (seconds, may be negative).
    func mintAppleToken(_ request: HTTPServerRequest) -> HTTPServerResponse {
        Self.withJSONBody(request) { body in
            guard let subject = body["sub"]?.stringValue, let nonce = body["nonce"]?.stringValue else {
                return Self.error(400, "invalid_request", "sub and nonce are required strings")
            }
            // Any number from a request is bounded before use: 1e300 must be a 400, never a trap.
            var lifetime: Int64 = 600
            if let value = body["expiresIn"] {
                guard let seconds = value.doubleValue, seconds.isFinite, abs(seconds) <= 10 * 365 * 86400 else {
                    return Self.error(400, "invalid_request", "expiresIn must be a number of seconds within ten years")
                }
                lifetime = Int64(seconds.rounded())
            }
            do {
                let issued = now
                var claims = JOSEObject()
                claims["iss"] = .string(body["iss"]?.stringValue ?? Self.appleIssuer)
                claims["aud"] = .string(body["aud"]?.stringValue ?? configuration.appleBundleID)
                claims["sub"] = .string(subject)
                claims["iat"] = .integer(issued)
                claims["exp"] = .integer(issued + lifetime)
                claims["nonce"] = .string(Self.appleNonceHash(nonce))
                claims["nonce_supported"] = true
                // Unique per minted token, as Apple's are (they differ in iat, auth_time and nonce).
                claims["jti"] = .string(UUID().uuidString)
                if let email = body["email"]?.stringValue {
                    claims["email"] = .string(email)
                    claims["email_verified"] = body["email_verified"] ?? true
                }
                let token = try JWT.sign(JWTClaims(claims), key: try standInAppleKey(), algorithm: .rs256, type: nil)
                return .json(200, JOSEValue.object(["identityToken": .string(token)]).jsonData)
            } catch {
                return Self.error(500, "server_error", "the token could not be minted")
            }
        }
    }

    /// `GET /_dev/apple/jwks` — the stand-in Apple issuer's public keys.
    func appleJWKS() -> HTTPServerResponse {
        guard let key = try? standInAppleKey().publicKey() else { return Self.error(500, "server_error", "no key") }
        return .json(200, JOSEValue.object(["keys": .array([key.jsonValue()])]).jsonData)
    }

    /// `POST /_dev/faults {"spec": SPEC}` — replaces the fault plan (`""` clears it).
    func setFaults(_ request: HTTPServerRequest) -> HTTPServerResponse {
        guard let object = try? JOSEValue.parse(request.body).objectValue,
            let spec = object["spec"]?.stringValue ?? object["faults"]?.stringValue
        else { return Self.error(400, "invalid_request", "the body is {\"spec\": SPEC}") }
        do {
            let plan = spec.isEmpty ? FaultPlan() : try FaultPlan(spec: spec)
            state.withLock { $0.faults = plan }
            return HTTPServerResponse(status: 204)
        } catch {
            return Self.error(400, "invalid_request", "\(error)")
        }
    }
}
