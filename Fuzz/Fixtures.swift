import Dispatch
import Foundation
import SesameJOSE

@testable import Sesame
@testable import SesameDevServer
@testable import SesameLoopback
@testable import sesame

#if canImport(Glibc)
    import Glibc
#endif

/// What the targets share, made once, and the targets themselves.
enum Fixtures {
    static let now = Date(timeIntervalSince1970: 1_750_000_000)
    static let issuer = "https://op.example"
    static let signingKey = made { try JWK.generate(for: .es256, keyID: "fuzz") }
    static let keySet = made { try JWKSet(keys: [try signingKey.publicKey()]) }
    static let jwks = Data(keySet.jsonValue.jsonBytes)
    static let verifier = JWTVerifier(keys: keySet)
    static let metadataJSON = """
        {"issuer":"https://op.example","authorization_endpoint":"https://op.example/authorize",
        "token_endpoint":"https://op.example/token","jwks_uri":"https://op.example/jwks",
        "userinfo_endpoint":"https://op.example/userinfo","revocation_endpoint":"https://op.example/revoke",
        "device_authorization_endpoint":"https://op.example/device",
        "pushed_authorization_request_endpoint":"https://op.example/par",
        "response_types_supported":["code"],"subject_types_supported":["public"],
        "id_token_signing_alg_values_supported":["ES256"],"code_challenge_methods_supported":["S256"]}
        """
    static let metadata = made { try OIDCProviderMetadata(json: try JOSEValue.parse(Data(metadataJSON.utf8))) }
    /// An ID token the provider could have issued, for a refresh to compare the new one against.
    static let idToken = made {
        try JWT.sign(
            JWTClaims([
                "iss": .string(issuer), "sub": .string("user-1"), "aud": .string("fuzz-client"),
                "iat": .integer(1_750_000_000), "exp": .integer(1_750_003_600), "nonce": .string("n"),
            ]), key: signingKey, algorithm: .es256)
    }
    static let folder: URL = {
        let base = ProcessInfo.processInfo.environment["SESAME_FUZZ_SCRATCH"] ?? NSTemporaryDirectory()
        // A new folder of an unguessable name, made by this process (mkdir fails on anything already there, a link
        // included): what the harness writes and deletes is only ever in it.
        let url = URL(fileURLWithPath: base).appendingPathComponent("sesame-fuzz-\(UUID().uuidString)")
        guard mkdir(url.path, 0o700) == 0 else {
            FileHandle.standardError.write(Data("fuzz harness: cannot make \(url.path)\n".utf8))
            exit(2)
        }
        setenv("SESAME_HOME", url.appendingPathComponent("home").path, 1)
        atexit { try? FileManager.default.removeItem(at: Fixtures.folder) }
        return url
    }()

    /// The client's DPoP key, for inputs that turn DPoP on.
    static let dpopKey = made { try JWK.generate(for: .es256, keyID: "fuzz-dpop") }

    static func provider(_ answer: FuzzResponse, pushed: Bool = false, dpop: Bool = false) -> OIDCAuthProvider {
        provider(FuzzTransport(answer: answer), pushed: pushed, dpop: dpop)
    }

    static func provider(_ transport: FuzzTransport, pushed: Bool = false, dpop: Bool = false) -> OIDCAuthProvider {
        var configuration = OIDCAuthProvider.Configuration(
            clientID: "fuzz-client", redirectURI: "http://127.0.0.1:8765/callback")
        // The fixtures' provider advertises PAR: without `.whenRequired`, every authorization request would be pushed
        // and take the fuzz response as PAR's answer (so the redirect target never reached a code exchange).
        configuration.pushedRequests = pushed ? .always : .whenRequired
        if dpop { configuration.dpopKey = dpopKey }
        return OIDCAuthProvider(
            metadata: metadata, configuration: configuration, transport: transport, timeSource: FixedTime(),
            sleep: { _ in })
    }

    // MARK: Targets

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

    static func discovery(_ bytes: [UInt8]) {
        let answer = FuzzResponse(bytes)
        _ = try? OIDCProviderMetadata(json: JOSEValue.parse(answer.body))
        blocking {
            guard
                let found = try? await OIDCProviderMetadata.discover(
                    issuer: url(issuer), transport: FuzzTransport(answer: answer))
            else { return }
            // OIDC Discovery §4.3: the document's issuer is the one asked for, byte for byte.
            require(found.issuer == issuer, "discovery accepted issuer \(String(describing: found.issuer))")
        }
    }

