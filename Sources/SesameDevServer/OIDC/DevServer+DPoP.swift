import Foundation
import SesameJOSE
import SesameLoopback

/// DPoP (RFC 9449) on the provider: proofs on `/token`, `/par`, `/userinfo` and `/me`, tokens bound with `cnf.jkt`,
/// nonces derived from a server secret (no table of issued nonces), replayed `jti`s refused within the window.
extension DevServer {
    /// What a request's DPoP proof says.
    enum DPoPCheck {
        /// No `DPoP` header.
        case absent
        /// A valid proof by the key with this thumbprint.
        case valid(String)
        /// An invalid proof, or one without the current nonce: answer this.
        case refused(HTTPServerResponse)
    }

    /// How long one nonce is current; the previous one is still accepted.
    static let dpopNonceWindow: Int64 = 300

    /// The nonce of the window containing `time`: an HMAC of the window number under the form secret.
    func dpopNonce(at time: Int64) -> String {
        let window = time / Self.dpopNonceWindow
        return Base64URL.encode(JOSECrypto.hmac(Array("dpop-nonce \(window)".utf8), key: formSecret, algorithm: .hs256))
    }

    /// Checks the `DPoP` header of `request` at `path` (with `accessToken` for resource requests).
    func dpopProof(_ request: HTTPServerRequest, path: String, accessToken: String?) -> DPoPCheck {
        let proofs = request.headers.values("DPoP")
        guard !proofs.isEmpty else { return .absent }
        let resource = accessToken != nil
        func refuse(_ code: String, _ description: String, nonce: Bool = false) -> DPoPCheck {
            var response =
                resource
                ? Self.error(401, code, description)
                : Self.oauthError(OAuthFailure(code, description))
            if resource {
                response.headers.set("WWW-Authenticate", "DPoP error=\"\(code)\", algs=\"ES256 EdDSA RS256 PS256\"")
            }
            if configuration.dpopNonce || nonce { response.headers.set("DPoP-Nonce", dpopNonce(at: now)) }
            return .refused(response)
        }
        guard proofs.count == 1, let proof = proofs.first, let url = URL(string: state.withLock { $0.issuer } + path)
        else { return refuse("invalid_dpop_proof", "send exactly one DPoP header") }
        let time = now
        let verified: DPoPProofVerifier.Verified
        do {
            verified = try DPoPProofVerifier().verify(
                proof, method: request.method, url: url, accessToken: accessToken,
                now: Date(timeIntervalSince1970: Double(time)))
        } catch {
            return refuse("invalid_dpop_proof", "the DPoP proof was rejected: \(error)")
        }
        let accepted = [dpopNonce(at: time), dpopNonce(at: time - Self.dpopNonceWindow)]
        let carriesNonce = verified.nonce.map { stated in
            accepted.contains { ConstantTime.equals(Array($0.utf8), Array(stated.utf8)) }
        }
        if configuration.dpopNonce, carriesNonce != true {
            return refuse("use_dpop_nonce", "use the DPoP-Nonce this server sent")
        }
        // The replay cache lives in memory, the grants (with `--db`) on disk: a proof that may predate this process
        // (its iat before the start, with the clock skew allowed) could have been used before a restart. A nonce of
        // this process's proves a proof new, so such a proof is asked for one (RFC 9449 §8) instead of trusted.
        // (The previous process took iat ≤ its whole-second clock + the skew, and its clock ≤ this start.)
        let fresh = verified.issuedAt.timeIntervalSince1970 > Double(startedAt) + DPoPProofVerifier().leeway
        if configuration.databasePath != ":memory:", !fresh, carriesNonce != true {
            return refuse(
                "use_dpop_nonce", "this proof may predate the server's start: use the DPoP-Nonce", nonce: true)
        }
        // A proof is good once (RFC 9449 §11.1): its jti is remembered for as long as the proof would be accepted.
        let outcome = dpopProofs.withLock {
            $0.insert(jti: verified.jti, key: verified.thumbprint, expiring: time + 70, now: time)
        }
        if let outcome { return refuse("invalid_dpop_proof", outcome) }
        return .valid(verified.thumbprint)
    }

