public import Foundation
public import Sesame

/// A person at the development identity server's pages (`sesame serve`, `SesameDevServer`), for your own tests and
/// demos: it opens the authorization URL, fills in the sign-in form (and the second step, and "Continue as …?"),
/// and hands back the redirect — as ``AuthorizationUserAgent`` — and it approves or denies device codes.
///
/// ```swift
/// var configuration = DevServer.Configuration()   // SesameDevServer: in memory, an ephemeral loopback port
/// configuration.users = [("alice@example.com", "correct-horse")]
/// let server = try DevServer(configuration: configuration)
/// let issuer = try server.start()
/// defer { server.stop() }
/// let auth = try await OIDCAuth.configure(
///     issuer: issuer, clientID: "sesame-cli", redirectURI: "http://127.0.0.1:5555/callback",
///     store: InMemoryTokenStore())
/// try await auth.signIn(with: DevServerUser(email: "alice@example.com", password: "correct-horse"))
/// ```
///
/// It speaks the pages' contract (the article "Running the dev server" lists the fields): the forms' hidden fields
/// (the CSRF token among them) are posted back with `email` and `password`, `otp` and `action=verify` on the second
/// step, `action=continue` on the remembered-browser page; its cookie jar is its own. Redirects are never followed:
/// the one to `redirectURI` is the answer, any other ends in ``AuthError/Code/invalidResponse`` naming the page.
public final class DevServerUser: AuthorizationUserAgent, @unchecked Sendable {
    /// The email address typed into the forms.
    public let email: String
    private let password: String
    private let transport: any HTTPTransport
    private let oneTimeCode: (@Sendable () async throws -> String)?
    // @unchecked Sendable: `cookies` is only touched under `lock`. Kept per origin, sent only back to it.
    private let lock = NSLock()
    private var cookies: [String: [String: String]] = [:]

    /// A user who signs in as `email` with `password`.
    ///
    /// - Parameters:
    ///   - email: the account's email address.
    ///   - password: its password (never logged, never in `description`).
    ///   - transport: how the pages are fetched (redirects are not followed by Sesame's transports).
    ///   - oneTimeCode: where the user reads the second step's one-time code from, when the server asks for one
    ///     (the dev server writes it to its log).
    public init(
        email: String, password: String, transport: any HTTPTransport = SesameHTTP.platformTransport,
        oneTimeCode: (@Sendable () async throws -> String)? = nil
    ) {
        self.email = email
        self.password = password
        self.transport = transport
        self.oneTimeCode = oneTimeCode
    }

    /// Forgets the server's cookies: the next sign-in shows the form again, as in a fresh browser.
    public func clearCookies() { lock.withLock { cookies = [:] } }

    /// Opens `url` as a browser, plays the pages, and returns the redirect to `redirectURI`.
    ///
    /// - Returns: the redirect URL, with the code (or the error) and `state`.
    /// - Throws: ``AuthError/Code/invalidResponse`` when a page is not one it knows or the redirect goes elsewhere;
    ///   the transport's errors.
    public func authorize(url: URL, redirectURI: String, state: String) async throws -> URL {
        var page = try await fetch("GET", url)
        for _ in 0..<6 {
            if let location = page.location {
                guard let redirect = URL(string: location, relativeTo: url)?.absoluteURL else {
                    throw AuthError(.invalidResponse, "an unreadable redirect from \(url.path)")
                }
                guard !redirectURI.isEmpty, redirect.absoluteString.hasPrefix(redirectURI) else {
                    throw AuthError(.invalidResponse, "a redirect elsewhere than the redirect URI (\(redirect.path))")
                }
                return redirect
            }
            guard page.status == 200 else {
                throw AuthError(.invalidResponse, "the sign-in page answered \(page.status)", statusCode: page.status)
            }
            let fields = page.hiddenFields()
            let target = page.formAction(relativeTo: url) ?? url
            // The password goes only to the origin the sign-in started at.
            guard Self.origin(target) == Self.origin(url) else {
                throw AuthError(.invalidResponse, "the sign-in page posts to another origin")
            }
            if page.has(id: "otp") {
                guard let oneTimeCode else {
                    throw AuthError(.invalidResponse, "the server asks for a one-time code and none was given")
                }
                page = try await fetch(
                    "POST", target, form: fields + [("otp", try await oneTimeCode()), ("action", "verify")])
            } else if page.has(id: "password") {
                page = try await fetch(
                    "POST", target, form: fields + [("email", email), ("password", password)])
                if page.status == 200, page.has(id: "password") {
                    throw AuthError(.invalidResponse, "the server refused the password of \(email)")
                }
            } else if page.has(id: "continue") {
                page = try await fetch("POST", target, form: fields + [("action", "continue")])
            } else {
                throw AuthError(.invalidResponse, "a page the dev server's user does not know")
            }
        }
        throw AuthError(.invalidResponse, "too many pages before the redirect")
    }

