import Foundation
import SesameJOSE

@testable import Sesame
@testable import SesameDevServer
@testable import SesameLoopback
@testable import sesame

/// The targets that read text handed to the SDK or a server: tokens, keys, headers, URLs, requests, forms, arguments.
extension Fixtures {
    /// A verifier with every claim check on, for claims the harness signs.
    static let strictVerifier: JWTVerifier = {
        var policy = ClaimValidationPolicy()
        (policy.issuer, policy.audience, policy.nonce, policy.maxAge) = (issuer, "fuzz-client", "n", 3600)
        return JWTVerifier(keys: keySet, policy: policy)
    }()

    static func jose(_ bytes: [UInt8]) {
        // A JSON object is also taken as claims, signed by the fixtures' key (the fuzzer cannot sign): what is
        // checked after a signature verifies is fuzzed too, and what passes must meet the policy.
        let parsed = try? JOSEValue.parse(bytes)
        if case .object(let object)? = parsed,
            let token = try? JWT.sign(JWTClaims(object), key: signingKey, algorithm: .es256),
            case let outcome = Result(catching: { try strictVerifier.verifiedClaims(of: token, now: now) }),
            case .success(let claims) = trace(outcome, "signed claims")
        {
            require(claims.issuer.map { ByteExact.equals($0, issuer) } == true, "a token of another issuer verified")
            require(
                claims.audience?.contains { ByteExact.equals($0, "fuzz-client") } == true,
                "a token for another audience verified")
            require(claims.nonce.map { ByteExact.equals($0, "n") } == true, "a token with another nonce verified")
            // The policy's arithmetic, at its boundaries (leeway 60 s, maxAge 3600 s).
            let time = now.timeIntervalSince1970
            require(claims["exp"]?.doubleValue.map { !(time >= $0 + 60) } == true, "an expired token verified")
            require(claims["nbf"]?.doubleValue.map { !(time + 60 < $0) } ?? true, "a token not yet valid verified")
            require(claims["events"] == nil, "a security event token verified as a JWT")
            // maxAge bounds iat here (auth_time is the ID-token validator's, above this layer).
            require(
                claims["iat"]?.doubleValue.map { !($0 > time + 60) && !(time - $0 > 3600 + 60) } ?? true,
                "a token issued in the future or longer ago than maxAge verified")
        }
        if let key = try? JWK(json: bytes, allowSymmetric: false) {
            require(key.keyType != .octet, "a symmetric key was read where only public keys may be")
        }
        _ = try? JWK(json: bytes, allowSymmetric: true)
        _ = try? JWKSet(json: bytes, allowSymmetric: true)
        let text = String(decoding: bytes, as: UTF8.self)
        _ = try? JWT.unverified(text)
        _ = try? Base64URL.decode(text)
        if let claims = try? verifier.verify(text, now: now) {
            // Only the fixtures' key signs: nothing the fuzzer makes can verify.
            require(false, "a fuzzed token verified: \(claims)")
        }
    }

    static func wwwAuthenticate(_ bytes: [UInt8]) {
        let text = String(decoding: bytes, as: UTF8.self)
        for challenge in AuthenticationChallenge.parse(text) { _ = challenge.isScheme("DPoP") }
        _ = StepUpChallenge(SesameHTTP.Response(status: 401, headers: ["WWW-Authenticate": text]))
        _ = StepUpChallenge(SesameHTTP.Response(status: 403, headers: ["WWW-Authenticate": text]))
    }

    static let apiBase = url("https://api.example/v1")

