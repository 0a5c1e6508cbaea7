import Foundation
import SesameJOSE
import SesameLoopback

/// OAuth parameters of one request: every name at most once (RFC 6749 §3.1), values without NUL.
struct OAuthParameters: Sendable {
    let values: [String: String]

    /// Parses form- or query-encoded text; nil names the parameter that was repeated or malformed.
    static func parse(_ text: String) -> Result<OAuthParameters, OAuthFailure> {
        var values: [String: String] = [:]
        for (name, value) in HTTPFormEncoding.decodePairs(text) {
            guard values[name] == nil else {
                return .failure(OAuthFailure("invalid_request", "the parameter \(name) is repeated"))
            }
            // Control characters nowhere (a line break in a redirect URI would reach a header), except line breaks
            // and tabs in the dev panel's JSON.
            let allowsLineBreaks = name == "claims"
            guard
                !value.unicodeScalars.contains(where: {
                    ($0.value < 0x20 || $0.value == 0x7F)
                        && !(allowsLineBreaks && ($0 == "\n" || $0 == "\r" || $0 == "\t"))
                }), !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }),
                value.utf8.count <= 8192
            else { return .failure(OAuthFailure("invalid_request", "the parameter \(name) is malformed")) }
            values[name] = value
        }
        return .success(OAuthParameters(values: values))
    }

    /// The parameters of a form POST (`application/x-www-form-urlencoded` only) or of the query.
    static func of(_ request: HTTPServerRequest, fromBody: Bool) -> Result<OAuthParameters, OAuthFailure> {
        guard fromBody else { return parse(request.query ?? "") }
        guard let type = request.headers["Content-Type"],
            type.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
                == "application/x-www-form-urlencoded"
        else {
            return .failure(
                OAuthFailure("invalid_request", "the body must be application/x-www-form-urlencoded", status: 415))
        }
        return parse(String(decoding: request.body, as: UTF8.self))
    }

    subscript(name: String) -> String? {
        guard let value = values[name], !value.isEmpty else { return nil }
        return value
    }
}

/// An OAuth error answer: the `error` code, a description, and the HTTP status when it is not redirected.
struct OAuthFailure: Error, Sendable {
    let code: String
    let description: String
    let status: Int

    init(_ code: String, _ description: String, status: Int = 400) {
        self.code = code
        self.description = description
        self.status = status
    }
}

/// Quoting request values in messages: bounded in length (pages and JSON escape them).
enum PrintableTextForPage {
    static func short(_ text: String) -> String { text.count > 200 ? String(text.prefix(200)) + "…" : text }
}

/// Why an authorization request was refused, and where the error may be sent (nil: show it, never redirect).
struct AuthorizationRejection: Error, Sendable {
    let failure: OAuthFailure
    let redirectURI: String?
    let state: String?
    /// Whether the error goes back as a form post (`response_mode=form_post`) rather than in the query.
    var formPost = false

    init(_ failure: OAuthFailure, redirectURI: String? = nil, state: String? = nil) {
        self.failure = failure
        self.redirectURI = redirectURI
        self.state = state
    }
}

/// A validated authorization request (`/authorize`, `/par`), as stored with a code or a pushed request.
struct AuthorizationRequest: Sendable, Equatable {
    var clientID: String
    var redirectURI: String
    var scope: [String]
    var state: String?
    var nonce: String?
    var codeChallenge: String
    var prompt: Set<String>
    var maxAge: Int64?
    var loginHint: String?
    /// The DPoP key thumbprint the code is bound to (`dpop_jkt`, RFC 9449 §10).
    var dpopJKT: String?
    /// The `claims` parameter, canonical (``ClaimsRequest/jsonText``), or nil.
    var claims: String? = nil
    /// The `acr_values` asked for, in order (voluntary, OIDC Core §3.1.2.1).
    var acrValues: [String] = []
    /// `form_post` (OAuth 2.0 Form Post Response Mode) or nil for the query.
    var responseMode: String? = nil

    /// The claim names the `claims` parameter asks for, sorted (shown on the sign-in and consent pages).
    var claimNames: [String] { Set(claimsRequest.idToken.keys).union(claimsRequest.userInfo.keys).sorted() }

    /// The parsed `claims` parameter (empty when none was sent).
    var claimsRequest: ClaimsRequest {
        guard let claims, case .success(let parsed) = ClaimsRequest.parse(claims) else { return ClaimsRequest() }
        return parsed
    }

    var wantsOpenID: Bool { scope.contains("openid") }
    var scopeString: String { scope.joined(separator: " ") }

