#if canImport(Observation)
    public import Observation

    /// The session's state for SwiftUI: `@Observable` and main-actor bound, so a root view can switch on it.
    ///
    /// ```swift
    /// struct AppRootView: View {
    ///     @State var auth: AuthState
    ///     var body: some View {
    ///         switch auth.status {
    ///         case .unknown: ProgressView()
    ///         case .signedIn: MainView()
    ///         case .signedOut: SignInView()
    ///         }
    ///     }
    /// }
    /// ```
    @MainActor
    @Observable
    public final class AuthState {
        /// What a root view needs to know.
        public enum Status: Sendable, Equatable {
            /// Not known yet (the store has not been read).
            case unknown
            /// Credentials exist.
            case signedIn(user: TokenSet.User?)
            /// No credentials; `reason` says why when the session ended.
            case signedOut(reason: AuthEvent.SignOutReason?)
        }

        /// The current status.
        public private(set) var status: Status = .unknown
        /// The latest transient problem (cleared by the next successful refresh).
        public private(set) var lastTransientError: AuthError.Code?

        @ObservationIgnored private var watcher: Task<Void, Never>?

        /// Follows `session`: reads its stored credentials, then applies its events.
        public init(session: AuthSession) {
            watcher = Task { [weak self] in
                let tokens = await session.currentTokens
                self?.status = tokens.map { .signedIn(user: $0.user) } ?? .signedOut(reason: nil)
                for await event in session.events {
                    guard let self else { return }
                    await self.apply(event, session: session)
                }
            }
        }

        isolated deinit { watcher?.cancel() }

        private func apply(_ event: AuthEvent, session: AuthSession) async {
            switch event {
            case .signedIn, .refreshed:
                status = .signedIn(user: await session.currentTokens?.user)
                lastTransientError = nil
            case .refreshFailed(let code):
                lastTransientError = code
            case .persistenceFailed:
                lastTransientError = .storeUnavailable
            case .signedOut(let reason):
                status = .signedOut(reason: reason)
            }
        }
    }
#endif