    static func redirect(_ bytes: [UInt8]) {
        let text = String(decoding: bytes, as: UTF8.self)
        // The same text as an endpoint path an app or `sesame request` gives AuthorizedClient: a URL under the base,
        // or a typed error (a query URLComponents would trap on once crashed the process).
        if let built = try? SesameHTTP.url(path: text, under: apiBase, baseText: "https://api.example/v1") {
            require(built.host == "api.example", "an endpoint path left the base: \(built)")
            // No `..` survives that a server would resolve out of /v1 (one hid behind a combining mark).
            require(built.standardized.path.hasPrefix("/v1"), "an endpoint path climbed out of /v1: \(built)")
        }
        // As a redirect: `STATE` stands for the request's state (the fuzzer cannot guess it), so that what is
        // checked after the state is fuzzed too.
        let pending = pending
        let redirect = text.replacingOccurrences(of: "STATE", with: pending.state)
        guard let url = URL(string: redirect) else { return }
        let parameters = (try? AuthorizationResponse(url: url))?.parameters
        let transport = FuzzTransport(answer: FuzzResponse([0]))
        let provider = provider(transport)
        blocking {
            // The token endpoint answers 200 with no body: nothing completes.
            let completed = await attempt { try await provider.completeAuthorization(redirect: url, pending: pending) }
            // The same response again (a replay): a state is good for one response (BCP-06).
            let replayed = await attempt { try await provider.completeAuthorization(redirect: url, pending: pending) }
            let exchanges = transport.tokenRequests.value.load(ordering: .relaxed)
            trace("completeAuthorization: \(completed), replayed: \(replayed); token requests: \(exchanges)")
            if case .success = completed { require(false, "a fuzzed redirect completed a sign-in: \(text)") }
            require(exchanges <= 1, "a replayed authorization response reached the token endpoint again: \(text)")
            if exchanges > 0 { checkExchanged(url, text: text, redirect: redirect, parameters: parameters) }
        }
    }

    /// What a redirect that reached the token endpoint must be: on the request's redirect URI, with its state (read
    /// apart from the product's parser as well), a code, no error and no other issuer (BCP-06/07, NAT-13).
    static func checkExchanged(_ url: URL, text: String, redirect: String, parameters: [String: String]?) {
        // Only a response on the request's redirect URI, with its state, a code, no error and no other issuer
        // reaches the token endpoint (BCP-06/07, NAT-13).
        let components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        require(
            components?.scheme?.lowercased() == "http" && components?.host == "127.0.0.1"
                && components?.port == 8765 && components?.percentEncodedPath == "/callback",
            "a code from another redirect URI was exchanged: \(text)")
        require(redirect.utf8.count > text.utf8.count, "a code exchanged without the request's state: \(text)")
        // The query read apart from the product's parser: one state, this request's.
        let states = Array((components?.percentEncodedQuery ?? "").utf8).split(separator: UInt8(ascii: "&"))
            .compactMap { item -> [UInt8]? in
                let pair = item.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
                guard percentDecoded(pair[0]) == Array("state".utf8) else { return nil }
                return pair.count > 1 ? (percentDecoded(pair[1], plusIsSpace: true) ?? []) : []
            }
        require(
            states == [Array(pending.state.utf8)],
            "a code exchanged for a query with \(states.count) states: \(text)")
        require(
            parameters?["state"].map { ByteExact.equals($0, pending.state) } == true,
            "a code exchanged with another state: \(text)")
        require(parameters?["code"] != nil, "a code exchange without a code: \(text)")
        require(parameters?["error"] == nil, "an error response's code was exchanged: \(text)")
        require(
            parameters?["iss"].map { ByteExact.equals($0, issuer) } ?? true,
            "a code from another issuer was exchanged: \(text)")
    }

    /// The `jwk` header of the proofs the harness signs: the client key's public half.
    static let dpopHeader: JOSEObject = made {
        ["typ": .string("dpop+jwt"), "jwk": try dpopKey.publicKey().jsonValue()]
    }
    static let tokenEndpoint = url("https://op.example/token")

    /// A JSON object taken as a proof's claims, signed with the client's key (the fuzzer cannot sign; `ATH` stands for
    /// the hash of the access token `at`), and verified for a token request and for a resource request.
    static func signedProof(_ bytes: [UInt8]) {
        guard case .object(var claims)? = try? JOSEValue.parse(bytes) else { return }
        if claims["ath"] == .string("ATH") { claims["ath"] = .string(DPoPProof.accessTokenHash("at")) }
        guard
            let proof = try? JWS.sign(
                payload: JOSEValue.object(claims).jsonBytes, key: dpopKey, algorithm: .es256, header: dpopHeader)
        else { return }
        for resource in [false, true] {
            let method = resource ? "GET" : "POST"
            let outcome = Result {
                try DPoPProofVerifier().verify(
                    proof, method: method, url: tokenEndpoint, accessToken: resource ? "at" : nil,
                    nonce: resource ? "n" : nil, now: now)
            }
            trace("signed \(method) proof: \(outcome.map(\.jti))")
            guard case .success(let verified) = outcome else { continue }
            // What passed must say what RFC 9449 §4.3 requires of it.
            require(verified.thumbprint == dpopKey.thumbprint, "a proof verified with another key")
            require(claims["htm"]?.stringValue == method, "a proof for another method verified")
            require(
                claims["htu"]?.stringValue.flatMap(URL.init(string:)).map {
                    DPoPProof.targetURI($0) == DPoPProof.targetURI(tokenEndpoint)
                } == true, "a proof for another URI verified")
            let age = claims["iat"]?.doubleValue.map { now.timeIntervalSince1970 - $0 }
            require(age.map { $0 >= -5 && $0 <= 60 } == true, "a proof issued outside its window verified")
            require(verified.jti.isEmpty == false, "a proof without a jti verified")
            if resource {
                require(
                    claims["ath"]?.stringValue == DPoPProof.accessTokenHash("at"), "a proof for another token verified")
                require(claims["nonce"]?.stringValue == "n", "a proof without the server's nonce verified")
            }
        }
    }