    /// An authorization request of the fixtures' client, made once, and one with DPoP on.
    ///
    /// Made outside any task (it blocks on one). Each input's provider is new, so the state is unused there; a
    /// request per input gave no parser coverage and cost a sixth of the token-response and redirect targets' time.
    static let pending = authorizationRequest(dpop: false)
    static let dpopPending = authorizationRequest(dpop: true)

    static func authorizationRequest(dpop: Bool) -> PendingAuthorization {
        nonisolated(unsafe) var made: Result<PendingAuthorization, any Error>?
        blocking {
            do { made = .success(try await provider(FuzzResponse([0]), dpop: dpop).authorizationRequest()) } catch {
                made = .failure(error)
            }
        }
        switch made {
        case .success(let pending): return pending
        case .failure(let error):
            FileHandle.standardError.write(Data("fuzz harness: no authorization request: \(error)\n".utf8))
            exit(2)
        case nil:
            FileHandle.standardError.write(Data("fuzz harness: the authorization request did not finish\n".utf8))
            exit(2)
        }
    }

    /// The redirect of `pending` with a code.
    static func codeRedirect(_ pending: PendingAuthorization) -> URL {
        url("http://127.0.0.1:8765/callback?code=c&state=\(pending.state)&iss=\(issuer)")
    }

    /// The response with its `id_token` signed by the fixtures' key when the fuzzer wrote it as a JSON object.
    ///
    /// A `nonce` claim of `NONCE` becomes `nonce`, the request's, which the fuzzer cannot guess. The fuzzer cannot
    /// sign: without this nothing checked after an ID token's signature would be fuzzed.
    static func signingIDToken(_ answer: FuzzResponse, nonce: String?) -> FuzzResponse {
        guard let body = try? JOSEValue.parse(answer.body), case .object(var object) = body,
            case .object(var claims)? = object["id_token"]
        else { return answer }
        if claims["nonce"] == .string("NONCE"), let nonce { claims["nonce"] = .string(nonce) }
        guard let token = try? JWT.sign(JWTClaims(claims), key: signingKey, algorithm: .es256) else { return answer }
        object["id_token"] = .string(token)
        return FuzzResponse(
            status: answer.status, headers: answer.headers, body: Data(JOSEValue.object(object).jsonBytes))
    }

    /// What any accepted token response must give: a token of the type asked for (RFC 9449 §5: with a DPoP key, DPoP
    /// only, bound to that key), and an ID token from the provider for this client.
    static func checkAccepted(_ tokens: TokenSet, dpop: Bool, clock: TimeInterval) {
        require(!tokens.accessToken.isEmpty, "an empty access token was accepted")
        require(
            tokens.tokenType.lowercased() == (dpop ? "dpop" : "bearer"),
            "token type \(tokens.tokenType) accepted with DPoP \(dpop ? "on" : "off")")
        require(
            dpop ? tokens.dpopKeyThumbprint == dpopKey.thumbprint : tokens.dpopKeyThumbprint == nil,
            "the tokens' key binding does not match the client's key")
        // A refresh answered without an ID token keeps the one it had (validated when it came).
        guard let token = tokens.idToken, token != idToken else { return }
        let claims = try? JWT.unverifiedClaims(of: token)
        require(claims?.issuer.map { ByteExact.equals($0, issuer) } == true, "an ID token of another issuer")
        require(
            claims?.audience?.contains { ByteExact.equals($0, "fuzz-client") } == true,
            "an ID token for another client")
        require(claims?.subject?.isEmpty == false, "an ID token without a subject")
        // On the provider's clock (learned from its Date header, up to a day off), as the validator computes it.
        let time = now.addingTimeInterval(clock).timeIntervalSince1970
        require(
            claims?["exp"]?.doubleValue.map { !(time >= $0 + 60) } == true, "an ID token expired beyond the 60 s leeway"
        )
        require(
            claims?["iat"]?.doubleValue.map { !($0 > time + 60) } == true, "an ID token issued in the future")
    }

