import Foundation
import SesameJOSE
import SesameLoopback

/// The provider's cookies: CSRF tokens bound to the browser and the form, and (with `--remember-browser`) the browser
/// session. Cookies ignore ports: nothing here is private to this server on `http://127.0.0.1`.
extension DevServer {
    static let csrfCookie = "sesame_csrf"
    static let sessionCookie = "sesame_session"
    func cookie(_ name: String, in request: HTTPServerRequest) -> String? {
        // Bytes, not Characters: a `;` or `=` next to a combining or prepended mark is part of one Character.
        let prefix = Array((name + "=").utf8)
        for header in request.headers.values("Cookie") {
            for part in Array(header.utf8).split(separator: UInt8(ascii: ";")) {
                let pair = part.drop { $0 == 0x20 || $0 == 0x09 }
                if pair.starts(with: prefix) {
                    let value = pair.dropFirst(prefix.count)
                    let end = value.lastIndex { $0 != 0x20 && $0 != 0x09 }.map { $0 + 1 } ?? value.startIndex
                    return String(decoding: value[..<end], as: UTF8.self)
                }
            }
        }
        return nil
    }

    /// The paths that read the provider's cookies.
    ///
    /// Cookies do not care about ports, so `Path=/` would hand them to every loopback redirect listener (another
    /// party, RFC 8252 §8.3): each cookie is set once per path.
    static let cookiePaths = ["/authorize", "/device", "/end-session"]

    /// ``cookiePaths`` under this issuer's path (an issuer of ``Configuration/issuers`` has cookies of its own).
    var cookiePaths: [String] { Self.cookiePaths.map { pathPrefix + $0 } }

    /// `Set-Cookie` values for `name`, one per path in ``cookiePaths``.
    func setCookie(_ name: String, _ value: String, maxAge: Int64?) -> [String] {
        let secure = (issuer?.scheme == "https") ? "; Secure" : ""
        let age = maxAge.map { "; Max-Age=\($0)" } ?? ""
        return cookiePaths.map { "\(name)=\(value); Path=\($0); HttpOnly; SameSite=Lax\(age)\(secure)" }
    }

    /// The CSRF token of a form: an HMAC over the browser's CSRF cookie and what the form carries, so it is good
    /// only for this browser and this request.
    func csrfToken(cookie: String, purpose: String) -> String {
        Base64URL.encode(JOSECrypto.hmac(Array("\(purpose)\n\(cookie)".utf8), key: formSecret, algorithm: .hs256))
    }

    /// Whether `token` is the CSRF token for `purpose` of this browser's CSRF cookie (and of `session`, the browser
    /// session's cookie, when given: a consent form is good only for the session it was shown to).
    func checkCSRF(_ request: HTTPServerRequest, token: String?, purpose: String, session: String? = nil) -> Bool {
        guard let cookie = cookie(Self.csrfCookie, in: request), let token else { return false }
        let bound = session.map { cookie + "\n" + $0 } ?? cookie
        return ConstantTime.equals(Array(csrfToken(cookie: bound, purpose: purpose).utf8), Array(token.utf8))
    }

    /// The browser's CSRF cookie, and the header that sets it when the browser has none yet.
    func csrfCookie(for request: HTTPServerRequest) -> (value: String, setCookie: [String]) {
        if let existing = cookie(Self.csrfCookie, in: request), existing.utf8.count == 43,
            existing.utf8.allSatisfy(AuthorizationRequest.isBase64URL)
        {
            return (existing, [])
        }
        let fresh = DevStore.newSecret()
        return (fresh, setCookie(Self.csrfCookie, fresh, maxAge: nil))
    }

    /// The browser's session: nil unless ``DevServer/Configuration/rememberBrowser`` is on (a session cookie is
    /// then neither set nor read, so one planted by another loopback port means nothing).
    func browserSession(_ request: HTTPServerRequest) -> (user: DevStore.User, authTime: Int64, token: String)? {
        guard configuration.rememberBrowser, let token = cookie(Self.sessionCookie, in: request),
            let session = try? store.session(token, now: now)
        else { return nil }
        return (session.user, session.authTime, token)
    }

    /// `Set-Cookie` values for a new browser session of `user`; none unless ``DevServer/Configuration/rememberBrowser``.
    func newBrowserSession(_ user: DevStore.User, authTime: Int64) -> [String]? {
        guard configuration.rememberBrowser else { return [] }
        guard
            let token = try? store.createSession(
                userID: user.id, authTime: authTime, ttl: configuration.browserSessionTTL, now: authTime)
        else { return nil }
        return setCookie(Self.sessionCookie, token, maxAge: configuration.browserSessionTTL)
    }
}
