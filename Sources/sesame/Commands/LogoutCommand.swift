import Foundation
import Sesame
import SesameJOSE

/// `sesame logout [--no-revoke] [--end-session]`.
struct LogoutCommand: SesameCommand {
    static let noRevoke = OptionSpec("--no-revoke", "only delete the local credentials")
    static let endSession = OptionSpec(
        "--end-session", "OpenID Connect: also print (and open) the provider's logout URL")
    static let noBrowser = OptionSpec("--no-browser", "with --end-session: only print the URL, do not open a browser")
    static let spec = CommandSpec(
        words: ["logout"], summary: "end the session on the server and delete local credentials", arguments: nil,
        discussion: """
            Tells the server (even when the access token has expired: the refresh token is revoked), then deletes
            the local credentials, the profile and its DPoP key whatever the server said; a warning says when the server did not
            confirm. Signing out when nobody is signed in succeeds (exit 0). A profile whose files are corrupt is
            cleared too.
            """,
        options: [noRevoke, endSession, noBrowser] + GlobalOptions.session,
        examples: ["sesame logout", "sesame logout --profile work --no-revoke"],
        exitCodes: [], command: Self.self)

    let selection: SessionSelection
    let revokes: Bool
    let endsProviderSession: Bool
    let opensBrowser: Bool

    init(_ arguments: ParsedArguments) throws {
        selection = try SessionInvocation(arguments).selection
        revokes = !arguments.flag(Self.noRevoke)
        endsProviderSession = arguments.flag(Self.endSession)
        opensBrowser = !arguments.flag(Self.noBrowser)
    }

    func run() async throws {
        let profile = selection.profile
        let settings: Profile.Settings?
        do {
            settings = try profile.settings()
        } catch let error as CLIError where error.code == "profile_corrupt" {
            // A corrupt profile is always cleared: it was moved aside; remove any credentials it may have left.
            // (Anything else — a newer sesame's profile, an unsafe folder — is reported and touches nothing.)
            FileHandle.standardError.write(Data("warning: \(PrintableText.sanitized(error.message))\n".utf8))
            let name = profile.name
            for kind in StoreKind.allCases {
                if let store = try? profile.store(kind, forNewSession: false) {
                    _ = try? await store.withExclusiveAccess(profile: name) { try await store.delete(profile: name) }
                }
            }
            // And what a signed-in profile keeps beside its credentials: the DPoP key and a service's secret.
            try? await OIDCLoginFlow.dpopKeys(profile).deleteKey(profile: name)
            try? PrivateFile.delete(ServiceAccountLogin.secretURL(profile))
            FileHandle.standardError.write(Data("signed out (profile \(profile.name))\n".utf8))
            return
        }
        guard settings != nil else {
            FileHandle.standardError.write(Data("not signed in (profile \(profile.name)); nothing to do\n".utf8))
            return
        }
        let context = try await SessionContext(selection)
        if endsProviderSession {
            guard let auth = context.oidc else {
                throw CLIError.usage("--end-session is for OpenID Connect profiles", command: selection.command)
            }
            // Without id_token_hint: it would print the ID token (the user's email with it) where any log keeps
            // it; the provider asks the user to confirm instead (RP-Initiated Logout §2).
            if let url = auth.provider.endSessionURL(for: TokenSet(accessToken: "-")) {
                print(url.absoluteString)
                if opensBrowser { LoopbackUserAgent.openInSystemBrowser(url) }
            } else {
                FileHandle.standardError.write(Data("warning: the provider has no end-session endpoint\n".utf8))
            }
        }
        // Through the facade for OpenID Connect: it also ends a sign-in shared with other profiles (Native SSO).
        let sharedEntry = revokes ? settings?.oidc?.nativeSSO : nil
        let sharing = await (try? context.oidc?.nativeSSO?.sharedSignIn()) != nil
        let result =
            if revokes, let auth = context.oidc { await auth.signOut() } else {
                await context.session.signOut(revoke: revokes)
            }
        if case .failed(let error) = result.revocation {
            FileHandle.standardError.write(
                Data(
                    ("warning: the server did not confirm the sign-out (\(CLI.describe(error))); "
                        + "the session may still be valid there until it expires\n").utf8))
        }
        guard result.credentialsRemoved else {
            throw CLIError(
                status: .transient, code: "store_unavailable",
                message: "the local credentials of profile \(profile.name) could not be deleted; run logout again")
        }
        profile.deleteSettings()
        try? await OIDCLoginFlow.dpopKeys(profile).deleteKey(profile: profile.name)
        try? PrivateFile.delete(ServiceAccountLogin.secretURL(profile))
        if let sharedEntry, sharing {
            FileHandle.standardError.write(
                Data(
                    ("ended the shared sign-in \(sharedEntry): profiles that signed in from it are signed out at the "
                        + "provider too\n").utf8))
        }
        FileHandle.standardError.write(Data("signed out (profile \(profile.name))\n".utf8))
    }
}