    static func dpopProof(_ bytes: [UInt8]) {
        signedProof(bytes)
        let text = String(decoding: bytes, as: UTF8.self)
        let endpoint = tokenEndpoint
        // A proof verifies only with a signature by the key it carries, which no mutation makes: whatever verifies
        // was accepted unsigned, with `none`, or with a MAC.
        if let verified = try? DPoPProofVerifier().verify(text, method: "POST", url: endpoint, now: now) {
            require(false, "a fuzzed DPoP proof verified: \(verified.thumbprint)")
        }
        if (try? DPoPProofVerifier().verify(text, method: "GET", url: endpoint, accessToken: "at", nonce: "n", now: now))
            != nil
        {
            require(false, "a fuzzed DPoP proof verified for a resource")
        }
    }

    /// The offset of the first CRLF CRLF in `bytes`, found the plain way.
    static func firstHeadEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        return (0...(bytes.count - 4)).first { bytes[$0...($0 + 3)].elementsEqual([0x0D, 0x0A, 0x0D, 0x0A]) }
    }

    static func httpRequest(_ bytes: [UInt8]) {
        let buffer = ArraySlice(bytes)
        let headEnd = firstHeadEnd(bytes)
        // The server's limits, and limits the input reaches (431 and 413 are answered only past them).
        let limits = [
            HTTPRequestParser.Limits(maxHeaderBytes: 8192, maxBodyBytes: 65536),
            HTTPRequestParser.Limits(maxHeaderBytes: max(1, bytes.count / 2), maxBodyBytes: bytes.count / 4),
        ]
        for limit in limits {
            if case .request(_, _, let consumed) = HTTPRequestParser.parse(buffer, limits: limit) {
                require(consumed > 0 && consumed <= bytes.count, "consumed \(consumed) of \(bytes.count) bytes")
                require(
                    headEnd.map { $0 <= limit.maxHeaderBytes && consumed - $0 - 4 <= limit.maxBodyBytes } == true,
                    "a request past its limits was accepted")
                // The event loop waits for requestLength bytes before parsing: more than the parse uses would
                // stall a request that has fully arrived.
                let length = HTTPRequestParser.requestLength(buffer, limits: limit)
                require(
                    length == nil || length == consumed, "requestLength \(length ?? -1) but the parse used \(consumed)")
            }
            _ = HTTPRequestParser.expectsContinue(buffer, limits: limit)
        }
        // A head's end is found whether the scan starts at 0 or where an earlier look (which found none) stopped.
        require(HTTPRequestParser.hasHeadEnd(buffer, from: 0) == (headEnd != nil), "hasHeadEnd disagrees with a scan")
        let split = bytes.count / 3
        if !HTTPRequestParser.hasHeadEnd(buffer[..<split], from: 0) {
            require(
                HTTPRequestParser.hasHeadEnd(buffer, from: split) == (headEnd != nil),
                "an incremental scan from \(split) missed a head's end")
        }
    }

    static func form(_ bytes: [UInt8]) {
        let text = String(decoding: bytes, as: UTF8.self)
        let pairs = HTTPFormEncoding.decodePairs(text)
        _ = HTTPFormEncoding.decode(text)
        // Encoding what was decoded and decoding it again gives the same pairs.
        let again = HTTPFormEncoding.decodePairs(HTTPFormEncoding.encode(pairs.map { ($0.name, $0.value) }))
        require(
            again.map { $0.name } == pairs.map { $0.name } && again.map { $0.value } == pairs.map { $0.value },
            "form round trip changed \(pairs.count) pairs")
        // The claims parameter as the dev server reads it: the decoded value of `claims` (the raw text too, for a
        // form that is not one).
        if case .success(let parameters) = OAuthParameters.parse(text), let claims = parameters.values["claims"] {
            _ = ClaimsRequest.parse(claims)
        }
        _ = ClaimsRequest.parse(text)
    }

    /// The development identity server, without a socket.
    ///
    /// Its handlers take the requests a connection would hand them. One user (alice@example.com, password
    /// "password", one PBKDF2 round: a sign-in per input must be cheap); no development endpoints (they inject
    /// faults and latency).
    static func makeDevServer() -> (DevServer, HTTPRouter) {
        var configuration = DevServer.Configuration()
        configuration.users = [("alice@example.com", "password")]
        configuration.passwordIterations = 1
        configuration.devEndpoints = false
        configuration.clock = { Fixtures.now }
        let server = made { try DevServer(configuration: configuration) }
        server.state.withLock { $0.issuer = "http://127.0.0.1:8080" }
        made { try server.reloadVerifier() }
        return (server, server.makeRouter())
    }

    /// The current dev server and how many inputs it has answered: a new one every 1,000 (what inputs leave
    /// behind — accounts, sessions, a locked-out address — stays bounded and does not starve later inputs).
    nonisolated(unsafe) static var devServerInUse: (server: DevServer, router: HTTPRouter, answered: Int)?

    /// A request to the dev server, as the loopback HTTP parser hands it over, through its handlers.
    static func devServer(_ bytes: [UInt8]) {
        let limits = HTTPRequestParser.Limits(maxHeaderBytes: 8192, maxBodyBytes: 65536)
        guard case .request(let request, _, _) = HTTPRequestParser.parse(ArraySlice(bytes), limits: limits) else {
            return
        }
        if devServerInUse.map({ $0.answered >= 1000 }) ?? true {
            let (server, router) = makeDevServer()
            devServerInUse = (server, router, 0)
        }
        guard let (server, router, _) = devServerInUse else { return }
        devServerInUse?.answered += 1
        let response = server.handle(request, router: router)
        trace("\(request.method) \(request.path): \(response.status)")
        // Bad input gets a clear 4xx; a 5xx would be a handler that did not expect what it was sent. A header with
        // a line break would become a 500 when written.
        require(response.status < 500, "\(request.method) \(request.path) answered \(response.status)")
        require(
            !response.headers.fields.contains {
                HTTPServerResponse.breaksHead($0.name) || HTTPServerResponse.breaksHead($0.value)
            }, "\(request.method) \(request.path) answered a header with a line break")
    }

    /// A client of the resource server, to ask whether an origin git names may have a token.
    static let resourceClient = AuthorizedClient(
        session: AuthSession(
            provider: provider(FuzzResponse([0])), store: InMemoryTokenStore(), timeSource: FixedTime()),
        baseURL: restBase, transport: FuzzTransport(answer: FuzzResponse([0])))

    /// What git sends `sesame credential-helper` on standard input: the origin it names is exactly a protocol and
    /// host, and a token is given only to the client's own origin.
    static func credentialHelper(_ bytes: [UInt8]) {
        let attributes = CredentialHelperCommand.attributes(from: Data(bytes))
        guard let url = CredentialHelperCommand.origin(attributes) else { return }
        trace("origin: \(url)")
        require(
            ["http", "https"].contains(url.scheme ?? "") && url.user == nil && url.password == nil && url.path == "/"
                && url.query == nil && url.fragment == nil,
            "git's attributes made an origin with more than a protocol and host: \(url)")
        if resourceClient.mayReceiveCredentials(url) {
            require(isResourceOrigin(url), "a token would go to \(url)")
        }
    }

    static func cliArguments(_ bytes: [UInt8]) {
        let words = bytes.split(separator: 0, omittingEmptySubsequences: false).map {
            String(decoding: $0, as: UTF8.self)
        }
        guard let (command, taken) = CommandTable.lookup(words) else {
            if let first = words.first {
                _ = Suggestions.closest(to: first, among: CommandTable.all.map(\.name))
            }
            return
        }
        guard let arguments = try? ParsedArguments(Array(words.dropFirst(taken)), for: command) else { return }
        _ = try? arguments.atMostOnePositional("a value")
        _ = try? Profile(arguments)
    }
}
