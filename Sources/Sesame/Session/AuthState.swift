#if canImport(Observation)
    public import Observation
    internal import SesameJOSE

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
    ///
    /// A store that cannot be read at launch (a locked Keychain while the app prewarms) leaves the status
    /// ``Status/unknown`` with ``lastTransientError`` set — never ``Status/signedOut(reason:)``; the status
    /// follows as soon as any call (or ``reload()``) reads the store.
    @available(iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0, visionOS 1.0, *)
    @MainActor
    @Observable
    public final class AuthState {
        /// What a root view needs to know.
        public enum Status: Sendable, Equatable {
            /// Not known yet (the store has not been read, or could not be).
            case unknown
            /// Credentials exist.
            case signedIn(user: TokenSet.User?)
            /// No credentials; `reason` says why when the session ended.
            case signedOut(reason: AuthEvent.SignOutReason?)
        }

        /// The current status.
        public private(set) var status: Status = .unknown
        /// The latest transient problem (cleared by the next successful read or refresh).
        public private(set) var lastTransientError: AuthError.Code?

        @ObservationIgnored private let session: AuthSession
        @ObservationIgnored private let watcher = WatcherTask()

        /// Follows `session`: subscribes to its events, then reads its stored credentials.
        public init(session: AuthSession) {
            self.session = session
            let events = session.events()
            watcher.start(
                Task { [weak self] in
                    await self?.reload()
                    for await event in events {
                        guard let self else { return }
                        await self.apply(event)
                    }
                })
        }

        deinit { watcher.cancel() }

        /// Reads the session's credentials again (after ``lastTransientError`` was
        /// ``AuthError/Code/storeUnavailable``, for example when the app becomes active).
        public func reload() async {
            do {
                let tokens = try await session.currentTokens
                status = tokens.map { .signedIn(user: $0.user) } ?? .signedOut(reason: nil)
                lastTransientError = nil
            } catch let error as AuthError {
                lastTransientError = error.code
            } catch {
                lastTransientError = .storeUnavailable
            }
        }

        private func apply(_ event: AuthEvent) async {
            switch event {
            case .signedIn, .refreshed, .loaded:
                if let tokens = try? await session.currentTokens {
                    status = .signedIn(user: tokens.user)
                } else if case .loaded(signedIn: false) = event {
                    status = .signedOut(reason: nil)
                }
                lastTransientError = nil
            case .refreshFailed(let code):
                lastTransientError = code
            case .persistenceFailed, .storeUnavailable:
                lastTransientError = .storeUnavailable
            case .signedOut(let reason):
                status = .signedOut(reason: reason)
            }
        }
    }

    /// Holds the watcher task so that the (nonisolated) deinit can cancel it — no `isolated deinit`, which needs
    /// Swift 6.2 and newer OS runtimes than the package declares.
    final class WatcherTask: Sendable {
        private let task = LockedValue<Task<Void, Never>?>(nil)

        func start(_ task: Task<Void, Never>) { self.task.withLock { $0 = task } }
        func cancel() { task.withLock { $0?.cancel() } }
    }
#endif
