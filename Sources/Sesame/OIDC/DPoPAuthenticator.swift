public import Foundation
public import SesameJOSE

/// The latest `DPoP-Nonce` per origin (RFC 9449 §8, §9): the token endpoint's and each resource server's apart.
public final class DPoPNonces: Sendable {
    private let nonces = LockedValue<[String: String]>([:])

    /// An empty cache.
    public init() {}

    /// The nonce `origin` gave last.
    public func nonce(for url: URL) -> String? {
        guard let origin = SesameHTTP.Origin(url)?.description else { return nil }
        return nonces.withLock { $0[origin] }
    }

    /// Whether `nonce` is one a proof may carry: RFC 9449 §8.1 NQCHAR (printable ASCII but `"` and `\`), 1 to
    /// 1024 bytes.
    public static func isAcceptable(_ nonce: String) -> Bool {
        !nonce.isEmpty && nonce.utf8.count <= 1024
            && nonce.utf8.allSatisfy {
                $0 >= 0x21 && $0 <= 0x7E && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\")
            }
    }

    /// Remembers `nonce` for `url`'s origin (at most 64 origins); a nonce that is not ``isAcceptable(_:)`` is
    /// ignored.
    public func remember(_ nonce: String, for url: URL) {
        guard let origin = SesameHTTP.Origin(url)?.description, Self.isAcceptable(nonce) else { return }
        nonces.withLock { table in
            if table.count >= 64, table[origin] == nil { table.removeAll() }
            table[origin] = nonce
        }
    }
}

/// `Authorization: DPoP <token>` with a fresh proof per request (RFC 9449 §7): `ath` for the token, the origin's
/// latest nonce; a `use_dpop_nonce` challenge is retried once with the new nonce.
///
/// It never sends a token as Bearer: a session whose tokens are not DPoP tokens is refused (sign in again).
public struct DPoPAuthenticator: Authenticator {
    /// The proof key's signer (nil for a key that cannot sign proofs: then every request fails).
    public let signer: DPoPSigner?
    /// Nonces per origin, shared with the provider's token requests when you pass the same cache.
    public let nonces: DPoPNonces
    private let timeSource: any TimeSource

    /// An authenticator proving possession of `key` (private).
    public init(key: JWK, nonces: DPoPNonces = DPoPNonces(), timeSource: any TimeSource = SystemTimeSource()) {
        self.init(signer: try? DPoPSigner(key: key), nonces: nonces, timeSource: timeSource)
    }

    /// An authenticator proving possession of the key behind `signer` (a Secure Enclave key, for one).
    public init(signer: DPoPSigner?, nonces: DPoPNonces = DPoPNonces(), timeSource: any TimeSource = SystemTimeSource())
    {
        self.signer = signer
        self.nonces = nonces
        self.timeSource = timeSource
    }

    /// Always true.
    public var usesSessionCredentials: Bool { true }

    /// Sets `Authorization: DPoP` and a `DPoP` proof for this request.
    ///
    /// - Throws: ``AuthError`` — ``AuthError/Code/notSignedIn``; ``AuthError/Code/configuration`` for a token that
    ///   is not a DPoP token (never downgraded to Bearer); ``AuthError/Code/dpopKeyMismatch`` when the tokens are
    ///   bound to another key.
    public func authenticate(_ request: SesameHTTP.Request, context: AuthenticationContext) async throws
        -> SesameHTTP.Request
    {
        guard let tokens = context.tokens else { throw AuthError(.notSignedIn, "no one is signed in") }
        guard SesameHTTP.Headers.same(tokens.tokenType, "dpop") else {
            throw AuthError(.configuration, "the session's token is not a DPoP token; sign in again with DPoP")
        }
        guard let signer else { throw AuthError(.configuration, "the DPoP key is not a private asymmetric key") }
        try Self.check(tokens, boundTo: signer.thumbprint)
        var request = request
        request.headers["Authorization"] = "DPoP \(tokens.accessToken)"
        request.headers["DPoP"] = try signer.proof(
            method: request.method, url: request.url, accessToken: tokens.accessToken,
            nonce: context.nonce ?? nonces.nonce(for: request.url), issuedAt: timeSource.now)
        return request
    }

    /// Refuses `tokens` bound to a key other than the one with `thumbprint` (`nil`: no key at all).
    ///
    /// Reads ``TokenSet/dpopKeyThumbprint``; tokens stored before thumbprints were recorded pass (the server still
    /// checks).
    static func check(_ tokens: TokenSet, boundTo thumbprint: String?) throws {
        guard let bound = tokens.dpopKeyThumbprint else {
            if thumbprint == nil, SesameHTTP.Headers.same(tokens.tokenType, "dpop") {
                throw AuthError(
                    .dpopKeyMismatch, "the tokens are DPoP-bound but no DPoP key is configured; sign in again")
            }
            return
        }
        guard let thumbprint else {
            throw AuthError(.dpopKeyMismatch, "the DPoP key these tokens are bound to is missing; sign in again")
        }
        guard bound.utf8.elementsEqual(thumbprint.utf8) else {
            throw AuthError(.dpopKeyMismatch, "the DPoP key is not the one these tokens are bound to; sign in again")
        }
    }

    /// Remembers a `DPoP-Nonce`; `use_dpop_nonce` → retry with it; an invalid token → refresh and retry.
    public func classify(_ response: SesameHTTP.Response, for request: SesameHTTP.Request) -> AuthenticationVerdict {
        let nonce = response.header("DPoP-Nonce").flatMap { DPoPNonces.isAcceptable($0) ? $0 : nil }
        if let nonce { nonces.remember(nonce, for: request.url) }
        guard response.status == 401 else { return .done }
        let challenges = response.challenges.filter { $0.isScheme("DPoP") }
        if let nonce, challenges.contains(where: { $0["error"] == "use_dpop_nonce" }) { return .retry(nonce: nonce) }
        if response.challenges.isEmpty { return .refreshAndRetry }
        return challenges.contains { $0["error"] == nil || $0["error"] == "invalid_token" } ? .refreshAndRetry : .done
    }
}

/// A DPoP proof without an access token, for the token and PAR endpoints (RFC 9449 §5): `use_dpop_nonce` in a 400
/// error body is retried once with the nonce the endpoint sent.
struct DPoPProofAuthenticator: Authenticator {
    let signer: DPoPSigner
    let nonces: DPoPNonces
    let timeSource: any TimeSource

    var usesSessionCredentials: Bool { false }

    func authenticate(_ request: SesameHTTP.Request, context: AuthenticationContext) async throws
        -> SesameHTTP.Request
    {
        var request = request
        request.headers["DPoP"] = try signer.proof(
            method: request.method, url: request.url, nonce: context.nonce ?? nonces.nonce(for: request.url),
            issuedAt: timeSource.now)
        return request
    }

    func classify(_ response: SesameHTTP.Response, for request: SesameHTTP.Request) -> AuthenticationVerdict {
        guard let nonce = response.header("DPoP-Nonce").flatMap({ DPoPNonces.isAcceptable($0) ? $0 : nil }) else {
            return .done
        }
        nonces.remember(nonce, for: request.url)
        guard response.status == 400, ServerErrorResponse(response)?.error == "use_dpop_nonce" else { return .done }
        return .retry(nonce: nonce)
    }
}

extension AuthorizedClient.Authorization {
    /// DPoP with `authenticator` (see ``DPoPAuthenticator``).
    public static func dpop(_ authenticator: DPoPAuthenticator) -> AuthorizedClient.Authorization {
        AuthorizedClient.Authorization(authenticator)
    }
}