    /// Enters `userCode` at the server's `/device` page, signs in and approves (or denies) it.
    ///
    /// - Parameters:
    ///   - userCode: the code the device shows.
    ///   - verificationURI: the device authorization's `verification_uri` (the server's `/device`).
    ///   - approve: false to press "Deny".
    /// - Throws: ``AuthError/Code/invalidResponse`` when a page is not the expected one.
    public func confirmDevice(userCode: String, at verificationURI: URL, approve: Bool = true) async throws {
        var components = URLComponents(url: verificationURI, resolvingAgainstBaseURL: true)
        components?.queryItems = [URLQueryItem(name: "user_code", value: userCode)]
        guard let entry = components?.url else { throw AuthError(.configuration, "an unusable verification URI") }
        let page = try await fetch("GET", entry)
        guard page.status == 200 else { throw AuthError(.invalidResponse, "the device page answered \(page.status)") }
        let action = approve ? "approve" : "deny"
        let target = page.formAction(relativeTo: entry) ?? verificationURI
        guard Self.origin(target) == Self.origin(entry) else {
            throw AuthError(.invalidResponse, "the device page posts to another origin")
        }
        let confirmation = try await fetch(
            "POST", target,
            form: page.hiddenFields() + [
                ("user_code", userCode), ("email", email), ("password", password), ("action", action),
            ])
        guard confirmation.status == 200, confirmation.has(id: action) else {
            throw AuthError(.invalidResponse, "the device page did not ask to confirm (\(confirmation.status))")
        }
        let done = try await fetch(
            "POST", confirmation.formAction(relativeTo: entry) ?? verificationURI,
            form: confirmation.hiddenFields() + [("action", action)])
        guard done.status == 200 else { throw AuthError(.invalidResponse, "the device page answered \(done.status)") }
    }

    /// A page: status, `Location`, body.
    struct Page {
        let status: Int
        let location: String?
        let body: String

        func has(id: String) -> Bool { body.contains("id=\"\(id)\"") }

        /// The first form's `action`, resolved against `base`.
        func formAction(relativeTo base: URL) -> URL? {
            guard let form = body.range(of: "<form"), let action = body[form.upperBound...].range(of: "action=\"")
            else { return nil }
            let rest = body[action.upperBound...]
            guard let end = rest.firstIndex(of: "\"") else { return nil }
            return URL(string: Self.unescape(String(rest[..<end])), relativeTo: base)?.absoluteURL
        }

        /// The hidden fields of the first form, HTML entities decoded.
        func hiddenFields() -> [(String, String)] {
            guard let form = body.range(of: "<form") else { return [] }
            let end = body[form.upperBound...].range(of: "</form>")?.lowerBound ?? body.endIndex
            var fields: [(String, String)] = []
            for input in body[form.upperBound..<end].components(separatedBy: "<input").dropFirst() {
                let tag = input.prefix { $0 != ">" }
                guard tag.contains("type=\"hidden\""), let name = Self.attribute("name", in: tag) else { continue }
                fields.append((name, Self.attribute("value", in: tag) ?? ""))
            }
            return fields
        }

        static func attribute(_ name: String, in tag: Substring) -> String? {
            guard let start = tag.range(of: " \(name)=\"") else { return nil }
            let rest = tag[start.upperBound...]
            guard let end = rest.firstIndex(of: "\"") else { return nil }
            return unescape(String(rest[..<end]))
        }

        static func unescape(_ text: String) -> String {
            text.replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&#39;", with: "'")
                .replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
                .replacingOccurrences(of: "&amp;", with: "&")
        }
    }

    /// `scheme://host:port` of `url`.
    static func origin(_ url: URL) -> String {
        "\(url.scheme?.lowercased() ?? "")://\(url.host?.lowercased() ?? ""):\(url.port ?? (url.scheme == "https" ? 443 : 80))"
    }

    private func fetch(_ method: String, _ url: URL, form: [(String, String)]? = nil) async throws -> Page {
        var headers = SesameHTTP.Headers()
        let origin = Self.origin(url)
        let jar = lock.withLock {
            (cookies[origin] ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        }
        if !jar.isEmpty { headers["Cookie"] = jar.joined(separator: "; ") }
        var body: Data?
        if let form {
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            body = Data(form.map { "\(Self.escape($0.0))=\(Self.escape($0.1))" }.joined(separator: "&").utf8)
        }
        let response = try await transport.send(.init(method: method, url: url, headers: headers, body: body))
        for header in response.headers.fields where header.name.lowercased() == "set-cookie" {
            let pair = header.value.prefix { $0 != ";" }
            guard let equals = pair.firstIndex(of: "=") else { continue }
            let name = String(pair[..<equals]).trimmingCharacters(in: .whitespaces)
            let value = String(pair[pair.index(after: equals)...])
            let expired = header.value.lowercased().contains("max-age=0")
            lock.withLock { cookies[origin, default: [:]][name] = expired || value.isEmpty ? nil : value }
        }
        return Page(
            status: response.status, location: response.headers["Location"],
            body: String(decoding: response.body, as: UTF8.self))
    }

    private static func escape(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}

extension DevServerUser: CustomStringConvertible, CustomReflectable {
    /// The email only: never the password.
    public var description: String { "DevServerUser(\(email))" }

    /// The email only, for `dump()` and debuggers: never the password or the cookies.
    public var customMirror: Mirror { Mirror(self, children: ["email": email], displayStyle: .class) }
}
