import Foundation

/// One request with credentials: apply them, send, classify the answer; refresh and retry once when they were
/// rejected, and — a separate budget (catalog HTTP-07) — retry once with a nonce the server asked for.
///
/// The one loop behind ``AuthorizedClient`` (which adds redirects around it), UserInfo, and the token endpoint's
/// DPoP proofs. A nonce demand and an expired token in the same exchange are both cured: at most four sends.
struct AuthenticatedExchange {
    /// Where the tokens come from.
    enum Credentials {
        /// The authenticator needs no tokens (a proof without a token, Basic, none).
        case none
        /// These tokens, never refreshed: a rejection is the answer.
        case fixed(TokenSet)
        /// The session's tokens, refreshed (once for every concurrent caller) when rejected.
        case session(AuthSession)
    }

    /// What to do after an answer.
    enum Step {
        /// The answer stands.
        case finished
        /// Send again (``prepare()`` applies the refreshed credentials or the nonce).
        case again
    }

    let authenticator: any Authenticator
    let credentials: Credentials
    /// The request to send next (``AuthorizedClient`` replaces it when following a redirect).
    var request: SesameHTTP.Request
    /// The nonce for the next proof; cleared when a redirect leaves the origin that gave it (RFC 9449 §8).
    var nonce: String?
    private var refreshed = false
    private var nonceRetried = false
    private var generation: Int?
    private var rejectedGeneration: Int?

    init(_ request: SesameHTTP.Request, authenticator: any Authenticator, credentials: Credentials) {
        self.request = request
        self.authenticator = authenticator
        self.credentials = credentials
    }

    /// ``request`` with the credentials applied.
    ///
    /// - Throws: the session's errors (not signed in, session expired, transient) and the authenticator's.
    mutating func prepare() async throws -> SesameHTTP.Request {
        var tokens: TokenSet?
        if authenticator.usesSessionCredentials {
            switch credentials {
            case .none: break
            case .fixed(let fixed): tokens = fixed
            case .session(let session):
                let current: (tokens: TokenSet, generation: Int)
                if let rejected = rejectedGeneration {
                    current = try await session.credentials(after: rejected)
                    rejectedGeneration = nil
                } else if let fresh = session.freshCredentials() {
                    generation = fresh.generation
                    // The common case, Bearer with credentials in hand: no copy of the token set at all.
                    if let value = fresh.bearerValue, authenticator is BearerAuthenticator {
                        return BearerAuthenticator.apply(value, to: request)
                    }
                    current = (fresh.tokens, fresh.generation)
                } else {
                    current = try await session.credentials()
                }
                tokens = current.tokens
                generation = current.generation
            }
        }
        return try await authenticator.authenticate(
            request, context: AuthenticationContext(tokens: tokens, nonce: nonce))
    }

    /// Reads `response` (to `outgoing`, as ``prepare()`` made it).
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/unauthorized`` when the session's credentials are still
    ///   rejected after a refresh (or a server keeps demanding new nonces): never a loop.
    mutating func step(after response: SesameHTTP.Response, to outgoing: SesameHTTP.Request) throws -> Step {
        switch authenticator.classify(response, for: outgoing) {
        case .done:
            return .finished
        case .retry(let nonce) where !nonceRetried:
            nonceRetried = true
            self.nonce = nonce
            SesameLog.log(
                .info, .dpop,
                "\(public: SesameHTTP.hostAndPort(outgoing.url)) asked for a DPoP nonce (\(redacted: nonce)): one retry with it"
            )
            return .again
        case .refreshAndRetry where !refreshed && canRefresh:
            SesameLog.log(
                .info, .http,
                "HTTP \(response.status) from \(public: SesameHTTP.hostAndPort(outgoing.url)): credentials rejected, refreshing once and retrying"
            )
            refreshed = true
            rejectedGeneration = generation
            return .again
        case .refreshAndRetry, .retry:
            guard canRefresh else { return .finished }
            throw AuthError(
                .unauthorized, "the request is unauthorized even with fresh credentials", statusCode: response.status)
        }
    }

    /// The whole exchange, without redirects.
    mutating func run(on transport: any HTTPTransport) async throws -> SesameHTTP.Response {
        while true {
            let outgoing = try await prepare()
            let response = try await transport.send(outgoing)
            if try step(after: response, to: outgoing) == .finished { return response }
        }
    }

    /// Whether a rejection can be cured by newer credentials.
    private var canRefresh: Bool {
        guard authenticator.usesSessionCredentials, case .session = credentials else { return false }
        return true
    }
}