    static func tokenResponse(_ bytes: [UInt8]) {
        // The first byte's top bit turns DPoP on (its value modulo 10 picks the status, as in every response target).
        let dpop = (bytes.first ?? 0) & 0x80 != 0
        let pending = dpop ? dpopPending : pending
        let provider = provider(signingIDToken(FuzzResponse(bytes), nonce: pending.nonce), dpop: dpop)
        blocking {
            var previous = TokenSet(
                accessToken: "a", tokenType: dpop ? "DPoP" : "Bearer", refreshToken: "r", idToken: idToken,
                expiresAt: now)
            if dpop { previous.dpopKeyThumbprint = dpopKey.thumbprint }
            let refreshed = await attempt { try await provider.refresh(previous) }
            trace("refresh: \(refreshed)")
            if case .success(let tokens) = refreshed {
                checkAccepted(tokens, dpop: dpop, clock: provider.clock.withLock { $0 })
                // OIDC Core §12.2: a refreshed ID token names the same subject.
                let claims = tokens.idToken.flatMap { try? JWT.unverifiedClaims(of: $0) }
                require(claims?.subject == "user-1", "a refresh changed the ID token's subject")
            }
            // The code exchange, with the request's own state: its ID token carries the request's nonce.
            let exchanged = await attempt {
                try await provider.completeAuthorization(redirect: codeRedirect(pending), pending: pending)
            }
            trace("code exchange: \(exchanged)")
            if case .success(let tokens) = exchanged {
                checkAccepted(tokens, dpop: dpop, clock: provider.clock.withLock { $0 })
                let claims = tokens.idToken.flatMap { try? JWT.unverifiedClaims(of: $0) }
                require(claims != nil, "a sign-in without an ID token")
                require(
                    claims?.nonce.map { ByteExact.equals($0, pending.nonce ?? "") } == true,
                    "an ID token without this request's nonce")
            }
        }
    }

    static func deviceResponse(_ bytes: [UInt8]) {
        let provider = provider(FuzzResponse(bytes))
        blocking {
            guard let authorization = try? await provider.deviceAuthorization() else { return }
            // RFC 8628 §3.2 with BCP 212: a URI the user opens is https, or http on this machine (127.0.0.0/8 as a
            // dotted quad, localhost, ::1).
            for shown in [authorization.verificationURI, authorization.verificationURIComplete].compactMap({ $0 }) {
                require(isWebOrLoopback(shown), "a verification URI to show the user: \(shown)")
            }
            require(authorization.interval >= 1, "a polling interval under a second")
        }
    }

    static func parResponse(_ bytes: [UInt8]) {
        let provider = provider(FuzzResponse(bytes), pushed: true)
        blocking {
            guard let pending = try? await provider.authorizationRequest() else { return }
            require(pending.url.host == "op.example", "the authorization URL left the provider: \(pending.url)")
        }
    }

    static func errorResponse(_ bytes: [UInt8]) {
        let response = FuzzResponse(bytes).response
        let error = ServerErrorResponse(response)
        let definitive = ServerErrorResponse.isDefinitiveRefreshRejection(response)
        if definitive { require(error != nil, "a definitive rejection without an OAuth error body") }
        _ = StepUpChallenge(response)
        _ = error.map { "\($0)" }
        // A `Retry-After` date once reached Foundation's DateFormatter, which traps on some non-ASCII text.
        if let wait = RetryPolicy.retryAfter(response) { require(wait >= 0, "a negative Retry-After wait") }
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
            guard exchanges > 0 else { return }
            // Only a response on the request's redirect URI, with its state, a code, no error and no other issuer
            // reaches the token endpoint (BCP-06/07, NAT-13).
            let components = URLComponents(url: url, resolvingAgainstBaseURL: false)
            require(
                components?.scheme?.lowercased() == "http" && components?.host == "127.0.0.1"
                    && components?.port == 8765 && components?.percentEncodedPath == "/callback",
                "a code from another redirect URI was exchanged: \(text)")
            require(redirect.utf8.count > text.utf8.count, "a code exchanged without the request's state: \(text)")
            require(
                parameters?["state"].map { ByteExact.equals($0, pending.state) } == true,
                "a code exchanged with another state: \(text)")
            require(parameters?["code"] != nil, "a code exchange without a code: \(text)")
            require(parameters?["error"] == nil, "an error response's code was exchanged: \(text)")
            require(
                parameters?["iss"].map { ByteExact.equals($0, issuer) } ?? true,
                "a code from another issuer was exchanged: \(text)")
        }
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

