#if canImport(Observation)
    public import Observation

    /// The accounts for SwiftUI: the current one with its ``AuthState``, and the others — `@Observable` and
    /// main-actor bound, for an account switcher (iOS 17, macOS 14 and later).
    ///
    /// ```swift
    /// struct AccountMenu: View {
    ///     @State var accounts: AccountsState
    ///     let agent: WebAuthenticationSessionAgent   // SesameApple
    ///     var body: some View {
    ///         Menu(accounts.current.map { $0.label ?? $0.subject } ?? "Sign in") {
    ///             ForEach(accounts.others, id: \.self) { account in
    ///                 Button(account.label ?? account.subject) { Task { try? await accounts.switchTo(account) } }
    ///             }
    ///             Button("Add an account…") { Task { try? await accounts.add(signingInWith: agent) } }
    ///         }
    ///         .task { await accounts.reload() }
    ///     }
    /// }
    /// ```
    ///
    /// ``add(signingInWith:at:options:)``, ``remove(_:)`` and ``switchTo(_:)`` reload after they act; call
    /// ``reload()`` yourself after changing the accounts through ``OIDCAccounts`` directly (or in another process).
    @available(iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0, visionOS 1.0, *)
    @MainActor
    @Observable
    public final class AccountsState {
        /// The current account, if any.
        public private(set) var current: Account?
        /// The other accounts, in the order they were added.
        public private(set) var others: [Account] = []
        /// The current account's session state (nil without a current account, or when its provider is missing).
        public private(set) var currentState: AuthState?
        /// The latest problem reading the accounts (cleared by the next successful read).
        public private(set) var lastError: AuthError.Code?
        @ObservationIgnored private let accounts: OIDCAccounts
        @ObservationIgnored private var followed: AuthSession?

        /// Follows `accounts`; call ``reload()`` (a root view's `.task`) to read them.
        public init(accounts: OIDCAccounts) { self.accounts = accounts }

        /// Reads the accounts and the current one again (after an add or a remove made elsewhere).
        public func reload() async {
            let list: [Account]
            let chosen: Account?
            do {
                list = try await accounts.list()
                chosen = try await accounts.current()
            } catch {
                lastError = (error as? AuthError)?.code ?? .storeUnavailable
                return
            }
            lastError = nil
            current = chosen
            others = list.filter { account in chosen.map { !account.isSame(as: $0) } ?? true }
            guard let chosen else {
                currentState = nil
                followed = nil
                return
            }
            do {
                // A removed and re-added account has a new session: follow that one, not the old.
                let session = try await accounts.session(for: chosen)
                if followed !== session || currentState == nil {
                    followed = session
                    currentState = AuthState(session: session)
                }
            } catch {
                // Its provider is gone (an app update): the list still shows, the account can be removed.
                currentState = nil
                followed = nil
                lastError = (error as? AuthError)?.code ?? .configuration
            }
        }

        /// Makes `account` current, and follows its session.
        ///
        /// - Throws: as ``OIDCAccounts/switchTo(_:)``.
        public func switchTo(_ account: Account) async throws {
            try await accounts.switchTo(account)
            await reload()
        }

        /// Signs in and adds an account (it becomes current), then reloads.
        ///
        /// - Returns: the account.
        /// - Throws: as ``OIDCAccounts/add(signingInWith:at:options:)``.
        @discardableResult
        public func add(
            signingInWith agent: some AuthorizationUserAgent, at provider: OIDCAuthProvider? = nil,
            options: AuthorizationOptions = AuthorizationOptions()
        ) async throws -> Account {
            let account = try await accounts.add(signingInWith: agent, at: provider, options: options)
            await reload()
            return account
        }

        /// Signs an account out and removes it, then reloads.
        ///
        /// - Returns: what the sign-out managed.
        /// - Throws: as ``OIDCAccounts/remove(_:)``.
        @discardableResult
        public func remove(_ account: Account) async throws -> AuthSession.SignOutResult {
            let result = try await accounts.remove(account)
            await reload()
            return result
        }
    }
#endif