    /// Enforces an access token's binding on a resource request.
    ///
    /// A DPoP-bound token needs the `DPoP` scheme and a proof by its key with its `ath`; a Bearer token may not be
    /// presented as DPoP.
    ///
    /// - Returns: nil when the request may go on, else the 401 to send.
    func checkBinding(_ request: HTTPServerRequest, claims: JWTClaims, token: String, scheme: String, path: String)
        -> HTTPServerResponse?
    {
        let bound = claims["cnf"]?["jkt"]?.stringValue
        if scheme == "Bearer" {
            guard bound == nil else {
                return Self.dpopChallenge("invalid_token", "this token is bound to a DPoP key: send it as DPoP")
            }
            return nil
        }
        guard let bound else { return Self.dpopChallenge("invalid_token", "this token is not a DPoP token") }
        switch dpopProof(request, path: path, accessToken: token) {
        case .absent: return Self.dpopChallenge("invalid_dpop_proof", "a DPoP token needs a DPoP proof")
        case .refused(let response): return response
        case .valid(let thumbprint):
            guard ConstantTime.equals(Array(thumbprint.utf8), Array(bound.utf8)) else {
                return Self.dpopChallenge("invalid_dpop_proof", "the proof's key is not the token's")
            }
            return nil
        }
    }

    static func dpopChallenge(_ code: String, _ description: String) -> HTTPServerResponse {
        var response = error(401, code, description)
        response.headers.set("WWW-Authenticate", "DPoP error=\"\(code)\", algs=\"ES256 EdDSA RS256 PS256\"")
        return response
    }

    /// The access token of a resource request and its scheme (`Bearer` or `DPoP`).
    static func presentedToken(_ request: HTTPServerRequest) -> (token: String, scheme: String)? {
        if let token = request.authorization(scheme: "DPoP") { return (token, "DPoP") }
        if let token = request.authorization(scheme: "Bearer") { return (token, "Bearer") }
        return nil
    }
}

/// The `jti`s of recently accepted proofs, per key (RFC 9449 §11.1), bounded in total and per key: it refuses
/// rather than forgets when full (a replay must never get through), and one key flooding it is refused alone
/// (`perKeyCapacity`) instead of locking every client out.
package struct DPoPReplayCache {
    private var byKey: [String: [String: Int64]] = [:]
    private var count = 0
    /// The most proofs remembered at once.
    package let capacity: Int
    /// The most proofs of one key remembered at once (a client makes a few a second).
    package let perKeyCapacity: Int

    package init(capacity: Int = 100_000, perKeyCapacity: Int = 10_000) {
        self.capacity = capacity
        self.perKeyCapacity = perKeyCapacity
    }

    /// Remembers `jti` of `key` until `expiry`; the refusal to send otherwise.
    package mutating func insert(jti: String, key: String, expiring expiry: Int64, now: Int64) -> String? {
        if byKey[key]?[jti] != nil { return "this DPoP proof was already used" }
        if let entries = byKey[key], entries.count >= perKeyCapacity {
            // Purge this key's expired proofs only when it is at its limit (not on every request).
            let kept = entries.filter { $0.value > now }
            count -= entries.count - kept.count
            byKey[key] = kept
            if kept.count >= perKeyCapacity { return "this DPoP key sent too many proofs; retry in a minute" }
        }
        if count >= capacity {
            var total = 0
            byKey = byKey.compactMapValues { entries in
                let kept = entries.filter { $0.value > now }
                total += kept.count
                return kept.isEmpty ? nil : kept
            }
            count = total
            if count >= capacity { return "too many recent DPoP proofs; retry in a minute" }
        }
        byKey[key, default: [:]][jti] = expiry
        count += 1
        return nil
    }
}
