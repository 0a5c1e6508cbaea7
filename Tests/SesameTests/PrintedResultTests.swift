import Foundation
import Testing

@testable import Sesame

/// What a person reads when the SDK prints something: a sign-out's result, an error from the redirect, and the
/// loopback agent's message when no browser opens.
@Suite struct PrintedResultTests {
    @Test("A sign-out result and its revocation read as words, not as Swift's type names")
    func signOutResult() {
        let confirmed = AuthSession.SignOutResult(revocation: .confirmed, credentialsRemoved: true, wasSignedIn: true)
        #expect("\(confirmed)" == "signed out; the server confirmed the revocation")
        #expect("\(confirmed.revocation)" == "confirmed by the server")
        let refused = AuthError(.server, "the server answered 503")
        let failed = AuthSession.SignOutResult(
            revocation: .failed(refused), credentialsRemoved: false, wasSignedIn: true)
        #expect("\(failed)".hasPrefix("signed out here; deleting the stored credentials is pending"))
        #expect("\(failed.revocation)" == "not confirmed: server: the server answered 503")
        let nobody = AuthSession.SignOutResult(revocation: .notAttempted, credentialsRemoved: true, wasSignedIn: false)
        #expect("\(nobody)" == "nobody was signed in" && "\(nobody.revocation)" == "not attempted")
        #expect(!"\(confirmed)".contains("Sesame.") && !"\(failed.revocation)".contains("Revocation"))
    }

    @Test("An error the provider sent on the redirect has no HTTP status, and none is printed")
    func redirectErrorHasNoStatus() {
        let redirect = AuthError(
            .cancelled, "the user cancelled the sign-in",
            serverResponse: ServerErrorResponse(statusCode: 0, error: "access_denied", errorDescription: "no"))
        #expect("\(redirect)" == "cancelled: the user cancelled the sign-in (access_denied: no)")
        let answered = AuthError(
            .server, "the server answered 400",
            serverResponse: ServerErrorResponse(statusCode: 400, error: "invalid_grant"))
        #expect("\(answered)" == "server: the server answered 400 (400 invalid_grant)")
    }

    @Test("A browser sign-in without a redirect URI (the device flow needs none) says what to configure")
    func noRedirectURI() {
        #expect {
            try OIDCAuthProvider.checkRedirectURI("")
        } throws: { error in
            guard let error = error as? AuthError else { return false }
            return error.code == .configuration && error.message.contains("the device flow needs none")
        }
    }

    @Test("With no browser, a sign-out's URL is written without its ID token and says sign out")
    func noBrowserSignOut() throws {
        let url = try #require(
            URL(
                string: "https://id.example.com/logout?id_token_hint=eyJhbGciOiJFUzI1NiJ9.secret.sig"
                    + "&post_logout_redirect_uri=http://127.0.0.1:5000/callback&state=abc&client_id=my-cli"))
        let message = LoopbackUserAgent.noBrowserMessage(for: url, purpose: .signOut)
        #expect(message.contains("to sign out") && !message.contains("sign in"))
        #expect(!message.contains("id_token_hint") && !message.contains("eyJhbGciOiJFUzI1NiJ9"))
        #expect(message.contains("client_id=my-cli") && message.contains("state=abc"))
        // The rest of the query exactly as sent: an encoded "+" stays encoded; a hint spelled with escapes goes too.
        let plus = try #require(
            URL(string: "https://id.example.com/logout?client_id=a%2Bb&id%5Ftoken%5Fhint=eyJ.x.y&state=s#frag"))
        #expect(LoopbackUserAgent.withoutIDToken(plus) == "https://id.example.com/logout?client_id=a%2Bb&state=s#frag")
        let only = try #require(URL(string: "https://id.example.com/logout?id_token_hint=eyJ.x.y"))
        #expect(LoopbackUserAgent.withoutIDToken(only) == "https://id.example.com/logout")
        let signIn = LoopbackUserAgent.noBrowserMessage(for: url, purpose: .signIn)
        #expect(signIn.contains("to sign in") && signIn.contains(url.absoluteString))
    }
}