    /// The request as hidden form fields and as stored JSON.
    var pairs: [(String, String)] {
        var pairs: [(String, String)] = [
            ("client_id", clientID), ("redirect_uri", redirectURI), ("response_type", "code"),
            ("scope", scopeString), ("code_challenge", codeChallenge), ("code_challenge_method", "S256"),
        ]
        if let state { pairs.append(("state", state)) }
        if let nonce { pairs.append(("nonce", nonce)) }
        if !prompt.isEmpty { pairs.append(("prompt", prompt.sorted().joined(separator: " "))) }
        if let maxAge { pairs.append(("max_age", String(maxAge))) }
        if let loginHint { pairs.append(("login_hint", loginHint)) }
        if let dpopJKT { pairs.append(("dpop_jkt", dpopJKT)) }
        if let claims { pairs.append(("claims", claims)) }
        if !acrValues.isEmpty { pairs.append(("acr_values", acrValues.joined(separator: " "))) }
        if let responseMode { pairs.append(("response_mode", responseMode)) }
        return pairs
    }

    /// The request as a page's hidden fields: `claims` travels as `request_claims`, since the sign-in page's
    /// development panel has a `claims` field of its own.
    var hiddenPairs: [(String, String)] { pairs.map { $0.0 == "claims" ? ("request_claims", $0.1) : $0 } }

    var encoded: String { HTTPFormEncoding.encode(pairs) }

    /// Scopes this provider knows; others are refused (`invalid_scope`).
    static let supportedScopes: Set<String> = [
        "openid", "profile", "email", "address", "phone", "offline_access", "device_sso",
    ]

    /// The response modes this provider offers.
    static let responseModes: Set<String> = ["query", "form_post"]

    /// Validates the client and redirect URI first (errors that must not be redirected, OAuth 2.0 §4.1.2.1), then
    /// everything else (errors that are redirected with `state` and `iss`).
    ///
    /// - Returns: the request, or the failure and whether it may be sent to the redirect URI.
    static func validate(_ parameters: OAuthParameters, clients: ClientRegistry)
        -> Result<AuthorizationRequest, AuthorizationRejection>
    {
        guard let clientID = parameters["client_id"] else {
            return .failure(AuthorizationRejection(OAuthFailure("invalid_request", "client_id is required")))
        }
        guard let client = clients[clientID] else {
            return .failure(
                AuthorizationRejection(OAuthFailure("invalid_client", "the client \(clientID) is not registered")))
        }
        guard let redirectURI = parameters["redirect_uri"] else {
            return .failure(AuthorizationRejection(OAuthFailure("invalid_request", "redirect_uri is required")))
        }
        guard client.accepts(redirectURI: redirectURI) else {
            return .failure(
                AuthorizationRejection(
                    OAuthFailure(
                        "invalid_request",
                        "the redirect_uri \(PrintableTextForPage.short(redirectURI)) is not registered for \(clientID)"
                            + (client.acceptsAnyLoopbackRedirect
                                ? " (it takes http://127.0.0.1:PORT/... or http://[::1]:PORT/..., not localhost)"
                                : " (registered: \(client.redirectURIs.joined(separator: ", ")))"))))
        }
        let state = parameters["state"]
        func fail(_ code: String, _ description: String)
            -> Result<AuthorizationRequest, AuthorizationRejection>
        {
            var rejection = AuthorizationRejection(
                OAuthFailure(code, description), redirectURI: redirectURI, state: state)
            // A form post only to http(s): never an auto-submitting form to a scheme another app may claim.
            rejection.formPost =
                parameters["response_mode"] == "form_post"
                && RegisteredClient.isHTTP(redirectURI)
            return .failure(rejection)
        }
        guard parameters["request"] == nil else {
            return fail("request_not_supported", "request objects are not supported; use PAR")
        }
        guard let responseType = parameters["response_type"] else {
            return fail("invalid_request", "response_type is required")
        }
        guard responseType == "code" else {
            return fail("unsupported_response_type", "only response_type=code is supported")
        }
        if let mode = parameters["response_mode"], !responseModes.contains(mode) {
            return fail("invalid_request", "response_mode is query or form_post")
        }
        if parameters["response_mode"] == "form_post",
            !RegisteredClient.isHTTP(redirectURI)
        {
            return .failure(
                AuthorizationRejection(
                    OAuthFailure("invalid_request", "response_mode=form_post needs an http or https redirect URI"),
                    redirectURI: redirectURI, state: state))
        }
        guard let challenge = parameters["code_challenge"] else {
            return fail("invalid_request", "PKCE is required: send code_challenge with code_challenge_method=S256")
        }
        guard parameters["code_challenge_method"] == "S256" else {
            return fail("invalid_request", "code_challenge_method must be S256 (plain is not supported)")
        }
        guard challenge.utf8.count == 43, challenge.utf8.allSatisfy(Self.isBase64URL) else {
            return fail(
                "invalid_request", "code_challenge must be the base64url SHA-256 of the verifier (43 characters)")
        }
        let scope = (parameters["scope"] ?? "").split(separator: " ").map(String.init)
        guard !scope.isEmpty else { return fail("invalid_scope", "scope is required") }
        if let unknown = scope.first(where: { !supportedScopes.contains($0) }) {
            return fail("invalid_scope", "the scope \(unknown) is not supported")
        }
        if scope.contains(DevServer.deviceSSOScope), !scope.contains("openid") {
            return fail("invalid_scope", "device_sso needs openid (Native SSO §3.1)")
        }
        let prompt = Set((parameters["prompt"] ?? "").split(separator: " ").map(String.init))
        if let unknown = prompt.first(where: { !["none", "login", "consent", "select_account"].contains($0) }) {
            return fail("invalid_request", "prompt=\(unknown) is not supported")
        }
        if prompt.contains("none"), prompt.count > 1 {
            return fail("invalid_request", "prompt=none cannot be combined with other values")
        }
        var maxAge: Int64?
        if let text = parameters["max_age"] {
            guard let value = Int64(text), value >= 0, value <= 10 * 365 * 86400 else {
                return fail("invalid_request", "max_age must be a non-negative number of seconds")
            }
            maxAge = value
        }
        if let jkt = parameters["dpop_jkt"], jkt.utf8.count != 43 || !jkt.utf8.allSatisfy(Self.isBase64URL) {
            return fail("invalid_request", "dpop_jkt must be a base64url SHA-256 JWK thumbprint")
        }
        var claimsRequest = ClaimsRequest()
        if let text = parameters["claims"] {
            switch ClaimsRequest.parse(text) {
            case .success(let parsed): claimsRequest = parsed
            case .failure(let failure): return fail(failure.code, failure.description)
            }
        }
        let acrValues = (parameters["acr_values"] ?? "").split(separator: " ").map(String.init)
        // acr_values is a voluntary request for the acr claim (OIDC Core §3.1.2.1): kept with the claims request.
        if !acrValues.isEmpty, claimsRequest.idToken["acr"] == nil {
            claimsRequest.idToken["acr"] = ClaimsRequest.Entry(values: acrValues.map(JOSEValue.string))
        }
        let claims = claimsRequest.isEmpty ? nil : claimsRequest.jsonText
        // The request is stored and read back under the same per-parameter limit: refuse what could not be.
        if let claims, claims.utf8.count > 8192 {
            return fail("invalid_request", "claims and acr_values together are too long (8 KiB at most)")
        }
        var request = AuthorizationRequest(
            clientID: clientID, redirectURI: redirectURI, scope: scope, state: state, nonce: parameters["nonce"],
            codeChallenge: challenge, prompt: prompt, maxAge: maxAge, loginHint: parameters["login_hint"],
            dpopJKT: parameters["dpop_jkt"])
        request.claims = claims
        request.acrValues = acrValues
        request.responseMode = parameters["response_mode"].flatMap { $0 == "query" ? nil : $0 }
        return .success(request)
    }

