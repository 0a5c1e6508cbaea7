#if canImport(Observation)
    public import Observation

    /// The accounts for SwiftUI: the current one with its ``AuthState``, and the others — `@Observable` and
    /// main-actor bound, for an account switcher.
    ///
    /// ```swift
    /// struct AccountMenu: View {
    ///     @State var accounts: AccountsState
    ///     var body: some View {
    ///         Menu(accounts.current?.label ?? "Sign in") {
    ///             ForEach(accounts.others, id: \.profile) { account in
    ///                 Button(account.label ?? account.subject) { Task { try await accounts.switchTo(account) } }
    ///             }
    ///         }
    ///     }
    /// }
    /// ```
    @available(iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0, visionOS 1.0, *)
    @MainActor
    @Observable
    public final class AccountsState {
        /// The current account, if any.
        public private(set) var current: Account?
        /// The other accounts, in the order they were added.
        public private(set) var others: [Account] = []
        /// The current account's session state (nil without a current account).
        public private(set) var currentState: AuthState?
        /// The latest problem reading the account list (cleared by the next successful read).
        public private(set) var lastError: AuthError.Code?
        @ObservationIgnored private let accounts: OIDCAccounts

        /// Follows `accounts`; call ``reload()`` (a root view's `.task`) to read them.
        public init(accounts: OIDCAccounts) { self.accounts = accounts }

        /// Reads the accounts and the current one again (after an add or a remove made elsewhere).
        public func reload() async {
            do {
                let list = try await accounts.list()
                let chosen = try await accounts.current()
                if chosen?.profile != current?.profile || currentState == nil {
                    if let chosen {
                        currentState = AuthState(session: try await accounts.session(for: chosen))
                    } else {
                        currentState = nil
                    }
                }
                current = chosen
                others = list.filter { account in chosen.map { !account.isSame(as: $0) } ?? true }
                lastError = nil
            } catch {
                lastError = (error as? AuthError)?.code ?? .storeUnavailable
            }
        }

        /// Makes `account` current, and follows its session.
        ///
        /// - Throws: as ``OIDCAccounts/switchTo(_:)``.
        public func switchTo(_ account: Account) async throws {
            try await accounts.switchTo(account)
            await reload()
        }
    }
#endif
