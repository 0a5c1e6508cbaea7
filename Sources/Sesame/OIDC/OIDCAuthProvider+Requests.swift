import Foundation
import SesameJOSE

// The requests an OIDCAuthProvider sends (form posts, DPoP proofs and their nonce retry) and how it reads a token
// response; the protocol steps themselves are in OIDCAuthProvider.swift.
extension OIDCAuthProvider {

    /// Checks a native app's redirect URI (RFC 8252 §7, BCP-21).
    ///
    /// Allowed: https, `http` to a loopback IP literal, or a private-use scheme in reverse-domain form
    /// (`com.example.app:/callback`). `http://localhost` is refused (§8.3), as is any other plain http.
    ///
    /// - Throws: ``AuthError`` with ``AuthError/Code/configuration``.
    public static func checkRedirectURI(_ uri: String) throws {
        guard !uri.isEmpty else {
            throw AuthError(
                .configuration,
                "a sign-in in the browser needs a redirect URI: configure with the one registered (a LoopbackUserAgent's "
                    + "redirectURI); the device flow needs none")
        }
        guard let components = URLComponents(string: uri), let scheme = components.scheme?.lowercased(),
            components.fragment == nil
        else { throw AuthError(.configuration, "the redirect URI \(uri) is not an absolute URI without a fragment") }
        switch scheme {
        case "https":
            guard components.host?.isEmpty == false else {
                throw AuthError(.configuration, "the redirect URI has no host")
            }
        case "http":
            let host = (components.host ?? "").trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
            guard host == "::1" || OIDCProviderMetadata.isLoopbackIPv4(host) else {
                throw AuthError(
                    .configuration,
                    "an http redirect URI must be a loopback IP literal (http://127.0.0.1:PORT/… or http://[::1]:PORT/…)"
                        + (host == "localhost" ? ", not localhost (RFC 8252 §8.3)" : ""))
            }
        default:
            guard scheme.contains("."), !["javascript", "data", "file"].contains(scheme) else {
                throw AuthError(
                    .configuration,
                    "a private-use redirect scheme must be reverse-domain (com.example.app:/callback), not \(scheme)")
            }
        }
    }

    /// Whether `url` arrived on `expected`: same scheme, host, port and path (the query is the response).
    static func sameEndpoint(_ url: URL, _ expected: String) -> Bool {
        guard let a = URLComponents(url: url, resolvingAgainstBaseURL: false), let b = URLComponents(string: expected)
        else { return false }
        return a.scheme?.lowercased() == b.scheme?.lowercased() && a.host?.lowercased() == b.host?.lowercased()
            && a.port == b.port && a.percentEncodedPath == b.percentEncodedPath
    }

    func postForm(_ url: URL, _ pairs: [(String, String)], headers extra: SesameHTTP.Headers = [:]) async throws
        -> SesameHTTP.Response
    {
        let (pairs, authentication) = try authenticated(pairs, for: url)
        var headers: SesameHTTP.Headers = [
            "Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json",
        ]
        for field in extra { headers[field.name] = field.value }
        for field in authentication { headers[field.name] = field.value }
        return try await transport.send(
            SesameHTTP.Request(method: "POST", url: url, headers: headers, body: Data(Self.formEncode(pairs).utf8)))
    }

    /// `pairs` with this client's authentication (``Configuration/clientAuthentication``) when `url` is one of the
    /// provider's endpoints that take it — token, PAR, revocation, device authorization — and unchanged elsewhere:
    /// a client's credentials go nowhere else.
    func authenticated(_ pairs: [(String, String)], for url: URL) throws -> (
        pairs: [(String, String)], headers: SesameHTTP.Headers
    ) {
        let authentication = configuration.clientAuthentication
        let endpoints = [
            metadata.tokenEndpoint, metadata.pushedAuthorizationRequestEndpoint, metadata.revocationEndpoint,
            metadata.deviceAuthorizationEndpoint,
        ].compactMap { $0 }
        guard authentication.isConfidential, endpoints.contains(url) else { return (pairs, [:]) }
        return try authentication.apply(
            to: pairs, clientID: configuration.clientID, issuer: metadata.issuer, tokenEndpoint: metadata.tokenEndpoint,
            now: timeSource.now.addingTimeInterval(clock.withLock { $0 }),
            keepsClientID: url == metadata.pushedAuthorizationRequestEndpoint)
    }

