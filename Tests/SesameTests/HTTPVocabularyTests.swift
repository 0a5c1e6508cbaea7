import Foundation
import Sesame
import SesameJOSE
import SesameTesting
import Testing

@Suite struct AuthenticationChallengeTests {
    @Test("RFC 9110 §11.6.1: several challenges, quoted strings with escapes and commas, any case, BWS")
    func parsing() {
        let value =
            #"Bearer realm="api, v2", error="invalid_token", error_description="the \"token\" expired", DPoP algs="ES256 PS256", Basic realm=simple"#
        let challenges = AuthenticationChallenge.parse(value)
        #expect(challenges.map(\.scheme) == ["Bearer", "DPoP", "Basic"])
        #expect(challenges[0]["realm"] == "api, v2" && challenges[0]["ERROR"] == "invalid_token")
        #expect(challenges[0]["error_description"] == #"the "token" expired"#)
        #expect(challenges[1].isScheme("dpop") && challenges[1]["algs"] == "ES256 PS256")
        #expect(challenges[2]["realm"] == "simple")
        let spaced = AuthenticationChallenge.parse(#"bearer   error = "invalid_token" ,, scope="a b""#)
        #expect(spaced.count == 1 && spaced[0].isScheme("Bearer") && spaced[0]["error"] == "invalid_token")
        #expect(spaced[0]["scope"] == "a b")
    }

    @Test("token68, bare schemes, a repeated parameter (first wins) and garbage never crash or confuse")
    func edgeCases() {
        #expect(AuthenticationChallenge.parse("Negotiate abc/+==")[0].token68 == "abc/+==")
        #expect(AuthenticationChallenge.parse("Bearer, DPoP").map(\.scheme) == ["Bearer", "DPoP"])
        let repeated = AuthenticationChallenge.parse(#"Bearer error="invalid_token", error="insufficient_scope""#)
        #expect(repeated.count == 1 && repeated[0]["error"] == "invalid_token")
        #expect(repeated[0].repeatedParameters == ["error"], "the repetition is reported")
        for garbage in [
            "", ",,,", "=", "\"unterminated", "Bearer error=\"open", "@@@ ===", String(repeating: "a=", count: 500),
        ] {
            _ = AuthenticationChallenge.parse(garbage)
        }
        #expect(AuthenticationChallenge.parse("").isEmpty)
    }

    @Test("HTTP-01: a 401 refreshes only for no challenge, or Bearer invalid_token / no error")
    func bearerVerdicts() {
        func verdict(_ challenge: String?, status: Int = 401) -> AuthenticationVerdict {
            var headers = SesameHTTP.Headers()
            if let challenge { headers.add("WWW-Authenticate", challenge) }
            return BearerAuthenticator.bearerVerdict(SesameHTTP.Response(status: status, headers: headers))
        }
        #expect(verdict(nil) == .refreshAndRetry)
        #expect(verdict(#"Bearer error="invalid_token""#) == .refreshAndRetry)
        #expect(verdict(#"Bearer realm="api""#) == .refreshAndRetry)
        #expect(verdict(#"BEARER ERROR="INVALID_TOKEN""#) == .done)  // values are case-sensitive
        #expect(verdict(#"Bearer error="insufficient_scope""#) == .done)
        #expect(verdict(#"Basic realm="x""#) == .done)
        #expect(verdict(#"Bearer error="invalid_token""#, status: 403) == .done)
        // A challenge that only mentions invalid_token inside another parameter is not one.
        #expect(verdict(#"Bearer error="invalid_request", error_description="not invalid_token""#) == .done)
        // Two header fields are read together.
        var headers = SesameHTTP.Headers()
        headers.add("WWW-Authenticate", #"Basic realm="x""#)
        headers.add("WWW-Authenticate", #"Bearer error="invalid_token""#)
        #expect(
            BearerAuthenticator.bearerVerdict(SesameHTTP.Response(status: 401, headers: headers)) == .refreshAndRetry)
    }
}

@Suite struct SesameHTTPTests {
    @Test("Headers: case-insensitive, repeated fields kept and joined, setting replaces all of a name")
    func headers() {
        var headers: SesameHTTP.Headers = ["Accept": "a", "X-Trace": "1"]
        headers.add("x-trace", "2")
        #expect(headers["X-TRACE"] == "1, 2" && headers.values("x-trace") == ["1", "2"])
        headers["x-Trace"] = "3"
        #expect(headers.values("X-Trace") == ["3"] && headers.fields.map(\.name) == ["Accept", "x-Trace"])
        headers["accept"] = nil
        #expect(!headers.contains("Accept") && headers.fields.count == 1)
    }

    @Test("Origins: scheme and host lower-cased, default ports filled in, anything else different")
    func origins() throws {
        func origin(_ text: String) throws -> SesameHTTP.Origin? { SesameHTTP.Origin(try #require(URL(string: text))) }
        #expect(try origin("HTTPS://API.Example/x") == origin("https://api.example:443/y"))
        #expect(try origin("http://api.example") == origin("http://api.example:80"))
        #expect(try origin("http://api.example") != origin("https://api.example"))
        #expect(try origin("https://api.example:8443") != origin("https://api.example"))
        #expect(try origin("https://api.example.evil") != origin("https://api.example"))
        #expect(try origin("http://[::1]:8080")?.host == "::1")
        #expect(try origin("file:///etc/passwd") == nil)
    }

    @Test("No secret in description, debugDescription or dump() of tokens, requests, responses, Basic credentials")
    func redaction() throws {
        let tokens = TokenSet(
            accessToken: "secret-access", refreshToken: "secret-refresh", idToken: "secret-id",
            expiresAt: Date(timeIntervalSince1970: 2_000_000_000), user: .init(id: "u1"))
        let request = SesameHTTP.Request(
            method: "POST", url: try #require(URL(string: "https://api.example/token?code=secret-code")),
            headers: ["Authorization": "Bearer secret-access", "DPoP": "secret-proof"],
            body: Data("password=secret-password".utf8))
        let response = SesameHTTP.Response(
            status: 200, headers: ["Set-Cookie": "secret-cookie"], body: Data("secret-body".utf8))
        let basic = BasicAuthenticator(user: "me", password: "secret-password")
        let endpoint = AuthorizedClient.Endpoint.post("/login", body: Data("secret-body".utf8))
        // A path may carry its own query, or be an absolute URL with user info.
        let withQuery = AuthorizedClient.Endpoint.get(
            "/files?access_token=secret-query#secret-fragment", query: [.init(name: "key", value: "secret-item")])
        let absolute = AuthorizedClient.Endpoint.get("https://me:secret-userinfo@api.example/x?sig=secret-sig")
        var texts: [String] = []
        for value in [tokens, request, response, basic, endpoint, withQuery, absolute] as [Any] {
            texts.append(String(describing: value))
            texts.append(String(reflecting: value))
            var dumped = ""
            dump(value, to: &dumped)
            texts.append(dumped)
        }
        for text in texts { #expect(!text.contains("secret"), "\(text)") }
        #expect(texts[0].contains("u1") && texts[3].contains("POST"))
        #expect(withQuery.description == "Endpoint(GET /files?…, body: 0 bytes)")
        #expect(absolute.description == "Endpoint(GET https://api.example/x?…, body: 0 bytes)")
        // The query is cut at the byte, also where a combining mark follows the `?` or `#`.
        let marked = AuthorizedClient.Endpoint.get("/s?\u{301}q=x&api_key=secret")
        #expect(marked.description == "Endpoint(GET /s?…, body: 0 bytes)")
        #expect(!AuthorizedClient.Endpoint.get("/s#\u{301}secret").description.contains("secret"))
    }
}

@Suite struct RESTProviderAnswerTests {
    let base: URL

    init() throws { base = try #require(URL(string: "https://api.example/")) }

    func provider(_ transport: ScriptedTransport) -> RESTAuthProvider {
        RESTAuthProvider(baseURL: base, transport: transport)
    }

    @Test("The server's status, error and error_description reach the caller verbatim (REST codes in their own type)")
    func verbatimErrors() async throws {
        let transport = ScriptedTransport()
        transport.enqueue(
            .json(400, #"{"error":"invalid_request","error_description":"the password needs at least 8 characters"}"#))
        do {
            _ = try await provider(transport).register(email: "a@example.com", password: "short")
            Issue.record("expected a rejection")
        } catch let error as AuthError {
            #expect(error.code == .server && error.statusCode == 400)
            #expect(error.serverResponse?.restError == .invalidRequest)
            #expect(error.serverResponse?.errorDescription == "the password needs at least 8 characters")
            #expect(error.description.contains("at least 8 characters"))
        }
        transport.enqueue(.json(409, #"{"error":"email_taken","error_description":"x\u001b[2Jy"}"#))
        do {
            _ = try await provider(transport).register(email: "a@example.com", password: "long-enough")
        } catch let error as AuthError {
            #expect(error.serverResponse?.restError == .emailTaken)
            #expect(error.serverResponse?.errorDescription == "x\u{FFFD}[2Jy")  // no terminal control from outside
        }
    }

    @Test("Refresh: only invalid_grant is definitive; another 401, a 5xx, a 429 or no refresh token are what they are")
    func refreshOutcomes() async throws {
        let transport = ScriptedTransport()
        let tokens = TokenSet(accessToken: "a", refreshToken: "r")
        func outcome(_ step: ScriptedTransport.Step) async -> AuthError? {
            transport.enqueue(step)
            do {
                _ = try await provider(transport).refresh(tokens)
                return nil
            } catch { return error as? AuthError }
        }
        let rejected = await outcome(.json(401, #"{"error":"invalid_grant","error_description":"reused"}"#))
        #expect(rejected?.code == .refreshRejected && rejected?.requiresReauthentication == true)
        #expect(rejected?.serverResponse?.errorDescription == "reused" && rejected?.statusCode == 401)
        let bare401 = await outcome(.empty(401))
        #expect(bare401?.code == .server && bare401?.requiresReauthentication == false && bare401?.statusCode == 401)
        let other = await outcome(.json(401, #"{"error":"invalid_client"}"#))
        #expect(other?.code == .server && other?.serverResponse?.oauthError == .invalidClient)
        #expect(other?.requiresReauthentication == false)
        let unavailable = await outcome(.json(503, #"{"error":"server_error"}"#))
        #expect(unavailable?.isTransient == true && unavailable?.requiresReauthentication == false)
        #expect(await outcome(.empty(429))?.isTransient == true)
        #expect(await outcome(.empty(502))?.code == .transport)
        await #expect(throws: AuthError.self) { try await provider(transport).refresh(TokenSet(accessToken: "a")) }
        do {
            _ = try await provider(transport).refresh(TokenSet(accessToken: "a"))
        } catch let error as AuthError {
            #expect(error.code == .noRefreshToken && error.serverResponse == nil)
        }
        #expect(transport.requests.count == 6)  // no request without a refresh token
    }

    @Test("An AuthResponse whose token or type holds control characters or spaces is not an AuthResponse")
    func hostileTokenText() {
        for (access, type) in [("x\u{1B}[2J", "Bearer"), ("a b", "Bearer"), ("ok", "Bearer\r\nX: y"), ("", "Bearer")] {
            let json: JOSEValue = ["accessToken": .string(access), "tokenType": .string(type), "expiresIn": 60]
            #expect(RESTAuthProvider.parseAuthResponse(json, receivedAt: Date()) == nil, "\(access.debugDescription)")
        }
        #expect(RESTAuthProvider.parseAuthResponse(["accessToken": "eyJ.a-b_c~d+e/f="], receivedAt: Date()) != nil)
    }

    @Test("A refresh answer without a refresh token keeps the old one (RFC 6749 §6); logout's 204 is not decoded")
    func keptRefreshToken() async throws {
        let transport = ScriptedTransport()
        transport.enqueue(.json(200, #"{"accessToken":"a2","expiresIn":60}"#), .empty(204))
        let refreshed = try await provider(transport).refresh(TokenSet(accessToken: "a1", refreshToken: "r1"))
        #expect(refreshed.accessToken == "a2" && refreshed.refreshToken == "r1")
        try await provider(transport).signOut(refreshed)
        #expect(transport.requests[1].body == Data(#"{"refreshToken":"r1"}"#.utf8))
    }
}

@Suite struct BaseURLRuleTests {
    @Test(
        "One rule for a base URL with a path: RESTAuthProvider and AuthorizedClient both append (…/v1 + login → …/v1/login)",
        arguments: ["https://api.example/v1", "https://api.example/v1/"])
    func pathsAppend(base text: String) async throws {
        let base = try #require(URL(string: text))
        let transport = ScriptedTransport()
        let provider = RESTAuthProvider(baseURL: base, transport: transport)
        transport.enqueue(.json(200, #"{"accessToken":"a","refreshToken":"r","user":{"id":"u"}}"#))
        let tokens = try await provider.login(email: "a@example.com", password: "pw")
        let session = AuthSession(provider: provider, store: InMemoryTokenStore())
        try await session.signIn(with: tokens)
        let client = AuthorizedClient(session: session, baseURL: base, transport: transport)
        transport.enqueue(.json(200, "{}"), .json(200, "{}"))
        _ = try await client.send(.get("me"))
        _ = try await client.send(.get("/me?x=1"))
        let urls = transport.requests.map(\.url.absoluteString)
        #expect(urls == ["https://api.example/v1/login", "https://api.example/v1/me", "https://api.example/v1/me?x=1"])
        await #expect(throws: AuthError.self) { _ = try await client.send(.get("../admin")) }
    }

    @Test(
        "A '..' segment or a '?' followed by a combining mark is still cut on the byte: the path cannot leave the base")
    func combiningMarks() throws {
        let base = try #require(URL(string: "https://api.example/v1"))
        // In Swift, "/" + U+0301 is one Character: a character split saw one segment "../\u{301}admin", not "..".
        for path in ["/../\u{301}admin", "a/..\u{2F}\u{301}/admin", "/.%2e/\u{301}x", "/..;\u{301}/admin"] {
            #expect(throws: AuthError.self, "\(path.unicodeScalars.map(\.value))") {
                _ = try SesameHTTP.url(path: path, under: base)
            }
        }
        let queried = try #require(try SesameHTTP.url(path: "/me?\u{301}a=1", under: base))
        #expect(queried.absoluteString == "https://api.example/v1/me?%CC%81a=1")
        // Legitimate segments that merely start with dots stay allowed.
        for path in ["/...", "/.well-known/x", "/..a", "/a..", "/%2e"] {
            #expect((try? SesameHTTP.url(path: path, under: base)) != nil, "\(path)")
        }
    }

    @Test(
        "A query written with a space, a lone % or non-ASCII is sent percent-encoded, never a crash (URLComponents traps on it); a URL that cannot be built is an error that does not show its query"
    )
    func queryAsWritten() async throws {
        let base = try #require(URL(string: "https://api.example/v1"))
        let session = AuthSession(provider: ScriptedProvider(), store: InMemoryTokenStore())
        try await session.signIn(with: TokenSet(accessToken: "a", refreshToken: "r", expiresAt: .distantFuture))
        let transport = ScriptedTransport()
        let client = AuthorizedClient(session: session, baseURL: base, transport: transport)
        transport.enqueue(.json(200, "{}"), .json(200, "{}"))
        _ = try await client.send(.get("/search?q=a b&x=50%&ok=%41&e=é&t=<\"|>"))
        _ = try await client.send(.get("/search?q=a+b&s=a/b?c:d@e!$'()*,;="))
        #expect(
            transport.requests.map(\.url.absoluteString) == [
                "https://api.example/v1/search?q=a%20b&x=50%25&ok=%41&e=%C3%A9&t=%3C%22%7C%3E",
                "https://api.example/v1/search?q=a+b&s=a/b?c:d@e!$'()*,;=",
            ])
        do {
            _ = try await client.send(.get("https://[api.example/x?access_token=SECRET-T"))
            Issue.record("an unparseable absolute URL was sent")
        } catch let error as AuthError {
            #expect(error.code == .configuration && !"\(error)".contains("SECRET-T"), "\(error)")
        }
    }
}

@Suite struct HeaderLineTests {
    @Test(
        "A received header line: the name up to the first byte ':', even before a combining mark; the value trimmed of blanks and CRLF"
    )
    func lines() throws {
        let plain = try #require(SesameHTTP.Headers.Field(line: "Date:  Tue, 01 Dec 2026 10:00:00 GMT \r\n"))
        #expect(plain.name == "Date" && plain.value == "Tue, 01 Dec 2026 10:00:00 GMT")
        // ":" + U+0301 is one Character: a Character search finds no colon here, or a later one.
        let marked = try #require(SesameHTTP.Headers.Field(line: "DPoP-Nonce:\u{301}n: v\r\n"))
        #expect(marked.name == "DPoP-Nonce" && marked.value == "\u{301}n: v")
        #expect(SesameHTTP.Headers.Field(line: "no colon at all\r\n") == nil)
        let empty = try #require(SesameHTTP.Headers.Field(line: "X-Empty:\r\n"))
        #expect(empty.name == "X-Empty" && empty.value.isEmpty)
    }
}