    /// The folders the stored-files target writes into, made once (0700).
    static let stores: URL = {
        let url = folder.appendingPathComponent("stores")
        made {
            try FileManager.default.createDirectory(
                at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        return url
    }()
    static let tokenStore = made { try FileTokenStore(directory: stores) }
    static let keyStore = made { try FileDPoPKeyStore(directory: stores) }
    static let profile: Profile = {
        _ = folder
        let profile = made { try Profile(try ParsedArguments(["--profile", "fuzz"], for: StatusCommand.spec)) }
        made {
            try FileManager.default.createDirectory(
                at: profile.settingsURL.deletingLastPathComponent(), withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        }
        chmod(profile.home.path, 0o700)
        return profile
    }()

    /// The stored-files target's paths, spelled once (building them per input was a tenth of its time).
    static let tokenFile = stores.appendingPathComponent("fuzz.json").path
    static let indexFile = stores.appendingPathComponent("accounts.json")
    static let settingsFile = profile.settingsURL.path
    static let cleared = [stores.path, profile.settingsURL.deletingLastPathComponent().path]

    /// Writes `bytes` to a new file at `path` (0600), as a store or the user would have left it.
    static func write(_ bytes: [UInt8], to path: String) -> Bool {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        return bytes.withUnsafeBytes { buffer in
            guard let start = buffer.baseAddress else { return true }
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(descriptor, start + offset, buffer.count - offset)
                guard written > 0 else { return false }
                offset += written
            }
            return true
        }
    }

    static func storedFiles(_ bytes: [UInt8]) {
        let data = Data(bytes)
        _ = try? StoredFormat.decodeTokens(data, from: "fuzz")
        let fileManager = FileManager.default
        defer {
            // Everything written or moved aside, so that each input starts from the same folders.
            for folder in cleared {
                for name in (try? fileManager.contentsOfDirectory(atPath: folder)) ?? [] where name != ".lock" {
                    unlink(folder + "/" + name)
                }
            }
        }
        blocking {
            // The token store's file: parsed, or refused, and never lost: what was read is still there (an older
            // format may have been rewritten in the current one), or an unreadable file's bytes were moved aside.
            guard write(bytes, to: tokenFile) else { return }
            if let loaded = try? await tokenStore.load(profile: "fuzz") {
                let now = fileManager.contents(atPath: tokenFile)
                require(
                    now.flatMap { try? StoredFormat.decodeTokens($0, from: "fuzz").tokens } == loaded,
                    "the credentials read are no longer in the file")
            } else {
                let kept = ((try? fileManager.contentsOfDirectory(atPath: stores.path)) ?? [])
                    .filter { $0 == "fuzz.json" || $0.hasPrefix("fuzz.json.corrupt-") }
                    .compactMap { fileManager.contents(atPath: stores.appendingPathComponent($0).path) }
                require(kept.contains(data), "reading a stored file lost its bytes")
            }
            // The account index and a DPoP key file.
            _ = write(bytes, to: indexFile.path)
            _ = try? await FileAccountIndexStore(url: indexFile).load()
            if let keyFile = try? keyStore.keyFile(profile: "fuzz") {
                _ = write(bytes, to: keyFile.path)
                _ = try? await keyStore.key(profile: "fuzz")
            }
        }
        // The CLI's profile settings.
        _ = write(bytes, to: settingsFile)
        _ = try? profile.settings()
    }

    static let restBase = url("https://api.example/v1")

    /// Every other answer a provider reads: UserInfo (its `sub` checked against the ID token's), revocation, and
    /// the REST contract's login, refresh, `/me` and logout.
    static func providerResponse(_ bytes: [UInt8]) {
        let answer = FuzzResponse(bytes)
        let oidc = provider(answer)
        let rest = RESTAuthProvider(
            baseURL: restBase, transport: FuzzTransport(answer: answer), timeSource: FixedTime())
        let tokens = TokenSet(
            accessToken: "a", refreshToken: "r", idToken: idToken, expiresAt: now.addingTimeInterval(300))
        blocking {
            let described = await attempt { try await oidc.userInfo(for: tokens) }
            trace("userInfo: \(described.map(\.names))")
            if case .success(let claims) = described {
                // OIDC Core §5.3.2: UserInfo describes the ID token's subject, byte for byte.
                require(claims["sub"]?.stringValue == "user-1", "UserInfo of another subject was accepted")
            }
            let revoked = await attempt { try await oidc.signOut(tokens) }
            trace("revocation: \(revoked)")
            for signedIn in [
                await attempt { try await rest.login(email: "a@example.com", password: "p") },
                await attempt { try await rest.refresh(tokens) },
            ] {
                trace("REST tokens: \(signedIn)")
                guard case .success(let received) = signedIn else { continue }
                require(RESTAuthProvider.isTokenText(received.accessToken), "an unusable access token was accepted")
                require(
                    received.refreshToken.map(RESTAuthProvider.isTokenText) ?? true, "an unusable refresh token")
            }
            let user = await attempt { try await rest.me(tokens) }
            trace("me: \(user.map(\.id))")
            let loggedOut = await attempt { try await rest.signOut(tokens) }
            trace("logout: \(loggedOut)")
        }
    }

    /// Whether `url` is the resource server's origin, https://api.example, worked out apart from the product's own
    /// `SesameHTTP.Origin`.
    static func isResourceOrigin(_ url: URL) -> Bool {
        guard let parts = URLComponents(url: url, resolvingAgainstBaseURL: true) else { return false }
        return parts.scheme?.lowercased() == "https" && parts.host?.lowercased() == "api.example"
            && (parts.port == nil || parts.port == 443)
    }

    /// A resource server's answers to `AuthorizedClient`.
    ///
    /// Redirects (a `Location` anywhere), 401 and 403 challenges, errors: credentials go only to the base's origin,
    /// and a 401 costs at most one refresh. The first byte's two top bits pick the redirect policy (follow, never,
    /// refuse other origins; 3 follows with DPoP on).
    static func resourceResponse(_ bytes: [UInt8]) {
        let transport = ResourceTransport(answer: FuzzResponse(bytes))
        let mode = (bytes.first ?? 0) >> 6
        let policy: AuthorizedClient.RedirectPolicy = [.follow, .never, .refuseCrossOrigin, .follow][Int(mode)]
        let dpop = mode == 3
        blocking {
            let store = InMemoryTokenStore()
            var tokens = TokenSet(
                accessToken: "at", tokenType: dpop ? "DPoP" : "Bearer", refreshToken: "rt",
                expiresAt: now.addingTimeInterval(3600))
            if dpop { tokens.dpopKeyThumbprint = dpopKey.thumbprint }
            try? await store.save(tokens, profile: "default")
            var configuration = OIDCAuthProvider.Configuration(
                clientID: "fuzz-client", redirectURI: "http://127.0.0.1:8765/callback")
            if dpop { configuration.dpopKey = dpopKey }
            let provider = OIDCAuthProvider(
                metadata: metadata, configuration: configuration, transport: transport, timeSource: FixedTime(),
                sleep: { _ in })
            let session = AuthSession(provider: provider, store: store, timeSource: FixedTime())
            let client = AuthorizedClient(
                session: session, baseURL: restBase, redirectPolicy: policy, transport: transport)
            let response = await attempt { try await client.send(.get("/me")) }
            trace("resource: \(response.map(\.status)); requests: \(transport.sent.withLock { $0.map(\.url) })")
            checkResourceRequests(transport.sent.withLock { $0 })
        }
    }

    /// Credentials only to the resource's origin (a public client's refresh carries none), one refresh at most.
    static func checkResourceRequests(_ sent: [SesameHTTP.Request]) {
        func isRefresh(_ request: SesameHTTP.Request) -> Bool {
            request.method == "POST" && request.url == tokenEndpoint
                && request.body.map { String(decoding: $0, as: UTF8.self).contains("grant_type=refresh_token") } == true
        }
        for request in sent where !isRefresh(request) {
            let carries = request.headers["Authorization"] != nil || request.headers["DPoP"] != nil
            require(!carries || isResourceOrigin(request.url), "credentials went to \(request.url)")
        }
        require(sent.count(where: isRefresh) <= 1, "one request made more than one refresh")
        require(sent.count <= 24, "one request made \(sent.count) requests")
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

/// https, or http with a loopback host: 127.0.0.0/8 as a dotted quad, localhost or ::1, in any letter case.
func isWebOrLoopback(_ url: URL) -> Bool {
    let scheme = url.scheme?.lowercased()
    if scheme == "https" { return true }
    guard scheme == "http", let host = url.host?.lowercased() else { return false }
    if host == "localhost" || host == "::1" || host == "[::1]" { return true }
    let parts = host.split(separator: ".", omittingEmptySubsequences: false)
    return parts.count == 4 && parts[0] == "127"
        && parts.allSatisfy { part in
            (1...3).contains(part.utf8.count) && part.utf8.allSatisfy { (0x30...0x39).contains($0) }
                && (Int(part) ?? 256) <= 255
        }
}

/// A fixture that must be made: the harness cannot run without it.
func made<T>(_ body: () throws -> T) -> T {
    do {
        return try body()
    } catch {
        FileHandle.standardError.write(Data("fuzz harness: a fixture failed: \(error)\n".utf8))
        exit(2)
    }
}

/// A URL the harness spells itself.
func url(_ text: String) -> URL {
    guard let url = URL(string: text) else {
        FileHandle.standardError.write(Data("fuzz harness: not a URL: \(text)\n".utf8))
        exit(2)
    }
    return url
}

/// The fixtures' clock: always ``Fixtures/now``.
struct FixedTime: TimeSource {
    var now: Date { Fixtures.now }
}
