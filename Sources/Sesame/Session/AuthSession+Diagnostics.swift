// What the session tells the diagnostics (SesameLog): each event at the level its meaning deserves, and why a
// refresh runs. Nothing here holds a token.
extension AuthSession {
    /// Each event in the diagnostics (``SesameLog``), at the level its meaning deserves.
    nonisolated static func log(_ event: AuthEvent, profile: String) {
        switch event {
        case .loaded(let signedIn):
            SesameLog.log(
                .debug, .session,
                "profile \(public: profile) loaded: \(public: signedIn ? "signed in" : "no credentials")")
        case .storeUnavailable:
            SesameLog.log(
                .warning, .session, "profile \(public: profile): the store cannot be read now (kept, try later)")
        case .signedIn: SesameLog.log(.info, .session, "profile \(public: profile): signed in")
        case .refreshed:
            SesameLog.log(.info, .session, "profile \(public: profile): refreshed")
        case .refreshFailed(let code):
            SesameLog.log(
                .warning, .session,
                "profile \(public: profile): refresh failed (\(public: code.rawValue)); credentials kept")
        case .persistenceFailed:
            SesameLog.log(
                .warning, .session, "profile \(public: profile): new credentials not saved yet (serving from memory)")
        case .signedOut(let reason):
            let why =
                switch reason {
                case .userInitiated: "by the app or the user"
                case .sessionExpired: "the provider rejected the refresh token: sign in again"
                case .signedOutElsewhere: "another process sharing the store signed out"
                case .dpopKeyLost: "the credentials are bound to a DPoP key this app no longer has: sign in again"
                }
            SesameLog.log(
                reason == .userInitiated ? .info : .error, .session,
                "profile \(public: profile): signed out (\(public: why))")
        }
    }

    /// An app's minimum validity as whole seconds, converted to `Int` only when it fits (it may be infinity).
    nonisolated static func wholeSeconds(_ seconds: Double) -> String {
        seconds.isFinite && abs(seconds) < 1e15 ? String(Int(seconds)) : "\(seconds)"
    }

    /// Why a refresh runs, for the diagnostics.
    nonisolated static func why(_ intent: SessionMachine.Intent) -> String {
        switch intent {
        case .expiring(let seconds): "the access token expires within \(wholeSeconds(seconds)) s"
        case .rejected: "the server rejected the access token"
        case .forced: "asked for"
        case .persist: "to save credentials a failed save left in memory"
        }
    }
}
