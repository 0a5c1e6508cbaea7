import Foundation
import SesameJOSE
import SesameLoopback

/// The provider's HTML: the sign-in form, the device page and error pages.
///
/// Plain HTML and CSS, no JavaScript; every value from outside is escaped.
enum SignInPage {
    /// Escapes text for HTML content and double-quoted attribute values.
    static func escape(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count)
        for character in text.unicodeScalars {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&#39;"
            default:
                if character.value < 0x20 && character != "\n" {
                    result += "\u{FFFD}"
                } else {
                    result.unicodeScalars.append(character)
                }
            }
        }
        return result
    }

    static func hiddenFields(_ pairs: [(String, String)]) -> String {
        pairs.map { "<input type=\"hidden\" name=\"\(escape($0.0))\" value=\"\(escape($0.1))\">" }.joined(
            separator: "\n")
    }

    static let banner = "<div class=\"banner\" role=\"note\">Development server: not for production use</div>"

    /// `html` with a second banner naming the RP test mode, so nobody mistakes its defects for bugs.
    static func addingBanner(for mode: RPTestMode, to html: Data) -> Data {
        let text = String(decoding: html, as: UTF8.self)
        let notice =
            "<div class=\"banner test\" role=\"note\">RP test mode \(escape(mode.rawValue)): this provider "
            + "misbehaves on purpose (\(escape(mode.summary)))</div>"
        return Data(text.replacingOccurrences(of: banner, with: banner + "\n" + notice).utf8)
    }

    /// A whole page around `body`, with the development banner.
    static func page(title: String, body: String, wide: Bool = false) -> String {
        """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(escape(title)) · Sesame dev server</title>
        <style>
        :root { color-scheme: light dark; --accent: #2f5bd3; --danger: #b3261e; }
        body { font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; background: Canvas; color: CanvasText; }
        .banner.test { background: #f6b3ae; }
        .banner { background: #ffd54a; color: #1b1b1b; padding: .5rem 1rem; font-weight: 600; text-align: center; }
        main { max-width: \(wide ? "60rem" : "26rem"); margin: 2rem auto; padding: 0 1rem; }
        pre { white-space: pre-wrap; word-break: break-all; background: rgba(128, 128, 128, .12); padding: .5rem; }
        h1 { font-size: 1.5rem; margin: 0 0 .25rem; }
        .sub { margin: 0 0 1.5rem; opacity: .8; }
        form { display: grid; gap: .75rem; margin: 0 0 1.5rem; }
        label { font-weight: 600; }
        input[type=email], input[type=password], input[type=text], textarea {
          font: inherit; padding: .55rem .7rem; border: 1px solid #8a8a8a; border-radius: .4rem; width: 100%; box-sizing: border-box; }
        input:focus-visible, button:focus-visible, textarea:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
        button { font: inherit; padding: .6rem 1rem; border-radius: .4rem; border: 1px solid var(--accent); background: var(--accent); color: #fff; cursor: pointer; }
        button.secondary { background: transparent; color: inherit; border-color: #8a8a8a; }
        .row { display: flex; gap: .5rem; flex-wrap: wrap; }
        .error { border-left: 4px solid var(--danger); padding: .5rem .75rem; background: rgba(179, 38, 30, .08); }
        .scopes { margin: 0 0 1.5rem; padding-left: 1.25rem; }
        fieldset { border: 1px dashed #8a8a8a; border-radius: .5rem; padding: 1rem; }
        legend { font-weight: 600; padding: 0 .25rem; }
        code { font-size: .95em; }
        </style>
        </head>
        <body>
        \(banner)
        <main>
        \(body)
        </main>
        </body>
        </html>
        """
    }

    /// The claims a `claims` request names (the scopes do not say everything it may read).
    static func claimList(_ claims: [String]) -> String {
        guard !claims.isEmpty else { return "" }
        return "<p id=\"claims\">and these claims by name: "
            + claims.map { "<code>\(escape($0))</code>" }.joined(separator: ", ") + "</p>"
    }

    static func scopeList(_ scope: [String]) -> String {
        let descriptions: [String: String] = [
            "openid": "Sign you in (your account identifier)", "profile": "Your name",
            "email": "Your email address", "offline_access": "Stay signed in (a refresh token)",
            "device_sso": "Share this sign-in with the vendor's other apps on this device",
            "address": "Your postal address", "phone": "Your phone number",
        ]
        let items = scope.map { "<li><code>\(escape($0))</code>: \(escape(descriptions[$0] ?? $0))</li>" }
        return "<ul class=\"scopes\">\(items.joined())</ul>"
    }

    /// The sign-in form for an authorization request.
    static func signIn(
        clientID: String, scope: [String], hidden: [(String, String)], email: String?, error: String?,
        devUsers: [(id: String, label: String)]?, destination: String? = nil, claims: [String] = []
    ) -> String {
        var body = """
            <h1>Sign in</h1>
            <p class="sub"><strong>\(escape(clientID))</strong> asks to:</p>
            \(scopeList(scope))
            \(claimList(claims))
            """
        if let destination {
            body +=
                "<p>The answer goes to <strong id=\"destination\">\(escape(destination))</strong>, which any program "
                + "on this computer may be listening on.</p>\n"
        }
        if let error { body += "<p class=\"error\" role=\"alert\" id=\"error\">\(escape(error))</p>\n" }
        // After a wrong password the email is kept, so the password field takes the focus.
        let focusPassword = error != nil && !(email ?? "").isEmpty
        body += """
            <form method="post" action="authorize" aria-label="Sign in with email and password">
            \(hiddenFields(hidden))
            <label for="email">Email</label>
            <input type="email" id="email" name="email" autocomplete="username" required\(focusPassword ? "" : " autofocus") value="\(escape(email ?? ""))"\(error == nil ? "" : " aria-describedby=\"error\"")>
            <label for="password">Password</label>
            <input type="password" id="password" name="password" autocomplete="current-password" required\(focusPassword ? " autofocus" : "")>
            <div class="row"><button type="submit" id="sign-in">Sign in</button>
            <button type="submit" class="secondary" name="action" value="cancel" formnovalidate>Cancel</button></div>
            </form>
            """
        if let devUsers {
            let buttons = devUsers.map {
                "<button type=\"submit\" class=\"secondary\" name=\"sign_in_as\" value=\"\(escape($0.id))\">\(escape($0.label))</button>"
            }
            body += """
                <form method="post" action="authorize" aria-label="Development: sign in as a user">
                <fieldset>
                <legend>Development: sign in as…</legend>
                \(hiddenFields(hidden))
                <label for="claims">Extra ID-token claims for this sign-in (JSON object, optional)</label>
                <textarea id="claims" name="claims" rows="3" placeholder='{"role": "admin"}'></textarea>
                <div class="row">\(buttons.isEmpty ? "<p>No users yet: start the server with <code>--user EMAIL:PASSWORD</code>.</p>" : buttons.joined(separator: "\n"))</div>
                </fieldset>
                </form>
                """
        }
        return page(title: "Sign in", body: body)
    }

    /// The device-flow page (RFC 8628 §3.3): enter the code, sign in (or continue as the signed-in user), decide.
    static func device(
        userCode: String?, signedInAs: String?, hidden: [(String, String)], message: String?,
        isError: Bool
    ) -> String {
        // The client is named only on the confirmation, after a valid code was posted: a look-up by URL tells nothing.
        var body = "<h1>Connect a device</h1>\n<p class=\"sub\">Enter the code your device shows.</p>\n"
        // With the code filled in (from verification_uri_complete) the focus goes to the first field still empty.
        let codeFocus = userCode?.isEmpty ?? true
        if let message {
            body +=
                isError
                ? "<p class=\"error\" role=\"alert\">\(escape(message))</p>\n"
                : "<p role=\"status\">\(escape(message))</p>\n"
        }
        let credentials =
            signedInAs.map { "<p>Signed in as <strong>\(escape($0))</strong>.</p>" } ?? """
                <label for="email">Email</label>
                <input type="email" id="email" name="email" autocomplete="username"\(codeFocus ? "" : " autofocus")>
                <label for="password">Password</label>
                <input type="password" id="password" name="password" autocomplete="current-password">
                """
        body += """
            <form method="post" action="device" aria-label="Approve a device">
            \(hiddenFields(hidden))
            <label for="user_code">Code</label>
            <input type="text" id="user_code" name="user_code" autocomplete="one-time-code" autocapitalize="characters" required\(codeFocus || signedInAs != nil ? " autofocus" : "") value="\(escape(userCode ?? ""))">
            \(credentials)
            <div class="row"><button type="submit" name="action" value="approve" id="approve">Approve</button>
            <button type="submit" class="secondary" name="action" value="deny">Deny</button></div>
            </form>
            """
        return page(title: "Connect a device", body: body)
    }

    /// The device flow's second step: who asks for what, approve or deny.
    static func deviceConfirmation(
        userCode: String, clientID: String, scope: [String], signedInAs: String, hidden: [(String, String)]
    ) -> String {
        let body = """
            <h1>Connect this device?</h1>
            <p>Signed in as <strong>\(escape(signedInAs))</strong>. The device showing <strong>\(escape(userCode))</strong>
            runs <strong>\(escape(clientID))</strong>, which asks to:</p>
            \(scopeList(scope))
            <p>Approve only if you started this on a device of yours.</p>
            \(decision("device", "Approve or deny the device", hidden, ("approve", "Approve"), ("deny", "Deny")))
            """
        return page(title: "Connect this device?", body: body)
    }

    /// "Continue as USER?": a browser session about to send a code to a loopback redirect (RFC 8252 §8.6).
    static func consent(
        clientID: String, scope: [String], signedInAs: String, destination: String, hidden: [(String, String)],
        claims: [String] = []
    ) -> String {
        let body = """
            <h1>Continue as \(escape(signedInAs))?</h1>
            <p class="sub"><strong>\(escape(clientID))</strong> asks to:</p>
            \(scopeList(scope))
            \(claimList(claims))
            <p>The answer goes to <strong id="destination">\(escape(destination))</strong>, which any program on this
            computer may be listening on. Continue only if you just started this sign-in there.</p>
            \(decision("authorize", "Continue or cancel", hidden, ("continue", "Continue"), ("cancel", "Cancel")))
            """
        return page(title: "Continue?", body: body)
    }

    /// The second step: the one-time code the server wrote to its log.
    static func secondStep(clientID: String, signedInAs: String, error: String?, hidden: [(String, String)])
        -> String
    {
        let alert = error.map { "<p class=\"error\" role=\"alert\" id=\"error\">\(escape($0))</p>" } ?? ""
        let body = """
            <h1>One more step</h1>
            <p class="sub"><strong>\(escape(clientID))</strong> asks for a stronger sign-in as \(escape(signedInAs)).</p>
            <p>Enter the six-digit code the dev server just wrote to its log. (A development stand-in for a second
            factor: anyone who can read the server's output can pass it.)</p>
            \(alert)
            <form method="post" action="authorize" aria-label="Second step">
            \(hiddenFields(hidden))
            <label for="otp">One-time code</label>
            <input type="text" id="otp" name="otp" inputmode="numeric" autocomplete="one-time-code" required autofocus>
            <div class="row"><button type="submit" name="action" value="verify" id="verify">Verify</button>
            <button type="submit" class="secondary" name="action" value="cancel" id="cancel" formnovalidate>Cancel</button></div>
            </form>
            """
        return page(title: "One more step", body: body)
    }

    /// A form that decides: the hidden fields and two buttons (`action` = the value, `id` the same); neither has the
    /// focus on arrival, so a stray Enter decides nothing.
    static func decision(
        _ action: String, _ label: String, _ hidden: [(String, String)], _ yes: (value: String, title: String),
        _ no: (value: String, title: String)
    ) -> String {
        """
        <form method="post" action="\(action)" aria-label="\(escape(label))">
        \(hiddenFields(hidden))
        <div class="row"><button type="submit" name="action" value="\(yes.value)" id="\(yes.value)">\(escape(yes.title))</button>
        <button type="submit" class="secondary" name="action" value="\(no.value)" id="\(no.value)">\(escape(no.title))</button></div>
        </form>
        """
    }

    /// 403: a form whose CSRF token is not this browser's for this request (or has expired).
    static func expiredForm() -> HTTPServerResponse {
        response(
            403,
            message(
                title: "This form has expired",
                text: "It was not sent from this browser's sign-in page. Go back to the app and start again."))
    }

    static func message(title: String, text: String) -> String {
        page(title: title, body: "<h1>\(escape(title))</h1>\n<p>\(escape(text))</p>")
    }

    /// The script that submits a form-post response on arrival, and its CSP hash (the only script the server sends).
    static let formPostScript = "document.forms[0].submit();"
    static let formPostScriptHash = Data(JOSECrypto.sha256(Array(formPostScript.utf8))).base64EncodedString()

    /// An authorization response as a form the browser posts to the client (OAuth 2.0 Form Post Response Mode):
    /// submitted by a one-line script, or by a button where scripts are off.
    static func formPost(to uri: String, fields: [(String, String)]) -> HTTPServerResponse {
        let html = page(
            title: "Returning to the app",
            body: """
                <h1>Returning to the app…</h1>
                <form method="post" action="\(escape(uri))">
                \(hiddenFields(fields))
                <noscript><div class="row"><button type="submit">Continue</button></div></noscript>
                </form>
                <script>\(formPostScript)</script>
                """)
        var response = self.response(200, html)
        response.headers.set(
            "Content-Security-Policy",
            "default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-\(formPostScriptHash)'; "
                + "frame-ancestors 'none'; base-uri 'none'")
        return response
    }

    /// An HTML response with the provider's security headers: no framing, no caching, no referrer.
    static func response(_ status: Int, _ html: String) -> HTTPServerResponse {
        var response = HTTPServerResponse.html(status, html)
        response.headers.set(
            "Content-Security-Policy",
            "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'")
        response.headers.set("X-Frame-Options", "DENY")
        response.headers.set("X-Content-Type-Options", "nosniff")
        response.headers.set("Referrer-Policy", "no-referrer")
        response.headers.set("Cache-Control", "no-store")
        return response
    }

    /// An error that must not be redirected (unknown client, unregistered redirect URI): shown to the user.
    static func error(_ failure: OAuthFailure, heading: String = "This sign-in request cannot be completed")
        -> HTTPServerResponse
    {
        response(
            failure.status,
            page(
                title: "Error",
                body: """
                    <h1>\(escape(heading))</h1>
                    <p class="error" role="alert"><code>\(escape(failure.code))</code>: \(escape(failure.description))</p>
                    <p>Return to the app and try again.</p>
                    """))
    }
}