    /// Re-reads a request this server validated and stored (with a code or as a pushed request).
    static func stored(_ text: String) -> AuthorizationRequest? {
        guard case .success(let parameters) = OAuthParameters.parse(text), let clientID = parameters["client_id"],
            let redirectURI = parameters["redirect_uri"],
            case .success(let request) = validate(
                parameters, clients: ClientRegistry([RegisteredClient(id: clientID, redirectURIs: [redirectURI])]))
        else { return nil }
        return request
    }

    static func isBase64URL(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default: false
        }
    }

    /// Whether a code sent to `uri` can only reach the client it names: an `https` URI on a public DNS name.
    ///
    /// Everything else may be answered by any program on the user's machine (RFC 8252 §8.6): `http`, loopback in
    /// any spelling (`127.1`, `0x7f000001`, `[::ffff:127.0.0.1]`, `localhost.`, `app.localhost`), IP literals,
    /// single-label names, and private-use schemes any app can claim. A remembered browser session never sends a
    /// code to those without the user's consent.
    static func reachesOnlyItsClient(_ uri: String) -> Bool {
        guard let components = URLComponents(string: uri), components.scheme?.lowercased() == "https",
            var host = components.host?.lowercased(), !host.isEmpty
        else { return false }
        if host.hasSuffix(".") { host.removeLast() }
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count >= 2, labels.allSatisfy({ !$0.isEmpty }), let last = labels.last else { return false }
        // An IP literal (v6, or v4 in any notation: a top-level label is never numeric) or a local name.
        if host.contains(":") || host.hasPrefix("[") { return false }
        if last.allSatisfy({ $0.isNumber }) || last.hasPrefix("0x") { return false }
        if last == "localhost" || last == "local" || last == "internal" { return false }
        return true
    }

    /// What the consent page names as the destination: host and port, or the scheme of a private-use URI.
    static func destination(_ uri: String) -> String {
        guard let components = URLComponents(string: uri) else { return uri }
        guard let host = components.host, !host.isEmpty else { return (components.scheme ?? uri) + ":" }
        let port = components.port ?? (components.scheme?.lowercased() == "https" ? 443 : 80)
        return "\(host):\(port)"
    }

    /// `uri` with `pairs` added to its query (RFC 6749 §4.1.2: keep the registered query).
    static func redirect(_ uri: String, adding pairs: [(String, String)]) -> String {
        let separator = uri.contains("?") ? (uri.hasSuffix("?") || uri.hasSuffix("&") ? "" : "&") : "?"
        return uri + separator + HTTPFormEncoding.encode(pairs)
    }
}