    /// A token or PAR request: with ``Configuration/dpopKey``, a fresh proof, and one retry on `use_dpop_nonce`
    /// (RFC 9449 §8; the provider refuses before spending anything).
    func postWithProof(_ url: URL, _ pairs: [(String, String)]) async throws -> SesameHTTP.Response {
        guard configuration.usesDPoP else { return try await postForm(url, pairs) }
        guard let dpopSigner else {
            throw AuthError(.configuration, "the DPoP key is not a private asymmetric key")
        }
        let request = SesameHTTP.Request(
            method: "POST", url: url,
            headers: ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"])
        let proof = DPoPProofAuthenticator(signer: dpopSigner, nonces: dpopNonces, timeSource: timeSource)
        // The body, with the client's authentication, made again for every send: a retry with a nonce must not
        // replay a client assertion (its jti is single-use).
        let fresh = FreshlyAuthenticatedBody(proof: proof) { [self] in
            let (pairs, headers) = try authenticated(pairs, for: url)
            return (Data(Self.formEncode(pairs).utf8), headers)
        }
        var exchange = AuthenticatedExchange(request, authenticator: fresh, credentials: .none)
        return try await exchange.run(on: transport)
    }

    /// A token response as a ``TokenSet``, its ID token validated.
    func tokens(from response: SesameHTTP.Response, expecting: IDTokenValidator.Expectations, previous: TokenSet?)
        async throws -> TokenSet
    {
        let receivedAt = timeSource.now
        guard let json = try? JOSEValue.parse(response.body), let access = json["access_token"]?.stringValue,
            RESTAuthProvider.isTokenText(access), let type = json["token_type"]?.stringValue,
            RESTAuthProvider.isTokenText(type), type.utf8.count <= 32
        else { throw AuthError(.invalidResponse, "the token response has no usable access_token and token_type") }
        // RFC 6749 §7.1: a client must understand the token type. With a DPoP key only DPoP tokens are taken
        // (RFC 9449 §5, strict: a Bearer answer would silently drop the protection); without one, Bearer only.
        let expected = configuration.usesDPoP ? "dpop" : "bearer"
        guard type.lowercased() == expected else {
            throw AuthError(
                .invalidResponse, "the token type is \(type), not \(expected == "dpop" ? "DPoP" : "Bearer")")
        }
        // The provider's clock from its Date header: this response's ID token is checked on it, and it is kept for
        // later ones only when this response is taken (a proxy's or portal's 200 page, or a token response refused
        // below, must not move it).
        var learnedOffset: TimeInterval?
        if configuration.learnsClockFromDateHeader, let header = response.header("Date"),
            let serverDate = HTTPDate.parse(header, now: receivedAt)
        {
            let offset = serverDate.timeIntervalSince(receivedAt)
            // A skew worth correcting (the Date header has one-second resolution), and a sane one (a Date a year off
            // is a broken server, not a clock fix).
            learnedOffset = abs(offset) > 5 && abs(offset) <= 86400 ? offset : 0
        }
        let refresh = json["refresh_token"]?.stringValue ?? previous?.refreshToken
        guard refresh.map(RESTAuthProvider.isTokenText) ?? true else {
            throw AuthError(.invalidResponse, "the token response's refresh_token is malformed")
        }
        var idToken = previous?.idToken
        var user = previous?.user
        if var validator, let keys {
            if let learnedOffset { validator.clockOffset = learnedOffset }
            if let returned = json["id_token"]?.stringValue {
                var expectations = expecting
                expectations.accessToken = access
                let claims: JWTClaims
                do {
                    claims = try await validator.validate(
                        returned, expecting: expectations, keys: keys, now: receivedAt)
                } catch let error as AuthError {
                    SesameLog.log(.error, .oidc, "ID token \(redacted: returned) refused: \(error)")
                    throw error
                }
                SesameLog.log(.debug, .oidc, "ID token \(redacted: returned) verified against the provider's keys")
                idToken = returned
                user = TokenSet.User(
                    id: claims.subject ?? "", email: claims["email"]?.stringValue, claims: claims.values.dictionary)
            } else if previous == nil, wantsOpenID || expecting.subject != nil {
                throw AuthError(.invalidResponse, "the token response has no id_token although openid was requested")
            }
        }
        // Native SSO §3.4 (NSSO-01): a device secret, only with a new sign-in, and only with an ID token that names
        // its device session (sid) and is bound to it (ds_hash); a refresh answer's is not taken.
        var deviceSecret: String?
        if previous == nil, let secret = json["device_secret"] {
            guard let text = secret.stringValue, RESTAuthProvider.isTokenText(text), let idToken,
                let claims = try? JWT.unverifiedClaims(of: idToken), claims["sid"]?.stringValue != nil,
                claims["ds_hash"]?.stringValue != nil
            else {
                throw AuthError(
                    .invalidResponse,
                    "the token response has a device_secret without an ID token naming sid and ds_hash (Native SSO §3.4)"
                )
            }
            deviceSecret = text
        }
        if let learnedOffset { clock.withLock { $0 = learnedOffset } }
        return TokenSet(
            accessToken: access, tokenType: type, refreshToken: refresh, idToken: idToken,
            expiresAt: TokenSet.expiry(
                expiresIn: json["expires_in"]?.doubleValue, accessToken: access, receivedAt: receivedAt),
            receivedAt: receivedAt,
            scope: json["scope"]?.stringValue ?? previous?.scope
                ?? (previous == nil ? configuration.scopes.joined(separator: " ") : nil), user: user,
            dpopKeyThumbprint: dpopThumbprint, deviceSecret: deviceSecret)
    }

    static func failure(_ response: SesameHTTP.Response, _ what: String) -> AuthError {
        let base = AuthError.unexpected(response)
        var error = AuthError(
            base.code, "\(what): \(base.message)", statusCode: response.status, serverResponse: base.serverResponse)
        error.retryAfter = base.retryAfter
        return error
    }

    static func formEncode(_ pairs: [(String, String)]) -> String {
        pairs.map { formComponent($0.0) + "=" + formComponent($0.1) }.joined(separator: "&")
    }

    /// `text` percent-encoded for a form: everything but unreserved characters.
    ///
    /// Byte by byte over the UTF-8, with no `CharacterSet`: building one per call was most of a token request's cost.
    static func formComponent(_ text: String) -> String {
        var encoded: [UInt8] = []
        encoded.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                encoded.append(byte)
            default:
                SesameHTTP.appendPercentEscape(byte, to: &encoded)
            }
        }
        return String(decoding: encoded, as: UTF8.self)
    }

    /// A form or query component decoded byte for byte (`%XX` as its byte, `+` as a space when `plusIsSpace`).
    ///
    /// Nil for a `%` without two hex digits or bytes that are not UTF-8. Not Foundation's `removingPercentEncoding`,
    /// which drops a leading U+FEFF and so makes `%EF%BB%BFx` and `x` the same value: identifiers compare byte for
    /// byte.
    static func formDecoded(_ text: some StringProtocol, plusIsSpace: Bool) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue)
                else { return nil }
                bytes.append(high << 4 | low)
            } else {
                bytes.append(plusIsSpace && byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            }
        }
        // Valid UTF-8 exactly when decoding replaced nothing (`String(validating:)` needs iOS 18 / macOS 15).
        let text = String(decoding: bytes, as: UTF8.self)
        return text.utf8.elementsEqual(bytes) ? text : nil
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// A set that forgets its oldest members beyond `capacity`.
struct BoundedSet: Sendable {
    let capacity: Int
    private var members: Set<String> = []
    private var order: [String] = []

    init(capacity: Int) { self.capacity = capacity }

    /// Inserts `member`; false when it was there already.
    mutating func insert(_ member: String) -> Bool {
        guard members.insert(member).inserted else { return false }
        order.append(member)
        if order.count > capacity { members.remove(order.removeFirst()) }
        return true
    }
}

/// A token-endpoint request's body and client authentication made afresh for every send, then a DPoP proof.
struct FreshlyAuthenticatedBody: Authenticator {
    let proof: DPoPProofAuthenticator
    let body: @Sendable () throws -> (Data, SesameHTTP.Headers)

    var usesSessionCredentials: Bool { false }

    func authenticate(_ request: SesameHTTP.Request, context: AuthenticationContext) async throws
        -> SesameHTTP.Request
    {
        var request = request
        let (data, headers) = try body()
        request.body = data
        for field in headers { request.headers[field.name] = field.value }
        return try await proof.authenticate(request, context: context)
    }

    func classify(_ response: SesameHTTP.Response, for request: SesameHTTP.Request) -> AuthenticationVerdict {
        proof.classify(response, for: request)
    }
}
