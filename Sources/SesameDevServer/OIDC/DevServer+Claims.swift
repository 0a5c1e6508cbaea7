import Foundation
import SesameJOSE

/// What goes into ID tokens and UserInfo answers besides the protocol's claims: the user's claims by scope and by
/// the `claims` parameter, `acr`, and the configured templates; and the key each client's ID tokens are signed with.
extension DevServer {
    /// The authentication context class of every sign-in here: a password (or the development panel).
    ///
    /// Returned as `acr` when a client asks for it (`acr_values`, or `acr` in the `claims` parameter).
    public static let passwordACR = "urn:sesame:acr:password"
    /// Claims no template or configured user may set: the protocol's, and what says how the user authenticated.
    static let reservedClaims = protocolClaims.union(["acr", "amr"])

    // MARK: Claims

    /// Everything known about `user`: the configured claims, with `email`, `email_verified` (false unless
    /// configured), and `name` / `preferred_username` from the email's local part when not configured.
    func profile(of user: DevStore.User) -> JOSEObject {
        var profile = user.email.flatMap { profiles[$0] } ?? JOSEObject()
        if let email = user.email {
            profile["email"] = .string(email)
            if profile["email_verified"] == nil { profile["email_verified"] = false }
            let local = String(email.prefix { $0 != "@" })
            if profile["name"] == nil { profile["name"] = .string(local) }
            if profile["preferred_username"] == nil { profile["preferred_username"] = .string(local) }
        }
        return profile
    }

    /// The claims every token of this grant carries: the issuer's templates, then the client's, then the user's
    /// own claims that are not standard ones (standard ones go by scope), never a protocol claim.
    func customClaims(for grant: DevStore.Grant, profile: JOSEObject) -> JOSEObject {
        var claims = JOSEObject()
        let templates = [configuration.claims, clients[grant.clientID]?.claims ?? [:]]
        for template in templates {
            for (name, value) in template.sorted(by: { $0.key < $1.key }) where !Self.reservedClaims.contains(name) {
                claims[name] = ClaimTemplate.fill(
                    value, subject: grant.user.id, email: grant.user.email, clientID: grant.clientID)
            }
        }
        if let email = grant.user.email, let own = profiles[email] {
            for member in own
            where !StandardClaims.all.contains(member.name) && !Self.reservedClaims.contains(member.name) {
                claims[member.name] = member.value
            }
        }
        return claims
    }

    /// The claims a `claims` request asks for (`acr` included) that this user has.
    func requestedClaims(_ entries: [String: ClaimsRequest.Entry], profile: JOSEObject, acr: String) -> JOSEObject {
        var claims = JOSEObject()
        for (name, _) in entries.sorted(by: { $0.key < $1.key }) where !Self.protocolClaims.contains(name) {
            if name == "acr" {
                claims["acr"] = .string(acr)
            } else if let value = profile[name] {
                claims[name] = value
            }
        }
        return claims
    }

    /// The UserInfo answer's claims besides `sub` (OIDC Core §5.3.2): the scopes' standard claims, those the
    /// `claims` parameter asked for in `userinfo`, and the custom claims.
    func userInfoClaims(for grant: DevStore.Grant, scope: [String]) -> JOSEObject {
        let profile = profile(of: grant.user)
        var claims = customClaims(for: grant, profile: profile)
        for name in StandardClaims.requested(by: scope) {
            if let value = profile[name] { claims[name] = value }
        }
        let request = grant.requestClaims.flatMap { try? ClaimsRequest.parse($0).get() } ?? ClaimsRequest()
        for member in requestedClaims(request.userInfo, profile: profile, acr: grant.acr ?? Self.passwordACR) {
            claims[member.name] = member.value
        }
        return claims
    }

    // MARK: Keys per algorithm

    /// The algorithm of `clientID`'s ID tokens (``RegisteredClient/idTokenSigningAlgorithm``).
    func idTokenAlgorithm(for clientID: String) -> JWSAlgorithm {
        clients[clientID]?.idTokenSigningAlgorithm ?? configuration.signingAlgorithm
    }

    /// The ID-token algorithms some client uses besides the access tokens' (each has a key of its own).
    func otherIDTokenAlgorithms() -> [JWSAlgorithm] {
        let used = Set(clients.values.compactMap(\.idTokenSigningAlgorithm))
        return used.subtracting([configuration.signingAlgorithm]).sorted { $0.name < $1.name }
    }

    /// The active key that signs tokens of `algorithm`: the access-token key for the configured algorithm, else
    /// the ID-token key of that algorithm (made on first use, rotated on the same schedule).
    func signingKey(for algorithm: JWSAlgorithm) throws -> JWK {
        if algorithm == configuration.signingAlgorithm { return try currentKey() }
        let purpose = "id-" + algorithm.name
        let key = try store.signingKey(purpose: purpose, algorithm: algorithm, now: now)
        guard let every = configuration.keyRotationInterval,
            let created = try store.activeKeyCreation(purpose: purpose), now - created >= every
        else { return key }
        return try rotationLock.withLock {
            if let created = try store.activeKeyCreation(purpose: purpose), now - created < every {
                return try store.signingKey(purpose: purpose, algorithm: algorithm, now: now)
            }
            return try store.rotateSigningKey(purpose: purpose, algorithm: algorithm, now: now)
        }
    }
}

/// A token the server issued, decoded for the debugger page: never the token itself.
struct IssuedToken: Sendable {
    let issuedAt: Int64
    let kind: String
    let clientID: String
    let header: String
    let claims: String
}
