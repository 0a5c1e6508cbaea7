import Foundation
import SesameJOSE
import SesameLoopback

/// `GET /_dev/debugger`: the last tokens this issuer issued, decoded, and the RP test modes (development only:
/// off with the other `/_dev/` endpoints).
extension DevServer {
    /// How many issued tokens the debugger page keeps.
    static let debuggerCapacity = 20

    /// Remembers a token for the debugger page: its decoded header and claims, never the token itself (the page
    /// must not hand out anything that works as a credential).
    func recordIssued(_ token: String, kind: String, clientID: String) {
        guard configuration.devEndpoints, let jwt = try? JWT.unverified(token) else { return }
        let header = Self.pretty(.object(jwt.header.parameters))
        let claims = Self.pretty(jwt.claims.jsonValue)
        let entry = IssuedToken(issuedAt: now, kind: kind, clientID: clientID, header: header, claims: claims)
        issuedTokens.withLock { tokens in
            tokens.append(entry)
            if tokens.count > Self.debuggerCapacity { tokens.removeFirst(tokens.count - Self.debuggerCapacity) }
        }
    }

    static func pretty(_ value: JOSEValue) -> String {
        guard let object = try? JSONSerialization.jsonObject(with: value.jsonData),
            let data = try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
        else { return value.jsonString }
        return String(decoding: data, as: UTF8.self).replacingOccurrences(of: "\\/", with: "/")
    }

    func debugger() -> HTTPServerResponse {
        let (issuer, mode) = state.withLock { ($0.issuer, $0.rpTest) }
        let tokens = issuedTokens.withLock { $0 }.reversed()
        let escape = SignInPage.escape
        let list =
            tokens.isEmpty
            ? "<p>No token issued yet. Sign in from an app, or <code>POST /_dev/token</code>.</p>"
            : tokens.map { token in
                """
                <section class="token"><h2>\(escape(token.kind)) for <code>\(escape(token.clientID))</code> \
                <small>at \(escape(Self.httpDate(Date(timeIntervalSince1970: TimeInterval(token.issuedAt)))))</small></h2>
                <pre>\(escape(token.header))</pre><pre>\(escape(token.claims))</pre></section>
                """
            }.joined(separator: "\n")
        let modes = RPTestMode.allCases.map { test in
            "<li><code>\(escape(test.rawValue))</code>\(test == mode ? " <strong>(on)</strong>" : ""): "
                + "\(escape(test.summary))</li>"
        }.joined()
        let body = """
            <h1>Debugger</h1>
            <p class="sub">Issuer <code>\(escape(issuer))</code>. The last \(Self.debuggerCapacity) tokens it issued, \
            newest first, decoded (headers and claims only: nothing here works as a credential).</p>
            \(list)
            <h2>RP test modes</h2>
            <p>Switch with <code>curl -X POST -H 'Content-Type: application/json' -d '{"test": "NAME"}' \
            \(escape(issuer))/_dev/rp-test</code> (<code>null</code> ends it).</p>
            <ul>\(modes)</ul>
            """
        var response = SignInPage.response(200, SignInPage.page(title: "Debugger", body: body, wide: true))
        response.headers.set("Refresh", "5")
        return response
    }
}
